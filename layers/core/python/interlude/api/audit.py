"""Routes of the tenant's audit log (issue 16 item 5): `GET /audit/verify` (OpenWOP verifyAuditLog; each of the
tenant's chains over the range, or `chain` alone) and `GET /audit` (its entries, newest first)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude import wiring
from interlude.api.http import app, json_response, principal_for, query_int
from interlude.api.routes import route
from interlude.app import audit
from interlude.composition import services
from interlude.domain.audit import MAX_SEQ
from interlude.domain.errors import Invalid
from interlude.domain.models.answers.audit import AuditPage, AuditVerification


@route("verifyAuditLog")
def verify_audit_log() -> Response:
    principal = principal_for("verifyAuditLog")
    from_seq = query_int("fromSeq", None, 0, MAX_SEQ)
    to_seq = query_int("toSeq", None, 0, MAX_SEQ)
    if from_seq is None or to_seq is None:
        raise Invalid("fromSeq and toSeq are both required", {"field": "fromSeq" if from_seq is None else "toSeq"})
    chain = query_int("chain", None, 0, wiring.AUDIT_CHAINS - 1)
    answer = services().audit.verify(principal.tenant, from_seq, to_seq, chain)
    return json_response(200, AuditVerification.model_validate(answer))


@route("listAuditEntries")
def list_audit_entries() -> Response:
    principal = principal_for("listAuditEntries")
    limit = query_int("limit", audit.DEFAULT_PAGE, 1, audit.MAX_PAGE)
    cursor = (app.current_event.query_string_parameters or {}).get("cursor")
    return json_response(200, AuditPage.model_validate(services().audit.entries_page(principal.tenant, limit, cursor)))
