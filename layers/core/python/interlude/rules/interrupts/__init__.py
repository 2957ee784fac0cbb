"""Interrupt rules: payloads per kind, resume validation and decisions. Pure: no I/O."""
