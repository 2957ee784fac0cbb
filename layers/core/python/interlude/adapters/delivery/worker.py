"""The callback delivery worker: one SQS message (one notice) per call, at least once, never lost.

For each message: claim the next attempt of the notice (a duplicated message of a delivered notice stops here),
check the callback URL again with the egress guard (resolving the host anew), sign the exact body with Standard
Webhooks headers, POST it over a connection pinned to the checked addresses, and record the attempt. A failure
hides the message for a backoff (exponential, capped, with jitter) by changing its visibility timeout and reports
it as a batch item failure, so SQS hands it out again later; the last failed attempt sends a dead letter (identity
and delivery history, no body, token or secret) to the DLQ and lets the message go.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Logger

from interlude.adapters.delivery.pinned_http import DeliveryFailed, post_pinned
from interlude.adapters.delivery.retry import backoff_s, dead_letter
from interlude.adapters.delivery.signing import SecretCache, webhook_headers
from interlude.config.delivery import DeliverySettings
from interlude.domain.clock import iso_epoch
from interlude.rules.egress import EgressRefused, Resolver, check_url
from interlude.store.deliveries import DeliveryStore, public_attempts

logger = Logger(service="interlude-callbacks", child=True)
USER_AGENT = "interlude-callbacks/1"
# A receiver answering 410 Gone asks never to be called again for this notice: no retry.
FINAL_STATUSES = frozenset({410})
# Lease beyond the attempt's own bounds, so a slow attempt is never claimed twice.
LEASE_MARGIN_S = 30.0


class RetryLater(Exception):
    """The message stays on the queue (its visibility was set to the backoff); report it as a failed item."""


@dataclass
class Worker:
    deliveries: DeliveryStore
    sqs: Any
    secrets: SecretCache
    settings: DeliverySettings
    resolve: Resolver | None = None
    clock: Callable[[], float] = time.time
    rand: Callable[[], float] = field(default=random.random)

    def handle(self, record: dict[str, Any]) -> str:
        """Process one SQS record; returns the outcome, or raises RetryLater."""
        message = json.loads(record["body"])
        notice = message["notice"]
        run_id, notice_id = notice["runId"], notice["id"]
        cfg = self.settings
        lease_s = cfg.connect_timeout_s + cfg.total_timeout_s + LEASE_MARGIN_S
        claim = self.deliveries.claim(run_id, notice_id, notice["type"], self.clock(), lease_s)
        if claim.outcome == "done":
            logger.info("notice already settled; duplicate message dropped", extra={"noticeId": notice_id})
            return "duplicate"
        if claim.outcome == "busy":
            self._hide(record, claim.retry_in_s)
            raise RetryLater(f"notice {notice_id} is being delivered by another worker")

        attempt = claim.attempt
        started = self.clock()
        attempt_record: dict[str, Any] = {
            "noticeId": notice_id,
            "webhookId": notice_id,
            "type": notice["type"],
            "attempt": attempt,
            "at": iso_epoch(started),
        }
        if notice.get("nodeId"):
            attempt_record["nodeId"] = notice["nodeId"]
        retry_after: int | None = None
        final = False
        try:
            target = check_url(message["callbackUrl"], resolve=self.resolve, allow_loopback=cfg.allow_loopback)
            body = json.dumps(notice, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
            timestamp = int(self.clock())
            headers = {
                "Content-Type": "application/json",
                "User-Agent": USER_AGENT,
                **webhook_headers(self.secrets.signing_secrets(message["tenant"]), notice_id, timestamp, body),
            }
            response = post_pinned(
                target,
                body.encode(),
                headers,
                connect_timeout=cfg.connect_timeout_s,
                total_timeout=cfg.total_timeout_s,
                max_response_bytes=cfg.max_response_bytes,
                ca_file=cfg.ca_file,
            )
            attempt_record.update({"status": "succeeded", "httpStatus": response.status})
        except EgressRefused:
            # One class for every refused destination: the tenant learns nothing about internal addresses.
            attempt_record.update({"status": "failed", "errorClass": "egress_denied"})
        except DeliveryFailed as failed:
            attempt_record.update({"status": "failed", "errorClass": failed.error_class})
            if failed.status is not None:
                attempt_record["httpStatus"] = failed.status
                final = failed.status in FINAL_STATUSES
            retry_after = _seconds(failed.retry_after)
        except Exception:  # a signing secret that cannot be read, a bug: recorded and retried like any failure
            logger.exception("delivery attempt failed inside the worker", extra={"noticeId": notice_id})
            attempt_record.update({"status": "failed", "errorClass": "internal"})
        attempt_record["elapsedMs"] = int((self.clock() - started) * 1000)

        if attempt_record["status"] == "succeeded":
            self.deliveries.finish(run_id, notice_id, attempt, attempt_record, "delivered")
            return "delivered"
        if final or attempt >= cfg.max_attempts:
            attempt_record["final"] = True
            history = [*self.deliveries.attempts(run_id, notice_id), attempt_record]
            # The dead letter goes first: a crash after it leaves a duplicate dead letter, never a lost one.
            self.sqs.send_message(
                QueueUrl=cfg.dlq_url,
                MessageBody=json.dumps(
                    dead_letter(message, public_attempts(history), iso_epoch(self.clock())), allow_nan=False
                ),
            )
            self.deliveries.finish(run_id, notice_id, attempt, attempt_record, "dead")
            return "dead"
        self.deliveries.finish(run_id, notice_id, attempt, attempt_record, "pending")
        delay = backoff_s(attempt, cfg.backoff_base_s, cfg.backoff_cap_s, self.rand)
        if retry_after is not None:
            delay = max(delay, min(retry_after, int(cfg.backoff_cap_s)))
        self._hide(record, delay)
        raise RetryLater(f"attempt {attempt} of notice {notice_id} failed ({attempt_record.get('errorClass')})")

    def _hide(self, record: dict[str, Any], seconds: int) -> None:
        self.sqs.change_message_visibility(
            QueueUrl=self.settings.queue_url,
            ReceiptHandle=record["receiptHandle"],
            VisibilityTimeout=max(0, min(int(seconds), 12 * 3600)),
        )


def _seconds(retry_after: str | None) -> int | None:
    if retry_after and retry_after.strip().isdigit():
        return int(retry_after.strip())
    return None
