"""API keys: `il_<keyId>_<secret>`, stored only as a SHA-256 of the secret, each bound to a tenant and a subject.

The secret carries 256 random bits, so a fast hash is enough (no password stretching needed).
"""

import hashlib
import hmac
import re
import secrets
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from interlude.domain.clock import instant
from interlude.domain.errors import Forbidden, Unauthenticated

if TYPE_CHECKING:
    from interlude.rules.interrupts.decide import Resolver

KEY_RE = re.compile(r"^il_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")
KEY_ID_RE = re.compile(r"[0-9a-f]{16}")
ISSUER = "urn:interlude:api-key"
# What a key must hold to decide an interrupt (the scope of resolveInterruptByRun): a link acting for a key decides
# only while the key holds it.
RESOLVE_SCOPE = "approvals:respond"
# Scopes a broader one holds too: a tenant's administrator may mint links for its people (issue 28 item 5), with
# keys made before the narrower scope existed.
HELD_BY = {"links:mint": "keys:admin"}


def holds(scopes: frozenset[str], scope: str) -> bool:
    return scope in scopes or HELD_BY.get(scope) in scopes


class Principal(NamedTuple):
    key_id: str
    tenant: str
    subject: dict[str, Any]
    scopes: frozenset[str]
    groups: tuple[str, ...]
    roles: tuple[str, ...]

    def require(self, scope: str) -> None:
        if not holds(self.scopes, scope):
            raise Forbidden(f"this key lacks the scope {scope!r}", {"scopeRequired": scope})


def new_key() -> tuple[str, str, str]:
    """(keyId, apiKey, secret hash)."""
    key_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    return key_id, f"il_{key_id}_{secret}", _hash(secret)


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def key_record(
    tenant: str,
    subject_id: str,
    scopes: list[str],
    groups: list[str],
    roles: list[str],
    kind: str,
    secret_hash: str,
    created_at: str,
    expires_at: str | None = None,
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "tenant": tenant,
        "subject": {"issuer": ISSUER, "subjectId": subject_id, "tenant": tenant, "lane": "api-key", "kind": kind},
        "scopes": sorted(set(scopes)),
        "groups": sorted(set(groups)),
        "roles": sorted(set(roles)),
        "hash": secret_hash,
        "createdAt": created_at,
    }
    if expires_at is not None:
        record["expiresAt"] = expires_at
    return record


def key_status(record: dict[str, Any], now: datetime) -> str:
    """`active`, `revoked` or `expired`: only an active key authenticates or stands behind a token it minted."""
    if record.get("revokedAt") or record.get("revoked"):
        return "revoked"
    if record.get("expiresAt") and instant(record["expiresAt"]) <= now:
        return "expired"
    return "active"


def key_metadata(record: dict[str, Any], key_id: str, now: datetime) -> dict[str, Any]:
    """What a tenant may see of a key: never its secret or the secret's hash."""
    shown = {"keyId": key_id, "status": key_status(record, now)}
    for field in ("tenant", "subject", "scopes", "groups", "roles", "createdAt", "expiresAt", "revokedAt"):
        if record.get(field) is not None:
            shown[field] = record[field]
    return shown


def unauthenticated(message: str) -> Unauthenticated:
    return Unauthenticated(message)


def parse_bearer(header: str | None) -> tuple[str, str]:
    if not header:
        raise unauthenticated("missing Authorization: Bearer <api key>")
    scheme, _, value = header.strip().partition(" ")
    match = KEY_RE.fullmatch(value.strip()) if scheme.lower() == "bearer" else None
    if not match:
        raise unauthenticated("the bearer credential is not an Interlude API key")
    return match.group(1), match.group(2)


def verify(record: dict[str, Any] | None, key_id: str, secret: str, now: datetime) -> Principal:
    # Compare against a dummy hash when the key is unknown so timing does not reveal which key ids exist.
    expected = record["hash"] if record else "0" * 64
    if not hmac.compare_digest(expected, _hash(secret)) or record is None:
        raise unauthenticated("the API key is not valid")
    status = key_status(record, now)
    if status != "active":
        # Only the holder of the secret learns why: the key exists, and it was revoked or has expired.
        raise unauthenticated(f"the API key is {status}")
    return principal_from_record(record, key_id)


def active_key(record: dict[str, Any] | None, key_id: str, tenant: str, now: datetime) -> Principal | None:
    """Who key `key_id` (its record as read) acts as while it is active and `tenant`'s; else None."""
    if record is None or record.get("tenant") != tenant or key_status(record, now) != "active":
        return None
    return principal_from_record(record, key_id)


def principal_from_record(record: dict[str, Any], key_id: str) -> Principal:
    """Who a (valid, active) key record acts as; whether it may act at all is the caller's check (key_status)."""
    return Principal(
        key_id=key_id,
        tenant=record["tenant"],
        subject=record["subject"],
        scopes=frozenset(record.get("scopes") or ()),
        groups=tuple(record.get("groups") or ()),
        roles=tuple(record.get("roles") or ()),
    )


def personal_subject(tenant: str, principal_id: str) -> dict[str, Any]:
    """Who votes through a personal link (issue 14): the directory principal, under the issuer its keys carry, so
    a person's key and their links are one principal (one vote per gate)."""
    return {"issuer": ISSUER, "subjectId": principal_id, "tenant": tenant, "lane": "session", "kind": "user"}


def run_resolver(principal: Principal, surface: Literal["run", "console"] = "run") -> "Resolver":
    """The principal deciding an interrupt with its key (its subject, groups and roles): on the run-scoped API,
    or in the operator console signed in with that key."""
    # The decision rules load with the first decision, not with every key check (dispatch and most requests).
    from interlude.rules.interrupts.decide import Resolver

    return Resolver(subject=principal.subject, surface=surface, groups=principal.groups, roles=principal.roles)
