"""The ModuleX face: its workflow definitions translated onto the engine, and its frames projected from the log.

Modules here are pure (no boto3, no HTTP) except `operations` and `workflows`, which work through the application
services (interlude.app) and the store capabilities `ports` declares.
`nodetypes` declares the engine node types a translated definition runs on; interlude.composition registers them.
"""
