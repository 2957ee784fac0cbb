"""The actions worker: one SQS message (one requested core.http visit) per call, performed exactly once.

For each message: read the visit from the run (a message for a visit that no longer waits is dropped); claim the
effect record (store.effects) — settled already: land the recorded outcome without calling; claimed by a live
worker: come back after its lease; claimed: hide the message for the lease, then call. The call goes through the
egress guard (the host resolved anew) over a connection pinned to the admitted addresses, with the effect's
Idempotency-Key and the auth headers read from Secrets Manager by reference. A 5xx, 408, 429, timeout or
connection error releases the attempt and hides the message for a backoff (exponential, capped, jittered, at
least Retry-After) until the node's maxAttempts; anything else settles the effect (completed with the bounded
response, or failed with a clear code) and lands the outcome on the run, where a failure routes like any other.

Nothing here logs or records a header value, a request body or a response body: only ids, statuses and classes.
"""

from __future__ import annotations

import contextlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Logger
from botocore.exceptions import ClientError

from interlude.adapters.actions.queue_work import RetryLater, hide
from interlude.adapters.delivery.pinned_http import AnsweredResponse, DeliveryFailed, send_pinned
from interlude.adapters.delivery.retry import backoff_s
from interlude.app import actions
from interlude.app.caught import caught
from interlude.config.actions import ActionSettings
from interlude.domain.clock import iso_epoch
from interlude.domain.errors import run_error
from interlude.domain.ids import secret_name, tenant_of
from interlude.domain.models.run import PendingAction
from interlude.engine.actions import provider_key
from interlude.rules.egress import EgressRefused, Resolver, check_url
from interlude.store.effects import EffectStore, LedgerEntry

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
        super().__init__(f"the secret {name!r} for header {header!r} could not be read")
        self.header = header
        self.name = name


@dataclass(frozen=True)
class _Attempt:
    """What one call came to: `settled` with an outcome (output or error), or `retry` (the effect may not have
    happened: another attempt, with the same Idempotency-Key, may follow)."""

    kind: str  # "settled" | "retry"
    outcome: dict[str, Any] = field(default_factory=dict)
    error_class: str = ""
    status: int | None = None
    retry_after: str | None = None


@dataclass
class ActionWorker:
    service: Any  # interlude.app.service.Service
    effects: EffectStore
    sqs: Any
    secrets: Any  # a Secrets Manager client
    settings: ActionSettings
    resolve: Resolver | None = None
    clock: Callable[[], float] = time.time
    rand: Callable[[], float] = field(default=random.random)
    # The tenants' effect retention in days, read at most every RETENTION_CACHE_S per tenant.
    _retention: dict[str, tuple[float, int]] = field(default_factory=dict)

    def handle(self, record: dict[str, Any]) -> str:
        """Process one SQS record; returns the outcome (completed, failed, replayed, stale, superseded) or raises
        RetryLater."""
        message = json.loads(record["body"])
        run_id, node_id, visit = message["runId"], message["nodeId"], int(message["visit"])
        pending = actions.pending_action(self.service, run_id, node_id, visit)
        if pending is None:
            logger.info("the visit no longer waits; message dropped", extra={"runId": run_id, "nodeId": node_id})
            return "stale"
        entry = LedgerEntry(run_id, node_id, pending.effectId, pending.keying, provider_key(pending.effectId))
        lease_s = self.settings.connect_timeout_s + pending.request["timeoutMs"] / 1000 + self.settings.lease_margin_s
        expires = self._effects_expire(run_id)
        claim = self.effects.claim(entry, self.clock(), iso_epoch(self.clock()), lease_s, expires)
        if claim.outcome == "busy":
            hide(self.sqs, self.settings.queue_url, record, claim.retry_in_s)
            raise RetryLater(f"effect {entry.effect_id} is being performed by another worker")
        if claim.outcome == "settled":
            # Performed before (a redelivery, a crash after the call, or another run with the same business key).
            status = "failed" if "error" in claim.recorded else "completed"
            self.effects.note_reuse(entry, claim.attempt, status, iso_epoch(self.clock()), expires)
            actions.finish_action(self.service, run_id, node_id, visit, claim.recorded)
            return "replayed"
        # Killed mid-call, this message reappears once the lease has run out, and its receiver takes over.
        hide(self.sqs, self.settings.queue_url, record, lease_s)
        result = self._call(pending, claim.attempt)
        max_attempts = int(pending.request["maxAttempts"])
        if result.kind == "retry" and claim.attempt < max_attempts:
            self.effects.finish(entry, claim.attempt, "pending", iso_epoch(self.clock()), expires)
            delay = backoff_s(claim.attempt, self.settings.backoff_base_s, self.settings.backoff_cap_s, self.rand)
            if result.retry_after and result.retry_after.strip().isdigit():
                delay = max(delay, min(int(result.retry_after.strip()), int(self.settings.backoff_cap_s)))
            hide(self.sqs, self.settings.queue_url, record, delay)
            raise RetryLater(f"attempt {claim.attempt} of effect {entry.effect_id} failed ({result.error_class})")
        outcome = result.outcome if result.kind == "settled" else _exhausted(pending, result, max_attempts)
        status = "failed" if "error" in outcome else "completed"
        if not self.effects.finish(entry, claim.attempt, status, iso_epoch(self.clock()), expires, outcome):
            # Our lease ran out and another worker took the effect over: its attempt settles it.
            logger.warning("claim lost before settling; the later attempt settles", extra={"effectId": entry.effect_id})
            return "superseded"
        actions.finish_action(self.service, run_id, node_id, visit, outcome)
        return status

    def _effects_expire(self, run_id: str) -> int:
        """When the effect record and ledger entry written now expire: the tenant's retention from now."""
        tenant = tenant_of(run_id)
        hit = self._retention.get(tenant)
        if hit is None or hit[0] <= time.monotonic():
            days = actions.effect_retention_days(self.service, tenant)
            hit = (time.monotonic() + RETENTION_CACHE_S, days)
            self._retention[tenant] = hit
        return int(self.clock()) + hit[1] * 24 * 3600

    # -- one call -------------------------------------------------------------------------------

    def _call(self, pending: PendingAction, attempt: int) -> _Attempt:
        request = pending.request
        try:
            target = check_url(request["url"], resolve=self.resolve, allow_loopback=self.settings.allow_loopback)
            headers = {
                **request["headers"],
                **self._secret_headers(pending.effectId, request["secretHeaders"]),
                "Idempotency-Key": provider_key(pending.effectId),
                "User-Agent": USER_AGENT,
            }
            body = request.get("body")
            if body is not None:
                headers["Content-Type"] = "application/json"
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
            # One class for every refused destination: the tenant learns nothing about internal addresses.
            return _Attempt(
                "settled",
                _error(
                    "interlude.egress_denied",
                    f"the URL was refused: {refused.reason}",
                    pending,
                    attempt,
                    errorClass="egress_denied",
                ),
            )
        except _SecretMissing as missing:
            return _Attempt(
                "settled",
                _error(
                    "interlude.secret_unavailable",
                    str(missing),
                    pending,
                    attempt,
                    header=missing.header,
                    secret=missing.name,
                ),
            )
        except DeliveryFailed as failed:
            return _Attempt("retry", error_class=failed.error_class)
        except Exception:  # a secret store outage, a bug: recorded and retried like any failure
            caught(logger, "action-attempt", "action attempt failed inside the worker", effectId=pending.effectId)
            return _Attempt("retry", error_class="internal")
        return self._judge(pending, attempt, response)

    def _judge(self, pending: PendingAction, attempt: int, response: AnsweredResponse) -> _Attempt:
        expected = pending.request["expectStatuses"]
        status = response.status
        if status in expected or (not expected and 200 <= status < 300):
            return _Attempt("settled", {"output": _output(pending, attempt, response)})
        if status >= 500 or status in RETRY_STATUSES:
            return _Attempt("retry", error_class="http_status", status=status, retry_after=response.retry_after)
        reason = " (redirects are not followed)" if 300 <= status < 400 else ""
        return _Attempt(
            "settled",
            _error(
                "interlude.http_failed",
                f"the call answered {status}{reason}",
                pending,
                attempt,
                status=status,
                errorClass="redirect" if reason else "http_status",
            ),
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
            if not isinstance(value, str) or not value or any(c in value for c in "\r\n\x00"):
                raise _SecretMissing(header, name)
            values[header] = value
        return values


def _exhausted(pending: PendingAction, result: _Attempt, attempts: int) -> dict[str, Any]:
    details: dict[str, Any] = {"errorClass": result.error_class}
    if result.status is not None:
        details["status"] = result.status
    message = f"the call did not succeed in {attempts} attempt(s)"
    return _error("interlude.http_failed", message, pending, attempts, **details)


def _output(pending: PendingAction, attempt: int, response: AnsweredResponse) -> dict[str, Any]:
    """The node's output: status, the body within the response budget (JSON when it says so and parses)."""
    budget = int(pending.request["responseBudgetBytes"])
    truncated = len(response.body_excerpt) > budget
    excerpt = response.body_excerpt[:budget]
    body: Any = excerpt.decode("utf-8", errors="replace")
    if not truncated and (response.content_type or "").split(";")[0].strip().lower().endswith("json") and excerpt:
        with contextlib.suppress(ValueError):
            body = json.loads(excerpt)
    return {
        "status": response.status,
        "body": body,
        "truncated": truncated,
        "effectId": pending.effectId,
        "attempt": attempt,
    }


def _error(code: str, message: str, pending: PendingAction, attempt: int, **details: Any) -> dict[str, Any]:
    return {"error": run_error(code, message, {"effectId": pending.effectId, "attempts": attempt, **details})}
