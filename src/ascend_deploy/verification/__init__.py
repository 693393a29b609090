"""Checks against a running endpoint: HTTP client, suite, precision, garbage text."""
