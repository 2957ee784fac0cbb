"""The approval page: server-rendered HTML for the signed-token surface (pure functions, no I/O)."""
