"""The ModuleX operations (run, resume, cancel, state), over the same Service, store and engine as OpenWOP.

A ModuleX run is an Interlude run; its `run_id` and `thread_id` are both the run's tenant-bound id in wire
form (`demo~2FAbC…`: one path segment), so a run started on either face is addressable on the other.
Every lookup by a ModuleX id answers 404 for unknown, malformed and other-organisation ids alike.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from interlude.app.idempotency import KeyedWrite
from interlude.domain.errors import Conflict, DomainError, Forbidden, Invalid, NotFound, Unprocessable
from interlude.domain.ids import AUTHOR_ID_RE, from_wire, tenant_of, to_wire
from interlude.domain.models import Answer
from interlude.domain.models.requests import CancelRunRequest, CreateRunRequest
from interlude.domain.models.run import RunState
from interlude.domain.validation import parse
from interlude.faces.modulex import definition as mx
from interlude.faces.modulex.fields import (
    JsonType,
    check_types,
    is_json,
    problem,
    refused,
    typing_problems,
    unknown_problems,
)
from interlude.faces.modulex.frames import ModulexStatus, RunView, status_of, view_of
from interlude.faces.modulex.workflows import translation
from interlude.rules import auth

if TYPE_CHECKING:
    from interlude.app.ports import Decider, DefinitionSource, RunControl, RunLedger, VersionWrites
    from interlude.faces.modulex.ports import ModulexRecords

ADMIN_ROLES = frozenset({"owner", "admin"})


class ModulexRunRequest(BaseModel):
    """POST /workflows/run (for the OpenAPI document; the face checks bodies itself, with ModuleX's answers)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    workflow_id: str | None = None
    workflow: dict[str, Any] | None = Field(default=None, description="An inline ModuleX workflow definition")
    system_workflow: str | None = Field(default=None, description="Not served: 400")
    input: dict[str, Any] | None = None
    config: dict[str, Any] | None = Field(default=None, description="recursion_limit is honoured; other keys ignored")
    stream: bool = True
    ephemeral: bool = False
    is_private: bool = False
    attribution_workflow_id: str | None = None
    llm: Any = None
    knowledge_config: Any = None


class ModulexResumeRequest(BaseModel):
    """POST /workflows/resume/{thread_id}."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    run_id: str
    resume_value: Any
    workflow_id: str | None = None
    workflow: dict[str, Any] | None = None
    stream: bool = True


class ModulexCancelRequest(BaseModel):
    """POST /workflows/cancel/{run_id} (the body is optional)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    reason: str | None = None


RUN_FIELDS = tuple(ModulexRunRequest.model_fields)
# The JSON type the contract gives each field a body may hold (`workflow` is checked as a definition; `llm` and
# `knowledge_config`, 0.1's, are untyped and unread).
RUN_TYPES: dict[str, JsonType] = {
    "workflow_id": "string",
    "input": "object",
    "config": "object",
    "stream": "boolean",
    "ephemeral": "boolean",
    "is_private": "boolean",
    "attribution_workflow_id": "string",
}
RESUME_FIELDS = tuple(ModulexResumeRequest.model_fields)
RESUME_TYPES: dict[str, JsonType] = {"workflow_id": "string", "stream": "boolean"}
CANCEL_FIELDS = tuple(ModulexCancelRequest.model_fields)
CANCEL_TYPES: dict[str, JsonType] = {"reason": "string"}


# -- answers (closed: the OpenAPI document is generated from them) -------------------------------------

WorkflowSource = Literal["request", "database"]


class ModulexRunStarted(Answer):
    status: ModulexStatus
    run_id: str
    thread_id: str
    chat_id: None
    ephemeral: bool
    stream: bool
    workflow_name: str
    workflow_version: str
    workflow_source: WorkflowSource
    elapsed_ms: float
    message: str


class ModulexResumed(Answer):
    status: Literal["resumed"]
    run_id: str
    thread_id: str
    stream: bool
    workflow_source: WorkflowSource
    message: str


class ModulexCancelled(Answer):
    status: Literal["cancellation_requested"]
    run_id: str
    reason: str | None
    message: str


class ModulexStateMetadata(Answer):
    status: ModulexStatus
    openwop_status: str
    workflow_id: str
    workflow_name: str
    step: int


class ModulexState(Answer):
    thread_id: str
    run_id: str
    checkpoint_id: str
    state: dict[str, Any]
    next: list[str]
    metadata: ModulexStateMetadata
    pending_writes: int


def flag(body: dict[str, Any], name: str, default: bool) -> bool:
    """A boolean field of a body whose types were checked: as sent, or `default` when left out (or null)."""
    value = body.get(name)
    return default if value is None else value is True


def not_found(what: str = "run") -> NotFound:
    return NotFound(f"{what} not found")


def is_admin(principal: auth.Principal) -> bool:
    """Owner/admin level: the key carries the role `owner` or `admin`, or may administer keys (keys:admin)."""
    return bool(ADMIN_ROLES & set(principal.roles)) or "keys:admin" in principal.scopes


# -- the steps of run and resume: each refusal in ModuleX's order -------------------------------------


def run_body(body: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(input, config) of a run request whose shape is right: a JSON object of known fields, no system workflow,
    exactly one of workflow_id and workflow, each field of its JSON type (422 naming every one that is not) and a
    config.recursion_limit, if any, a positive integer."""
    if not isinstance(body, dict):
        raise Invalid("the body must be a JSON object")
    unknown = unknown_problems(body, RUN_FIELDS, "a run body")
    if unknown:
        raise refused(unknown)
    if body.get("system_workflow") is not None:
        raise Invalid("system workflows are not served by this host")
    if (body.get("workflow_id") is not None) == (body.get("workflow") is not None):
        raise Invalid("give exactly one of workflow_id and workflow")
    problems = typing_problems(body, RUN_TYPES)
    config = body.get("config")
    if isinstance(config, dict):
        problems += recursion_problems(config)
    if problems:
        raise refused(problems)
    inputs = body.get("input")
    return ({} if inputs is None else inputs), ({} if config is None else config)


def recursion_problems(config: dict[str, Any]) -> list[dict[str, Any]]:
    """A run config's recursion_limit (LangGraph's: how many steps the run may take) is a positive integer; another
    value is named, never read as no limit at all. A larger one than the engine allows is taken as its ceiling."""
    limit = config.get("recursion_limit")
    if limit is None or (is_json(limit, "integer") and limit >= 1):
        return []
    msg = "config.recursion_limit must be a positive JSON integer"
    return [problem(["config", "recursion_limit"], msg, "int_type")]


def run_configurable(config: dict[str, Any]) -> dict[str, Any]:
    """The create request's `configurable` for the request's own recursion_limit, or nothing when it gives none (the
    workflow's own then applies: WorkflowDefinition.own_run_options)."""
    recursion = config.get("recursion_limit")
    if recursion is None:
        return {}
    return {"configurable": {"version": 1, "run": {"recursionLimit": int(recursion)}}}


def resume_body(body: Any) -> str:
    """The run_id of a resume request whose shape is right: only the contract's fields (422 naming any other, before
    a missing one: `reume` is resume_value misspelt, not left out), each of its JSON type (a run_id that is no string
    names no run: 404)."""
    if not isinstance(body, dict):
        raise Invalid("the body must be a JSON object with run_id and resume_value")
    unknown = unknown_problems(body, RESUME_FIELDS, "a resume body")
    if unknown:
        raise refused(unknown)
    missing = [f for f in ("run_id", "resume_value") if body.get(f) is None]
    if missing:
        raise Invalid(f"missing required field(s): {', '.join(missing)}")
    if body.get("workflow_id") is not None and body.get("workflow") is not None:
        raise Invalid("workflow_id and workflow are mutually exclusive")
    check_types(body, RESUME_TYPES)
    if not isinstance(body["run_id"], str):
        raise not_found()
    return body["run_id"]


def cancel_reason(body: Any) -> str | None:
    """The reason of a cancel request whose shape is right: no body, or an object holding only the contract's field
    (422 naming any other, as a run, resume or workflow body: a misspelt `reason` is told, not lost), a string."""
    if body is None:
        return None
    if not isinstance(body, dict):
        raise Invalid("the body must be a JSON object")
    unknown = unknown_problems(body, CANCEL_FIELDS, "a cancel body")
    if unknown:
        raise refused(unknown)
    check_types(body, CANCEL_TYPES)
    return body.get("reason")


def resumed_source(body: dict[str, Any], state: RunState) -> WorkflowSource:
    """Where the resume says the run's workflow comes from; refused when it names another workflow than the run's."""
    if body.get("workflow_id") is not None and body["workflow_id"] != state.workflowId:
        raise Invalid(f"the run was not started from workflow {body['workflow_id']!r}")
    if body.get("workflow") is None:
        return "database"
    try:
        inline_id = mx.content_id(mx.translate(body["workflow"], "workflow"))
    except mx.Invalid as exc:
        raise Unprocessable(str(exc), {"errors": exc.errors}) from None
    if inline_id != state.workflowId:
        raise Invalid("the run was started from a different workflow definition")
    return "request"


def waiting_interrupt(state: RunState) -> str:
    """The node of the one interrupt the run waits on; 409 when it waits on none or on several."""
    if state.terminal or not state.interrupts:
        raise Conflict(
            f"the run is not interrupted (it is {status_of(state.status)})",
            code="interlude.run_state_invalid",
        )
    if len(state.interrupts) > 1:
        raise Conflict(
            "the run waits on several interrupts; resolve them one by one on POST /runs/{runId}/interrupts/{nodeId}",
            code="interlude.run_state_invalid",
        )
    return next(iter(state.interrupts))


class ModulexFace:
    def __init__(
        self,
        records: ModulexRecords,
        runs: RunLedger,
        control: RunControl,
        decisions: Decider,
        versions: VersionWrites,
        definitions: DefinitionSource,
    ) -> None:
        self.records = records
        self.runs = runs
        self.control = control
        self.decisions = decisions
        self.versions = versions
        self.definitions = definitions

    # -- lookups -----------------------------------------------------------------------------------

    def run_id(self, principal: auth.Principal, wire: str) -> str:
        try:
            run_id = from_wire(wire)
        except DomainError:
            raise not_found() from None
        if tenant_of(run_id) != principal.tenant:
            raise not_found()
        return run_id

    def load(self, principal: auth.Principal, wire: str) -> tuple[RunState, int]:
        run_id = self.run_id(principal, wire)
        try:
            return self.runs.load_run(principal.tenant, run_id)
        except DomainError as exc:
            if exc.code in ("not_found", "id_tenant_mismatch"):
                raise not_found() from None
            raise

    def view(self, state: RunState) -> RunView:
        definition = self.definitions.workflow(state.tenant, state.workflowId, state.workflowVersion)
        return view_of(state.runId, state.workflowId, state.workflowVersion, definition)

    # -- run ----------------------------------------------------------------------------------------

    def register_inline(self, principal: auth.Principal, raw: Any) -> str:
        """Store an inline ModuleX definition under its content id (once); that id."""
        translated, definition = translation(raw, "workflow")
        workflow_id = mx.content_id(translated)
        if self.records.latest_workflow(principal.tenant, workflow_id) is None:
            # Content-addressed: a concurrent writer stored the very same definition, so losing the race is fine.
            self.versions.store_workflow_version(principal, workflow_id, 1, definition)
        return workflow_id

    def deployed_id(self, principal: auth.Principal, workflow_id: str) -> str:
        """A workflow_id to run from the database: any stored workflow of the tenant but a deleted ModuleX one."""
        if not AUTHOR_ID_RE.fullmatch(workflow_id):
            return workflow_id  # refused, naming the field, when the run request is parsed
        deployed = self.records.get_modulex_workflow(principal.tenant, workflow_id)
        if deployed is not None and "deletedAt" in deployed:
            raise Invalid(f"no deployed workflow {workflow_id!r} (it was deleted)")
        return workflow_id

    def run(
        self,
        principal: auth.Principal,
        body: Any,
        keyed: KeyedWrite | None = None,
        written_numbers: Mapping[str, str] | None = None,
    ) -> ModulexRunStarted:
        """`written_numbers`: how the request wrote its numbers (RunState.writtenNumbers)."""
        began = time.monotonic()
        inputs, config = run_body(body)
        has_inline = body.get("workflow") is not None
        source: WorkflowSource
        if has_inline:
            workflow_id, source = self.register_inline(principal, body["workflow"]), "request"
        else:
            workflow_id, source = self.deployed_id(principal, body["workflow_id"]), "database"
        request: dict[str, Any] = {"workflowId": workflow_id, "inputs": inputs, **run_configurable(config)}

        def started(state: RunState) -> ModulexRunStarted:
            return self.run_started(state, body, source, began)

        typed: CreateRunRequest = parse(CreateRunRequest, request, "request body")
        try:
            # With an Idempotency-Key, the answer is made just before the commit and committed with the run.
            # The request's recursion_limit, else the workflow's own (of the version the run runs), else the default.
            state = self.control.create_run(principal, typed, keyed.map(started) if keyed else None, written_numbers)
        except DomainError as exc:
            if exc.code == "not_found" and not has_inline:
                # ModuleX: a workflow_id without an active deployment is a 400.
                raise Invalid(f"no deployed workflow {workflow_id!r}") from None
            raise
        return started(state)

    def run_started(
        self, state: RunState, body: dict[str, Any], source: WorkflowSource, began: float
    ) -> ModulexRunStarted:
        view = self.view(state)
        return ModulexRunStarted(
            status=status_of(state.status),
            run_id=to_wire(state.runId),
            thread_id=to_wire(state.runId),
            chat_id=None,
            ephemeral=flag(body, "ephemeral", False),
            stream=flag(body, "stream", True),
            workflow_name=view.workflow_name,
            workflow_version=view.workflow_version,
            workflow_source=source,
            elapsed_ms=round((time.monotonic() - began) * 1000, 1),
            message=f"Run started; listen at /workflows/listen/{to_wire(state.runId)}",
        )

    # -- resume -------------------------------------------------------------------------------------

    def resume(
        self,
        principal: auth.Principal,
        thread_id: str,
        body: Any,
        keyed: KeyedWrite | None = None,
        written_numbers: Mapping[str, str] | None = None,
    ) -> ModulexResumed:
        """`written_numbers`: how the request wrote its numbers (RunState.writtenNumbers)."""
        if not is_admin(principal):
            raise Forbidden("resuming a run requires an owner or admin key")
        state, version = self.load(principal, resume_body(body))
        if to_wire(state.runId) != thread_id and thread_id != state.runId:
            raise not_found("thread")
        source = resumed_source(body, state)
        node_id = waiting_interrupt(state)
        wire = to_wire(state.runId)
        resumed = ModulexResumed(
            status="resumed",
            run_id=wire,
            thread_id=wire,
            stream=flag(body, "stream", True),
            workflow_source=source,
            message=f"Run resumed at {self.view(state).node(node_id)['id']}; listen at /workflows/listen/{wire}",
        )
        resolver = auth.run_resolver(principal)
        answer = keyed.map(lambda _: resumed) if keyed else None
        self.decisions.resolve(
            state, version, node_id, body["resume_value"], resolver, keyed=answer, written_numbers=written_numbers
        )
        return resumed

    # -- cancel, state ------------------------------------------------------------------------------

    def cancel(
        self, principal: auth.Principal, wire: str, body: Any, keyed: KeyedWrite | None = None
    ) -> ModulexCancelled:
        reason = cancel_reason(body)
        state, _ = self.load(principal, wire)
        if state.terminal:
            raise Conflict(f"the run is already {state.status}", code="interlude.run_state_invalid")
        cancelled = ModulexCancelled(
            status="cancellation_requested", run_id=to_wire(state.runId), reason=reason, message="Run cancelled"
        )
        request: CancelRunRequest = parse(CancelRunRequest, {"reason": reason} if reason else {}, "request body")
        self.control.cancel_run(principal, state.runId, request, keyed.map(lambda _: cancelled) if keyed else None)
        return cancelled

    def state(self, principal: auth.Principal, thread_id: str) -> ModulexState:
        state, _ = self.load(principal, thread_id)
        view = self.view(state)
        waiting = list(state.interrupts) or list(state.queue)
        return ModulexState(
            thread_id=to_wire(state.runId),
            run_id=to_wire(state.runId),
            checkpoint_id=str(state.nextSeq - 1),
            state={**view.state_of(state.outputs), "input": state.inputs},
            next=[view.node(n)["id"] for n in waiting],
            metadata=ModulexStateMetadata(
                status=status_of(state.status),
                openwop_status=state.status,
                workflow_id=state.workflowId,
                workflow_name=view.workflow_name,
                step=state.step,
            ),
            pending_writes=0,
        )
