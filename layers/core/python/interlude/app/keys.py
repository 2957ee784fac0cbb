"""API keys: authenticating a bearer key (with a short, bounded cache), issuing, listing and revoking keys.

Revocation reaches the instance that revokes at once and every other warm instance within `cache_seconds`, the
time a key found active is trusted without reading it again: the deployment's `key_cache_seconds` (interlude.config,
5 s unless it chose; docs/configuration.md, "Keys: revocation and expiry"; docs/adr/0017).
"""

from __future__ import annotations

import time
from datetime import UTC
from typing import TYPE_CHECKING, Any

from interlude.app import audit_entries as audit
from interlude.app.idempotency import KeyedWrite, answered, committed
from interlude.config import DEFAULT_KEY_CACHE_SECONDS
from interlude.domain.clock import Clock, iso
from interlude.domain.errors import Forbidden, Invalid, NotFound
from interlude.domain.expiring import ExpiringCache
from interlude.rules import auth

if TYPE_CHECKING:
    from interlude.app.ports import KeyRecords
    from interlude.domain.models.requests import CreateKeyRequest

# A page of `GET /keys` / `interlude keys list`.
DEFAULT_KEYS_LIMIT = 50
MAX_KEYS_LIMIT = 100


class Keys:
    """Bearer keys checked (through a bounded cache), issued, listed and revoked; console sessions signed in with one."""

    # An unknown, revoked or expired key stays refused, so that answer may be kept longer.
    REFUSED_KEY_CACHE_SECONDS = 30.0
    # Every well-formed key id is cached, known or not, so the cache is bounded like the workflow cache.
    KEY_CACHE_SIZE = 1024

    def __init__(self, records: KeyRecords, clock: Clock, cache_seconds: float = DEFAULT_KEY_CACHE_SECONDS) -> None:
        self.records = records
        self.clock = clock
        # How long an active key is trusted without reading it again: the bound on revocation across instances.
        self.cache_seconds = cache_seconds
        # On this module's `time` at each use: the bench stands the clock still by replacing it, as tests do.
        self._cache: ExpiringCache[str, dict[str, Any] | None] = ExpiringCache(
            self.KEY_CACHE_SIZE, lambda: time.monotonic()
        )

    def authenticate(self, authorization: str | None) -> auth.Principal:
        key_id, secret = auth.parse_bearer(authorization)
        return auth.verify(self._key_record(key_id), key_id, secret, self.clock())

    def open_console_session(self, principal: auth.Principal, session_id: str, ends_at: int) -> None:
        """Record a console session signed in with `principal`'s key, open until `ends_at` (epoch s) or sign-out."""
        self.records.open_console_session(principal.tenant, session_id, principal.key_id, ends_at)

    def end_console_session(self, tenant: str, session_id: str) -> None:
        """Sign-out: the session's cookie, and every copy of it, is refused from now on, on every instance."""
        self.records.end_console_session(tenant, session_id)

    def signed_in_principal(self, key_id: str, tenant: str, subject_id: str, session_id: str) -> auth.Principal:
        """Who console session `session_id`, signed in with key `key_id`, acts as while the session is open and the
        key active. The session is read at every request (one GetItem), so a sign-out ends it at once everywhere;
        the key through the same cached read as `authenticate`, so a revocation ends it within `cache_seconds`
        on every instance (at once on the one that revoked)."""
        if not self.records.console_session_open(tenant, session_id, key_id):
            raise auth.unauthenticated("this session was signed out")
        record = self._key_record(key_id) if auth.KEY_ID_RE.fullmatch(key_id) else None
        if record is None or record.get("tenant") != tenant or record["subject"].get("subjectId") != subject_id:
            raise auth.unauthenticated("the API key this session signed in with is not valid")
        status = auth.key_status(record, self.clock())
        if status != "active":
            raise auth.unauthenticated(f"the API key this session signed in with is {status}")
        return auth.principal_from_record(record, key_id)

    def connected_principal(self, key_id: str, tenant: str) -> auth.Principal:
        """Who a live connection opened with key `key_id` acts as at each message: the key read as `authenticate`
        reads it (a revocation reaches the connection's next message within `cache_seconds`)."""
        record = self._key_record(key_id) if auth.KEY_ID_RE.fullmatch(key_id) else None
        if record is None or record.get("tenant") != tenant:
            raise auth.unauthenticated("the API key this connection opened with is not valid")
        status = auth.key_status(record, self.clock())
        if status != "active":
            raise auth.unauthenticated(f"the API key this connection opened with is {status}")
        return auth.principal_from_record(record, key_id)

    def get_api_key(self, key_id: str) -> dict[str, Any] | None:
        """The key's record as `authenticate` reads it (a KeyLookup): the links a run's notices carry are minted for
        the key that created it on this read, and checked against the key again, read anew, when one is used
        (app/tokens.py)."""
        return self._key_record(key_id)

    def _key_record(self, key_id: str) -> dict[str, Any] | None:
        if (cached := self._cache.fresh(key_id)) is not None:
            return cached[0]
        record = self.records.get_api_key(key_id)
        active = record is not None and auth.key_status(record, self.clock()) == "active"
        return self._cache.keep(key_id, record, self.cache_seconds if active else self.REFUSED_KEY_CACHE_SECONDS)

    def create_key(
        self,
        principal: auth.Principal,
        request: CreateKeyRequest,
        keyed: KeyedWrite | None = None,
        surface: str = "api",
    ) -> dict[str, Any]:
        """`surface`: where the creator asked (the audit entry's actor surface: api, console)."""
        missing = {s for s in request.scopes if not auth.holds(principal.scopes, s)}
        if missing:
            raise Forbidden("a key cannot grant scopes its creator lacks", {"scopes": sorted(missing)})
        return self.issue_key(principal.tenant, request, keyed, audit.actor(principal, surface))

    def issue_key(
        self,
        tenant: str,
        request: CreateKeyRequest,
        keyed: KeyedWrite | None = None,
        by: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """`by`: who asked (audit.actor); None: the operator, through the CLI."""
        now = self.clock()
        if request.expiresAt is not None and request.expiresAt <= now:
            raise Invalid("expiresAt must be in the future", {"field": "expiresAt"})
        expires_at = iso(request.expiresAt.astimezone(UTC)) if request.expiresAt is not None else None
        key_id, api_key, secret_hash = auth.new_key()
        record = auth.key_record(
            tenant,
            request.subjectId,
            list(request.scopes),
            request.groups,
            request.roles,
            request.kind,
            secret_hash,
            iso(now),
            expires_at,
        )
        issued = {
            "keyId": key_id,
            "apiKey": api_key,
            "tenant": tenant,
            "subject": record["subject"],
            "scopes": record["scopes"],
            **({"expiresAt": expires_at} if expires_at else {}),
        }
        answer = answered(keyed, issued)
        entry = audit.entry(
            tenant,
            by or audit.OPERATOR,
            "key.created",
            {"keyId": key_id},
            iso(now),
            {"subjectId": request.subjectId, "scopes": record["scopes"], **({"expiresAt": expires_at} if expires_at else {})},
        )
        self.records.put_api_key(key_id, record, answer, entry)
        committed(keyed, answer)
        return issued

    def list_keys(self, tenant: str, limit: int, cursor: str | None) -> dict[str, Any]:
        """One page of the tenant's keys (metadata only), oldest first; `cursor` continues after it."""
        try:
            page, after = self.records.list_api_keys(tenant, limit, cursor)
        except ValueError:
            raise Invalid("cursor is not one this listing issued", {"field": "cursor"}) from None
        now = self.clock()
        body: dict[str, Any] = {"keys": [auth.key_metadata(record, key_id, now) for key_id, record in page]}
        if after is not None:
            body["cursor"] = after
        return body

    def revoke_key(self, tenant: str, key_id: str, by: dict[str, Any] | None = None) -> dict[str, Any]:
        """Revoke one of the tenant's keys; another tenant's key answers as an unknown one (404). `by`: who asked
        (audit.actor); None: the operator, through the CLI."""
        if not auth.KEY_ID_RE.fullmatch(key_id):
            raise NotFound("no such key")
        at = iso(self.clock())
        entry = audit.entry(tenant, by or audit.OPERATOR, "key.revoked", {"keyId": key_id}, at)
        record = self.records.revoke_api_key(tenant, key_id, at, entry)
        if record is None:
            raise NotFound("no such key")
        self._cache.forget(key_id)  # this instance refuses it from now on
        return auth.key_metadata(record, key_id, self.clock())
