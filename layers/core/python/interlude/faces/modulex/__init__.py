"""The ModuleX face: its workflow definitions translated onto the engine, and its frames projected from the log.

Modules here are pure (no boto3, no HTTP) except `service`, which works through interlude.app.service / store.
`references`, `expressions` and `nodes` import nothing from the engine, so the engine may import them.
"""
