"""A run as getRun answers it (OpenWOP's RunSnapshot, with Interlude's extension): what the run routes, the run
listing and the console show."""

from __future__ import annotations

from typing import Any

from interlude.domain.clock import iso_epoch
from interlude.domain.models.run import PUBLIC_VOTE_FIELDS, RunState
from interlude.engine.events import ENGINE_VERSION, EVENT_LOG_SCHEMA_VERSION
from interlude.engine.run import waiting_on


def snapshot(state: RunState) -> dict[str, Any]:
    snap: dict[str, Any] = {
        "runId": state.runId,
        "workflowId": state.workflowId,
        "status": state.status,
        "owner": state.owner,
        "eventLogSchemaVersion": EVENT_LOG_SCHEMA_VERSION,
        "engineVersion": ENGINE_VERSION,
        "inputs": state.inputs,
        "nodeStates": {nid: {"status": ns.status, "visits": ns.visits} for nid, ns in state.nodes.items()},
        "variables": state.outputs,
    }
    for field in ("startedAt", "completedAt", "error"):
        if getattr(state, field):
            snap[field] = getattr(state, field)
    held = waiting_on(state)
    if held is not None:
        snap["currentNodeId"] = held[0]
    if state.tags:
        snap["tags"] = state.tags
    if state.metadata:
        snap["metadata"] = state.metadata
    if state.configurable is not None:
        snap["configurable"] = state.configurable
    if state.parentRunId is not None:
        snap["parentRunId"] = state.parentRunId
    interrupts = {
        nid: {
            "interruptId": oi.interruptId,
            "kind": oi.kind,
            "key": oi.key,
            "raisedAt": oi.raisedAt,
            **({"deadline": iso_epoch(oi.deadline)} if oi.deadline is not None else {}),
            "votes": [{k: v for k, v in vote.model_dump().items() if k in PUBLIC_VOTE_FIELDS} for vote in oi.votes],
        }
        for nid, oi in state.interrupts.items()
    }
    snap["extensions"] = {
        "interlude.run": {
            "workflowVersion": state.workflowVersion,
            "openInterrupts": interrupts,
            "failedNodeId": state.failedNodeId,
        }
    }
    # Sub-workflows: the child runs this run started (at most MAX_CHILDREN_PER_RUN, oldest first), and for a
    # child the parent's node that waits on it (parentRunId is the snapshot's own field).
    if state.children:
        snap["extensions"]["interlude.run"]["childRunIds"] = list(state.children)
    # Forks (issue 29 item 2): where this run was forked from, and the runs forked from it (oldest first).
    if state.fork is not None:
        snap["extensions"]["interlude.run"]["ancestry"] = state.fork.model_dump(include={"sourceRunId", "fromSeq", "mode", "redrive"})
    if state.forks:
        snap["extensions"]["interlude.run"]["forkRunIds"] = list(state.forks)
    if state.parentNodeId is not None:
        snap["extensions"]["interlude.run"]["parentNodeId"] = state.parentNodeId
    return snap
