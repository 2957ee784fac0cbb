"""Turn event drafts into RunEventDocs: contiguous sequences and derived ids (schema-checked under a debug switch)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlude.config.runtime import runtime_settings
from interlude.domain.ids import derive_opaque
from interlude.engine.effect_names import ACTION_REQUESTED, CHILD_REQUESTED, NODE_RETRIED, RERUN_REASON, TASK

if TYPE_CHECKING:
    from interlude.engine.run import EventDraft

SCHEMA_VERSION = 1
ENGINE_VERSION = 1
EVENT_LOG_SCHEMA_VERSION = 3
# The events that end a run: exactly one is the last event of every finished run.
RUN_END_EVENTS: tuple[str, ...] = ("run.completed", "run.failed", "run.cancelled")
# Debug switch (INTERLUDE_VALIDATE_EVENTS), read once per process: check every event against the OpenWOP schemas
# before it is written. The test suite sets it (tests/conftest.py); production leaves it off, because the checks
# were two thirds of a resolve's own time and the engine builds events only from typed drafts (docs/adr/0030).
VALIDATE_EVENTS = runtime_settings().validate_events


class InvalidEvent(Exception):
    """The engine built an event that breaks the OpenWOP schema: a bug, never written to the log."""


def to_docs(run_id: str, drafts: list[EventDraft], first_seq: int, timestamp: str) -> list[dict[str, Any]]:
    docs = []
    for offset, draft in enumerate(drafts):
        seq = first_seq + offset
        doc: dict[str, Any] = {
            # Derived from (run, sequence): a replayed step writes the same id, never a second event.
            "eventId": derive_opaque("event", run_id, str(seq)),
            "runId": run_id,
            "type": draft.type,
            "payload": draft.payload,
            "timestamp": timestamp,
            "sequence": seq,
            "schemaVersion": SCHEMA_VERSION,
            "engineVersion": ENGINE_VERSION,
        }
        if draft.node_id is not None:
            doc["nodeId"] = draft.node_id
        if VALIDATE_EVENTS:
            check(doc)
        docs.append(doc)
    return docs


def check(doc: dict[str, Any]) -> None:
    from interlude.domain import schemas  # first use only: jsonschema is not on the hot path or the cold start

    problems = schemas.errors_of(schemas.validator("run-event.schema.json"), doc)
    payload_validator = schemas.payload_validator(doc["type"])
    if payload_validator is not None:
        problems += schemas.errors_of(payload_validator, doc["payload"])
    if problems:
        raise InvalidEvent(f"{doc['type']}: {problems}")


# What one transition's events ask of the outbox handlers that move runs or read task items: the dispatch function
# builds those handlers (and loads their modules) with the first record that holds such an event (interlude.composition).


def requests_child_or_ends_run(events: list[dict[str, Any]]) -> bool:
    """A child run requested, or a run ended (its parent may wait on it; its children end with it)."""
    return any(e.get("type") == CHILD_REQUESTED or e.get("type") in RUN_END_EVENTS for e in events)


def ends_or_reruns_run(events: list[dict[str, Any]]) -> bool:
    """A run ended (its items are given their expiry: app/retention.py), or a node of it was retried (a finished run
    that runs again keeps its items)."""
    return ends_run(events) or reruns_run(events)


def ends_run(events: list[dict[str, Any]]) -> bool:
    return any(e.get("type") in RUN_END_EVENTS for e in events)


def reruns_run(events: list[dict[str, Any]]) -> bool:
    """A node of a finished run retried: the run runs again."""
    return any(e.get("type") == NODE_RETRIED and (e.get("payload") or {}).get("reason") == RERUN_REASON for e in events)


def requests_or_cancels_task(events: list[dict[str, Any]]) -> bool:
    return any(
        (e.get("type") == ACTION_REQUESTED and (e.get("payload") or {}).get("kind") == TASK)
        or e.get("type") == "node.cancelled"
        for e in events
    )


def raised_external_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The external-event interrupts raised (a kept event may resume one at once)."""
    return [e for e in events if e.get("type") == "interrupt.requested" and e["payload"].get("kind") == "external-event"]
