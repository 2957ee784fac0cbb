"""API keys: authenticating a bearer key (with a short, bounded cache) and issuing keys."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

from interlude.app.idempotency import KeyedWrite, answered, committed
from interlude.domain.clock import Clock
from interlude.domain.errors import Forbidden
from interlude.domain.models.requests import CreateKeyRequest
from interlude.domain.validation import parse
from interlude.engine import run as engine
from interlude.rules import auth
from interlude.store import Store


class KeyOperations:
    """Part of Service (app/service.py), which sets these attributes."""

    store: Store
    clock: Clock
    _keys: OrderedDict[str, tuple[float, dict[str, Any] | None]]

    KEY_CACHE_SECONDS = 30.0
    # Every well-formed key id is cached, known or not, so the cache is bounded like the workflow cache.
    KEY_CACHE_SIZE = 1024

    def authenticate(self, authorization: str | None) -> auth.Principal:
        key_id, secret = auth.parse_bearer(authorization)
        cached = self._keys.get(key_id)
        if cached and cached[0] > time.monotonic():
            record = cached[1]
        else:
            record = self.store.get_api_key(key_id)
            self._keys[key_id] = (time.monotonic() + self.KEY_CACHE_SECONDS, record)
            self._keys.move_to_end(key_id)
            if len(self._keys) > self.KEY_CACHE_SIZE:
                self._keys.popitem(last=False)
        return auth.verify(record, key_id, secret)

    def create_key(self, principal: auth.Principal, body: Any, keyed: KeyedWrite | None = None) -> dict[str, Any]:
        request: CreateKeyRequest = parse(CreateKeyRequest, body, "request body")
        missing = set(request.scopes) - principal.scopes
        if missing:
            raise Forbidden("a key cannot grant scopes its creator lacks", {"scopes": sorted(missing)})
        return self.issue_key(principal.tenant, request, keyed)

    def issue_key(self, tenant: str, request: CreateKeyRequest, keyed: KeyedWrite | None = None) -> dict[str, Any]:
        key_id, api_key, secret_hash = auth.new_key()
        record = auth.key_record(
            tenant,
            request.subjectId,
            list(request.scopes),
            request.groups,
            request.roles,
            request.kind,
            secret_hash,
            engine.iso(self.clock()),
        )
        issued = {
            "keyId": key_id,
            "apiKey": api_key,
            "tenant": tenant,
            "subject": record["subject"],
            "scopes": record["scopes"],
        }
        answer = answered(keyed, issued)
        self.store.put_api_key(key_id, record, answer)
        committed(keyed, answer)
        return issued
