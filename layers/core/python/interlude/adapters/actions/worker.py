"""The actions worker: one SQS message (one requested core.http visit) per call, performed exactly once.

A leased worker (adapters.leased_work) over the effect record (store.effects): a message for a visit that no longer
waits is dropped; an effect settled already lands its recorded outcome without a call; a claimed one hides its
message for the lease, then calls. The call goes through the egress guard (the host resolved anew) over a
connection pinned to the admitted addresses, with the effect's Idempotency-Key and the auth headers read from
Secrets Manager by reference. A 5xx, 408, 429, timeout or connection error is retried later (at least Retry-After)
until the node's maxAttempts; anything else settles the effect (completed with the bounded response, or failed
with a clear code) and lands the outcome on the run, where a failure routes like any other. Its dead letter is no
queue: the last failure is the effect's outcome, and lands on the run the same way.

Nothing here logs or records a header value, a request body or a response body: only ids, statuses and classes.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from botocore.exceptions import ClientError

from interlude.adapters.delivery.pinned_http import AnsweredResponse, DeliveryFailed, send_pinned
from interlude.adapters.leased_work import Attempted, LeasedWorker, Work, retry_after_s
from interlude.app.caught import caught
from interlude.config.actions import ActionSettings
from interlude.domain.budgets import MAX_VALUE_DEPTH, BudgetExceeded, json_size
from interlude.domain.clock import iso_epoch
from interlude.domain.errors import run_error
from interlude.domain.ids import secret_name, tenant_of
from interlude.domain.models.run import PendingAction
from interlude.domain.written_numbers import with_spellings
from interlude.engine.actions import is_header_value, provider_key
from interlude.rules.egress import UNRESOLVED, EgressRefused, Resolver, check_url
from interlude.rules.retention import effect_expiry
from interlude.store.effects import EffectStore, LedgerEntry, recorded_outcome
from interlude.store.leases import Claim

if TYPE_CHECKING:
    from interlude.app.ports import ActionOutcomes

logger = Logger(service="interlude-actions", child=True)
USER_AGENT = "interlude-actions/1"
# A tenant's effect retention (tenant settings) is read again after this long: a change applies within it.
RETENTION_CACHE_S = 300.0
RETRY_STATUSES = frozenset({408, 429})
# Secrets Manager answers that no retry can change: the node fails with interlude.secret_unavailable.
SECRET_FINAL_ERRORS = frozenset(
    {"ResourceNotFoundException", "AccessDeniedException", "InvalidRequestException", "DecryptionFailure"}
)


class _SecretMissing(Exception):
    def __init__(self, header: str, name: str) -> None:
        super().__init__(f"the secret {name!r} for header {header!r} is missing, unreadable or no header value")
        self.header = header
        self.name = name


@dataclass(frozen=True)
class Call(Work[LedgerEntry]):
    """A requested visit's call, as the run holds it."""

    pending: PendingAction
    visit: int


@dataclass
class ActionWorker(LeasedWorker[Call]):
    actions: ActionOutcomes
    # The tenant's effect retention in days (its settings): read at most every RETENTION_CACHE_S per tenant.
    retention_days: Callable[[str], int]
    effects: EffectStore
    sqs: Any
    secrets: Any  # a Secrets Manager client
    settings: ActionSettings
    resolve: Resolver | None = None
    clock: Callable[[], float] = time.time
    rand: Callable[[], float] = field(default=random.random)
    # The tenants' effect retention in days, as last read, and until when it is trusted.
    _retention: dict[str, tuple[float, int]] = field(default_factory=dict)

    # Killed mid-call, its message reappears once the lease has run out, and its receiver takes over: the lease
    # follows the node's own timeout, which the queue's visibility timeout does not know.
    HIDE_FOR_LEASE = True
    MESSAGE = "action"

    @property
    def ledger(self) -> EffectStore:
        return self.effects

    def receive(self, message: dict[str, Any]) -> Call | str:
        run_id, node_id, visit = message["runId"], message["nodeId"], int(message["visit"])
        waiting = self.actions.waiting_action(run_id, node_id, visit)
        if waiting is None:
            logger.info("the visit no longer waits; message dropped", extra={"runId": run_id, "nodeId": node_id})
            return "stale"
        pending = waiting.pending
        expires = self._effects_expire(run_id, waiting.items_expire)
        entry = LedgerEntry(run_id, node_id, pending.effectId, pending.keying, provider_key(pending.effectId), expires)
        lease_s = self.settings.connect_timeout_s + pending.request["timeoutMs"] / 1000 + self.settings.lease_margin_s
        return Call(entry, f"effect {pending.effectId}", lease_s, int(pending.request["maxAttempts"]), pending, visit)

    def replay(self, work: Call, claim: Claim) -> str:
        """Performed before (a redelivery, a crash after the call, or another run with the same business key)."""
        recorded = recorded_outcome(claim)
        status = "failed" if "error" in recorded else "completed"
        self.effects.note_reuse(work.ref, claim.attempt, status, iso_epoch(self.clock()), claim.held)
        self.actions.finish_action(work.ref.run_id, work.ref.node_id, work.visit, recorded)
        return "replayed"

    def settle(self, work: Call, claim: Claim, status: str, kept: dict[str, Any]) -> str:
        """The effect settled with its outcome, landed on the run, where a failure routes like any other."""
        if not self.effects.settle(work.ref, claim.attempt, status, kept, self.clock()):
            # Our lease ran out and another worker took the effect over: its attempt settles it.
            logger.warning("claim lost before settling; the later attempt settles", extra={"effectId": work.ref.effect_id})
            return "superseded"
        self.actions.finish_action(work.ref.run_id, work.ref.node_id, work.visit, kept)
        return status

    def dead_letter(self, work: Call, claim: Claim, attempted: Attempted) -> str:
        """No dead-letter queue: the last attempt's failure is the effect's recorded outcome (`kept`)."""
        return self.settle(work, claim, "failed", attempted.kept)

    def _effects_expire(self, run_id: str, items_expire: int | None) -> int:
        """When the effect record and ledger entry written now expire: the tenant's retention from now, or the run's
        items' provisional expiry (`items_expire`) when later."""
        tenant = tenant_of(run_id)
        hit = self._retention.get(tenant)
        if hit is None or hit[0] <= time.monotonic():
            days = self.retention_days(tenant)
            hit = (time.monotonic() + RETENTION_CACHE_S, days)
            self._retention[tenant] = hit
        return effect_expiry(self.clock(), hit[1], items_expire)

    # -- one call -------------------------------------------------------------------------------

    def attempt(self, work: Call, claim: Claim) -> Attempted:
        """One call, with the effect's Idempotency-Key and the auth headers its secrets hold."""
        pending, attempt = work.pending, claim.attempt
        request = pending.request
        try:
            target = check_url(request["url"], resolve=self.resolve, allow_loopback=self.settings.allow_loopback)
            body = request.get("body")
            ours = {"Idempotency-Key": provider_key(pending.effectId), "User-Agent": USER_AGENT}
            if body is not None:
                ours["Content-Type"] = "application/json"
            headers = _one_per_name(
                request["headers"], self._secret_headers(pending.effectId, request["secretHeaders"]), ours
            )
            response = send_pinned(
                request["method"],
                target,
                body.encode() if body is not None else None,
                headers,
                connect_timeout=self.settings.connect_timeout_s,
                total_timeout=request["timeoutMs"] / 1000,
                # One byte past the budget tells a body cut short from one that fits exactly.
                max_response_bytes=int(request["responseBudgetBytes"]) + 1,
                ca_file=self.settings.ca_file,
            )
        except EgressRefused as refused:
            if refused.reason == UNRESOLVED:
                # A name that did not resolve may resolve at the next attempt (a resolver timing out, a record being
                # published): retried like a connection error, and the attempts that ran out say so.
                return _failed(work, "dns")
            # One class for every refused destination: the tenant learns nothing about internal addresses.
            return _settled(
                _error(
                    "interlude.egress_denied",
                    f"the URL was refused: {refused.reason}",
                    pending,
                    attempt,
                    errorClass="egress_denied",
                )
            )
        except _SecretMissing as missing:
            return _settled(
                _error(
                    "interlude.secret_unavailable",
                    str(missing),
                    pending,
                    attempt,
                    header=missing.header,
                    secret=missing.name,
                )
            )
        except DeliveryFailed as failed:
            return _failed(work, failed.error_class)
        except Exception:  # a secret store outage, a bug: recorded and retried like any failure
            caught(logger, "action-attempt", "action attempt failed inside the worker", effectId=pending.effectId)
            return _failed(work, "internal")
        return self._judge(work, attempt, response)

    def _judge(self, work: Call, attempt: int, response: AnsweredResponse) -> Attempted:
        pending = work.pending
        expected = pending.request["expectStatuses"]
        status = response.status
        if status in expected or (not expected and 200 <= status < 300):
            output = _output(pending, attempt, response)
            # How the answer wrote its numbers goes with the outcome (docs/adr/0119): read only from JSON it parsed.
            parsed = not isinstance(output["body"], str)
            return _settled(with_spellings({"output": output}, response.body_excerpt) if parsed else {"output": output})
        if status >= 500 or status in RETRY_STATUSES:
            return _failed(work, "http_status", status, retry_after_s(response.retry_after))
        reason = " (redirects are not followed)" if 300 <= status < 400 else ""
        return _settled(
            _error(
                "interlude.http_failed",
                f"the call answered {status}{reason}",
                pending,
                attempt,
                status=status,
                errorClass="redirect" if reason else "http_status",
            )
        )

    def _secret_headers(self, effect_id: str, refs: dict[str, str]) -> dict[str, str]:
        tenant = effect_id.split("/", 1)[0]
        values = {}
        for header, name in refs.items():
            try:
                got = self.secrets.get_secret_value(SecretId=secret_name(self.settings.secret_prefix, tenant, name))
            except ClientError as exc:
                if exc.response["Error"]["Code"] in SECRET_FINAL_ERRORS:
                    raise _SecretMissing(header, name) from None
                raise
            value = got.get("SecretString")
            if not isinstance(value, str) or not value or not is_header_value(value):
                raise _SecretMissing(header, name)
            values[header] = value
        return values


def _one_per_name(*layers: dict[str, str]) -> dict[str, str]:
    """The headers of `layers`, a later layer's replacing an earlier one's of the same name in any case: HTTP names
    are case-insensitive, and a definition's `content-type` beside Interlude's `Content-Type` would be sent twice."""
    merged: dict[str, tuple[str, str]] = {}
    for layer in layers:
        merged.update({name.lower(): (name, value) for name, value in layer.items()})
    return dict(merged.values())


def _settled(outcome: dict[str, Any]) -> Attempted:
    return Attempted("failed" if "error" in outcome else "completed", outcome)


def _failed(work: Call, error_class: str, status: int | None = None, retry_after: int | None = None) -> Attempted:
    """A call that may not have happened: another attempt, with the same Idempotency-Key, may follow. It keeps the
    outcome recorded should it be the last one."""
    details: dict[str, Any] = {"errorClass": error_class}
    if status is not None:
        details["status"] = status
    message = f"the call did not succeed in {work.max_attempts} attempt(s)"
    exhausted = _error("interlude.http_failed", message, work.pending, work.max_attempts, **details)
    return Attempted(None, exhausted, retry_after_s=retry_after, why=error_class)


def _output(pending: PendingAction, attempt: int, response: AnsweredResponse) -> dict[str, Any]:
    """The node's output: status, the body within the response budget (JSON when it says so and parses)."""
    budget = int(pending.request["responseBudgetBytes"])
    truncated = len(response.body_excerpt) > budget
    excerpt = response.body_excerpt[:budget]
    body: Any = excerpt.decode("utf-8", errors="replace")
    if not truncated and (response.content_type or "").split(";")[0].strip().lower().endswith("json") and excerpt:
        with contextlib.suppress(ValueError):
            body = _json_body(excerpt)
    return {
        "status": response.status,
        "body": body,
        "truncated": truncated,
        "effectId": pending.effectId,
        "attempt": attempt,
    }


def _json_body(excerpt: bytes) -> Any:
    """The answer's JSON as a node's output can hold it; ValueError (the body is kept as text) when it is no JSON, or
    holds a NaN, an infinity or a lone surrogate (which no stored value may), or nests past the output's budget (the
    body is one level inside the output; thousands deep would take the parser past Python's stack)."""
    try:
        value = json.loads(excerpt, parse_float=_finite, parse_constant=_not_json)
    except RecursionError:
        raise ValueError("the answer nests deeper than Python's parser goes") from None
    try:
        json_size(value, 1 << 62, depth=MAX_VALUE_DEPTH - 1)
    except BudgetExceeded as exc:
        raise ValueError(str(exc)) from None
    # A lone surrogate (`"\ud800"`) parses, and then no UTF-8 answer, event or delivery can carry it.
    json.dumps(value, ensure_ascii=False, allow_nan=False).encode()
    return value


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is past a double's range")
    return value


def _not_json(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


def _error(code: str, message: str, pending: PendingAction, attempt: int, **details: Any) -> dict[str, Any]:
    return {"error": run_error(code, message, {"effectId": pending.effectId, "attempts": attempt, **details})}
