"""The pure rules of issue 11 items 7 and 8: which limits apply, request windows and admission, definition quotas,
and whether a key record may act (revoked, expired) and what of it may be shown."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from interlude.api.errors import status_for_code, status_of
from interlude.app.tenant_facts import tenant_settings
from interlude.domain.errors import DomainError, Forbidden, Invalid, RateLimited
from interlude.domain.models.tenants import TenantLimits, TenantSettings
from interlude.domain.validation import parse
from interlude.rules import auth
from interlude.rules import limits as rules

DEFAULTS = rules.Limits(
    requests_per_second=25, open_runs=1000, workflow_versions=1000, definition_bytes=262_144, definition_nodes=500
)
NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def test_a_tenants_own_limits_override_the_host_defaults_field_by_field() -> None:
    assert rules.effective(TenantLimits(), DEFAULTS) == DEFAULTS
    own = rules.effective(TenantLimits(requestsPerSecond=3, definitionNodes=2), DEFAULTS)
    assert (own.requests_per_second, own.definition_nodes, own.open_runs) == (3, 2, 1000)


class _Settings:
    def __init__(self, stored: dict[str, object] | None) -> None:
        self.stored = stored

    def get_settings(self, tenant: str) -> dict[str, object] | None:
        return self.stored


def test_a_tenant_that_stored_no_settings_reads_every_default_as_a_validated_model_holds_it() -> None:
    """Built without the validator (ADR 0137), the same document, fields and answer as the model validated from {}."""
    read = tenant_settings(_Settings(None), "t1")
    validated = TenantSettings.model_validate({})
    assert read == validated
    assert read.model_fields_set == validated.model_fields_set == set()
    assert read.model_dump_json() == validated.model_dump_json()
    assert read.limits == TenantLimits()
    assert tenant_settings(_Settings({"retentionDays": 7}), "t1").retentionDays == 7


@pytest.mark.parametrize(
    "limits",
    [
        {"requestsPerSecond": 0},
        {"requestsPerSecond": 501},
        {"openRuns": 100_001},
        {"workflowVersions": 0},
        {"definitionBytes": 300_001},
        {"definitionBytes": 1023},
        {"definitionNodes": 501},
        {"unknown": 1},
    ],
)
def test_limits_past_the_ceilings_or_unknown_are_refused(limits: dict[str, int]) -> None:
    with pytest.raises(Invalid):
        parse(TenantSettings, {"limits": limits}, "tenant settings")
    if "unknown" not in limits:  # stored settings are read open (a later release's limit is kept), never past a bound
        with pytest.raises(ValidationError):
            TenantSettings.model_validate({"limits": limits})


def test_stored_settings_keep_a_limit_a_later_release_added() -> None:
    stored = TenantSettings.model_validate({"limits": {"openRuns": 5, "retainedDays": 90}})
    assert stored.limits.openRuns == 5
    assert stored.model_dump(exclude_none=True)["limits"] == {"openRuns": 5, "retainedDays": 90}


def test_a_moment_falls_in_a_one_second_window_and_retry_after_points_past_it() -> None:
    window = rules.window_of(1_000.25)
    assert (window.start, window.retry_after_s) == (1000, 1)
    assert rules.window_of(1_000.999).start == 1000
    assert rules.window_of(1_001.0).start == 1001
    # Never a Retry-After of 0, even at the very start of a window.
    assert rules.window_of(1_001.0).retry_after_s == 1
    assert window.expires_at > window.start + rules.WINDOW_SECONDS


def test_admission_allows_up_to_the_limit_and_refuses_past_it_with_the_wait() -> None:
    window = rules.window_of(50.5)
    assert rules.admission(1, 3, window).allowed
    assert rules.admission(3, 3, window).allowed
    refused = rules.admission(None, 3, window)  # the store would not count past the limit
    assert (refused.allowed, refused.limit, refused.retry_after_s) == (False, 3, 1)
    assert not rules.admission(4, 3, window).allowed


def test_a_definition_over_its_size_or_node_quota_is_refused_naming_the_quota() -> None:
    limits = rules.Limits(25, 10, 10, definition_bytes=2048, definition_nodes=2)
    rules.check_definition(2048, 2, limits)
    with pytest.raises(DomainError) as size:
        rules.check_definition(2049, 1, limits)
    assert (status_of(size.value), size.value.code) == (403, "interlude.quota_exceeded")
    assert isinstance(size.value, Forbidden)
    assert size.value.details == {"quota": "definitionBytes", "limit": 2048, "size": 2049}
    with pytest.raises(DomainError) as nodes:
        rules.check_definition(100, 3, limits)
    assert nodes.value.details == {"quota": "definitionNodes", "limit": 2, "nodes": 3}


def test_the_new_codes_are_registered_with_their_statuses() -> None:
    assert status_for_code("rate_limited") == 429
    assert status_for_code("interlude.quota_exceeded") == 403
    assert status_of(RateLimited("slow down", retry_after_s=1)) == 429


def key(**extra: object) -> tuple[str, str, dict[str, object]]:
    key_id, api_key, secret_hash = auth.new_key()
    record = auth.key_record("t1", "robot", ["runs:read"], [], [], "user", secret_hash, "2026-11-01T00:00:00.000Z")
    return key_id, auth.parse_bearer(f"Bearer {api_key}")[1], {**record, **extra}


def test_an_active_key_verifies_and_a_revoked_or_expired_one_is_refused_saying_which() -> None:
    key_id, secret, record = key()
    assert auth.verify(record, key_id, secret, NOW).tenant == "t1"
    for extra, status in (
        ({"revokedAt": "2026-11-30T00:00:00.000Z"}, "revoked"),
        ({"expiresAt": "2026-12-01T12:00:00.000Z"}, "expired"),
    ):
        _, _, stopped = key(**extra)
        assert auth.key_status(stopped, NOW) == status
        with pytest.raises(DomainError) as refused:
            auth.verify({**stopped, "hash": record["hash"]}, key_id, secret, NOW)
        assert (refused.value.code, refused.value.message) == ("unauthenticated", f"the API key is {status}")
    # A wrong secret says nothing about the key's state.
    _, _, revoked = key(revokedAt="2026-11-30T00:00:00.000Z")
    with pytest.raises(DomainError) as wrong:
        auth.verify(revoked, key_id, "x" * 43, NOW)
    assert wrong.value.message == "the API key is not valid"
    _, _, later = key(expiresAt="2026-12-01T12:00:01.000Z")
    assert auth.key_status(later, NOW) == "active"


def test_key_metadata_never_shows_the_secrets_hash() -> None:
    key_id, _, record = key(expiresAt="2027-01-01T00:00:00.000Z")
    shown = auth.key_metadata(record, key_id, NOW)
    assert "hash" not in shown
    assert record["hash"] not in str(shown)
    assert shown["keyId"] == key_id
    assert shown["status"] == "active"
    assert shown["expiresAt"] == "2027-01-01T00:00:00.000Z"
