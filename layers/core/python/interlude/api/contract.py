"""What each operation of wiring.ROUTES answers: its success responses, its parameters, and every error code it
may refuse with. Declared once, here; the OpenAPI document (interlude.api.openapi) is generated from it and the
suite holds the handlers to it (schemathesis against the local stack; tests/e2e/test_api_errors.py checks every
refusal's code against its operation's declaration).

An operation's error codes are the ones its route implies (a key → 401/403; a body → 400/413/415; an
Idempotency-Key → its three refusals; a path parameter → 400) plus the ones declared for it below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args

from pydantic import BaseModel

from interlude import wiring
from interlude.api.errors import status_for_code
from interlude.app import audit, run_listing
from interlude.app import inbox as approver_inbox
from interlude.app.keys import MAX_KEYS_LIMIT
from interlude.app.workflows import MAX_WORKFLOW_PAGE
from interlude.domain.ids import AUTHOR_ID
from interlude.domain.models import responses as r
from interlude.domain.models import tasks as tk
from interlude.domain.models import webhooks as wh
from interlude.domain.models.principals import DelegateVoteRequest, PrincipalEntry, SlackSettings, VoteDelegated
from interlude.domain.models.requests import (
    BulkCancelRequest,
    CancelRunRequest,
    CreateKeyRequest,
    CreateRunRequest,
    ResolveInterruptRequest,
)
from interlude.domain.models.run import RunStatus
from interlude.domain.models.tenants import CredentialGrantRequest, PostEventRequest, TenantSettings
from interlude.domain.models.tokens import MintTokenRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.faces.modulex import operations as mx
from interlude.faces.modulex import workflows as mxw


def run_statuses() -> tuple[str, ...]:
    return get_args(RunStatus)


JSON = "application/json"
HTML = "text/html"
SSE = "text/event-stream"
FORM = "application/x-www-form-urlencoded"


@dataclass(frozen=True)
class Success:
    status: int
    description: str
    # The body: a model, or a JSON schema (for documents that are not models: SSE text, an HTML page), or one of
    # several models (a route two faces share).
    model: type[BaseModel] | None = None
    schema: dict[str, Any] | None = None
    media: tuple[str, ...] = (JSON,)
    headers: tuple[str, ...] = ()
    one_of: tuple[type[BaseModel], ...] = ()


@dataclass(frozen=True)
class Param:
    name: str
    where: str  # "query" | "header"
    schema: dict[str, Any]
    description: str = ""


@dataclass(frozen=True)
class Operation:
    answers: tuple[Success, ...]
    # Error codes beyond those the route implies.
    errors: tuple[str, ...] = ()
    request: type[BaseModel] | None = None
    # A body that may be left out (cancel's reason, a mint's defaults).
    optional_body: bool = False
    # Request media besides JSON (the approval page's form).
    form: bool = False
    params: tuple[Param, ...] = ()
    # Refusals may also come as the approval page (a browser's GET or form POST on a token surface).
    html_errors: bool = False


# Every refusal a request can meet whatever the operation: an unexpected failure (the correlation id is logged).
ALWAYS = ("internal_error",)
# A key's tenant may also be over its request rate (429 with Retry-After).
KEYED = ("unauthenticated", "forbidden", "rate_limited")
BODY = ("validation_error", "payload_too_large", "unsupported_media_type")
IDEMPOTENT = ("idempotency_key_invalid", "idempotency_key_mismatch", "idempotency_in_flight")
# A run named by the path: another tenant's (403, or ModuleX's 404), none, or one that kept changing (retry).
RUN = ("validation_error", "id_tenant_mismatch", "not_found", "runner_unavailable")
DECISION = ("not_found", "interrupt_already_resolved", "interlude.vote_already_cast", "forbidden", "payload_too_large")
WEBHOOK = ("validation_error", "id_tenant_mismatch", "not_found")
# A task token (interlude.app.tasks): not one Interlude issued, another tenant's, unknown, or no longer holding
# (task_not_claimed is also the answer when the run no longer waits for the task: details.status "cancelled").
TASK = ("interlude.task_token_invalid", "id_tenant_mismatch", "not_found", "interlude.task_not_claimed")
TOKEN = ("interrupt_token_invalid", "interrupt_expired", "not_found", "interrupt_already_resolved", "runner_unavailable")

LAST_EVENT_ID = Param("Last-Event-ID", "header", {"type": "string"}, "Resume after this event sequence")
ORGANIZATION = Param("X-Organization-ID", "header", {"type": "string"}, "Must name the key's tenant when sent")
WORKFLOW_ID = {"type": "string", "pattern": AUTHOR_ID}
SSE_TEXT = Success(200, "Server-sent events, then a retry hint", schema={"type": "string"}, media=(SSE,))
PAGE = {"type": "string", "description": "The approval page"}

# The operator console (interlude.api.console): HTML pages, a 303 to the sign-in page without a session, and
# every refusal as a page with its status (401 when the session's key was revoked or expired).
CONSOLE_PAGE = Success(200, "The page", schema={"type": "string", "description": "A console page"}, media=(HTML,))
CONSOLE_REDIRECT = Success(
    303, "Elsewhere in the console (sign in first)", schema={"type": "string"}, media=(HTML,), headers=("Location",)
)
SIGNED_IN = ("unauthenticated", "forbidden", "rate_limited", "validation_error")
CONSOLE_FORM = (*SIGNED_IN, "payload_too_large")


def console(*answers: Success, errors: tuple[str, ...] = SIGNED_IN, params: tuple[Param, ...] = ()) -> Operation:
    return Operation(answers or (CONSOLE_PAGE, CONSOLE_REDIRECT), errors, params=params, html_errors=True)


CURSOR = Param("cursor", "query", {"type": "string"}, "where the previous page ended")
CONSOLE_OPERATIONS: dict[str, Operation] = {
    "consoleHome": console(errors=()),
    "consoleSignInPage": console(CONSOLE_PAGE, errors=()),
    "consoleSignIn": console(
        CONSOLE_PAGE, errors=("unauthenticated", "forbidden", "validation_error", "payload_too_large")
    ),
    "consoleSignOut": console(CONSOLE_PAGE, errors=("forbidden", "validation_error", "payload_too_large")),
    "consoleInbox": console(params=(CURSOR,)),
    "consoleDecide": console(CONSOLE_PAGE, errors=(*CONSOLE_FORM, *RUN, *DECISION, "interrupt_already_resolved")),
    "consoleRuns": console(
        params=(
            Param("status", "query", {"type": "string"}),
            Param("workflowId", "query", WORKFLOW_ID),
            Param("runId", "query", {"type": "string"}, "open this run"),
            CURSOR,
        ),
        errors=(*SIGNED_IN, "id_tenant_mismatch"),
    ),
    "consoleCancelRuns": console(CONSOLE_PAGE, errors=(*CONSOLE_FORM, *RUN, "run_terminal")),
    "consoleRun": console(
        params=(Param("after", "query", {"type": "integer", "minimum": -1}, "events after this sequence"),),
        errors=(*SIGNED_IN, *RUN),
    ),
    "consoleWorkflows": console(params=(Param("workflowId", "query", {"type": "string"}, "open this workflow"),)),
    "consoleWorkflow": console(
        params=(Param("version", "query", {"type": "integer", "minimum": 1}),), errors=(*SIGNED_IN, "not_found")
    ),
    "consoleKeys": console(params=(CURSOR,)),
    "consoleCreateKey": console(
        Success(201, "The key, shown once", schema={"type": "string"}, media=(HTML,)), errors=CONSOLE_FORM
    ),
    "consoleRevokeKey": console(CONSOLE_PAGE, errors=(*CONSOLE_FORM, "not_found")),
    "consoleAudit": console(params=(CURSOR,)),
}

OPERATIONS: dict[str, Operation] = {
    "getCapabilities": Operation(
        (
            Success(200, "Discovery document", r.Capabilities, headers=("Cache-Control", "ETag")),
            Success(304, "Unchanged since the ETag sent in If-None-Match", media=(), headers=("Cache-Control", "ETag")),
        ),
        params=(Param("If-None-Match", "header", {"type": "string"}, "An ETag of an earlier discovery document"),),
    ),
    "getOpenApi": Operation((Success(200, "This document", schema={"type": "object"}),)),
    "putWorkflow": Operation(
        (
            Success(201, "The version registered", r.WorkflowVersion),
            Success(200, "The ModuleX workflow the id names, updated (issue 16)", mxw.ModulexWorkflow),
        ),
        ("runner_unavailable", "interlude.quota_exceeded", "interlude.workflow_unprocessable"),
        WorkflowDefinition,
    ),
    "getWorkflow": Operation(
        (
            Success(
                200,
                "The latest version; for a ModuleX workflow's id, its ModuleX record; for a ModuleX client (it sends "
                "X-Organization-ID, or a modulex-python / modulex-js User-Agent), any workflow as ModuleX reads it",
                one_of=(r.WorkflowVersion, mxw.ModulexWorkflow, mxw.OpenwopWorkflow),
            ),
        ),
        ("not_found",),
    ),
    "createRun": Operation(
        (Success(201, "The run started", r.RunCreated, headers=("Location",)),),
        ("not_found", "interlude.quota_exceeded"),
        CreateRunRequest,
    ),
    "getRun": Operation(
        (
            Success(200, "Run snapshot", schema={"$ref": "#/components/schemas/RunSnapshot"}, headers=("ETag",)),
            Success(304, "Unchanged since the ETag sent in If-None-Match", media=(), headers=("ETag",)),
        ),
        RUN,
        params=(Param("If-None-Match", "header", {"type": "string"}, "An ETag of an earlier snapshot"),),
    ),
    "cancelRun": Operation(
        (Success(200, "The run cancelled", r.RunCancelled),), (*RUN, "run_terminal"), CancelRunRequest, True
    ),
    "pollRunEvents": Operation(
        (Success(200, "Events after the cursor (may be none)", r.EventPage),),
        RUN,
        params=(
            Param("afterSequence", "query", {"type": "integer", "minimum": 0, "maximum": 10**12}),
            Param("timeout", "query", {"type": "integer", "minimum": 1, "maximum": 60}, "Seconds to wait"),
        ),
    ),
    "resolveInterruptByRun": Operation(
        (Success(200, "The decision recorded", r.Resolution),), (*RUN, *DECISION), ResolveInterruptRequest
    ),
    "createKey": Operation((Success(201, "The key (its secret shown once)", r.CreatedKey),), (), CreateKeyRequest),
    "listKeys": Operation(
        (Success(200, "The tenant's keys, oldest first (metadata only)", r.KeyPage),),
        ("validation_error",),
        params=(
            Param("limit", "query", {"type": "integer", "minimum": 1, "maximum": MAX_KEYS_LIMIT}),
            Param("cursor", "query", {"type": "string"}, "cursor of the previous page"),
        ),
    ),
    "revokeKey": Operation((Success(200, "The key, revoked", r.KeyMetadata),), ("not_found",)),
    "inspectInterruptByToken": Operation(
        (Success(200, "The interrupt payload, or the approval page", schema={"type": "object"}, media=(JSON,)),),
        ("forbidden", *TOKEN),
        html_errors=True,
    ),
    "resolveInterruptByToken": Operation(
        (Success(200, "The decision recorded, or the page saying so", r.Resolution),),
        (*TOKEN, *DECISION, "validation_error"),
        ResolveInterruptRequest,
        form=True,
        html_errors=True,
    ),
    "getInterruptToken": Operation(
        (Success(200, "The interrupt and a token for it", r.MintedToken, headers=("Cache-Control",)),),
        (*RUN, "interrupt_already_resolved"),
    ),
    "mintInterruptToken": Operation(
        (Success(201, "A token for the interrupt", r.MintedToken, headers=("Cache-Control",)),),
        (*RUN, "interrupt_already_resolved"),
        MintTokenRequest,
        True,
    ),
    "listRunDeliveries": Operation((Success(200, "Every delivery attempt", r.RunDeliveries),), RUN),
    "listInterrupts": Operation(
        (Success(200, "Pending interrupts, newest first", r.Inbox),),
        ("validation_error", "id_tenant_mismatch"),
        params=(
            Param("status", "query", {"type": "string", "enum": ["pending"]}),
            Param(
                "limit",
                "query",
                {"type": "integer", "minimum": 1, "maximum": approver_inbox.MAX_INBOX_LIMIT},
            ),
            Param("kind", "query", {"type": "string", "enum": list(approver_inbox.INTERRUPT_KINDS)}),
            Param("workflowId", "query", WORKFLOW_ID),
            Param("runId", "query", {"type": "string"}),
            Param("cursor", "query", {"type": "string"}, "nextCursor of the previous page"),
        ),
    ),
    "postEvent": Operation(
        (Success(202, "Kept, and the waiting interrupts it resolved", r.EventAccepted),),
        ("runner_unavailable",),
        PostEventRequest,
    ),
    "getTenantSettings": Operation((Success(200, "The tenant's settings", r.TenantSettingsAnswer),)),
    "putTenantSettings": Operation((Success(200, "The settings stored", r.TenantSettingsAnswer),), (), TenantSettings),
    "putCredentialGrant": Operation(
        (Success(200, "The grant recorded", r.CredentialGrant),), ("validation_error",), CredentialGrantRequest
    ),
    "streamRunEvents": Operation(
        (SSE_TEXT,),
        (*RUN, "unsupported_stream_mode"),
        params=(
            Param("streamMode", "query", {"type": "string"}, "updates (default), debug, values, or a mix"),
            Param("bufferMs", "query", {"type": "integer", "minimum": 0, "maximum": 5000}),
            Param("resumable", "query", {"type": "string", "enum": ["true", "false"]}),
            LAST_EVENT_ID,
        ),
    ),
    "modulexRun": Operation(
        (Success(200, "The run started", mx.ModulexRunStarted),),
        ("interlude.workflow_unprocessable", "interlude.quota_exceeded"),
        mx.ModulexRunRequest,
        params=(ORGANIZATION,),
    ),
    "modulexListen": Operation((SSE_TEXT,), RUN, params=(LAST_EVENT_ID, ORGANIZATION)),
    "modulexResume": Operation(
        (Success(200, "The interrupt answered", mx.ModulexResumed),),
        (*RUN, *DECISION, "interlude.run_state_invalid", "interlude.workflow_unprocessable"),
        mx.ModulexResumeRequest,
        params=(ORGANIZATION,),
    ),
    "modulexCancel": Operation(
        (Success(200, "The run cancelled", mx.ModulexCancelled),),
        (*RUN, "interlude.run_state_invalid", "run_terminal"),
        mx.ModulexCancelRequest,
        True,
        params=(ORGANIZATION,),
    ),
    "modulexState": Operation((Success(200, "The run's state", mx.ModulexState),), RUN, params=(ORGANIZATION,)),
    "putPrincipal": Operation(
        (
            Success(201, "The entry created", r.PrincipalAnswer),
            Success(200, "The entry replaced", r.PrincipalAnswer),
        ),
        ("interlude.quota_exceeded", "runner_unavailable"),
        PrincipalEntry,
    ),
    "getPrincipal": Operation((Success(200, "The entry", r.PrincipalAnswer),), ("not_found",)),
    "deletePrincipal": Operation((Success(200, "The entry removed", r.PrincipalAnswer),), ("not_found", "runner_unavailable")),
    # Issue 16: run listing and bulk cancel.
    "listRuns": Operation(
        (Success(200, "One page of the tenant's runs, newest first", r.RunList),),
        ("validation_error",),
        params=(
            Param("limit", "query", {"type": "integer", "minimum": 1}, f"clamped to {run_listing.MAX_RUNS_PAGE}"),
            Param("cursor", "query", {"type": "string", "minLength": 1, "maxLength": 2048}, "nextCursor of a page"),
            Param("workflowId", "query", WORKFLOW_ID),
            Param("status", "query", {"type": "string", "enum": list(run_statuses())}),
        ),
    ),
    "bulkCancelRuns": Operation(
        (Success(200, "Each id's outcome, in request order", r.BulkCancelAnswer),), (), BulkCancelRequest
    ),
    # Issue 16 item 5: the audit log.
    "verifyAuditLog": Operation(
        (Success(200, "The range re-walked: the chain's and the checkpoints' anomalies", r.AuditVerification),),
        # not_found: auditLogIntegrity unadvertised (the checkpoint key cannot be read).
        ("validation_error", "not_found"),
        params=(
            Param("fromSeq", "query", {"type": "integer", "minimum": 0, "maximum": 10**12 - 1}, "First entry (required)"),
            Param("toSeq", "query", {"type": "integer", "minimum": 0, "maximum": 10**12 - 1}, "Last entry (required)"),
            Param("chain", "query", {"type": "integer", "minimum": 0, "maximum": wiring.AUDIT_CHAINS - 1}, "Walk this chain only (default: every chain)"),
        ),
    ),
    "listAuditEntries": Operation(
        (Success(200, "The tenant's audit entries, newest first", r.AuditPage),),
        ("validation_error",),
        params=(
            Param("limit", "query", {"type": "integer", "minimum": 1, "maximum": audit.MAX_PAGE}),
            Param("cursor", "query", {"type": "string"}, "cursor of the previous page"),
        ),
    ),
    "getRunEffects": Operation((Success(200, "The run's effect records", r.RunEffects),), RUN),
    # not_found while `replay` is not advertised (api/effects.py, REPLAY_CAPABILITY): this host serves no fork.
    "getEffectSeamManifest": Operation((Success(200, "The effect-seam manifest", r.EffectSeamManifest),), ("not_found",)),
    "getRunAncestry": Operation((Success(200, "The run and its immediate parent", r.RunAncestry),), RUN),
    # Issue 15 item 2: task workers.
    "claimTask": Operation(
        (Success(200, "A task, claimed", tk.ClaimedTask), Success(204, "Nothing ready within waitSeconds", media=())),
        (),
        tk.ClaimTaskRequest,
    ),
    "completeTask": Operation((Success(200, "Completed", tk.TaskSettled),), TASK, tk.CompleteTaskRequest),
    "failTask": Operation((Success(200, "Failed, or queued again", tk.TaskSettled),), TASK, tk.FailTaskRequest),
    "heartbeatTask": Operation((Success(200, "The claim holds", tk.TaskHeld),), TASK, tk.HeartbeatRequest, True),
    # Issue 16: ModuleX database mode and run rows.
    "modulexCreateWorkflow": Operation(
        (Success(201, "The workflow deployed", mxw.ModulexWorkflow),),
        ("interlude.workflow_unprocessable", "interlude.quota_exceeded", "runner_unavailable"),
        mxw.ModulexWorkflowRequest,
        params=(ORGANIZATION,),
    ),
    "listWorkflows": Operation(
        (Success(200, "One page of the tenant's workflows, both faces", mxw.WorkflowList),),
        ("validation_error",),
        params=(
            Param("page", "query", {"type": "integer", "minimum": 1, "maximum": 10**6}),
            Param("page_size", "query", {"type": "integer", "minimum": 1, "maximum": MAX_WORKFLOW_PAGE}),
            *(Param(name, "query", {"type": "string", "maxLength": mxw.MAX_NAME}) for name in mxw.LISTING_FILTERS),
            ORGANIZATION,
        ),
    ),
    "modulexDeleteWorkflow": Operation(
        (Success(200, "The workflow deleted", mxw.WorkflowDeleted),),
        ("not_found", "interlude.method_not_allowed"),
        params=(ORGANIZATION,),
    ),
    "modulexListRuns": Operation(
        (Success(200, "The runs, newest first", mxw.RunRows),),
        ("validation_error",),
        params=(
            Param("limit", "query", {"type": "integer", "minimum": 1, "maximum": mxw.MAX_RUN_LIMIT}),
            Param("offset", "query", {"type": "integer", "minimum": 0, "maximum": mxw.MAX_RUN_OFFSET}),
            Param("workflow_id", "query", WORKFLOW_ID),
            Param("status", "query", {"type": "string"}, "a ModuleX or an OpenWOP run status"),
            Param("trigger_type", "query", {"type": "string", "maxLength": mxw.MAX_NAME}, "api or subworkflow"),
            ORGANIZATION,
        ),
    ),
    "modulexGetRun": Operation((Success(200, "The run's record", mxw.RunDetail),), RUN, params=(ORGANIZATION,)),
    **CONSOLE_OPERATIONS,
    # Issue 14 item 4: delegation of a vote (the run's interrupt named by the path, as for a resolve).
    "delegateVote": Operation(
        (Success(200, "The delegation recorded on the gate", VoteDelegated),),
        (*RUN, "interrupt_already_resolved", "interlude.vote_already_cast", "forbidden", "interlude.delegation_not_allowed"),
        DelegateVoteRequest,
    ),
    # Issue 14: webhook subscriptions (a subscription named by the path: another tenant's is 403, none is 404).
    "registerWebhook": Operation(
        (Success(201, "The subscription (its secret shown once)", wh.WebhookRegistered, headers=("Cache-Control",)),),
        ("webhook_url_rejected", "interlude.quota_exceeded"),
        wh.RegisterWebhookRequest,
    ),
    "unregisterWebhook": Operation(
        (Success(204, "Unregistered: nothing more is delivered to it", media=()),), WEBHOOK
    ),
    "rotateWebhookSecret": Operation(
        (Success(200, "Rotated; the previous secret signs too until it expires", wh.WebhookSecretRotated),),
        (*WEBHOOK, "interlude.rotation_in_overlap"),
        wh.RotateWebhookSecretRequest,
        True,
    ),
    "listWebhookDeadLetters": Operation(
        (Success(200, "Dead-lettered deliveries, newest first (content-free)", wh.WebhookDeadLetterPage),),
        WEBHOOK,
        params=(
            Param("limit", "query", {"type": "integer", "minimum": 1}, "clamped to deadLetter.maxPageSize"),
            Param("cursor", "query", {"type": "string", "minLength": 1, "maxLength": 2048}, "nextCursor"),
        ),
    ),
    "listRunNotifications": Operation((Success(200, "Every notification of the run", r.RunNotifications),), RUN),
    "putSlackSettings": Operation(
        (Success(200, "The credential stored (never returned)", r.SlackConfigured),), (), SlackSettings
    ),
}


def is_modulex(route: wiring.Route) -> bool:
    return route.face == "modulex"


def error_codes(route: wiring.Route) -> list[str]:
    """Every code `route` may refuse with: what its route implies, then what its operation declares."""
    op = OPERATIONS[route.operation]
    codes: list[str] = [*ALWAYS]
    if route.scope:
        codes += KEYED
    if op.request is not None:
        codes += BODY
    if route.mutating:
        codes += IDEMPOTENT
    if "{" in route.path:
        codes.append("validation_error")
    codes += op.errors
    return list(dict.fromkeys(codes))


def error_statuses(route: wiring.Route) -> dict[int, list[str]]:
    """The codes `route` may refuse with, by the status each answers with on the route's face."""
    by_status: dict[int, list[str]] = {}
    for code in error_codes(route):
        by_status.setdefault(status_for_code(code, route.face), []).append(code)
    return dict(sorted(by_status.items()))
