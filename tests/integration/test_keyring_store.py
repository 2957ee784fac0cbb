"""The token key ring in Secrets Manager (moto): created once, rotated, retired, and read through what a warm instance
keeps (adapters/secret_values.py)."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from interlude.adapters import secret_values
from interlude.adapters.keyring_store import ensure_key_ring, load_key_ring, retire_key, rotate_key_ring
from interlude.rules.tokens import KeyRing, TokenClaims, TokenInvalid, mint, verify

SECRET = "interlude/test/token-keys"
NOW = 1_760_000_000.0


# A world of its own: a test lists every secret of the account.
@pytest.fixture
def secretsmanager(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SECURITY_TOKEN": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SECRETS_MANAGER"):
        monkeypatch.delenv(name, raising=False)
    secret_values.forget()
    with mock_aws():
        yield boto3.client("secretsmanager", region_name="us-east-1")
    secret_values.forget()


@pytest.fixture
def now(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The kept values' clock (adapters/secret_values.py), moved by the test."""
    clock = [1000.0]
    monkeypatch.setattr(secret_values, "monotonic", lambda: clock[0])
    return clock


@pytest.fixture
def fetches(secretsmanager) -> list[str]:
    """The names of the secrets read from Secrets Manager, in order."""
    read: list[str] = []
    secretsmanager.meta.events.register(
        "before-parameter-build.secrets-manager.GetSecretValue", lambda params, **_: read.append(params["SecretId"])
    )
    return read


@pytest.fixture
def claims() -> TokenClaims:
    return TokenClaims(
        interrupt_id="acme/int-0123456789abcdef",
        run_id="acme/run-0123456789abcdef",
        node_id="approve",
        expires_at=int(NOW) + 600,
        intent="resolve",
    )


def stored_ring(client) -> KeyRing:
    return KeyRing.from_json(client.get_secret_value(SecretId=SECRET)["SecretString"])


def test_ensure_creates_the_secret_once_and_then_returns_it_unchanged(secretsmanager) -> None:
    # Given no secret, when the local stack starts twice
    first = ensure_key_ring(SECRET, client=secretsmanager)
    second = ensure_key_ring(SECRET, client=secretsmanager)

    # Then one secret exists and both starts use the same ring
    assert [s["Name"] for s in secretsmanager.list_secrets()["SecretList"]] == [SECRET]
    assert first == second == stored_ring(secretsmanager)
    assert len(first.keys) == 1
    assert all(len(secret) >= 32 for secret in first.keys.values())


def test_ensure_keeps_a_ring_that_already_exists(secretsmanager) -> None:
    existing = KeyRing.generate("k-operator").rotated()
    secretsmanager.create_secret(Name=SECRET, SecretString=existing.to_json())

    assert ensure_key_ring(SECRET, client=secretsmanager) == existing
    assert stored_ring(secretsmanager) == existing


def test_rotate_adds_a_signing_kid_and_keeps_the_old_one(secretsmanager, claims: TokenClaims) -> None:
    original = ensure_key_ring(SECRET, client=secretsmanager)
    old_token = mint(claims, original)

    rotated = rotate_key_ring(SECRET, client=secretsmanager)

    assert stored_ring(secretsmanager) == rotated
    assert rotated.current_kid != original.current_kid
    assert set(rotated.keys) == {original.current_kid, rotated.current_kid}
    assert rotated.keys[original.current_kid] == original.keys[original.current_kid]
    assert verify(old_token, stored_ring(secretsmanager), now=NOW) == claims


def test_retire_removes_a_kid_and_revokes_its_tokens(secretsmanager, claims: TokenClaims) -> None:
    original = ensure_key_ring(SECRET, client=secretsmanager)
    old_token = mint(claims, original)
    rotated = rotate_key_ring(SECRET, client=secretsmanager)

    retired = retire_key(SECRET, original.current_kid, client=secretsmanager)

    assert stored_ring(secretsmanager) == retired
    assert set(retired.keys) == {rotated.current_kid}
    with pytest.raises(TokenInvalid):
        verify(old_token, retired, now=NOW)


def test_retiring_the_current_kid_is_refused_and_changes_nothing(secretsmanager) -> None:
    ring = ensure_key_ring(SECRET, client=secretsmanager)
    versions_before = versions(secretsmanager)

    with pytest.raises(ValueError):
        retire_key(SECRET, ring.current_kid, client=secretsmanager)

    assert stored_ring(secretsmanager) == ring
    assert versions(secretsmanager) == versions_before


def versions(client) -> list[tuple[str, list[str]]]:
    # Identity and stages only: reading a secret moves its LastAccessedDate.
    listed = client.list_secret_version_ids(SecretId=SECRET)["Versions"]
    return sorted((v["VersionId"], sorted(v.get("VersionStages", []))) for v in listed)


def test_load_is_kept_until_max_age(secretsmanager, now, fetches) -> None:
    ensure_key_ring(SECRET, client=secretsmanager)
    fetches.clear()  # what the ring's creation read

    # Given a warm reader
    first = load_key_ring(SECRET, max_age_s=60, client=secretsmanager)
    assert load_key_ring(SECRET, max_age_s=60, client=secretsmanager) == first
    assert fetches == [SECRET]

    # When an operator rotates, the reader keeps its ring within max_age
    rotated = rotate_key_ring(SECRET, client=secretsmanager)
    fetches.clear()
    now[0] += 59
    assert load_key_ring(SECRET, max_age_s=60, client=secretsmanager) == first
    assert fetches == []

    # Then force_fetch sees the rotation at once
    assert load_key_ring(SECRET, max_age_s=60, client=secretsmanager, force_fetch=True) == rotated

    # And once max_age has passed since that read, a plain load sees the next rotation
    rotated_again = rotate_key_ring(SECRET, client=secretsmanager)
    now[0] += 59
    assert load_key_ring(SECRET, max_age_s=60, client=secretsmanager) == rotated
    now[0] += 2
    assert load_key_ring(SECRET, max_age_s=60, client=secretsmanager) == rotated_again


def test_load_through_the_sessions_own_client(secretsmanager) -> None:
    ring = ensure_key_ring(SECRET, client=secretsmanager)
    assert load_key_ring(SECRET) == ring

    rotated = rotate_key_ring(SECRET, client=secretsmanager)
    assert load_key_ring(SECRET) == ring
    assert load_key_ring(SECRET, force_fetch=True) == rotated
