"""Graph execution: pure decisions over a run's state; no I/O, no HTTP, no boto3."""
