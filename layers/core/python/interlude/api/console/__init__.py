"""The operator console at /console: server-rendered pages over the application services (issue 16, item 3)."""
