"""A run's lifecycle as callers ask for it: created (checked against its workflow and the tenant's quota), cancelled,
and advanced when a transition left it runnable (the dispatch outbox). Decisions on its gates: app/decisions.py."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING

from interlude.app import audit_entries as audit_log
from interlude.app.idempotency import KeyedWrite
from interlude.app.retries import MAX_RACE_RETRIES, busy
from interlude.config import DEFAULT_STEP_BUDGET
from interlude.domain import clock as clock_
from interlude.domain import schemas
from interlude.domain.budgets import MAX_INPUTS_BYTES, within_budget
from interlude.domain.clock import Clock, iso
from interlude.domain.errors import Conflict, Forbidden, Invalid, NotFound
from interlude.domain.ids import mint_opaque, tenant_bound
from interlude.domain.models.run import RunState
from interlude.engine import run as engine
from interlude.rules import auth, run_search
from interlude.rules import inputs as declared_inputs
from interlude.rules.callback_url import check_callback_url
from interlude.store.transactions import LostRace

if TYPE_CHECKING:
    from interlude.app.ports import (
        DefinitionSource,
        HostResolver,
        RunLedger,
        RunRecords,
        TenantLimits,
        WorkflowVersions,
    )
    from interlude.domain.models.requests import CancelRunRequest, CreateRunRequest


class RunLifecycle:
    def __init__(
        self,
        records: RunRecords,
        versions: WorkflowVersions,
        runs: RunLedger,
        definitions: DefinitionSource,
        limits: TenantLimits,
        clock: Clock = clock_.now,
        step_budget: int = DEFAULT_STEP_BUDGET,
        callback_resolver: HostResolver | None = None,
    ) -> None:
        self.records = records
        self.versions = versions
        self.runs = runs
        self.definitions = definitions
        self.limits = limits
        self.clock = clock
        self.step_budget = step_budget
        # The callbackUrl guard's host-name resolver (None: getaddrinfo).
        self.callback_resolver = callback_resolver

    def create_run(
        self,
        principal: auth.Principal,
        request: CreateRunRequest,
        keyed: KeyedWrite | None = None,
        written_numbers: Mapping[str, str] | None = None,
    ) -> RunState:
        """`written_numbers`: how the request wrote its numbers (RunState.writtenNumbers). The run options the version
        the run runs gives its runs (WorkflowDefinition.run_configurable) are taken where the request's configurable
        gives none, whichever face started the run."""
        if request.tenantId is not None and request.tenantId != principal.tenant:
            raise Forbidden("tenantId must be the tenant of the credential", {"field": "tenantId"})
        if request.callbackUrl is not None:
            check_callback_url(request.callbackUrl, self.callback_resolver)
        for field in ("residency", "evalSuiteRef", "agentId"):
            if getattr(request, field) is not None:
                raise Invalid(f"{field} is not supported by this host", {"field": field})
        if request.mode == "eval":
            raise Invalid("mode 'eval' is not supported by this host", {"field": "mode"})
        if request.configurable is not None:
            problems = schemas.errors_of(schemas.validator("configurable.schema.json"), request.configurable)
            if problems:
                raise Invalid(
                    "configurable is not valid",
                    {"field": "configurable", "errors": problems},
                )
        # The pointer (a few bytes), then the version from the process cache: versions are immutable.
        version = self.versions.latest_workflow_version(principal.tenant, request.workflowId)
        if version is None:
            raise NotFound(f"no workflow {request.workflowId!r}", {"field": "workflowId"})
        definition = self.definitions.workflow(principal.tenant, request.workflowId, version)
        missing = declared_inputs.missing(definition.variables, request.inputs)
        if missing:
            raise Invalid(
                f"inputs lack required variables: {missing}",
                {"field": "inputs", "missing": missing},
            )
        refused = declared_inputs.problems(definition.variables, request.inputs)
        if refused:
            raise Invalid(
                "inputs do not match the variables the workflow declares: "
                + "; ".join(f"{p['path']}: {p['message']}" for p in refused[:3]),
                {"field": "inputs", "errors": refused},
            )
        within_budget(request.inputs, MAX_INPUTS_BYTES, "the run's inputs")
        limits = self.limits.limits(principal.tenant)
        searchable = [key for key in limits.searchable_metadata if key in request.metadata]
        run_search.check_run_fields(request.tags, request.metadata, searchable)
        now = self.clock()
        state = RunState(
            runId=tenant_bound(principal.tenant, mint_opaque()),
            tenant=principal.tenant,
            workflowId=request.workflowId,
            workflowVersion=version,
            owner={"tenant": principal.tenant, "subject": principal.subject},
            inputs=request.inputs,
            configurable=definition.run_configurable(request.configurable),
            tags=request.tags,
            metadata=request.metadata,
            workflowName=run_search.stored_name(definition.name),
            searchableMetadata=searchable,
            **run_search.indexing(limits, now),
            callbackUrl=request.callbackUrl,
            createdByKey=principal.key_id,
            createdAt=iso(now),
            writtenNumbers=dict(written_numbers or {}),
        )
        build = partial(engine.start, state, definition, now, self.step_budget)
        transition = self.runs.commit_or_fail(build, None, now, keyed=keyed, open_runs_limit=limits.open_runs)
        return transition.state

    def cancel_run(
        self,
        principal: auth.Principal,
        run_id: str,
        request: CancelRunRequest,
        keyed: KeyedWrite | None = None,
        surface: str = "api",
    ) -> RunState:
        """`surface`: where the cancel was asked (the audit entry's actor surface: api, console)."""
        for _ in range(MAX_RACE_RETRIES):
            state, version = self.runs.load_run(principal.tenant, run_id)
            if state.terminal:
                raise Conflict(f"the run is already {state.status}", {"runStatus": state.status}, code="run_terminal")
            now = self.clock()
            transition = engine.cancel(state, now, request.reason, principal.subject["subjectId"])
            details = {"reason": request.reason[:500]} if request.reason else {}
            entry = audit_log.entry(
                principal.tenant, audit_log.actor(principal, surface), "run.cancelled", {"runId": run_id}, iso(now), details
            )
            try:
                return self.runs.commit_answered(transition, version, now, keyed, audit=entry).state
            except LostRace:
                continue
        raise busy("the run kept changing while cancelling; retry")

    def advance_run(self, run_id: str, got: tuple[RunState, int] | None = None) -> int:
        """Continue a run left runnable; returns how many events were written (0 when nothing to do). `got`: the run
        as just read (the dispatch outbox reads it to see whether it is runnable), else it is read here."""
        for _ in range(MAX_RACE_RETRIES):
            if got is None:
                got = self.records.get_run(run_id)
            if got is None:
                return 0
            state, version = got
            got = None
            if state.terminal or not state.queue:
                return 0
            now = self.clock()
            definition = self.definitions.workflow(state.tenant, state.workflowId, state.workflowVersion)
            try:
                build = partial(engine.advance, state, definition, now, self.step_budget)
                transition = self.runs.commit_or_fail(build, version, now, state.queue[0])
                return len(transition.events)
            except LostRace:
                continue
        return 0

