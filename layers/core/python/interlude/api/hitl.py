"""Routes of issue 3: the approver inbox, external events by correlation, tenant settings, credential grants."""

from __future__ import annotations

from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response

from .. import hitl
from .http import app, json_response, principal_for, required_body, route, service


@route("listInterrupts")
def list_interrupts() -> Response:
    principal = principal_for("listInterrupts")
    query = dict(app.current_event.query_string_parameters or {})
    return json_response(200, hitl.inbox(service(), principal, query))


@route("postEvent")
def post_event() -> Response:
    principal = principal_for("postEvent")
    return json_response(202, hitl.post_event(service(), principal, required_body()))


@route("getTenantSettings")
def get_tenant_settings() -> Response:
    principal = principal_for("getTenantSettings")
    return json_response(200, hitl.get_settings(service(), principal))


@route("putTenantSettings")
def put_tenant_settings() -> Response:
    principal = principal_for("putTenantSettings")
    body = required_body()
    return json_response(200, hitl.put_settings(service(), principal.tenant, body, principal.subject["subjectId"]))


@route("putCredentialGrant")
def put_credential_grant(provider: str) -> Response:
    principal = principal_for("putCredentialGrant")
    body = required_body()
    by = principal.subject["subjectId"]
    return json_response(200, hitl.put_grant(service(), principal.tenant, unquote(provider), body, by))
