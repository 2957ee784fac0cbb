"""`Idempotency-Key` on every mutating route (OpenWOP idempotency.md Layer 1, RFC 0213 §B).

`routes.route()` wraps the handler of every write (a route of wiring.ROUTES declared with an `idempotency`) with
`idempotent()`, so a route added later is covered without touching its handler; a console form's handler wraps
its action itself, once its credential holds (wiring.Route.keyed_in_handler). Reads are never wrapped: they ignore
the header.

Per request carrying the header:
  1. the value must match KEY_RE, else `400 idempotency_key_invalid` (never stored);
  2. the record namespace ("tenant") comes from the credential: the API key's tenant for routes with a
     scope (so 401/403 come first and are never stored), the key's own where the answer is a credential
     (wiring.Route.credential: an API key, a decision link, a secret, a task token); or, for a credential-less
     route (the signed-token surfaces), the capability in the path — `tok:` + sha256 of the path parameters.
     A token belongs to one interrupt of one run of one tenant, so that namespace is narrower than the
     tenant's; the token is verified by the handler before any effect and a refused token (401/403) is never
     stored; or, for a console form, the session's tenant (its key's own where the answer is a credential),
     once the session, its scope and its form proof hold; or, for the console's sign-in, the namespace of the
     key it signs in with (`key_namespace`), once that key holds;
  3. the request digest is sha256 over the operationId, the path parameters and the raw body bytes;
  4. a record found under (namespace, operationId, key) answers: a different digest ⇒
     `409 idempotency_key_mismatch` (never the cached body); the first request still running ⇒
     `409 idempotency_in_flight` with `Retry-After` (no timing in details); a stored final response ⇒ that
     response byte for byte plus `OpenWOP-Idempotent-Replay: true`, and nothing runs again;
  5. otherwise the handler runs, in one of two ways:
     * "with-effect" routes (their effect is one TransactWriteItems): one consistent GetItem looks
       for the record; the handler passes `keyed(render)` to its operation, which renders the answer from
       the decided transition and commits the record, already final, in the effect's own transaction. Lost
       answers cannot happen: once the effect is committed so is its answer, and a retry replays it. Of
       concurrent duplicates the transaction's condition picks one; the others replay its answer. There is
       no lease: a request that dies before its commit leaves nothing behind.
     * "claimed" routes claim the record with one conditional PutItem for a lease (the Lambda's remaining
       time plus LEASE_MARGIN_MS), run, then store the answer (wiring says, beside each, why it is not one
       transaction to join).
     A final outcome (2xx and 4xx other than 400 validation_error / idempotency_key_invalid, 401, 403, 429)
     is kept for RETENTION_SECONDS; any other outcome (429, 5xx, an unexpected exception) leaves the key
     free so a retry with the same key executes.
  5. a credential route's answer is kept with its body encrypted under a key derived from the credential the
     request came with, and opened only by a retry sent with it (`_to_cached`, `_opened`; docs/adr/0188).
Keys are never logged.
"""

import base64
import functools
import hashlib
import json
import re
import secrets
import time
from collections.abc import Callable
from contextvars import ContextVar
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from aws_lambda_powertools.event_handler.api_gateway import Response
from aws_lambda_powertools.shared.cookies import Cookie

from interlude import wiring
from interlude.adapters import metrics
from interlude.api import http
from interlude.api.errors import status_of
from interlude.app.caught import caught
from interlude.app.idempotency import KeyedWrite
from interlude.composition import services
from interlude.domain.errors import Conflict, DomainError, Invalid
from interlude.rules.auth import Principal
from interlude.store.idempotency import (
    AnsweredRecord,
    CachedResponse,
    Claim,
    Existing,
    IdempotencyKey,
    IdempotencyStore,
    KeyAlreadyUsed,
)

if TYPE_CHECKING:
    # Loaded with the first credential answer kept or opened, not with every route.
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

HEADER = "idempotency-key"
REPLAY_HEADER = "OpenWOP-Idempotent-Replay"
KEY_RE = re.compile(r"[A-Za-z0-9._~-]{22,128}")
IN_FLIGHT_RETRY_AFTER_S = 1
LEASE_MARGIN_MS = 1_000
# 400 codes that describe the request itself; a corrected request with the same key must execute.
UNCACHED_400_CODES = frozenset({"validation_error", "idempotency_key_invalid"})


def is_final(status: int, code: str | None) -> bool:
    """Whether an outcome is cached: 2xx and non-retryable 4xx, except 400 validation, 401 and 403."""
    if status >= 500 or status in (401, 403, 429):
        return False
    return not (status == 400 and code in UNCACHED_400_CODES)


def request_digest(operation: str, params: dict[str, str], raw_body: bytes) -> str:
    # The JSON line cannot contain a raw newline, so the split between it and the body is unambiguous.
    head = json.dumps([operation, sorted(params.items())], separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(head.encode() + b"\n" + raw_body).hexdigest()


def capability_namespace(params: dict[str, str]) -> str:
    # ':' never occurs in a tenant id (ids.TENANT_RE), so this cannot collide with a real tenant.
    return "tok:" + hashlib.sha256(json.dumps(sorted(params.items()), allow_nan=False).encode()).hexdigest()


def key_namespace(principal: Principal) -> str:
    # Under the key's tenant (its records go with the tenant), yet the key's own: a console sign-in's answer opens a
    # session of that one key, so no other key's request, in any tenant, may find it. `#` is in no key id or tenant.
    return f"{principal.tenant}#K#{principal.key_id}"


def namespace_of(spec: wiring.Route, principal: Principal) -> str:
    """Where a request of `principal`'s keeps its record: in the key's tenant, or, where the answer is a credential (the
    route's, or that of the API operation a console form performs), in the key's own namespace: another key of the
    tenant sending the same request with the same Idempotency-Key is never answered the first key's credential."""
    return key_namespace(principal) if spec_answers_credential(spec) else principal.tenant


def spec_answers_credential(spec: wiring.Route) -> bool:
    """Whether the route's answer (or that of the API operation a console form performs) is a credential."""
    return (http.ROUTES_BY_OPERATION[spec.acts_as] if spec.acts_as else spec).credential


@cache
def records() -> IdempotencyStore:
    return services().idempotency


def _now_ms() -> int:
    return int(time.time() * 1000)


def _lease_ms() -> int:
    context = http.app.lambda_context
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return wiring.function(wiring.ROUTES_FUNCTION).timeout_s * 1000 + LEASE_MARGIN_MS
    return int(remaining()) + LEASE_MARGIN_MS


def _raw_body() -> bytes:
    event = http.app.current_event
    raw = event.body or ""
    return base64.b64decode(raw) if event.is_base64_encoded else raw.encode()


def _error_code(response: Response) -> str | None:
    if response.status_code != 400 or not isinstance(response.body, str):
        return None
    try:
        doc = json.loads(response.body)
    except ValueError:
        return None
    return doc.get("error") if isinstance(doc, dict) else None


# A credential route's answer (wiring.Route.credential: an API key's secret, a token, a link, a signing secret) is
# kept encrypted under a key derived from the credential the request came with (its API key, or the console session
# it was sent in): the table and its backups hold no usable credential, and only a retry sent with the same
# credential reads it back (docs/adr/0188). API keys themselves are kept only as hashes, for the same reason.
_answer_key: ContextVar[bytes | None] = ContextVar("interlude_answer_key", default=None)


def _to_cached(response: Response) -> CachedResponse:
    body = response.body
    headers = dict(response.headers)
    cookies = tuple(str(cookie) for cookie in response.cookies)
    if isinstance(body, bytes):
        cached = CachedResponse(response.status_code, headers, base64.b64encode(body).decode(), True, cookies)
    else:
        cached = CachedResponse(response.status_code, headers, "" if body is None else str(body), False, cookies)
    answer_key = _answer_key.get()
    if answer_key is None:
        return cached
    sealed = _cipher(answer_key).encrypt(nonce := secrets.token_bytes(12), cached.body.encode(), None)
    return cached._replace(body=base64.b64encode(nonce + sealed).decode(), encrypted=True)


def _answer_key_of(credential: str, key: IdempotencyKey) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    info = "\x00".join(("interlude idempotent answer", key.namespace, key.operation, key.key)).encode()
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(credential.encode())


def _cipher(answer_key: bytes) -> "AESGCM":
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM(answer_key)


def _opened(cached: CachedResponse) -> CachedResponse:
    """A kept answer as it was given: an encrypted one opened with this request's credential's key, or refused as
    another request's (a credential whose key cannot open it never learns what it holds)."""
    if not cached.encrypted:
        return cached
    answer_key = _answer_key.get()
    try:
        if answer_key is None:
            raise ValueError("no credential to open the answer with")
        kept = base64.b64decode(cached.body)
        body = _cipher(answer_key).decrypt(kept[:12], kept[12:], None).decode()
    except Exception:  # noqa: BLE001 - any failure to open it: another credential's answer
        raise Conflict("this Idempotency-Key was used with a different request", code="idempotency_key_mismatch") from None
    return cached._replace(body=body, encrypted=False)


class _SentCookie(Cookie):
    """A Set-Cookie of a kept answer, sent again exactly as the first answer sent it (the resolver sends str(cookie))."""

    def __init__(self, sent: str) -> None:
        # Not Cookie's own __init__: that builds the header anew from its parts, which a kept answer no longer has.
        self._sent = sent

    def __str__(self) -> str:
        return self._sent


def _replay(cached: CachedResponse) -> Response:
    replayed = _given(cached)
    replayed.headers[REPLAY_HEADER] = "true"
    return replayed


class _KeyedRequest(NamedTuple):
    key: IdempotencyKey
    now_ms: int
    sealed: list[CachedResponse]


_current: ContextVar[_KeyedRequest | None] = ContextVar("interlude_keyed_request", default=None)


def keyed(render: Callable[[Any], Response]) -> KeyedWrite | None:
    """This request's keyed write (None without Idempotency-Key): `render` makes the answer from the
    operation's result, the same function the handler answers with, so the stored answer is the one given."""
    current = _current.get()
    if current is None:
        return None
    return KeyedWrite(current.key, current.now_ms, lambda result: _to_cached(render(result)), current.sealed)


def _answer(existing: Existing, digest: str, operation: str) -> Response:
    if existing.digest != digest:
        raise Conflict("this Idempotency-Key was used with a different request", code="idempotency_key_mismatch")
    if existing.completed is None:
        raise Conflict(
            "a request with this Idempotency-Key is still in progress",
            code="idempotency_in_flight",
            retry_after_s=IN_FLIGHT_RETRY_AFTER_S,
        )
    metrics.count("IdempotentReplays", operation=operation)
    return _replay(existing.completed)


def _given(cached: CachedResponse) -> Response:
    """The answer committed with the effect, exactly as a replay of it will read (without the replay mark)."""
    cached = _opened(cached)
    body: str | bytes = base64.b64decode(cached.body) if cached.is_base64 else cached.body
    cookies: list[Cookie] = [_SentCookie(sent) for sent in cached.cookies]
    return Response(status_code=cached.status, body=body, headers=dict(cached.headers), cookies=cookies)


def _run_committed_with_effect(key: IdempotencyKey, handler: Callable[..., Response], params: dict[str, str]) -> Response:
    now = _now_ms()
    found = records().find(key, now_ms=now)
    if found is not None:
        return _answer(found, key.digest, key.operation)
    request = _KeyedRequest(key, now, [])
    token = _current.set(request)
    try:
        response = handler(**params)
    except KeyAlreadyUsed as lost:
        return _answer(lost.existing, key.digest, key.operation)
    except DomainError as exc:
        if request.sealed:
            return _given(request.sealed[-1])
        if not is_final(status_of(exc, http.current_face()), exc.code):
            raise
        # Exactly what the resolver's handler answers, so what is stored is what the first caller received.
        return _keep_refusal(key, http.error_response(exc), now)
    except Exception:
        if not request.sealed:
            raise
        # The effect and its answer are committed: whatever failed after, that answer is the outcome.
        caught(http.logger, "idempotency-after-commit", "the request failed after its effect was committed; answering what was committed")
        return _given(request.sealed[-1])
    finally:
        _current.reset(token)
    if request.sealed:
        return _given(request.sealed[-1])
    if not is_final(response.status_code, _error_code(response)):
        return response
    return _keep_refusal(key, response, now)


def _keep_refusal(key: IdempotencyKey, response: Response, now_ms: int) -> Response:
    """A final answer with no effect committed alongside (a refusal): kept unless the key was taken meanwhile,
    in which case the record that took it answers as it answers a retry: a concurrent duplicate's outcome, or a
    mismatch when another request took it (never the refusal that request's effect caused here)."""
    try:
        taken = records().store_answer(AnsweredRecord(key, _to_cached(response), now_ms))
    except Exception:
        caught(http.logger, "idempotency-store", "storing the idempotent response failed")
        return response
    if taken is not None and (taken.digest != key.digest or taken.completed is not None):
        return _answer(taken, key.digest, key.operation)
    return response


def idempotent(
    spec: wiring.Route, handler: Callable[..., Response], tenant: str | None = None, credential: str | None = None
) -> Callable[..., Response]:
    """`handler` honouring Idempotency-Key, its records in `tenant` when the caller has already been authenticated
    there (a console session, `credential` its cookie), else in the namespace the route's credential gives (the
    module's docstring, 2)."""

    @functools.wraps(handler)
    def wrapped(**params: str) -> Response:
        headers = http.app.current_event.headers or {}
        key = headers.get(HEADER)
        if key is None:
            return handler(**params)
        if not KEY_RE.fullmatch(key):
            raise Invalid(
                "Idempotency-Key must be 22 to 128 characters from A-Z a-z 0-9 . _ ~ -",
                {"header": "Idempotency-Key"},
                code="idempotency_key_invalid",
            )
        namespace = tenant or (
            namespace_of(spec, http.principal_for(spec.operation)) if spec.scope else capability_namespace(params)
        )
        keyed_as = IdempotencyKey(namespace, spec.operation, key, request_digest(spec.operation, params, _raw_body()))
        asking = credential or headers.get("authorization")
        answer_key = _answer_key_of(asking, keyed_as) if spec_answers_credential(spec) and asking else None
        token = _answer_key.set(answer_key)
        try:
            if spec.idempotency == "with-effect":
                return _run_committed_with_effect(keyed_as, handler, params)
            got = records().claim(
                namespace, spec.operation, key, keyed_as.digest, now_ms=_now_ms(), lease_ms=_lease_ms()
            )
            if not isinstance(got, Claim):
                return _answer(got, keyed_as.digest, spec.operation)
            return _run_claimed(got, handler, params)
        finally:
            _answer_key.reset(token)

    return wrapped


def _run_claimed(claim: Claim, handler: Callable[..., Response], params: dict[str, str]) -> Response:
    try:
        response = handler(**params)
    except DomainError as exc:
        if not is_final(status_of(exc, http.current_face()), exc.code):
            _release(claim)
            raise
        # Exactly what the resolver's handler answers, so what is stored is what the first caller received.
        response = http.error_response(exc)
    except Exception:
        _release(claim)
        raise
    if not is_final(response.status_code, _error_code(response)):
        _release(claim)
        return response
    try:
        if not records().complete(claim, _to_cached(response), now_ms=_now_ms()):
            http.logger.warning("idempotency claim was taken over before completion; response not stored")
    except Exception:
        # The effect happened; answer it. The claim stays in flight until its lease ends.
        caught(http.logger, "idempotency-store", "storing the idempotent response failed")
    return response


def _release(claim: Claim) -> None:
    try:
        records().release(claim)
    except Exception:
        # The original outcome is what the caller must see; the claim ends with its lease.
        caught(http.logger, "idempotency-release", "releasing an idempotency claim failed")
