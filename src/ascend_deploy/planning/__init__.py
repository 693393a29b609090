"""Decisions made before anything starts: compatibility, memory, serve plan, preflight."""
