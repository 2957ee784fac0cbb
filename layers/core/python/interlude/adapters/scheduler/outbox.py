"""The outbox handler for deadlines: one schedule per deadline a transition introduced, deleted once settled.

Registered in interlude.composition (Services.outbox). It decides from the run head as it is now (one GetItem, only for batches that
hold a relevant event), never from the record alone, so a record delivered twice or out of order does no
harm: a deadline already settled is not scheduled again, a create that finds the schedule is fine, and a
delete that finds nothing is fine. A deadline already due when its record arrives is applied here at once
(no schedule needed). A schedule that outlives its deadline (a create racing the resolve's delete) fires
once, finds nothing pending, changes nothing, and is deleted by ActionAfterCompletion.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from interlude.adapters.scheduler import scheduler as scheduler_
from interlude.engine import deadlines
from interlude.engine.deadlines import Deadline
from interlude.engine.events import RUN_END_EVENTS
from interlude.engine.visits import interrupt_id

if TYPE_CHECKING:
    from interlude.app.ports import DefinitionSource, RunLedger, RunRecords
    from interlude.domain.clock import Clock

log = logging.getLogger(__name__)

INTRODUCING = {"node.suspended", "node.started", "run.started"}
SETTLING = {"interrupt.resolved", "node.cancelled", *RUN_END_EVENTS}


class DeadlineSchedules:
    def __init__(self, records: RunRecords, runs: RunLedger, definitions: DefinitionSource, clock: Clock) -> None:
        self.records = records
        self.runs = runs
        self.definitions = definitions
        self.clock = clock

    def on_events(self, run_id: str, events: list[dict[str, Any]]) -> None:
        types = {e["type"] for e in events}
        if not types & (INTRODUCING | SETTLING):
            return
        scheduler = scheduler_.from_env()
        if scheduler is None:
            return
        got = self.records.get_run(run_id)
        if got is None:
            return
        state, version = got
        new = introduced(state, events)
        if any(d.due <= self.clock().timestamp() for d in new):
            # Already due (a short timeout, or a record processed late): apply it now, no schedule needed.
            state, version = self.runs.apply_deadlines(state, version)
        for deadline in new:
            if deadlines.is_pending(state, deadline):
                scheduler.ensure(run_id, deadline)
        if types & SETTLING:
            for deadline in self.settled(state, events):
                scheduler.delete(run_id, deadline)

    def settled(self, state: Any, events: list[dict[str, Any]]) -> list[Deadline]:
        """Deadlines this batch settled whose schedules may still exist."""
        definition = self.definitions.workflow(state.tenant, state.workflowId, state.workflowVersion)
        nodes = {n.id: n for n in definition.nodes}

        def timed(node_id: str) -> bool:
            node = nodes.get(node_id)
            return node is not None and int(node.config.get("timeoutMs") or 0) > 0

        out: list[Deadline] = []
        for event in events:
            payload = event["payload"]
            node_id = payload.get("nodeId")
            if event["type"] == "interrupt.resolved" and timed(node_id):
                out.append(Deadline("interrupt", 0, node_id, interrupt_id=payload["interruptId"]))
            elif event["type"] == "node.cancelled" and state.terminal and node_id in nodes:
                # Cancellation only happens as the run ends, so the node's visit count is final: it names the
                # occurrence that was open.
                visit = state.nodes[node_id].visits
                if nodes[node_id].typeId == "core.delay":
                    out.append(Deadline("delay", 0, node_id, visit=visit))
                elif timed(node_id):
                    out.append(Deadline("interrupt", 0, node_id, interrupt_id=interrupt_id(state, node_id, visit)))
            elif event["type"] in RUN_END_EVENTS and state.deadline is not None:
                error = payload.get("error") or {}
                if error.get("code") != "run_timeout":
                    out.append(Deadline("run", 0))
        return out


def introduced(state: Any, events: list[dict[str, Any]]) -> list[Deadline]:
    """Pending deadlines whose introducing event is in this batch."""
    suspended = {e["payload"].get("interruptId") for e in events if e["type"] == "node.suspended"}
    started = {e["payload"].get("nodeId") for e in events if e["type"] == "node.started"}
    run_started = any(e["type"] == "run.started" for e in events)
    out = []
    for deadline in deadlines.pending(state):
        if (
            (deadline.purpose == "interrupt" and deadline.interrupt_id in suspended)
            or (deadline.purpose == "delay" and deadline.node_id in started)
            or (deadline.purpose == "run" and run_started)
        ):
            out.append(deadline)
    return out


