"""Forks of a run (OpenWOP `POST /runs/{runId}:fork`, replay.md) and the redrive of a failed one (a branch at its
failure): a new run of the source's workflow version that carries the source's history (engine/forks.py), linked
both ways (the fork's `fork`, the source's `forks`). No HTTP here, no boto3 here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from interlude.app import audit_entries as audit_log
from interlude.app.retries import MAX_RACE_RETRIES
from interlude.config import DEFAULT_STEP_BUDGET
from interlude.domain import clock as clock_
from interlude.domain import schemas
from interlude.domain.budgets import MAX_STATE_BYTES, within_budget
from interlude.domain.clock import Clock, iso
from interlude.domain.errors import Conflict, Invalid, TooLarge, Unprocessable
from interlude.domain.ids import mint_opaque, tenant_bound
from interlude.domain.models.run import ForkOrigin, RunState
from interlude.engine import forks
from interlude.engine import run as engine
from interlude.engine.run import Transition
from interlude.rules import run_diff, run_search
from interlude.store.transactions import LostRace

if TYPE_CHECKING:
    from interlude.app.idempotency import KeyedWrite
    from interlude.app.ports import DefinitionSource, FailedEffects, RunLedger, RunRecords, TenantLimits
    from interlude.domain.models.requests import ForkRunRequest
    from interlude.rules import auth

# The runs one run may be forked into (its `forks` list, in its head); a fork of a fork counts for its own source.
MAX_FORKS_PER_RUN = 50
# The share of a run's state a fork's carried history may take (the rest is the run's own).
MAX_RECORDED_BYTES = MAX_STATE_BYTES // 2


@dataclass(frozen=True)
class Forked:
    """A fork made: the new run and where it branched from its source."""

    state: RunState
    source_run_id: str
    from_seq: int
    mode: str


class Forks:
    def __init__(
        self,
        records: RunRecords,
        runs: RunLedger,
        definitions: DefinitionSource,
        limits: TenantLimits,
        reopen_failed_effect: FailedEffects,
        clock: Clock = clock_.now,
        step_budget: int = DEFAULT_STEP_BUDGET,
    ) -> None:
        self.records = records
        self.runs = runs
        self.definitions = definitions
        self.limits = limits
        self.reopen_failed_effect = reopen_failed_effect
        self.clock = clock
        self.step_budget = step_budget

    def fork_run(
        self, principal: auth.Principal, run_id: str, request: ForkRunRequest, keyed: KeyedWrite | None = None
    ) -> Forked:
        overlay = request.runOptionsOverlay.model_dump(exclude_none=True) if request.runOptionsOverlay else {}
        if request.mode == "branch" and request.fromSeq is None:
            raise Invalid("a branch names its fork point: fromSeq", {"field": "fromSeq"})
        if request.mode == "replay" and overlay:
            raise Invalid("runOptionsOverlay is for a branch only; a replay runs as its source ran", {"field": "runOptionsOverlay"})
        source, _ = self.runs.load_run(principal.tenant, run_id)
        from_seq = 0 if request.fromSeq is None else request.fromSeq
        if from_seq >= source.nextSeq:
            raise Unprocessable(
                f"fromSeq {from_seq} is past the source run's event log (its last sequence is {source.nextSeq - 1})",
                {"field": "fromSeq", "fromSeq": from_seq, "lastSequence": source.nextSeq - 1},
                code="fork_point_invalid",
            )
        events = self._whole_log(source)
        # A branch carries what settled before its fork point; a replay the whole log (replay.md: nothing it
        # decided is decided again, no effect it performed is performed again).
        recorded = self._with_votes(source, forks.recorded_history(events, from_seq if request.mode == "branch" else None))
        return self._fork(principal, source, recorded, ForkOrigin(sourceRunId=source.runId, fromSeq=from_seq, mode=request.mode), overlay, keyed)

    def redrive_run(self, principal: auth.Principal, run_id: str, keyed: KeyedWrite | None = None) -> Forked:
        """A failed run (its node failed, a gate was rejected or timed out, or the run's own time ran out) runs again
        from its failed node: a branch at the failure, where the failing visit runs anew and everything settled before
        it is carried."""
        source, _ = self.runs.load_run(principal.tenant, run_id)
        if source.status != "failed":
            raise Conflict(
                f"only a failed run is redriven; this one is {source.status}",
                {"runStatus": source.status},
                code="run_state_conflict",
            )
        events = self._whole_log(source)
        point = forks.redrive_point(events, source.failedNodeId)
        if point is None:
            raise Unprocessable("the run's event log holds no failure to redrive from", {"field": "fromSeq"}, code="fork_point_invalid")
        recorded = self._with_votes(source, forks.recorded_history(events, point))
        self._reopen_business_effect(source, events)
        origin = ForkOrigin(sourceRunId=source.runId, fromSeq=point, mode="branch", redrive=True)
        return self._fork(principal, source, recorded, origin, {}, keyed)

    def diff_runs(self, principal: auth.Principal, run_id: str, against: str) -> dict[str, Any]:
        """OpenWOP diffRun (rules/run_diff.py) of `run_id` (a) against `against` (b), both the caller's tenant's; a run
        whose log holds more than MAX_DIFF_EVENTS events is refused before either log is read."""
        runs = [self.runs.load_run(principal.tenant, run)[0] for run in (run_id, against)]
        for state in runs:
            if state.nextSeq > run_diff.MAX_DIFF_EVENTS:
                raise TooLarge(
                    f"run {state.runId} has {state.nextSeq} events; a diff compares at most {run_diff.MAX_DIFF_EVENTS} a run",
                    {"runId": state.runId, "events": state.nextSeq, "maxEvents": run_diff.MAX_DIFF_EVENTS},
                )
        a, b = (self.records.read_events(state.runId, limit=run_diff.MAX_DIFF_EVENTS, holder=state) for state in runs)
        return run_diff.diff_runs(run_id, a, against, b)

    def _whole_log(self, source: RunState) -> list[dict[str, Any]]:
        """The source's event log, refused unless it is whole (events past their retention would be history lost) and
        the source may be forked once more."""
        if len(source.forks) >= MAX_FORKS_PER_RUN:
            raise Conflict(
                f"the run has been forked {MAX_FORKS_PER_RUN} times, the most one run is",
                {"maxForks": MAX_FORKS_PER_RUN},
                code="interlude.fork_limit_reached",
            )
        events = self.records.read_events(source.runId, holder=source)
        if [e["sequence"] for e in events[:1]] != [0] or len(events) != source.nextSeq:
            raise Unprocessable(
                "the source run's event log is no longer whole, so its history cannot be carried",
                {"field": "fromSeq", "lastSequence": source.nextSeq - 1},
                code="fork_point_invalid",
            )
        return events

    def _with_votes(self, source: RunState, recorded: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The votes cast before the fork point on gates still open there, read from the source's interrupt items
        (who cast each: principal, membership, surface, delegation), the first as many as the log counts."""
        carried: dict[str, dict[str, Any]] = {}
        for visit, asked in recorded.get("votes", {}).items():
            item = self.records.closed_interrupt(source.runId, asked["key"]) or {}
            votes = item.get("votes")
            votes = json.loads(votes) if isinstance(votes, str) else votes or []
            if len(votes) >= asked["count"]:
                carried[visit] = {"votes": votes[: asked["count"]], "events": asked["events"]}
        return {**recorded, "votes": carried}

    def _reopen_business_effect(self, source: RunState, events: list[dict[str, Any]]) -> None:
        """A failed call keyed by its business identity (effectKey) is the same effect in the redrive, whose record
        says it failed: reopened, so the redrive calls again rather than landing the failure (as a retry-action)."""
        failed = source.failedNodeId
        if failed is None:
            return
        definition = self.definitions.workflow(source.tenant, source.workflowId, source.workflowVersion)
        node = next((n for n in definition.nodes if n.id == failed), None)
        if node is None or not node.config.get("effectKey"):
            return
        effect_id = forks.last_effect(events, failed)
        if effect_id is not None:
            self.reopen_failed_effect(source.runId, failed, effect_id, "business-identity", self.clock())

    def _fork(
        self,
        principal: auth.Principal,
        source: RunState,
        recorded: dict[str, dict[str, Any]],
        origin: ForkOrigin,
        overlay: dict[str, Any],
        keyed: KeyedWrite | None,
    ) -> Forked:
        within_budget(recorded, MAX_RECORDED_BYTES, "the fork's carried history")
        options = _run_options(source, overlay)
        # The fork is found as any run is (rules/run_search.py): the tags and metadata its overlay gives are held to
        # createRun's limits, and it is indexed under the searchable keys the tenant declares now (those whose value,
        # perhaps the source's from before the key was declared, the index can hold).
        limits = self.limits.limits(principal.tenant)
        given = overlay.get("metadata") or {}
        run_search.check_run_fields(
            overlay.get("tags") or [], given, [k for k in limits.searchable_metadata if k in given], "runOptionsOverlay."
        )
        searchable = [k for k in limits.searchable_metadata if run_search.indexable(options["metadata"].get(k))]
        definition = self.definitions.workflow(source.tenant, source.workflowId, source.workflowVersion)
        now = self.clock()
        state = RunState(
            runId=tenant_bound(principal.tenant, mint_opaque()),
            tenant=principal.tenant,
            workflowId=source.workflowId,
            workflowVersion=source.workflowVersion,
            workflowName=run_search.stored_name(definition.name),
            # forkRun: the child's owner is copied verbatim.
            owner=source.owner,
            inputs=source.inputs,
            createdByKey=principal.key_id,
            createdAt=iso(now),
            fork=origin,
            recorded=recorded,
            writtenNumbers=source.writtenNumbers,
            searchableMetadata=searchable,
            **run_search.indexing(limits, now),
            **options,
        )
        open_runs = limits.open_runs
        build = partial(engine.start, state, definition, now, self.step_budget)
        forked = Forked(state, source.runId, origin.fromSeq, origin.mode)
        details = {"sourceRunId": source.runId, "fromSeq": origin.fromSeq, "mode": origin.mode, "redrive": origin.redrive}
        votes = carried_votes(recorded)
        if votes:
            details["carriedVotes"] = votes
        entry = audit_log.draft(principal, "run.forked", {"runId": state.runId}, iso(now), details)
        transition = self.runs.commit_or_fail(
            build, None, now, keyed=keyed, result=lambda made: _forked(made, forked), open_runs_limit=open_runs, audit=entry
        )
        self._link(source.runId, state.runId)
        return _forked(transition, forked)

    def _link(self, source_run_id: str, fork_run_id: str) -> None:
        """The source names its fork (its head only: no event, so a finished run's log still ends with its end)."""
        for _ in range(MAX_RACE_RETRIES):
            got = self.records.get_run(source_run_id)
            if got is None or fork_run_id in got[0].forks:
                return
            state, version = got
            linked = state.model_copy(deep=True)
            linked.forks.append(fork_run_id)
            try:
                self.records.rewrite_head(linked, version)
            except LostRace:
                continue
            return


# The carried votes a fork's audit entry names one by one (the rest counted): a quorum asks at most a few dozen people.
MAX_AUDITED_VOTES = 20


def carried_votes(recorded: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What the fork's audit entry says of the votes it carried: how many, and for each (the first MAX_AUDITED_VOTES)
    the gate, who cast it (for whom, when delegated), what, and when in the source."""
    listed = [
        {
            "nodeId": visit.rsplit("#", 1)[0],
            "principal": vote.get("principal"),
            "action": vote.get("action"),
            "at": vote.get("at"),
            **({"castBy": vote["castBy"]} if vote.get("castBy") else {}),
        }
        for visit, held in sorted(recorded.get("votes", {}).items())
        for vote in held["votes"]
    ]
    return {"count": len(listed), "votes": listed[:MAX_AUDITED_VOTES]} if listed else {}


def _forked(transition: Transition, forked: Forked) -> Forked:
    return Forked(transition.state, forked.source_run_id, forked.from_seq, forked.mode)


def _run_options(source: RunState, overlay: dict[str, Any]) -> dict[str, Any]:
    """The source's run options with a branch's overlay on them: configurable merged key by key (its `run` limits
    too), tags replaced, metadata merged."""
    configurable = dict(source.configurable or {})
    extra = overlay.get("configurable")
    if extra is not None:
        problems = schemas.errors_of(schemas.validator("configurable.schema.json"), extra)
        if problems:
            raise Invalid("runOptionsOverlay.configurable is not valid", {"field": "runOptionsOverlay.configurable", "errors": problems})
        run = {**(configurable.get("run") or {}), **(extra.get("run") or {})}
        configurable.update(extra)
        if run:
            configurable["run"] = run
    return {
        "configurable": configurable or None,
        "tags": list(overlay.get("tags", source.tags)),
        "metadata": {**source.metadata, **(overlay.get("metadata") or {})},
    }
