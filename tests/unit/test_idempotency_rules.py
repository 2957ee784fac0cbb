"""The pure rules of Idempotency-Key: grammar, which outcomes are cached, the request digest."""

from __future__ import annotations

import pytest

from interlude import wiring
from interlude.api.errors import status_for_code
from interlude.api.idempotency import KEY_RE, capability_namespace, is_final, request_digest
from interlude.domain.ids import TENANT_RE


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("a" * 22, True),
        ("a" * 128, True),
        ("0123456789abcdefABCDEF._~-", True),
        ("a" * 21, False),
        ("a" * 129, False),
        ("a" * 21 + "=", False),
        ("a" * 21 + "\n", False),
        ("a" * 21 + "é", False),
    ],
)
def test_key_grammar(value, ok):
    assert bool(KEY_RE.fullmatch(value)) is ok


@pytest.mark.parametrize(
    ("status", "code", "cached"),
    [
        (200, None, True),
        (201, None, True),
        (400, "validation_error", False),
        (400, "idempotency_key_invalid", False),
        (400, "unsupported_stream_mode", True),
        (401, "unauthenticated", False),
        (401, "interrupt_token_invalid", False),
        (403, "forbidden", False),
        (403, "id_tenant_mismatch", False),
        (404, "not_found", True),
        (409, "interrupt_already_resolved", True),
        (409, "run_terminal", True),
        (410, "interrupt_expired", True),
        (422, "interlude.workflow_unprocessable", True),
        (429, None, False),
        (500, "internal_error", False),
        (502, None, False),
        (503, None, False),
    ],
)
def test_which_outcomes_are_cached(status, code, cached):
    assert code is None or status_for_code(code) == status
    assert is_final(status, code) is cached


def test_the_digest_covers_operation_path_parameters_and_every_body_byte():
    base = request_digest("resolveInterruptByRun", {"runId": "t~2Fr1", "nodeId": "gate"}, b'{"a":1}')
    assert base == request_digest("resolveInterruptByRun", {"nodeId": "gate", "runId": "t~2Fr1"}, b'{"a":1}')
    assert base != request_digest("cancelRun", {"runId": "t~2Fr1", "nodeId": "gate"}, b'{"a":1}')
    assert base != request_digest("resolveInterruptByRun", {"runId": "t~2Fr2", "nodeId": "gate"}, b'{"a":1}')
    assert base != request_digest("resolveInterruptByRun", {"runId": "t~2Fr1", "nodeId": "gate"}, b'{"a": 1}')
    # A newline in a parameter cannot be confused with the start of the body.
    assert request_digest("x", {"p": "a\nb"}, b"") != request_digest("x", {"p": "a"}, b"b")


def test_a_capability_namespace_never_collides_with_a_tenant():
    assert not TENANT_RE.match(capability_namespace({"token": "ow2.hs256.k.p.m"}))


def test_mutating_routes_are_writes():
    assert all(r.method != "GET" for r in wiring.ROUTES if r.mutating)
