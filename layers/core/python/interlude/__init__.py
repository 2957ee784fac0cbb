"""Interlude: durable human-in-the-loop gates for workflow runs."""

__version__ = "0.1.0"
