"""CDK constructs for Interlude; the stack composes them, wiring.py decides what they build."""
