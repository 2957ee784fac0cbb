"""Routes of the key lifecycle (issue 11, item 7): list the tenant's keys, revoke one. `POST /keys` is in runs.py."""

from __future__ import annotations

from urllib.parse import unquote

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.api.http import app, json_response, principal_for, query_int
from interlude.api.routes import route
from interlude.app import audit_entries as audit
from interlude.app.keys import DEFAULT_KEYS_LIMIT, MAX_KEYS_LIMIT
from interlude.composition import services
from interlude.domain.models.answers.keys import KeyMetadata, KeyPage


@route("listKeys")
def list_keys() -> Response:
    principal = principal_for("listKeys")
    limit = query_int("limit", DEFAULT_KEYS_LIMIT, 1, MAX_KEYS_LIMIT) or DEFAULT_KEYS_LIMIT
    cursor = (app.current_event.query_string_parameters or {}).get("cursor")
    return json_response(200, KeyPage.model_validate(services().keys.list_keys(principal.tenant, limit, cursor)))


@route("revokeKey")
def revoke_key(keyId: str) -> Response:  # noqa: N803 - the path parameter's name
    principal = principal_for("revokeKey")
    return json_response(200, KeyMetadata.model_validate(services().keys.revoke_key(principal.tenant, unquote(keyId), audit.actor(principal))))
