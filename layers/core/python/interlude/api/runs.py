"""The OpenWOP core routes: discovery, workflows, runs, keys (the run-scoped resolve: api/run_decisions.py)."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler.api_gateway import Response

# The service these routes call, which the composition builds at their first use: createRun and cancel run the
# engine's run rules (app/lifecycle.py). Loaded with the routes, so a run request's first use counts it.
import interlude.app.lifecycle  # noqa: F401
from interlude import __version__
from interlude.api.http import (
    OPENWOP_VERSION,
    answers_as_modulex,
    if_none_match,
    is_custom_method,
    json_response,
    not_modified,
    parsed,
    principal_for,
    query_int,
    raw_body,
    required_body,
    run_links,
    tagged_json,
)
from interlude.api.idempotency import keyed
from interlude.api.routes import route
from interlude.app.snapshots import snapshot
from interlude.composition import services
from interlude.config import settings
from interlude.config.delivery import delivery_settings
from interlude.domain.errors import Invalid, NotFound
from interlude.domain.ids import check_author_id, from_wire
from interlude.domain.models.requests import CancelRunRequest, CreateKeyRequest, CreateRunRequest
from interlude.domain.models.responses import (
    Capabilities,
    CreatedKey,
    EventPage,
    RunCancelled,
    RunCreated,
    WorkflowVersion,
)
from interlude.domain.models.run import RunState
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.domain.validation import parse
from interlude.domain.written_numbers import spellings
from interlude.engine.events import ENGINE_VERSION, EVENT_LOG_SCHEMA_VERSION
from interlude.rules import audit as audit_rules
from interlude.rules.interrupts.decide import REF_KINDS

# -- routes ----------------------------------------------------------------------------------------


@route("getCapabilities")
def get_capabilities() -> Response:
    # capabilities.md §1.1: an ETag of the document's bytes, and 304 to a matching If-None-Match.
    return tagged_json(Capabilities.model_validate(capabilities()), {"Cache-Control": "public, max-age=60"})


def capabilities() -> dict[str, Any]:
    # Advertise only what this deployment actually serves. The token scheme loads here (discovery), not with a resolve.
    from interlude.rules.tokens.scheme import TOKEN_ALGS

    caps: dict[str, Any] = {
        "protocolVersions": [OPENWOP_VERSION],
        "preferredVersion": OPENWOP_VERSION,
        "implementation": {"name": "interlude", "version": __version__},
        "engineVersion": ENGINE_VERSION,
        "eventLogSchemaVersion": EVENT_LOG_SCHEMA_VERSION,
        # The run event log behind GET /runs/{runId}/events (SSE) and /events/poll. capabilities.schema.json closes
        # this record: besides status/since/witness its one facet is crossEngineOrdering, and every run's sequence
        # is assigned by one writer (the run head's conditional version), which is `global-sequencer`.
        "eventLog": {
            "status": "stable",
            "since": "2.0",
            "witness": "claims-check",
            "crossEngineOrdering": {"orderingModel": "global-sequencer"},
        },
    }
    # Issue 3: the approver ref kinds this host resolves and enforces (approverGroupRefs / approverRoleRefs bind
    # only because they are listed here), and core.conversationGate.
    caps["interrupt"] = {
        "status": "stable",
        "since": "2.0",
        "witness": "witnessable-gated",
        # Issue 4: the signed-token surfaces (api/tokens.py) verify exactly these algs.
        "tokenAlgs": list(TOKEN_ALGS),
        "refKinds": list(REF_KINDS),
        # Issue 6: notices go to a run's callbackUrl (interlude.adapters.delivery), guarded at createRun and at delivery.
        "callbackDelivery": True,
    }
    caps["conversationPrimitive"] = {"status": "stable", "since": "2.0", "witness": "claims-check"}
    # Issue 26 row 11: idempotency Layer 2 (RFC 0150), which binds GET /runs/{runId}/effects: core.http claims each
    # effect by its business identity before calling and records the outcome (store/effects.py); Layer 1 is the
    # Idempotency-Key of every mutating route. The record alone: one region, so no multiRegion or crossRegion.
    caps["idempotency"] = {"status": "stable", "since": "2.0", "witness": "witnessable-gated"}
    # `replay` with POST /runs/{runId}:fork (issue 29 item 2): the one declaration both discovery and
    # GET /host/effect-seams read (loaded here: no other request of this module uses it).
    from interlude.api.effects import REPLAY_CAPABILITY

    if REPLAY_CAPABILITY is not None:
        caps["replay"] = dict(REPLAY_CAPABILITY)
    # Issue 16: GET /runs (interlude.api.run_listing, loaded here: discovery is no part of a resolve's cold start).
    from interlude.api.run_listing import run_list_capability

    caps["runList"] = run_list_capability()
    # Issue 16: the audit log's integrity family (RFC 0224), advertised only when the signing key can be read.
    audit_key = services().audit.public_key()
    if audit_key is not None:
        caps["auditLogIntegrity"] = {
            "status": "experimental",
            "since": "2.0",
            "until": "2.1",
            "witness": "witnessable-gated",
            "checkpointSignatureAlgorithm": audit_rules.SIGNATURE_ALGORITHM,
            "checkpointPublicKey": audit_key,
            "checkpointIntervalEntries": audit_rules.CHECKPOINT_INTERVAL_ENTRIES,
            "checkpointIntervalSeconds": audit_rules.CHECKPOINT_INTERVAL_SECONDS,
        }
    caps["webhooks"] = webhooks_capability()
    # Issue 15 item 3: core.subWorkflow, and GET /runs/{runId}/ancestry while this deployment serves it (loaded here,
    # like the webhook models below: the run routes' other requests use neither).
    from interlude.app.subworkflows import SUBWORKFLOW_CAPABILITY, ancestry_capability

    caps["subWorkflow"] = dict(SUBWORKFLOW_CAPABILITY)
    multi_agent = ancestry_capability()
    if multi_agent is not None:
        caps["multiAgent"] = multi_agent
    return caps


def webhooks_capability() -> dict[str, Any]:
    """Issue 14: webhook subscriptions, delivered by the callback pipeline under its retry policy."""
    from interlude.domain.models.webhooks import (
        DEAD_LETTER_MAX_PAGE,
        DEAD_LETTER_RETENTION_DAYS,
        ROTATION_OVERLAP_SECONDS,
        SIGNATURE_ALGORITHMS,
    )

    return {
        "status": "stable",
        "since": "2.0",
        "witness": "witnessable-gated",
        "signatureAlgorithms": list(SIGNATURE_ALGORITHMS),
        "retryPolicy": {"maxAttempts": delivery_settings().max_attempts, "backoff": "exponential"},
        "deadLetter": {"retentionDays": DEAD_LETTER_RETENTION_DAYS, "maxPageSize": DEAD_LETTER_MAX_PAGE},
        "secretRotation": {"overlapSeconds": ROTATION_OVERLAP_SECONDS},
    }


@route("getOpenApi")
def get_openapi() -> Response:
    from interlude.api import openapi  # first use only: building the document is no part of a cold start

    return json_response(200, openapi.document())


@route("putWorkflow")
def put_workflow(workflowId: str) -> Response:
    principal = principal_for("putWorkflow")
    if answers_as_modulex(principal.tenant, unquote(workflowId)):
        # The ModuleX face's routes share this path: imported (the whole face with them) for ModuleX's requests only.
        from interlude.api.modulex_workflows import put_modulex

        return put_modulex(principal, unquote(workflowId))  # the ModuleX update
    workflow_id = check_author_id(unquote(workflowId), "workflowId")
    raw = required_body()
    if isinstance(raw, dict) and raw.get("id") not in (None, workflow_id):
        raise Invalid("the body's id differs from the path's workflowId", {"path": "id"})
    definition = parse(WorkflowDefinition, raw, "workflow definition")
    return json_response(201, WorkflowVersion.model_validate(services().workflows.put_workflow(principal, workflow_id, definition)))


@route("getWorkflow")
def get_workflow(workflowId: str) -> Response:
    principal = principal_for("getWorkflow")
    if answers_as_modulex(principal.tenant, unquote(workflowId)):
        from interlude.api.modulex_workflows import get_modulex

        return get_modulex(principal, unquote(workflowId))  # a ModuleX record, or an OpenWOP workflow as ModuleX reads it
    workflow_id = check_author_id(unquote(workflowId), "workflowId")
    return json_response(200, WorkflowVersion.model_validate(services().workflows.get_workflow(principal, workflow_id)))


@route("createRun")
def create_run() -> Response:
    principal = principal_for("createRun")
    request = parsed(CreateRunRequest)
    return run_created(services().lifecycle.create_run(principal, request, keyed(run_created), spellings(raw_body())))


def run_created(state: RunState) -> Response:
    links = run_links(state.runId)
    created = RunCreated(runId=state.runId, status=state.status, **links)
    return json_response(201, created, {"Location": links["statusUrl"]})


@route("getRun")
def get_run(runId: str) -> Response:
    if is_custom_method(runId):
        # The resolver's `{runId}` takes a segment with a colon, so GET /runs/{runId}:diff reaches this route first
        # whichever module registered first: diffRun is told apart here, any other custom method is not served.
        run_id, _, method = runId.rpartition(":")
        if method != "diff":
            raise NotFound("no such route")
        from interlude.api.forks import diff_run

        return diff_run(run_id)
    principal = principal_for("getRun")
    state, _ = services().runs.load_run(principal.tenant, from_wire(runId))
    etag = f'"{state.nextSeq}-{state.status}"'
    if if_none_match(etag):
        return not_modified(etag)
    return json_response(200, snapshot(state), {"ETag": etag})


@route("exportRun")
def export_run(runId: str) -> Response:
    # Its answer's model loads with the first export: a run request builds none of the answers' models.
    from interlude.domain.models.answers.export import RunExport

    principal = principal_for("exportRun")
    after = query_int("afterSequence", -1, 0, 10**12)
    return json_response(200, RunExport.model_validate(services().run_exports.export(principal, from_wire(runId), after)))


@route("cancelRun")
def cancel_run(runId: str) -> Response:
    principal = principal_for("cancelRun")
    return run_cancelled(services().lifecycle.cancel_run(principal, from_wire(runId), parsed(CancelRunRequest, optional=True), keyed(run_cancelled)))


def run_cancelled(state: RunState) -> Response:
    return json_response(200, RunCancelled(runId=state.runId, status=state.status))


@route("pollRunEvents")
def poll_run_events(runId: str) -> Response:
    principal = principal_for("pollRunEvents")
    run_id = from_wire(runId)
    after = query_int("afterSequence", None, 0, 10**12)
    timeout = query_int("timeout", 30, 1, 60)
    wait = min(float(timeout), settings().max_poll_seconds)
    # afterSequence is an exclusive cursor; omitted means "from the first event".
    page = services().runs.poll_events(principal, run_id, -1 if after is None else after, wait)
    return json_response(200, EventPage.model_validate(page))


@route("createKey")
def create_key() -> Response:
    principal = principal_for("createKey")
    return key_created(services().keys.create_key(principal, parsed(CreateKeyRequest), keyed(key_created)))


def key_created(issued: dict[str, Any]) -> Response:
    return json_response(201, CreatedKey.model_validate(issued))
