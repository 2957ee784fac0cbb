"""Refusals by outcome: every registered code keeps the status, envelope and headers clients rely on, on both faces,
and the outcome classes below the API edge carry no HTTP."""

from __future__ import annotations

import pytest

from interlude.api.errors import OUTCOME_STATUS, envelope, headers_of, reply, status_for_code, status_of
from interlude.domain import errors
from interlude.domain.errors import (
    ERROR_CODES,
    Conflict,
    DomainError,
    Forbidden,
    Internal,
    Invalid,
    MethodNotAllowed,
    NotFound,
    Unauthenticated,
    Unavailable,
    Unprocessable,
)

# The statuses clients saw before errors were named by outcome (the OpenWOP v2 error registry plus this host's
# vendor codes), written out literally so a change to the mapping shows up here.
OPENWOP_STATUS = {
    "validation_error": 400,
    "idempotency_key_invalid": 400,
    "unsupported_stream_mode": 400,
    "unauthenticated": 401,
    "interrupt_token_invalid": 401,
    "interlude.slack_signature_invalid": 401,
    "forbidden": 403,
    "id_tenant_mismatch": 403,
    "not_found": 404,
    "interlude.method_not_allowed": 405,
    "interrupt_already_resolved": 409,
    "run_terminal": 409,
    "idempotency_key_mismatch": 409,
    "idempotency_in_flight": 409,
    "interlude.vote_already_cast": 409,
    "interlude.run_state_invalid": 400,
    "interlude.workflow_unprocessable": 422,
    "interlude.field_unprocessable": 422,
    "interrupt_expired": 410,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "internal_error": 500,
    "runner_unavailable": 503,
    # Issue 11: per-tenant limits.
    "interlude.quota_exceeded": 403,
    "rate_limited": 429,
    # Issue 16: a bulk-cancel entry naming another tenant's run (never a whole request's refusal).
    "run_forbidden": 403,
    # Issue 14: webhook subscriptions.
    "webhook_url_rejected": 400,
    "interlude.delegation_not_allowed": 403,
    "interlude.gate_claimed": 409,
    "interlude.task_token_invalid": 400,
    "interlude.task_not_claimed": 409,
    # Issue 26: a webhook secret rotation inside the previous one's overlap.
    "interlude.rotation_in_overlap": 409,
    # Issue 30: a stored item in a format newer than this release reads.
    "interlude.item_too_new": 500,
    # Issue 31 (docs/adr/0169): a format-12 gate whose workflow version no longer reads it back.
    "interlude.gate_payload_unreadable": 500,
    # Issue 30 item 5: replays of what failed.
    "interlude.not_dead_lettered": 409,
    "interlude.replay_limit_reached": 409,
    "interlude.recovery_too_large": 400,
    "interlude.recovery_running": 409,
    "interlude.action_not_retryable": 409,
    # Issue 30 item 6: a suspended tenant on every surface; the operator surface's refusals (answered by the admin
    # function, never over HTTP, but named by the same registry).
    "interlude.tenant_suspended": 403,
    "interlude.tenant_exists": 409,
    "interlude.tenant_not_suspended": 409,
    "interlude.tenant_deleting": 409,
    # Issue 29 item 2: forks and redrives.
    "fork_point_invalid": 422,
    "run_state_conflict": 409,
    "interlude.fork_limit_reached": 409,
}


MODULEX_STATUS = {"id_tenant_mismatch": 404, "interrupt_already_resolved": 400, "run_terminal": 400}


def raise_of(code: str) -> DomainError:
    outcome = ERROR_CODES[code]
    if outcome is MethodNotAllowed:
        return MethodNotAllowed("POST is not allowed here", ["GET"])
    return outcome("m", code=code)


@pytest.mark.parametrize("code", list(ERROR_CODES))
def test_every_registered_code_keeps_its_status_on_both_faces(code: str) -> None:
    assert status_for_code(code) == OPENWOP_STATUS[code]
    assert status_of(raise_of(code)) == OPENWOP_STATUS[code]
    # ModuleX: the same statuses, except another organisation's run, which is the same 404 as a missing one, and a
    # resume or cancel that lost its race, which is the 400 of one that came late (docs/adr/0187).
    assert status_for_code(code, "modulex") == MODULEX_STATUS.get(code, OPENWOP_STATUS[code])


def test_the_registry_is_what_clients_were_answered_with() -> None:
    assert set(ERROR_CODES) == set(OPENWOP_STATUS)


def test_every_outcome_has_a_status_at_the_edge() -> None:
    outcomes = {cls for cls in vars(errors).values() if isinstance(cls, type) and issubclass(cls, DomainError)}
    assert outcomes - {DomainError} == set(OUTCOME_STATUS)


def test_a_code_is_raised_only_as_its_outcome() -> None:
    with pytest.raises(ValueError, match="not registered"):
        NotFound("m", code="validation_error")
    with pytest.raises(ValueError, match="not registered"):
        Conflict("m")  # a conflict always names which one
    with pytest.raises(ValueError, match="not registered"):
        Invalid("m", code="made_up")


def test_no_refusal_carries_http() -> None:
    """Statuses and header names live at the edge; a refusal carries only what happened, as data."""
    for outcome in [DomainError, *set(ERROR_CODES.values())]:
        names = {name.lower() for cls in outcome.__mro__ for name in vars(cls)}
        assert not names & {"status", "status_code", "headers", "envelope"}, outcome


def test_data_becomes_headers_only_at_the_edge() -> None:
    busy = Unavailable("retry", retry_after_s=1)
    assert (status_of(busy), headers_of(busy)) == (503, {"Retry-After": "1"})
    in_flight = Conflict("still running", code="idempotency_in_flight", retry_after_s=1)
    assert headers_of(in_flight) == {"Retry-After": "1"}
    assert headers_of(Unauthenticated("no key")) == {"WWW-Authenticate": 'Bearer realm="interlude"'}
    assert headers_of(Unauthenticated("bad token", code="interrupt_token_invalid")) == {}
    refused_method = MethodNotAllowed("DELETE is not allowed here", ["GET", "PUT"])
    assert headers_of(refused_method) == {"Allow": "GET, PUT"}
    assert envelope(refused_method) == {
        "error": "interlude.method_not_allowed",
        "message": "DELETE is not allowed here",
        "details": {"allowed": ["GET", "PUT"]},
    }


def test_the_envelope_leaves_out_absent_details() -> None:
    assert envelope(NotFound("no such run")) == {"error": "not_found", "message": "no such run"}
    assert envelope(Forbidden("x", {"field": "f"})) == {"error": "forbidden", "message": "x", "details": {"field": "f"}}


def test_modulex_answers_detail_with_the_code_in_a_header() -> None:
    assert reply(Internal("internal error", {"correlationId": "c"}), "modulex") == (
        500,
        {"detail": "internal error"},
        {"X-Interlude-Error": "internal_error"},
    )
    assert reply(Forbidden("another tenant", code="id_tenant_mismatch"), "modulex")[0] == 404
    problems = [{"loc": ["body", "workflow"], "msg": "bad"}]
    assert reply(Unprocessable("cannot run", {"errors": problems}), "modulex")[1] == {"detail": problems}
    status, body, headers = reply(Unauthenticated("no key"), "modulex")
    assert (status, body) == (401, {"detail": "no key"})
    assert headers == {"WWW-Authenticate": 'Bearer realm="interlude"', "X-Interlude-Error": "unauthenticated"}
