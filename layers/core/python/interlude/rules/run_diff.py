"""The structured diff of two runs (OpenWOP diffRun, `GET /runs/{runId}:diff?against=`, RFC 0054): where their event
logs diverge, each event that differs, and how the state the two logs reach differs. A pure function of the two logs.

Events are compared position by position (sequence `n` of `a` with sequence `n` of `b`) on what they say, not on
what names the run they belong to: the envelope's `eventId`, `runId`, `timestamp` and `sequence`, and the payload's
`interruptId` and `key` (both derived from the run's id), are left out, so a run and its replay fork that took the
same course compare equal where Interlude's fork emits the same events (docs/adr/0108: a fork's log is its own, so a
gate it settled as recorded diverges from the source's request and resolve).

The state compared is the one the log folds to: how the run ended (its `run.completed`/`run.failed`/`run.cancelled`)
and, per node, how its last visit settled (`node.completed` outputs, `node.failed` error, skipped, cancelled).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

# The events compared per run: a run with more is refused (app/forks.py), not diffed in part. A run's log reaches this
# only over long loops (a lifecycle of a few gates writes 20-40 events).
MAX_DIFF_EVENTS = 2000
# The bytes of differing events one answer carries (serialised): past it the rest are left out and `truncated` is set.
# Under API Gateway's and Lambda's 6 MB response, with the envelope's room.
MAX_DIFF_BYTES = 4 * 1024 * 1024

_ENVELOPE_IDENTITY = ("eventId", "runId", "timestamp", "sequence")
_PAYLOAD_IDENTITY = ("interruptId", "key")
_RUN_ENDS = ("run.completed", "run.failed", "run.cancelled")
_NODE_SETTLED = {"node.completed": "completed", "node.failed": "failed", "node.skipped": "skipped", "node.cancelled": "cancelled"}


def comparable(event: dict[str, Any]) -> dict[str, Any]:
    """What an event says, without what names its run."""
    said = {k: v for k, v in event.items() if k not in _ENVELOPE_IDENTITY}
    payload = said.get("payload")
    if isinstance(payload, dict):
        said["payload"] = {k: v for k, v in payload.items() if k not in _PAYLOAD_IDENTITY}
    return said


def folded_state(events: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """How the log leaves the run: its end (None while it has none) and each settled node's last settlement."""
    end: dict[str, Any] | None = None
    nodes: dict[str, dict[str, Any]] = {}
    for event in events:
        type_, payload = event["type"], event.get("payload") or {}
        if type_ in _RUN_ENDS:
            end = {"status": type_.removeprefix("run."), **({"error": payload["error"]} if payload.get("error") else {})}
        elif type_ in _NODE_SETTLED and isinstance(payload, dict) and payload.get("nodeId"):
            settled: dict[str, Any] = {"status": _NODE_SETTLED[type_]}
            for field in ("outputs", "error"):
                if field in payload:
                    settled[field] = payload[field]
            nodes[payload["nodeId"]] = settled
    return {"end": end, "nodes": nodes}


def state_diff(a_events: list[dict[str, Any]], b_events: list[dict[str, Any]]) -> dict[str, Any]:
    """`{"end": {"a", "b"}?, "nodes": {nodeId: {"a", "b"}}?}`: only what differs (a node one log never settled is
    None on that side); `{}` when both logs reach the same state."""
    a, b = folded_state(a_events), folded_state(b_events)
    diff: dict[str, Any] = {}
    if a["end"] != b["end"]:
        diff["end"] = {"a": a["end"], "b": b["end"]}
    nodes = {
        node: {"a": a["nodes"].get(node), "b": b["nodes"].get(node)}
        for node in sorted(a["nodes"].keys() | b["nodes"].keys())
        if a["nodes"].get(node) != b["nodes"].get(node)
    }
    if nodes:
        diff["nodes"] = nodes
    return diff


def diff_runs(
    a_id: str, a_events: list[dict[str, Any]], b_id: str, b_events: list[dict[str, Any]], max_bytes: int = MAX_DIFF_BYTES
) -> dict[str, Any]:
    """run-diff-response.schema.json: `divergedAtSeq` (the first sequence whose events differ, or where one log ends
    before the other; None when the logs say the same), `eventDiffs` in sequence order (`changed` with both events,
    `removed` with `a`'s alone where `b` has none, `added` with `b`'s alone), `stateDiff`, and `truncated` when the
    differing events came to more than `max_bytes` and the rest were left out."""
    a_at = {e["sequence"]: e for e in a_events}
    b_at = {e["sequence"]: e for e in b_events}
    diffs: list[dict[str, Any]] = []
    diverged: int | None = None
    spent = 0
    truncated = False
    for seq in sorted(a_at.keys() | b_at.keys()):
        a, b = a_at.get(seq), b_at.get(seq)
        if a is not None and b is not None and comparable(a) == comparable(b):
            continue
        diverged = seq if diverged is None else diverged
        entry: dict[str, Any] = {"seq": seq, "op": "changed" if a and b else ("removed" if a else "added")}
        if a is not None:
            entry["aEvent"] = a
        if b is not None:
            entry["bEvent"] = b
        spent += len(json.dumps(entry, separators=(",", ":"), default=str, allow_nan=False))
        if spent > max_bytes:
            truncated = True
            break
        diffs.append(entry)
    answer: dict[str, Any] = {
        "a": a_id,
        "b": b_id,
        "divergedAtSeq": diverged,
        "eventDiffs": diffs,
        "stateDiff": state_diff(a_events, b_events),
    }
    if truncated:
        answer["truncated"] = True
    return answer
