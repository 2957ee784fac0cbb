"""Graph execution: pure decisions over a run's state; no I/O, no HTTP, no boto3."""

# The conversation, confidence and credential gates join the node type registry on first import of the engine.
from . import gates as _gates

_gates.register()
