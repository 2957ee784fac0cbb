"""What a run's events are called where a person reads them (the console's run page, the CLI's timeline): never the
protocol's type names. Plain data, imported by the API edge and the CLI alike (the CLI loads no models)."""

from __future__ import annotations

EVENT_WORDS = {
    "run.started": "Run started",
    "run.completed": "Run completed",
    "run.failed": "Run failed",
    "run.cancelled": "Run cancelled",
    "node.started": "Step started",
    "node.completed": "Step completed",
    "node.failed": "Step failed",
    "node.skipped": "Step skipped",
    "node.cancelled": "Step cancelled",
    "node.suspended": "Step waiting",
    "node.resumed": "Step resumed",
    "interrupt.requested": "Asked for a decision",
    "approval.requested": "Approval requested",
    "interrupt.resolved": "Decided",
    "approval.received": "Vote received",
    "interlude.result-carried": "Result carried from the run it was forked from",
}


def event_in_words(event_type: str) -> str:
    """An event's type as a person reads it; one without words of its own as its type, spaced and capitalised."""
    return EVENT_WORDS.get(event_type, event_type.replace(".", " ").replace("-", " ").capitalize())
