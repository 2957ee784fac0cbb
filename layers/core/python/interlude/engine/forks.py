"""A fork's recorded history (OpenWOP replay.md, `POST /runs/{runId}:fork`), read from its source run's event log. Pure.

A fork is a new run of the source's workflow version that runs again from the start (docs/adr/0108): every gate the
source had decided before the fork point settles as it was decided, without being asked (no `interrupt.requested`;
its `interrupt.resolved` and what followed it are emitted again from the record), and every core.http effect it had
performed is requested under the source's effect identity, so the actions worker finds the source's effect record
and lands its recorded outcome instead of calling (store.effects). What the source did at or after the fork point
runs anew: a `branch`. A `replay` carries the whole log: nothing the source decided is asked again and no effect it
performed is performed again. Also carried: votes on a gate still open at the fork point, and the results of tasks and
sub-workflow children the source completed.

The history is keyed by node and visit ("<nodeId>#<visit>"): the engine reaches the same visits in the same order
given the same inputs and the same settlements.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from interlude.domain.outcomes import approval_outcome
from interlude.engine import kind_events
from interlude.engine.effect_names import ACTION_REQUESTED, CHILD_REQUESTED, TASK

if TYPE_CHECKING:
    from interlude.rules.interrupts.decide import Decision

# The action kind whose effect identity a fork carries over (engine/actions.py): the fork's request lands the effect
# record's outcome. A core.task's or a sub-workflow child's completed result is carried as its output (`results`):
# the fork's node completes with it, and no task or child is made.
HTTP_KIND = "http"
CHILD_KIND = "child"
_IDS = ("nodeId", "interruptId")
_SETTLED = ("node.completed", "node.failed")
# The events that record a vote on a gate that stays open (engine/run.py: resolve's `record`, delegate): each appends
# one entry to the gate's votes, in order, so the first N entries of its item's votes are the first N such events'.
# The event that records a delegation for one interrupt (issue 14 item 4): a vendor event (`<org>.<name>`).
VOTE_DELEGATED = "interlude.vote-delegated"
VOTE_EVENTS = ("approval.received", VOTE_DELEGATED)
_CLOSING = ("interrupt.resolved", "node.cancelled", *_SETTLED)


def visit_key(node_id: str, visit: int) -> str:
    return f"{node_id}#{visit}"


def _without_ids(payload: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k not in _IDS}


def recorded_history(events: Iterable[dict[str, Any]], until: int | None) -> dict[str, dict[str, Any]]:
    """The gates decided and the core.http effects completed in `events` (the source's log, in order) before sequence
    `until` (None: the whole log), and the `votes` and `results` below: `{"gates": {visit key: recorded decision},
    "effects": {visit key: {"effectId"}}, "votes": ..., "results": ...}`. A gate counts from its `interrupt.resolved` and an effect from its `action.requested`: what
    follows either (the node settling, maybe past `until`) is read to the end, so a fork never asks again a decision
    made before its fork point, nor repeats a call made for it. An effect that failed is not carried: a fork tries
    it again under its own identity.

    A recorded decision is what `decision_of` turns back into the engine's Decision: the `interrupt.resolved` payload
    (without ids), the events the resolve emitted after it, and how the node settled (output or error).

    `"votes"`: the gates still open at the fork point on which votes were cast before it (a quorum gate with 1 of its 2
    approvals), `{visit key: {"key": the source's interrupt key, "count": votes before the fork point, "events": [[type,
    payload without ids], ...]}}`; the caller reads the votes themselves from the source's interrupt item (the log
    holds what a vote said, not whose credential cast it) and keeps the first `count` (app/forks.py).

    `"results"`: the core.task and sub-workflow child results the source completed, counted from their request like
    effects: `{visit key: {"kind": "task" | "child", "from": the task's effect id or the child run's id, "output"}}`."""
    visits: dict[str, int] = {}
    gates: dict[str, dict[str, Any]] = {}
    effects: dict[str, dict[str, Any]] = {}
    deciding: dict[str, dict[str, Any]] = {}  # node id -> its decision being read
    requested: dict[str, dict[str, Any]] = {}  # node id -> its http call, task or child waiting to settle
    asking: dict[str, dict[str, Any]] = {}  # node id -> its gate open (before the fork point) and the votes cast on it
    results: dict[str, dict[str, Any]] = {}
    for event in events:
        type_, payload = event["type"], event.get("payload") or {}
        node_id = payload.get("nodeId") if isinstance(payload, dict) else None
        if node_id is None:
            continue
        before = until is None or event["sequence"] < until
        if node_id in deciding:
            _read_decision(deciding, gates, node_id, type_, payload)
        elif type_ in _SETTLED and node_id in requested:
            action = requested.pop(node_id)
            # A failed call, task or child is not carried: the fork tries it again as its own. Nor is a result that
            # was not an object: node.completed holds it as {"value": ...}, which an object of that one key also is.
            outputs = payload.get("outputs")
            completed = type_ == "node.completed"
            if completed and action["kind"] == HTTP_KIND:
                effects[visit_key(node_id, action["visit"])] = {"effectId": action["effectId"]}
            elif completed and isinstance(outputs, dict) and list(outputs) != ["value"]:
                results[visit_key(node_id, action["visit"])] = {"kind": action["kind"], "from": action["effectId"], "output": outputs}
        elif not before:
            continue
        elif type_ == "node.started":
            visits[node_id] = visits.get(node_id, 0) + 1
        elif type_ == "interrupt.resolved":
            kind = payload.get("kind")
            deciding[node_id] = {
                "visit": visits.get(node_id, 1),
                "event": _without_ids(payload),
                "alias": kind_events.resolved_type(kind or "", payload),
                "extra": [],
            }
        elif type_ == ACTION_REQUESTED and payload.get("kind") in (HTTP_KIND, TASK):
            requested[node_id] = {"visit": payload["visit"], "effectId": payload["effectId"], "kind": payload["kind"]}
        elif type_ == CHILD_REQUESTED:
            requested[node_id] = {"visit": payload["visit"], "effectId": payload.get("childRunId"), "kind": CHILD_KIND}
        if before:
            _note_votes(asking, visits.get(node_id, 1), node_id, type_, payload)
    votes = {
        visit_key(node_id, open_["visit"]): {"key": open_["key"], "count": len(open_["events"]), "events": open_["events"]}
        for node_id, open_ in asking.items()
        if open_["events"] and open_["key"]
    }
    return {"gates": gates, "effects": effects, "votes": votes, "results": results}


def _note_votes(asking: dict[str, dict[str, Any]], visit: int, node_id: str, type_: str, payload: dict[str, Any]) -> None:
    """A gate asked, a vote cast on it, or the gate closed (decided, cancelled, its node settled)."""
    if type_ == "node.suspended":  # interrupt.requested's payload is the spec's (no nodeId); this one names both
        asking[node_id] = {"visit": visit, "key": payload.get("key"), "events": []}
    elif type_ in VOTE_EVENTS and node_id in asking:
        asking[node_id]["events"].append([type_, _without_ids(payload)])
    elif type_ in _CLOSING:
        asking.pop(node_id, None)


def _read_decision(
    deciding: dict[str, dict[str, Any]], gates: dict[str, dict[str, Any]], node_id: str, type_: str, payload: dict[str, Any]
) -> None:
    """One more event of a decision being read: the resolve's own events, then the node settling."""
    read = deciding[node_id]
    if type_ == read["alias"]:
        read["alias"] = None  # the kind-specific twin of interrupt.resolved, emitted again with it
    elif type_ == "node.resumed":
        read["resumed"] = True
    elif type_ == "node.completed":
        output = payload.get("outputs")
        # complete() wraps an output that is not an object as {"value": ...}.
        if isinstance(output, dict) and list(output) == ["value"] and read["event"].get("resumeValue") != output:
            output = output["value"]
        _settle(deciding, gates, node_id, {"outcome": "complete", "output": output})
    elif type_ == "node.failed":
        _settle(deciding, gates, node_id, {"outcome": "fail", "error": payload.get("error")})
    else:
        read["extra"].append([type_, _without_ids(payload)])


def _settle(
    deciding: dict[str, dict[str, Any]], gates: dict[str, dict[str, Any]], node_id: str, settled: dict[str, Any]
) -> None:
    read = deciding.pop(node_id)
    gates[visit_key(node_id, read["visit"])] = {"event": read["event"], "extra": read["extra"], **settled}


def decision_of(recorded: dict[str, Any], kind: str) -> Decision:
    """The engine's Decision for a gate the source decided (recorded by `recorded_history`): the same events, the same
    outcome, read by the steps after it as they read it in the source."""
    from interlude.rules.interrupts.decide import Decision  # only where a fork reaches a decided gate

    event = dict(recorded["event"])
    extra = [(t, dict(p)) for t, p in recorded.get("extra") or []]
    value = event.get("resumeValue")
    routed_only = event.get("action") == "refine"
    if recorded["outcome"] == "complete":
        return Decision("complete", value, event, extra_events=extra, output=recorded.get("output"), routed_only=routed_only)
    output = None
    if kind == "approval":
        output = approval_outcome(value, str(event.get("action")), event.get("decision"), event.get("reason"))
    return Decision("fail", value, event, error=recorded.get("error"), extra_events=extra, output=output)


def in_conversation(recorded: dict[str, Any], cid: str) -> dict[str, Any]:
    """A conversation turn the source had answered, as the fork's: the conversation is the fork's own (its id minted
    from the fork's run id and claimed tenant-wide, engine/gates.py), so where the recorded turn names the source's
    conversation (its output, its conversation.exchanged/closed event) it names the fork's."""
    output = recorded.get("output")
    source_cid = output.get("conversationId") if isinstance(output, dict) else None
    if source_cid is None or source_cid == cid:
        return recorded

    def ours(payload: Any) -> Any:
        if isinstance(payload, dict) and payload.get("conversationId") == source_cid:
            return {**payload, "conversationId": cid}
        return payload

    return {**recorded, "output": ours(output), "extra": [[t, ours(p)] for t, p in recorded.get("extra") or []]}


def redrive_point(events: Iterable[dict[str, Any]], failed_node_id: str | None) -> int | None:
    """Where a failed run's redrive branches: where its failed node's failing visit was decided (a gate's
    `interrupt.resolved`: rejected, or timed out) or else failed (`node.failed`), so that visit runs again and
    everything the run settled before it is history; when the run failed on no node's account (its own timeout), at
    `run.failed`. None: the log holds neither."""
    point = decided = None
    for event in events:
        type_ = event["type"]
        ours = failed_node_id is not None and (event.get("payload") or {}).get("nodeId") == failed_node_id
        if ours and type_ == "node.started":
            decided = None
        elif ours and type_ == "interrupt.resolved":
            decided = event["sequence"]
        elif ours and type_ == "node.failed":
            point = event["sequence"] if decided is None else decided
        elif type_ == "run.failed" and point is None:
            point = event["sequence"]
    return point


def last_effect(events: Iterable[dict[str, Any]], node_id: str) -> str | None:
    """The effect id of `node_id`'s last core.http request in `events`; None if it made none."""
    found = None
    for event in events:
        payload = event.get("payload") or {}
        if event["type"] == ACTION_REQUESTED and payload.get("nodeId") == node_id and payload.get("kind") == HTTP_KIND:
            found = payload.get("effectId")
    return found
