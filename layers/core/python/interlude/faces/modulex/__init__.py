"""The ModuleX face: its workflow definitions translated onto the engine, and its frames projected from the log.

Modules here are pure (no boto3, no HTTP) except `operations`, which works through interlude.app.service / store.
`nodetypes` declares the engine node types a translated definition runs on; interlude.composition registers them.
"""
