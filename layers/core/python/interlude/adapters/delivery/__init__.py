"""Outbound delivery of callbacks: the egress guard and the pinned HTTP client."""
