"""Routes of the principal directory (issue 14 item 1): `PUT/GET/DELETE /principals/{principalId}` (keys:admin)."""

from __future__ import annotations

from urllib.parse import unquote

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.api.http import json_response, parsed, principal_for
from interlude.api.routes import route
from interlude.composition import services
from interlude.domain.errors import Invalid
from interlude.domain.ids import SUBJECT_ID, SUBJECT_ID_RE
from interlude.domain.models.answers.principals import PrincipalAnswer
from interlude.domain.models.principals import PrincipalEntry


def principal_id_of(raw: str) -> str:
    value = unquote(raw)
    if not SUBJECT_ID_RE.fullmatch(value):
        raise Invalid(f"principalId must match {SUBJECT_ID}", {"field": "principalId"})
    return value


@route("putPrincipal")
def put_principal(principalId: str) -> Response:  # noqa: N803 - the path parameter's name
    admin = principal_for("putPrincipal")
    checked = principal_id_of(principalId)
    entry = parsed(PrincipalEntry, "directory entry")
    created, stored = services().directory.put_principal(admin.tenant, checked, entry, admin.subject["subjectId"])
    return json_response(201 if created else 200, PrincipalAnswer.model_validate(stored))


@route("getPrincipal")
def get_principal(principalId: str) -> Response:  # noqa: N803 - the path parameter's name
    admin = principal_for("getPrincipal")
    stored = services().directory.get_principal(admin.tenant, principal_id_of(principalId))
    return json_response(200, PrincipalAnswer.model_validate(stored))


@route("deletePrincipal")
def delete_principal(principalId: str) -> Response:  # noqa: N803 - the path parameter's name
    admin = principal_for("deletePrincipal")
    removed = services().directory.delete_principal(admin.tenant, principal_id_of(principalId))
    return json_response(200, PrincipalAnswer.model_validate(removed))
