"""Sub-workflows (issue 15 item 3) on the dispatch side: start a requested child, land a finished child's outcome on
its parent, cancel the unfinished children of a run that ended, and answer GET /runs/{runId}/ancestry.

Every step is keyed on state (the child's id is derived from the parent's node visit; an outcome lands only on
the visit that waits for it; a cancel of a finished run does nothing), so a stream record delivered twice or out
of order changes nothing the second time. engine/subworkflows.py holds the rules and the limits.

A run's end cascades to its unfinished children durably: a child that keeps changing through every retry of its
cancel fails the outbox record of the end (ChildrenNotCancelled), which the outbox queue hands out again, and after its
last receive keeps in its dead letters to be sent back (docs/adr/0208).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from interlude.app.retries import MAX_RACE_RETRIES
from interlude.config import DEFAULT_STEP_BUDGET, settings
from interlude.domain import clock as clock_
from interlude.domain.clock import Clock
from interlude.domain.errors import DomainError, Invalid, NotFound, run_error
from interlude.domain.models.run import RunState
from interlude.engine import run as engine
from interlude.engine.effect_names import CHILD_REQUESTED
from interlude.engine.events import RUN_END_EVENTS
from interlude.engine.subworkflows import child_outcome
from interlude.rules import inputs as declared_inputs
from interlude.rules import run_search
from interlude.store.transactions import LostRace

if TYPE_CHECKING:
    from interlude.app.ports import (
        ActionOutcomes,
        DefinitionSource,
        RunLedger,
        RunRecords,
        TenantLimits,
        WorkflowVersions,
    )
    from interlude.rules import auth

# The host id ancestry names (multiAgent.executionModel.crossHostCausation.hostId).
HOST_ID = "interlude"
# Discovery's `subWorkflow` family (capabilities.schema.json: a closed record whose one facet is inputMapping).
SUBWORKFLOW_CAPABILITY: dict[str, Any] = {
    "status": "experimental",
    "since": "2.0",
    "until": "2.1",
    "witness": "claims-check",
    "inputMapping": True,
}


def ancestry_capability() -> dict[str, Any] | None:
    """Discovery's `multiAgent` family while GET /runs/{runId}/ancestry is served, else None (the route 404s).

    The one declaration both read (INTERLUDE_ANCESTRY_ENDPOINT). The schema seats the flag only under
    executionModel, whose `version` is required; 3 is the phase that names the endpoint, and conformance reads
    crossHostCausation only with version >= 3 (docs/adr/0033)."""
    if not settings().ancestry_endpoint:
        return None
    causation = {"hostId": HOST_ID, "ancestryEndpointSupported": True}
    return {
        "status": "experimental",
        "since": "2.0",
        "until": "2.1",
        "witness": "claims-check",
        "executionModel": {"version": 3, "crossHostCausation": causation},
    }


class ChildrenNotCancelled(Exception):
    """A run ended and some of its children kept changing while its cancel cascaded to them: the outbox record of its end
    fails, to be handed out again (and after the queue's last receive kept in its dead letters, to be sent back)."""

    def __init__(self, parent_run_id: str, child_ids: list[str]) -> None:
        super().__init__(
            f"run {parent_run_id} ended and its child run(s) {', '.join(child_ids)} kept changing while the cancel"
            " cascaded to them: not cancelled yet, tried again with the record's next delivery"
        )
        self.parent_run_id = parent_run_id
        self.child_ids = child_ids


class SubWorkflows:
    def __init__(
        self,
        records: RunRecords,
        versions: WorkflowVersions,
        runs: RunLedger,
        definitions: DefinitionSource,
        limits: TenantLimits,
        actions: ActionOutcomes,
        clock: Clock = clock_.now,
        step_budget: int = DEFAULT_STEP_BUDGET,
    ) -> None:
        self.records = records
        self.versions = versions
        self.runs = runs
        self.definitions = definitions
        self.limits = limits
        self.actions = actions
        self.clock = clock
        self.step_budget = step_budget

    def on_events(self, run_id: str, events: list[dict[str, Any]]) -> None:
        """The outbox handler: child requests start children; a run's end reaches its parent and its children."""
        for event in events:
            if event.get("type") == CHILD_REQUESTED:
                self.start_child(run_id, event.get("payload") or {})
        if any(e.get("type") in RUN_END_EVENTS for e in events):
            got = self.records.run_head(run_id)  # its end, its parent and its children: none of its inputs
            if got is None or not got[0].terminal:
                return
            ended = got[0]
            if ended.parentRunId and ended.parentNodeId and ended.parentVisit is not None:
                self.actions.finish_action(ended.parentRunId, ended.parentNodeId, ended.parentVisit, child_outcome(ended))
            raced = [child for child in ended.children if not self.cancel_child(child, ended.runId)]
            if raced:
                # The record fails, so the outbox hands it out again and the cascade is tried anew (docs/adr/0208).
                raise ChildrenNotCancelled(ended.runId, raced)

    def start_child(self, parent_run_id: str, request: dict[str, Any]) -> None:
        node_id, visit, child_id = request["nodeId"], int(request["visit"]), request["childRunId"]
        got = self.records.get_run(parent_run_id)
        if got is None:
            return
        parent = got[0]
        pending = parent.actions.get(node_id)
        if parent.terminal or pending is None or pending.visit != visit or self.records.get_run(child_id) is not None:
            return
        try:
            self._create_child(parent, node_id, visit, child_id, pending.request)
        except LostRace:
            return  # started by an earlier delivery of the same request
        except DomainError as exc:
            error = run_error(
                "interlude.subworkflow_unavailable",
                f"node {node_id!r}: the child run could not start: {exc}",
                {"nodeId": node_id, "childRunId": child_id},
            )
            self.actions.finish_action(parent_run_id, node_id, visit, {"error": error})

    def _create_child(self, parent: RunState, node_id: str, visit: int, child_id: str, request: dict[str, Any]) -> None:
        workflow_id = request["workflowId"]
        version = self.versions.latest_workflow_version(parent.tenant, workflow_id)
        if version is None:
            raise NotFound(f"no workflow {workflow_id!r}")
        definition = self.definitions.workflow(parent.tenant, workflow_id, version)
        inputs = request.get("inputs") or {}
        missing = declared_inputs.missing(definition.variables, inputs)
        refused = declared_inputs.problems(definition.variables, inputs)
        if missing or refused:
            raise Invalid(f"its inputs do not match the variables {workflow_id!r} declares")
        now = self.clock()
        limits = self.limits.limits(parent.tenant)
        state = RunState(
            runId=child_id,
            tenant=parent.tenant,
            workflowId=workflow_id,
            workflowVersion=version,
            workflowName=run_search.stored_name(definition.name),
            owner=parent.owner,
            inputs=inputs,
            # The run options its workflow's version gives its runs, as a run its caller starts takes (app/lifecycle).
            configurable=definition.run_configurable(None),
            createdAt=engine.iso(now),
            parentRunId=parent.runId,
            parentNodeId=node_id,
            parentVisit=visit,
            depth=parent.depth + 1,
            # Its inputs come from the parent's values, written as the parent's caller wrote them.
            writtenNumbers=parent.writtenNumbers,
            **run_search.indexing(limits, now),
        )
        open_runs = limits.open_runs
        build = partial(engine.start, state, definition, now, self.step_budget)
        self.runs.commit_or_fail(build, None, now, open_runs_limit=open_runs)

    def cancel_child(self, child_id: str, parent_run_id: str) -> bool:
        """Cancel an unfinished child because its parent ended (its open interrupts close with it). False when it kept
        changing for MAX_RACE_RETRIES reads in a row and is not cancelled yet; a child gone or ended already is left
        alone (True), so a cascade tried again cancels only what is still running."""
        for _ in range(MAX_RACE_RETRIES):
            got = self.records.get_run(child_id)
            if got is None or got[0].terminal:
                return True
            state, version = got
            now = self.clock()
            transition = engine.cancel(state, now, None, None, parent_run_id=parent_run_id)
            try:
                self.runs.commit_answered(transition, version, now)
                return True
            except LostRace:
                continue
        return False

    def run_ancestry(self, principal: auth.Principal, run_id: str) -> dict[str, Any]:
        """GET /runs/{runId}/ancestry: the run and its immediate parent (clients walk the chain one hop at a time).

        404 not_found, before the run is read, when the deployment does not advertise the endpoint (openapi.yaml)."""
        if ancestry_capability() is None:
            raise NotFound("this host does not serve run ancestry (see multiAgent in /.well-known/openwop)")
        state, _ = self.runs.load_run(principal.tenant, run_id)
        parent = None
        if state.parentRunId is not None:
            parent = {"runId": state.parentRunId, "hostId": HOST_ID, "cause": "core.subWorkflow"}
        return {"runId": state.runId, "hostId": HOST_ID, "parent": parent}
