"""Pydantic models of what Interlude stores and exchanges."""
