"""The run operations (create, read, cancel, resolve, deadlines, advance) and `Service`, which joins them with the key
and workflow operations: between the HTTP layer and the store, no HTTP here, no boto3 here."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from functools import cache, cached_property, partial
from typing import TYPE_CHECKING, Any, Literal

from interlude.app import audit as audit_log
from interlude.app.caught import caught
from interlude.app.idempotency import KeyedWrite, answered, committed
from interlude.app.keys import KeyOperations
from interlude.app.retries import MAX_RACE_RETRIES, busy
from interlude.app.workflows import WorkflowOperations
from interlude.config import DEFAULT_STEP_BUDGET, settings
from interlude.domain import clock as clock_
from interlude.domain import schemas
from interlude.domain.audit import AuditDraft
from interlude.domain.budgets import (
    ITEM_BUDGET,
    MAX_INPUTS_BYTES,
    MAX_VALUE_BYTES,
    BudgetExceeded,
    first_page,
    json_size,
)
from interlude.domain.clock import Clock, iso, iso_epoch
from interlude.domain.errors import Conflict, Forbidden, Invalid, NotFound, TooLarge, run_error
from interlude.domain.ids import mint_opaque, tenant_bound, tenant_of
from interlude.domain.models.run import PUBLIC_VOTE_FIELDS, OpenInterrupt, RunState
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine import deadlines
from interlude.engine.events import ENGINE_VERSION, EVENT_LOG_SCHEMA_VERSION, InvalidEvent
from interlude.engine.visits import visit_keys
from interlude.rules import auth
from interlude.rules import inputs as declared_inputs
from interlude.store.directory import DirectoryStore
from interlude.store.facade import Store
from interlude.store.idempotency import IdempotencyStore
from interlude.store.interactions import InteractionStore
from interlude.store.transactions import LostRace

if TYPE_CHECKING:
    from interlude.app.limits import TenantLimiter
    from interlude.domain.models.requests import CancelRunRequest, CreateRunRequest
    from interlude.engine import run as engine
    from interlude.rules.interrupts.decide import Resolver
    from interlude.store.deliveries import DeliveryStore
    from interlude.store.webhooks import SubscriptionSecrets, WebhookStore

logger = logging.getLogger(__name__)


class Service(KeyOperations, WorkflowOperations):
    """Runs, their interrupts and deadlines; keys (app/keys.py) and workflows (app/workflows.py) join in."""

    # Host-name resolver of the callbackUrl guard at createRun (None: getaddrinfo); tests inject a fixed table.
    callback_resolver: Callable[[str, int], list[str]] | None = None

    def __init__(self, store: Store, clock: Clock = clock_.now, step_budget: int = DEFAULT_STEP_BUDGET) -> None:
        self.store = store
        # Every audit append through this store checkpoints when one is due (app/audit.py).
        audit_log.install(store)
        self.clock = clock
        self.step_budget = step_budget
        self._workflows: OrderedDict[tuple[str, str, int], WorkflowDefinition] = OrderedDict()
        self._keys: OrderedDict[str, tuple[float, dict[str, Any] | None]] = OrderedDict()

    # -- side stores: the one way to reach each, over the run table's connection ------------------

    @cached_property
    def hitl_store(self) -> InteractionStore:
        return InteractionStore(self.store.table, self.store.client)

    @cached_property
    def limiter(self) -> TenantLimiter:
        """The tenant's limits in force (cached briefly) and its request counter: the API's, and a child run's start.
        Loaded with its first use, so the stream and queue consumers do not load the limit rules."""
        from interlude.app.limits import TenantLimiter

        return TenantLimiter(self)

    @cached_property
    def directory(self) -> DirectoryStore:
        return DirectoryStore(self.store)

    @cached_property
    def deliveries(self) -> DeliveryStore:
        # The side stores of a few routes (deliveries, webhooks) load with their first use, not at a cold start.
        from interlude.store.deliveries import DeliveryStore

        return DeliveryStore(self.store)

    @cached_property
    def idempotency(self) -> IdempotencyStore:
        return IdempotencyStore(self.store.table, self.store.client)

    @cached_property
    def webhooks(self) -> WebhookStore:
        from interlude.store.webhooks import WebhookStore

        return WebhookStore(self.store.table, self.store.client)

    @cached_property
    def webhook_secrets(self) -> SubscriptionSecrets:
        from interlude.store.webhooks import subscription_secrets

        return subscription_secrets()

    # -- runs --------------------------------------------------------------------------------------

    def create_run(
        self, principal: auth.Principal, request: CreateRunRequest, keyed: KeyedWrite | None = None
    ) -> RunState:
        # The engine's run rules load where a run moves (create, cancel, resolve, advance, a deadline applied, a
        # snapshot's waiting node): the dispatch function's records read runs and move none but a runnable one.
        from interlude.engine import run as engine

        if request.tenantId is not None and request.tenantId != principal.tenant:
            raise Forbidden("tenantId must be the tenant of the credential", {"field": "tenantId"})
        if request.callbackUrl is not None:
            # The egress guard loads with the first run that names a callback (cold starts of other functions).
            from interlude.rules.callback_url import check_callback_url

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
        version = self.store.latest_workflow_version(principal.tenant, request.workflowId)
        if version is None:
            raise NotFound(f"no workflow {request.workflowId!r}", {"field": "workflowId"})
        definition = self.workflow(principal.tenant, request.workflowId, version)
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
        now = self.clock()
        state = RunState(
            runId=tenant_bound(principal.tenant, mint_opaque()),
            tenant=principal.tenant,
            workflowId=request.workflowId,
            workflowVersion=version,
            owner={"tenant": principal.tenant, "subject": principal.subject},
            inputs=request.inputs,
            configurable=request.configurable,
            tags=request.tags,
            metadata=request.metadata,
            callbackUrl=request.callbackUrl,
            createdByKey=principal.key_id,
            createdAt=iso(now),
        )
        open_runs = self.limiter.limits(principal.tenant).open_runs
        build = partial(engine.start, state, definition, now, self.step_budget)
        transition = self.commit_or_fail(build, None, now, keyed=keyed, open_runs_limit=open_runs)
        return transition.state

    def commit_or_fail(
        self,
        build: Callable[..., engine.Transition],
        version: int | None,
        now: datetime,
        node_id: str | None = None,
        keyed: KeyedWrite | None = None,
        result: Callable[[engine.Transition], Any] = lambda made: made.state,
        open_runs_limit: int | None = None,
        audit: AuditDraft | None = None,
    ) -> engine.Transition:
        """Commit what `build()` makes; if it cannot be made (a bug) or stored (an item would pass DynamoDB's
        size), commit `build(halt=error)` instead: what was decided lands and the run fails with a clear code,
        never left waiting on a step nobody can take. A lost race (Conflict) and other storage errors propagate.
        With `keyed`, the answer to what was committed (`result` of it, rendered by the edge) is committed with it.
        `open_runs_limit`: the tenant's quota, checked in the transaction that creates a run. `audit`: the entry that
        records what was decided, committed in the same transaction either way."""
        where = f"what follows node {node_id!r}" if node_id else "the run's next steps"
        try:
            transition = build()
        except Exception as exc:  # noqa: BLE001 - a bug after a decision must not strand the run
            caught(logger, "transition-build", "building a transition failed; failing the run")
            error = run_error("interlude.node_error", f"{where} failed: {type(exc).__name__}", {"nodeId": node_id})
        else:
            try:
                return self.commit_answered(transition, version, now, keyed, result, open_runs_limit, audit)
            except TooLarge as refused:
                # The store names the budget passed: one stored item's bytes, or one transaction's items.
                budget = {**ITEM_BUDGET, **(refused.details or {})}
                error = run_error(
                    "interlude.budget_exceeded",
                    f"{where} would not fit in {budget['budget']} ({budget['limit']:,} {budget['unit']})",
                    {"nodeId": node_id, **budget},
                )
            except InvalidEvent as exc:
                caught(logger, "transition-invalid-event", "a transition built an invalid event; failing the run")
                error = run_error("interlude.node_error", f"{where} failed: {type(exc).__name__}", {"nodeId": node_id})
        return self.commit_answered(build(halt=error), version, now, keyed, result, open_runs_limit, audit)

    def commit_answered(
        self,
        transition: engine.Transition,
        version: int | None,
        now: datetime,
        keyed: KeyedWrite | None = None,
        result: Callable[[engine.Transition], Any] = lambda made: made.state,
        open_runs_limit: int | None = None,
        audit: AuditDraft | None = None,
    ) -> engine.Transition:
        """Commit a transition; with `keyed`, the Idempotency-Key's record and its answer in the same transaction
        (and `audit`'s entry too)."""
        record = answered(keyed, result(transition)) if keyed else None
        self.store.commit(transition, version, iso(now), record, open_runs_limit, audit)
        committed(keyed, record)
        return transition

    def load_run(self, principal_tenant: str, run_id: str, deciding: bool = False) -> tuple[RunState, int]:
        """`deciding`: a decision follows (its audit chain's head is read with the run: Store.get_run)."""
        # The tenant check comes before any lookup, so a foreign id discloses nothing.
        if tenant_of(run_id) != principal_tenant:
            raise Forbidden("the run id belongs to another tenant", code="id_tenant_mismatch")
        got = self.store.get_run(run_id, deciding)
        if got is None:
            raise NotFound("no such run")
        return self.apply_deadlines(*got)

    def apply_deadlines(self, state: RunState, version: int) -> tuple[RunState, int]:
        """Record every deadline that has passed (timeouts, delays, the run's own), in one transaction when it holds them.

        Every read and resolve goes through here, so a late or lost schedule never lets a late decision
        through; the scheduler's worker calls it too. Whoever commits first wins; the others see the result.
        Deadlines that one transaction cannot hold all (budgets.TRANSITION_MAX_WAITS) are committed in turn.
        """
        races = 0
        while races < MAX_RACE_RETRIES:
            now = self.clock()
            if not deadlines.due(state, now):
                return state, version
            definition = self.workflow(state.tenant, state.workflowId, state.workflowVersion)
            try:
                build = partial(deadlines.expire, state, definition, now, self.step_budget)
                transition = self.commit_or_fail(build, version, now)
                # Every commit applies at least one deadline, so this ends.
                state, version = transition.state, version + 1
            except LostRace:
                races += 1
                got = self.store.get_run(state.runId)
                if got is None:
                    raise NotFound("no such run") from None
                state, version = got
        raise busy("the run kept changing while applying its deadlines; retry")

    def fire_deadline(self, body: dict[str, Any]) -> int:
        """The scheduler's worker: apply the named deadline if it is still pending and due.

        Returns the number of events written; 0 when the deadline was already applied, its interrupt was
        decided by a person first, the run moved on, or the run is gone — firing twice changes nothing.
        """
        run_id = body.get("runId")
        if not isinstance(run_id, str):
            return 0
        got = self.store.get_run(run_id)
        if got is None:
            return 0
        state, version = got
        before = state.nextSeq
        state, _ = self.apply_deadlines(state, version)
        named = deadlines.from_input(body)
        if named is not None and deadlines.is_pending(state, named):
            # Fired before its time by this process's clock: fail, so the invoker retries later.
            raise deadlines.NotDueYet(f"{named.purpose} deadline of {run_id} is not due yet")
        return state.nextSeq - before

    def snapshot(self, state: RunState) -> dict[str, Any]:
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
        from interlude.engine.run import waiting_on

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
        if state.parentNodeId is not None:
            snap["extensions"]["interlude.run"]["parentNodeId"] = state.parentNodeId
        return snap

    def cancel_run(
        self,
        principal: auth.Principal,
        run_id: str,
        request: CancelRunRequest,
        keyed: KeyedWrite | None = None,
        surface: str = "api",
    ) -> RunState:
        """`surface`: where the cancel was asked (the audit entry's actor surface: api, console)."""
        from interlude.engine import run as engine

        for _ in range(MAX_RACE_RETRIES):
            state, version = self.load_run(principal.tenant, run_id)
            if state.terminal:
                raise Conflict(f"the run is already {state.status}", {"runStatus": state.status}, code="run_terminal")
            now = self.clock()
            transition = engine.cancel(state, now, request.reason, principal.subject["subjectId"])
            details = {"reason": request.reason[:500]} if request.reason else {}
            entry = audit_log.entry(
                principal.tenant, audit_log.actor(principal, surface), "run.cancelled", {"runId": run_id}, iso(now), details
            )
            try:
                return self.commit_answered(transition, version, now, keyed, audit=entry).state
            except LostRace:
                continue
        raise busy("the run kept changing while cancelling; retry")

    def poll_events(self, principal: auth.Principal, run_id: str, after: int, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        delay = 0.2
        while True:
            state, _ = self.load_run(principal.tenant, run_id)
            events = self.store.read_events(run_id, after)
            if events or state.terminal or time.monotonic() + delay > deadline:
                return {
                    "runId": run_id,
                    # A page: lastSequence says whether more follow (ask again after the last event received).
                    "events": first_page(events),
                    "lastSequence": state.nextSeq - 1,
                    "status": state.status,
                    "isTerminal": state.terminal,
                }
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)

    def run_deliveries(self, principal: auth.Principal, run_id: str) -> dict[str, Any]:
        """Every callback delivery attempt of a run, oldest first, in the fields a tenant may see."""
        # Tenant check and existence first: a foreign or unknown run answers as getRun would.
        state, _ = self.load_run(principal.tenant, run_id)
        attempts = sorted(
            self.deliveries.attempts(run_id),
            key=lambda a: (a.get("at", ""), a.get("noticeId", ""), a.get("attempt", 0)),
        )
        from interlude.store.deliveries import public_attempts

        return {"runId": state.runId, "callbackUrl": state.callbackUrl, "deliveries": public_attempts(attempts)}

    # -- interrupts --------------------------------------------------------------------------------

    def resolve_interrupt(
        self,
        principal: auth.Principal,
        run_id: str,
        node_id: str,
        resume_value: Any,
        keyed: KeyedWrite | None = None,
        surface: Literal["run", "console"] = "run",
    ) -> dict[str, Any]:
        resolver = auth.run_resolver(principal, surface)
        state, version = self.load_run(principal.tenant, run_id, deciding=True)
        return self.resolve(state, version, node_id, resume_value, resolver, keyed=keyed)

    def node_named(self, state: RunState, node_id: str) -> str:
        """The node a caller names in `state`'s run as the engine runs it (WorkflowDefinition.engine_node_id)."""
        if node_id in state.interrupts:
            return node_id
        return self.workflow(state.tenant, state.workflowId, state.workflowVersion).engine_node_id(node_id)

    def open_interrupt(self, state: RunState, node_id: str) -> OpenInterrupt:
        """The interrupt node_id holds now.

        404 not_found: the run has no such node, the node is not a gate, or the gate has raised no interrupt yet
        in a run that is still going. 409 interrupt_already_resolved: the gate's interrupt was decided, cancelled
        or timed out, or the run is over (interrupt.md §Resolve as amended by RFC 0213 §C).
        """
        interrupt = state.interrupts.get(node_id)
        if interrupt is not None:
            return interrupt
        definition = self.workflow(state.tenant, state.workflowId, state.workflowVersion)
        if (engine_id := definition.engine_node_id(node_id)) != node_id:
            return self.open_interrupt(state, engine_id)  # a ModuleX node by the id its author wrote
        node = next((n for n in definition.nodes if n.id == node_id), None)
        if node is None:
            raise NotFound(f"the run has no node {node_id!r}")
        from interlude.engine.registry import is_gate

        if not is_gate(node.typeId):
            raise NotFound(f"node {node_id!r} is not a gate: it raises no interrupt")
        if state.terminal or self.store.raised_any(state.runId, visit_keys(state, node_id)):
            raise Conflict(
                f"node {node_id!r} holds no open interrupt (run {state.status})",
                {"runStatus": state.status},
                code="interrupt_already_resolved",
            )
        raise NotFound(f"node {node_id!r} has not raised an interrupt")

    def resolve(
        self,
        state: RunState,
        version: int,
        node_id: str,
        resume_value: Any,
        resolver: Resolver,
        interrupt_id: str | None = None,
        keyed: KeyedWrite | None = None,
    ) -> dict[str, Any]:
        """`interrupt_id` pins the decision to one interrupt (a token names one; a later visit's is another)."""
        # What a decision reads (the tenant's facts, its directory, delegations) loads with the first resolve: the
        # actions and timeouts functions' invocations land outcomes and apply deadlines, and decide nothing.
        from interlude.app.delegation import with_delegations
        from interlude.app.directory import with_directory
        from interlude.app.tenants import with_tenant_facts
        from interlude.engine import run as engine
        from interlude.rules.interrupts.decide import decide

        within_budget(resume_value, MAX_VALUE_BYTES, "the resume value")
        node_id = self.node_named(state, node_id)
        for _ in range(MAX_RACE_RETRIES):
            # A decision arriving after the deadline loses to the timeout, which is recorded first if nobody has.
            state, version = self.apply_deadlines(state, version)
            definition = self.workflow(state.tenant, state.workflowId, state.workflowVersion)
            interrupt = self.open_interrupt(state, node_id)
            if interrupt_id is not None and interrupt.interruptId != interrupt_id:
                raise Conflict(
                    f"the interrupt this token names was resolved; node {node_id!r} has asked again since",
                    {"runStatus": state.status},
                    code="interrupt_already_resolved",
                )
            now = self.clock()
            if interrupt.deadline is not None and interrupt.deadline <= now.timestamp():
                continue  # the deadline passed while deciding: the next attempt records the timeout first
            config = definition.node(node_id).config
            # Tenant-held facts (override principals, credential grants), read at decision time (issue 3).
            resolver = with_tenant_facts(self.hitl_store, state.tenant, interrupt, resolver)
            if interrupt.kind == "approval":
                # Group and role membership from the tenant's directory, read at decision time (issue 14).
                resolver = with_directory(self.directory, state.tenant, interrupt.payload["data"], resolver)
                # Votes handed to this principal, for this gate or while someone is out of office (issue 14).
                resolver = with_delegations(self, state.tenant, interrupt, resolver, now)
            decision = decide(interrupt, resume_value, resolver, iso(now), config)
            entry = audit_log.decision_draft(
                state.tenant, state.runId, node_id, interrupt.interruptId, interrupt.kind, decision, resolver, iso(now)
            )
            try:
                build = partial(engine.resolve, state, definition, node_id, decision, now, self.step_budget)
                transition = self.commit_or_fail(
                    build,
                    version,
                    now,
                    node_id,
                    keyed,
                    partial(resolution_of, node_id),
                    audit=entry,
                )
                return resolution_of(node_id, transition)
            except LostRace as lost:
                old = lost.interrupt_old_image()
                if old is not None and old.get("status") != "open":
                    # The failed condition already tells the loser what won: no further read.
                    raise Conflict(
                        "another decision resolved this interrupt first",
                        {"resolution": old.get("resolution")},
                        code="interrupt_already_resolved",
                    ) from None
                state, version = self.load_run(state.tenant, state.runId)
        raise busy("the run kept changing while resolving; retry")

    # -- dispatch ---------------------------------------------------------------------------------

    def advance_run(self, run_id: str) -> int:
        """Continue a run left runnable; returns how many events were written (0 when nothing to do)."""
        from interlude.engine import run as engine

        for _ in range(MAX_RACE_RETRIES):
            got = self.store.get_run(run_id)
            if got is None:
                return 0
            state, version = got
            if state.terminal or not state.queue:
                return 0
            now = self.clock()
            definition = self.workflow(state.tenant, state.workflowId, state.workflowVersion)
            try:
                build = partial(engine.advance, state, definition, now, self.step_budget)
                transition = self.commit_or_fail(build, version, now, state.queue[0])
                return len(transition.events)
            except LostRace:
                continue
        return 0


def within_budget(value: Any, limit: int, what: str) -> None:
    """413 for a value the caller sends that could not be stored as part of a run."""
    try:
        json_size(value, limit, what)
    except BudgetExceeded as exc:
        raise TooLarge(str(exc), {"limit": limit, "unit": exc.unit}) from None


def resolution_of(node_id: str, transition: engine.Transition) -> dict[str, Any]:
    """What a resolve answers: the run, the node decided, and where the run stands after it."""
    return {"runId": transition.state.runId, "nodeId": node_id, "status": transition.state.status}


@cache
def default_service() -> Service:
    """The process's one Service over the configured table: what every Lambda entry point uses."""
    cfg = settings()
    return Service(Store(cfg.table_name), step_budget=cfg.step_budget)
