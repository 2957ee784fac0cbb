"""The only room that talks to DynamoDB: one module per aggregate (runs, transitions, API keys, workflows, ...), the
table's key layout in `layout`, every store together in `facade.Store`. Nothing is imported here: a function loads
the modules it uses, and no more (tests/unit/test_cold_imports.py)."""
