"""Routes of issue 3: the approver inbox, external events by correlation, tenant settings, credential grants."""

from __future__ import annotations

from urllib.parse import unquote

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.api.http import app, json_response, parsed, principal_for, query_int, raw_body, required_body
from interlude.api.routes import route
from interlude.app import audit_entries as audit
from interlude.app import inbox as approver_inbox
from interlude.composition import services
from interlude.domain.errors import Invalid, UnsupportedMedia
from interlude.domain.ids import check_author_id, from_wire
from interlude.domain.models.answers.inbox import CredentialGrant, EventAccepted, Inbox, TenantSettingsAnswer
from interlude.domain.models.tenant_requests import CredentialGrantRequest, PostEventRequest
from interlude.domain.models.tenants import TenantSettings
from interlude.domain.written_numbers import spellings
from interlude.wiring import JSON, MERGE_PATCH


@route("listInterrupts")
def list_interrupts() -> Response:
    principal = principal_for("listInterrupts")
    limit, filters, cursor = inbox_query(dict(app.current_event.query_string_parameters or {}))
    return json_response(200, Inbox.model_validate(services().inbox.inbox(principal, limit, filters, cursor)))


def inbox_query(query: dict[str, str]) -> tuple[int, dict[str, str], str | None]:
    """`GET /interrupts` query parameters as (limit, filters, cursor); a bad one is a 400 naming it."""
    if query.get("status", "pending") != "pending":
        raise Invalid(
            "status must be 'pending' (the inbox lists open interrupts)",
            {"field": "status"},
        )
    limit = query_int("limit", approver_inbox.DEFAULT_INBOX_LIMIT, 1, approver_inbox.MAX_INBOX_LIMIT, query)
    filters: dict[str, str] = {}
    if "kind" in query:
        if query["kind"] not in approver_inbox.INTERRUPT_KINDS:
            raise Invalid(f"kind must be one of {list(approver_inbox.INTERRUPT_KINDS)}", {"field": "kind"})
        filters["kind"] = query["kind"]
    if "workflowId" in query:
        filters["workflowId"] = check_author_id(query["workflowId"], "workflowId")
    if "runId" in query:
        filters["runId"] = from_wire(query["runId"])
    for name, allowed in (("sort", approver_inbox.ORDERS), ("claim", approver_inbox.CLAIMS)):
        if name in query:
            if query[name] not in allowed:
                raise Invalid(f"{name} must be one of {list(allowed)}", {"field": name})
            filters[name] = query[name]
    return limit or approver_inbox.DEFAULT_INBOX_LIMIT, filters, query.get("cursor")


@route("postEvent")
def post_event() -> Response:
    principal = principal_for("postEvent")
    request = parsed(PostEventRequest)
    accepted = services().external_events.post_event(principal, request, spellings(raw_body()))
    return json_response(202, EventAccepted.model_validate(accepted))


@route("getTenantSettings")
def get_tenant_settings() -> Response:
    principal = principal_for("getTenantSettings")
    return json_response(200, TenantSettingsAnswer.model_validate(services().tenants.get_settings(principal)))


@route("putTenantSettings")
def put_tenant_settings() -> Response:
    principal = principal_for("putTenantSettings")
    settings = parsed(TenantSettings, "tenant settings")
    stored = services().tenants.put_settings(principal.tenant, settings, principal.subject["subjectId"], audit.actor(principal)
    )
    return json_response(200, TenantSettingsAnswer.model_validate(stored))


@route("patchTenantSettings")
def patch_tenant_settings() -> Response:
    principal = principal_for("patchTenantSettings")
    content_type = (app.current_event.headers.get("content-type") or JSON).split(";")[0].strip().lower()
    if content_type not in (MERGE_PATCH, JSON):
        raise UnsupportedMedia(f"send the patch as {MERGE_PATCH} (RFC 7396) or {JSON}")
    patch = required_body()
    changed = services().tenants.patch_settings(principal.tenant, patch, principal.subject["subjectId"], audit.actor(principal))
    return json_response(200, TenantSettingsAnswer.model_validate(changed))


@route("putCredentialGrant")
def put_credential_grant(provider: str) -> Response:
    principal = principal_for("putCredentialGrant")
    checked = check_author_id(unquote(provider), "provider")
    request = parsed(CredentialGrantRequest, "credential grant")
    grant = services().tenants.put_grant(principal.tenant, checked, request, principal.subject["subjectId"], audit.actor(principal)
    )
    return json_response(200, CredentialGrant.model_validate(grant))
