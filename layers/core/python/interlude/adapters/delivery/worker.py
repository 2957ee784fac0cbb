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
from interlude.adapters.delivery.subscriptions import (
    MESSAGE_KIND,
    SubscriptionSecretCache,
    dead_letter_record,
    delivery_bytes,
    delivery_headers,
)
from interlude.app.caught import caught
from interlude.config.delivery import DeliverySettings
from interlude.domain.clock import iso_epoch
from interlude.rules.egress import EgressRefused, Resolver, check_url
from interlude.store.deliveries import DeliveryStore, public_attempts
from interlude.store.webhooks import WebhookStore, subscription_secrets

logger = Logger(service="interlude-callbacks", child=True)
USER_AGENT = "interlude-callbacks/1"
# A callback receiver answering 410 Gone asks never to be called again for this notice: no retry. A webhook
# subscription's delivery has no such exception (webhooks.md §Durability retries every failure, and a dead letter's
# reason is retries_exhausted or payload_unprojectable): its 410 is retried like a 500.
CALLBACK_FINAL_STATUSES = frozenset({410})
# Lease beyond the attempt's own bounds, so a slow attempt is never claimed twice.
LEASE_MARGIN_S = 30.0


class RetryLater(Exception):
    """The message stays on the queue (its visibility was set to the backoff); report it as a failed item."""


class Unprojectable(Exception):
    """The delivery's body cannot be made (its event is not in the log): dead-lettered on the first attempt."""


@dataclass(frozen=True)
class Outgoing:
    """One delivery, whatever sends it: a callback notice or a webhook subscription's event."""

    run_id: str
    url: str
    # The attempt record's identity fields: noticeId (the delivery's id in the run), type, and who it is for.
    fields: dict[str, Any]
    # (timestamp) -> (the exact body bytes, the signature headers)
    signed: Callable[[int], tuple[bytes, dict[str, str]]]
    # (delivery history, unprojectable) -> None: keep the content-free dead letter.
    dead: Callable[[list[dict[str, Any]], bool], None]
    # Statuses that end the delivery at once (dead-lettered, never retried).
    final_statuses: frozenset[int] = frozenset()


@dataclass
class Worker:
    deliveries: DeliveryStore
    sqs: Any
    secrets: SecretCache
    settings: DeliverySettings
    resolve: Resolver | None = None
    clock: Callable[[], float] = time.time
    rand: Callable[[], float] = field(default=random.random)
    # Webhook subscriptions (issue 14): the subscription and event reads and the dead-letter sink (None: over the
    # deliveries' table), and their secrets (None: the deployment's, read from Secrets Manager when first needed).
    webhook_store: WebhookStore | None = None
    subscription_secret_cache: SubscriptionSecretCache | None = None

    @property
    def webhooks(self) -> WebhookStore:
        if self.webhook_store is None:
            self.webhook_store = WebhookStore(self.deliveries.table, self.deliveries.client)
        return self.webhook_store

    @property
    def subscription_secrets(self) -> SubscriptionSecretCache:
        if self.subscription_secret_cache is None:
            self.subscription_secret_cache = SubscriptionSecretCache(subscription_secrets())
        return self.subscription_secret_cache

    def handle(self, record: dict[str, Any]) -> str:
        """Process one SQS record; returns the outcome, or raises RetryLater."""
        message = json.loads(record["body"])
        if message.get("kind") == MESSAGE_KIND:
            return self._webhook(record, message)
        notice = message["notice"]
        tenant = message["tenant"]

        def signed(timestamp: int) -> tuple[bytes, dict[str, str]]:
            body = json.dumps(notice, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
            return body.encode(), webhook_headers(self.secrets.signing_secrets(tenant), notice["id"], timestamp, body)

        def dead(history: list[dict[str, Any]], unprojectable: bool) -> None:
            self._to_dlq(dead_letter(message, public_attempts(history), iso_epoch(self.clock())))

        fields = {"noticeId": notice["id"], "webhookId": notice["id"], "type": notice["type"]}
        if notice.get("nodeId"):
            fields["nodeId"] = notice["nodeId"]
        outgoing = Outgoing(notice["runId"], message["callbackUrl"], fields, signed, dead, CALLBACK_FINAL_STATUSES)
        return self._deliver(record, outgoing)

    def _webhook(self, record: dict[str, Any], message: dict[str, Any]) -> str:
        """A webhook subscription's delivery: only while the subscription exists, of the event as persisted."""
        webhook_id, run_id = message["webhookId"], message["runId"]
        subscription = self.webhooks.get(webhook_id)
        if subscription is None:
            logger.info("subscription gone; delivery dropped", extra={"webhookId": webhook_id})
            return "unsubscribed"

        def signed(timestamp: int) -> tuple[bytes, dict[str, str]]:
            event = self.webhooks.read_event(run_id, message["sequence"])
            if event is None:
                raise Unprojectable(f"event {message['sequence']} of the run is not in its log")
            body = delivery_bytes(run_id, event)
            v1_secret, secrets = self.subscription_secrets.signing(subscription, self.clock())
            return body, delivery_headers(message, v1_secret, secrets, timestamp, body)

        def dead(history: list[dict[str, Any]], unprojectable: bool) -> None:
            statuses = [a["httpStatus"] for a in history if "httpStatus" in a]
            reason = "payload_unprojectable" if unprojectable else "retries_exhausted"
            kept = dead_letter_record(message, len(history), reason, statuses[-1] if statuses else None, self.clock())
            # The readable sink first (GET /webhooks/{id}/dead-letters), then the operators' queue (alarmed).
            self.webhooks.put_dead_letter(kept)
            self._to_dlq({"v": 1, "kind": MESSAGE_KIND, "tenant": message["tenant"], **kept})

        fields = {
            "noticeId": message["deliveryId"],
            "subscriptionId": webhook_id,
            "type": message["eventType"],
        }
        return self._deliver(record, Outgoing(run_id, subscription["url"], fields, signed, dead))

    def _deliver(self, record: dict[str, Any], outgoing: Outgoing) -> str:
        """Claim the next attempt, send it, record it: delivered, dead (after the last attempt) or RetryLater."""
        run_id, item_id = outgoing.run_id, outgoing.fields["noticeId"]
        cfg = self.settings
        lease_s = cfg.connect_timeout_s + cfg.total_timeout_s + LEASE_MARGIN_S
        claim = self.deliveries.claim(run_id, item_id, outgoing.fields["type"], self.clock(), lease_s)
        if claim.outcome == "done":
            logger.info("notice already settled; duplicate message dropped", extra={"noticeId": item_id})
            return "duplicate"
        if claim.outcome == "busy":
            self._hide(record, claim.retry_in_s)
            raise RetryLater(f"{item_id} is being delivered by another worker")

        attempt = claim.attempt
        started = self.clock()
        attempt_record: dict[str, Any] = {**outgoing.fields, "attempt": attempt, "at": iso_epoch(started)}
        retry_after, final, unprojectable = self._attempt(outgoing, attempt_record)
        attempt_record["elapsedMs"] = int((self.clock() - started) * 1000)

        if attempt_record["status"] == "succeeded":
            self.deliveries.finish(run_id, item_id, attempt, attempt_record, "delivered")
            return "delivered"
        if final or attempt >= cfg.max_attempts:
            attempt_record["final"] = True
            history = [*self.deliveries.attempts(run_id, item_id), attempt_record]
            # The dead letter goes first: a crash after it leaves a duplicate dead letter, never a lost one.
            outgoing.dead(history, unprojectable)
            self.deliveries.finish(run_id, item_id, attempt, attempt_record, "dead")
            return "dead"
        self.deliveries.finish(run_id, item_id, attempt, attempt_record, "pending")
        delay = backoff_s(attempt, cfg.backoff_base_s, cfg.backoff_cap_s, self.rand)
        if retry_after is not None:
            delay = max(delay, min(retry_after, int(cfg.backoff_cap_s)))
        self._hide(record, delay)
        raise RetryLater(f"attempt {attempt} of {item_id} failed ({attempt_record.get('errorClass')})")

    def _attempt(self, outgoing: Outgoing, attempt_record: dict[str, Any]) -> tuple[int | None, bool, bool]:
        """One guarded, signed, pinned POST; fills `attempt_record`. (Retry-After seconds, final, unprojectable)."""
        cfg = self.settings
        try:
            target = check_url(outgoing.url, resolve=self.resolve, allow_loopback=cfg.allow_loopback)
            body, signed_headers = outgoing.signed(int(self.clock()))
            headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT, **signed_headers}
            response = post_pinned(
                target,
                body,
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
        except Unprojectable:
            # Retrying cannot change it: dead at once (OpenWOP webhooks.md §Durability).
            attempt_record.update({"status": "failed", "errorClass": "unprojectable"})
            return None, True, True
        except DeliveryFailed as failed:
            attempt_record.update({"status": "failed", "errorClass": failed.error_class})
            if failed.status is not None:
                attempt_record["httpStatus"] = failed.status
            return _seconds(failed.retry_after), failed.status in outgoing.final_statuses, False
        except Exception:  # a signing secret that cannot be read, a bug: recorded and retried like any failure
            caught(logger, "delivery-attempt", "delivery attempt failed inside the worker", noticeId=attempt_record["noticeId"])
            attempt_record.update({"status": "failed", "errorClass": "internal"})
        return None, False, False

    def _to_dlq(self, record: dict[str, Any]) -> None:
        self.sqs.send_message(QueueUrl=self.settings.dlq_url, MessageBody=json.dumps(record, allow_nan=False))

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
