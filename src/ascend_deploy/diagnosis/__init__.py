"""Classifying a failed deployment from its logs."""
