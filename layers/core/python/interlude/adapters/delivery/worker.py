"""The callback delivery worker: one SQS message (a notice or a transition's notices) a call, at least once, never lost.

A leased worker (adapters.leased_work) that records each attempt after it rather than claiming it (one write per
attempt, ADR 0129: a receiver deduplicates by `webhook-id`): the retries with backoff and the dead letter are the
template's. One attempt checks the callback URL again with the egress guard (resolving the host anew), signs the exact body
with Standard Webhooks headers, POSTs it over a connection pinned to the checked addresses, and records the
attempt. The dead letter (identity and delivery history, no body, token or secret) goes to the DLQ. A message may carry
the notices of one transition (format 10, ADR 0155): one delivery whose attempt dials each notice not settled yet, in
order (store/deliveries.py), each with its own `webhook-id`, attempts and dead letter; a notice whose round would begin
too late in its message's life for the receives its queue allows begins it in a copy of the message (ADR 0198). A
message that fails on the last receive its queue allows is dead-lettered here too, without another attempt (`handle`).
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from aws_lambda_powertools import Logger

from interlude import wiring
from interlude.adapters.delivery.pinned_http import DeliveryFailed, post_pinned
from interlude.adapters.delivery.retry import (
    attempts_made,
    dead_letter,
    dropped_links,
    receives,
    sent_at,
    without_links,
)
from interlude.adapters.delivery.signing import SecretCache, webhook_headers
from interlude.adapters.delivery.subscriptions import (
    MESSAGE_KIND,
    SubscriptionSecretCache,
    dead_letter_record,
    delivery_bytes,
    delivery_headers,
)
from interlude.adapters.held_work import admitted, message_body, queue_destination, read_message
from interlude.adapters.leased_work import DEAD, Attempted, LeasedWorker, OutOfTime, Work, retry_after_s
from interlude.adapters.subscription_secrets import subscription_secrets
from interlude.app.caught import caught
from interlude.config.delivery import WAITS_WITHIN_S, DeliverySettings, worst_case_wait_s
from interlude.domain.clock import iso_epoch
from interlude.rules.egress import EgressRefused, Resolver, check_url
from interlude.rules.notice_bundles import applied, bundle_status
from interlude.store.deliveries import (
    BUNDLE,
    HISTORY,
    RECEIVES_EXHAUSTED,
    DeliveryStore,
    Notice,
    bundle_parts,
    bundle_ref,
    public_attempts,
)
from interlude.store.layout import message_created_expiry, message_table
from interlude.store.leases import PENDING, Claim
from interlude.store.tenant_standing import TenantStanding
from interlude.store.webhooks import WebhookStore

logger = Logger(service="interlude-callbacks", child=True)
USER_AGENT = "interlude-callbacks/1"
# A callback receiver answering 410 Gone asks never to be called again for this notice: no retry. A webhook
# subscription's delivery has no such exception (webhooks.md §Durability retries every failure, and a dead letter's
# reason is retries_exhausted or payload_unprojectable): its 410 is retried like a 500.
CALLBACK_FINAL_STATUSES = frozenset({410})
# An attempt's bound with a margin (Work.lease_s): honoured as a claim's lease by the workers that claim; this one
# claims nothing, and the callbacks queue's visibility timeout (540 s) is far beyond it, so a message is not handed
# out again while its attempt runs.
LEASE_MARGIN_S = 30.0
# A dial begins only with its bound (the total timeout) and this much more left in the invocation: its host name's
# lookup (rules/egress.LOOKUP_TIMEOUT_S) comes before it, its record's write and the batch's report after it. A
# bundle's notices are dialled one after another, each within its bound, so without this a receiver answering each
# slowly would hold the invocation past the function's timeout (ADR 0181).
DIAL_MARGIN_S = 5.0
# Receives SQS allows a message before it moves it, as queued, to the dead letters: notice, decision link and all.
MAX_RECEIVES = wiring.queue("callbacks").max_receive_count
HELD = "held"
# A bundle whose next notice's round would outlast its message's receives goes on in a copy of its message (ADR 0198).
PASSED_ON = "passed-on"


class Unprojectable(Exception):
    """The delivery's body cannot be made (its event is not in the log): dead-lettered on the first attempt."""


@dataclass(frozen=True)
class Outgoing(Work[Notice]):
    """One delivery, whatever sends it: a callback notice or a webhook subscription's event."""

    url: str
    # The attempt record's identity fields: noticeId (the delivery's id in the run), type, and who it is for.
    fields: dict[str, Any]
    # (timestamp) -> (the exact body bytes, the signature headers)
    signed: Callable[[int], tuple[bytes, dict[str, str]]]
    # (delivery history, unprojectable) -> None: keep the content-free dead letter.
    dead: Callable[[list[dict[str, Any]], bool], None]
    # Statuses that end the delivery at once (dead-lettered, never retried).
    final_statuses: frozenset[int] = frozenset()
    # A bundle's notices (format 10), each an Outgoing of its own, dialled in order; () for one notice alone.
    parts: tuple[Outgoing, ...] = ()
    # How many times SQS has handed out its message, this time included; when it was sent (None: not said).
    receives: int = 1
    sent_at: float | None = None


@dataclass
class Worker(LeasedWorker[Outgoing]):
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
    # Seconds left in the invocation (the handler's Lambda context); unbounded outside one.
    time_left_s: Callable[[], float] = field(default=lambda: math.inf)
    # Whether a message's tenant may act now (None: every tenant may: a worker outside a function).
    standing: TenantStanding | None = None

    CLAIMS = False
    MESSAGE = "callback"

    @property
    def ledger(self) -> DeliveryStore:
        return self.deliveries

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
        """The message's delivery (LeasedWorker.handle), once its tenant may act (`tenant_acts`). One that fails on its
        last receive, its attempts not run out (a crash each time, invocations without time for its dial, a hold that
        cannot be written), is dead-lettered here and taken off the queue, rather than left for SQS to move it to the
        dead letters as queued, decision links and all: as its attempts running out would have it
        (`_dead_unattempted`, ADR 0190), or, when its record cannot be read or written, as queued without its links,
        to be sent back once the cause is fixed (ADR 0185). A bundle whose next notice's round would outlast its message
        goes on in a copy of it (`_attempt_bundle`), sent here once the attempt is recorded: `PASSED_ON`."""
        try:
            if not self.tenant_acts(record["body"]):
                return HELD
            outcome = super().handle(record)
        except Exception:
            if receives(record) < MAX_RECEIVES:
                raise
            caught(logger, "callback-last-receive", "a message failed on its last receive; dead-lettered")
            ended = self._dead_unattempted(record)
            if ended is not None:
                return ended
            kept = without_links(record["body"])
            if kept is None:
                raise
            self._to_dlq(kept)
            return DEAD
        if outcome != PENDING:
            return outcome
        # A bundle's attempt recorded, its next notice's round left to a copy of its message (`_attempt_bundle`): sent
        # after the record, so the copy dials only what the record leaves pending. A copy that cannot be sent fails the
        # message, which comes back and passes it on again.
        tenant = str(message_body(record["body"])["tenant"])
        self.sqs.send_message(QueueUrl=self.settings.queue_url, MessageBody=record["body"], MessageGroupId=tenant)
        return PASSED_ON

    def tenant_acts(self, body: str) -> bool:
        """Whether the message's tenant may act now; if not, the message was held for its resume (or dropped: the
        tenant is going). It is held without its notices' decision links, so no credential is kept while the tenant
        is suspended; its resume mints them anew, living from then (interlude.adapters.tenant_outside, ADR 0190)."""
        if self.standing is None:
            return True
        return admitted(self.standing, queue_destination("callbacks"), dropped_links(message_body(body)))

    def _dead_unattempted(self, record: dict[str, Any]) -> str | None:
        """The delivery of a message on its last receive dead-lettered without another attempt: each of its notices
        still pending gets its dead letter and, in its record, the line that says so (no attempt number), and its
        record is dead, so its tenant reads it dead and may send it again (store/deliveries.py). The outcome; None
        when it cannot be done (the message is unreadable, its record unread or unwritten, or leased by the release
        before)."""
        try:
            work = self.receive(read_message(record["body"], self.MESSAGE))
            if isinstance(work, str):
                return work
            seen = self.deliveries.look(work.ref, self.clock())
            if seen.outcome == "settled":
                return "duplicate"
            if seen.outcome != "open":
                return None
            now = self.clock()
            if work.parts:
                parts = zip(bundle_parts(work.ref, seen.held), work.parts, strict=True)
                kept = seen.held.get(HISTORY, ())
                pending = [(o, [r for r in kept if r.get("noticeId") == p["id"]]) for p, o in parts if not p.get("status")]
            else:
                pending = [(work, self.deliveries.attempts(work.ref.run_id, work.ref.notice_id))]
            ended = []
            for outgoing, earlier in pending:
                given_up = {"status": "failed", "errorClass": RECEIVES_EXHAUSTED, "final": True}
                line = {**outgoing.fields, "at": iso_epoch(now), **given_up}
                # Its dead letter before the write that records it: a crash between leaves a duplicate, never none.
                outgoing.dead([*earlier, line], False)
                ended.append(line)
            return DEAD if self.deliveries.dead_unattempted(work.ref, seen, ended, now) else None
        except Exception:
            caught(logger, "callback-last-receive-record", "a delivery could not be recorded dead; kept as queued")
            return None

    def received(self, record: dict[str, Any]) -> Outgoing | str:
        work = super().received(record)
        return work if isinstance(work, str) else replace(work, receives=receives(record), sent_at=sent_at(record))

    def receive(self, message: dict[str, Any]) -> Outgoing | str:
        if message.get("kind") == MESSAGE_KIND:
            return self._webhook(message)
        if BUNDLE in message:
            return self._bundle(message)
        return self._notice(message, message["notice"])

    def _notice(self, message: dict[str, Any], notice: dict[str, Any]) -> Outgoing:
        """A callback notice of `message` (the notice it carries, or one of its bundle's)."""
        tenant = message["tenant"]

        def signed(timestamp: int) -> tuple[bytes, dict[str, str]]:
            body = json.dumps(notice, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
            return body.encode(), webhook_headers(self.secrets.signing_secrets(tenant), notice["id"], timestamp, body)

        def dead(history: list[dict[str, Any]], unprojectable: bool) -> None:
            alone = {k: v for k, v in message.items() if k != BUNDLE}
            self._to_dlq(dead_letter({**alone, "notice": notice}, public_attempts(history), iso_epoch(self.clock())))

        fields = {"noticeId": notice["id"], "webhookId": notice["id"], "type": notice["type"]}
        if notice.get("nodeId"):
            fields["nodeId"] = notice["nodeId"]
        label = f"notice {notice['id']}"
        ref = Notice(
            notice["runId"],
            notice["id"],
            notice["type"],
            notice.get("sequence"),
            where=message_table(message),
            created_expiry=message_created_expiry(message),
        )
        return self._outgoing(ref, label, message["callbackUrl"], fields, signed, dead, CALLBACK_FINAL_STATUSES)

    def _bundle(self, message: dict[str, Any]) -> Outgoing:
        """The notices of one transition (format 10): one delivery, its notices dialled in order (`attempt`)."""
        parts = tuple(self._notice(message, notice) for notice in message[BUNDLE])
        first = parts[0]
        ref = bundle_ref(first.ref.run_id, list(message[BUNDLE]), first.ref.where, first.ref.created_expiry)
        # Its attempt may dial every notice: its bound is theirs together.
        return replace(first, ref=ref, label=f"notices {ref.notice_id}+", lease_s=first.lease_s * len(parts), parts=parts)

    def _webhook(self, message: dict[str, Any]) -> Outgoing | str:
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
            kept = dead_letter_record(message, attempts_made(history), reason, statuses[-1] if statuses else None, self.clock())
            # The readable sink first (GET /webhooks/{id}/dead-letters), then the operators' queue (alarmed).
            self.webhooks.put_dead_letter(kept)
            self._to_dlq({"v": 1, "kind": MESSAGE_KIND, "tenant": message["tenant"], **kept})

        fields = {
            "noticeId": message["deliveryId"],
            "subscriptionId": webhook_id,
            "type": message["eventType"],
        }
        ref = Notice(
            run_id, message["deliveryId"], message["eventType"], message["sequence"], webhook_id, where=message_table(message)
        )
        return self._outgoing(ref, f"delivery {message['deliveryId']}", subscription["url"], fields, signed, dead)

    def _outgoing(
        self,
        ref: Notice,
        label: str,
        url: str,
        fields: dict[str, Any],
        signed: Callable[[int], tuple[bytes, dict[str, str]]],
        dead: Callable[[list[dict[str, Any]], bool], None],
        final_statuses: frozenset[int] = frozenset(),
    ) -> Outgoing:
        cfg = self.settings
        return Outgoing(
            ref=ref,
            label=label,
            lease_s=cfg.connect_timeout_s + cfg.total_timeout_s + LEASE_MARGIN_S,
            max_attempts=cfg.max_attempts,
            url=url,
            fields=fields,
            signed=signed,
            dead=dead,
            final_statuses=final_statuses,
        )

    def replay(self, work: Outgoing, claim: Claim) -> str:
        logger.info("notice already settled; duplicate message dropped", extra={"noticeId": work.ref.notice_id})
        return "duplicate"

    def attempt(self, work: Outgoing, claim: Claim) -> Attempted:
        """One guarded, signed, pinned POST, and its attempt record."""
        if work.parts:
            return self._attempt_bundle(work, claim)
        if not self._time_for_a_dial():
            raise OutOfTime
        record, retry_after, final = self._dial(work, claim.attempt)
        if record["status"] == "succeeded":
            return Attempted("delivered", record)
        return Attempted(None, record, final=final, retry_after_s=retry_after, why=record["errorClass"])

    def _attempt_bundle(self, work: Outgoing, claim: Claim) -> Attempted:
        """A POST of each notice not settled yet, in order, until one fails and may be tried again: a notice whose
        round of attempts ran out (or that failed for good) is dead-lettered on its own, and the next one is dialled.
        When the invocation has no time for the next dial, the notices dialled so far are recorded and the rest wait
        for the message's next receive."""
        notices = bundle_parts(work.ref, claim.held)
        records: list[dict[str, Any]] = []
        for part, outgoing in zip(notices, work.parts, strict=True):
            if part.get("status"):
                continue
            if records and int(part["tries"]) == int(part.get("since", 0)) and not self._round_fits(work):
                # The notice before it settled on this receive, late in its message's life: SQS would take the message
                # to its dead letters, or drop it at its retention, before this notice's round ran out. Its round
                # begins in a copy of the message, with every receive a notice alone has and a retention of its own
                # (`handle` sends it once this attempt is recorded).
                return Attempted(PENDING, {"records": records})
            if not self._time_for_a_dial():
                if not records:
                    raise OutOfTime
                # No notice's attempt failed (in_round 0): the message comes back after the first backoff.
                return Attempted(None, {"records": records}, why="out of time", in_round=0)
            record, retry_after, final = self._dial(outgoing, int(part["tries"]) + 1)
            records.append(record)
            if record["status"] == "succeeded":
                continue
            in_round = record["attempt"] - int(part.get("since", 0))
            if not final and in_round < work.max_attempts:
                kept = {"records": records}
                return Attempted(None, kept, retry_after_s=retry_after, why=record["errorClass"], in_round=in_round)
            # Its dead letter before the write that records it: a crash between leaves a duplicate, never none.
            record["final"] = True
            earlier = [r for r in claim.held.get(HISTORY, ()) if r.get("noticeId") == part["id"]]
            outgoing.dead([*earlier, record], False)
        status = bundle_status(applied(notices, records)[0])
        return Attempted(status, {"records": records})

    def _round_fits(self, work: Outgoing) -> bool:
        """Whether a notice's whole round, from this receive on, fits in the receives its message has left, and, each
        of its waits at the backoff's cap, ends while SQS keeps the message (config.delivery.WAITS_WITHIN_S)."""
        if MAX_RECEIVES - work.receives + 1 < work.max_attempts:
            return False
        if work.sent_at is None:
            return True
        waits = worst_case_wait_s(work.max_attempts, self.settings.backoff_cap_s)
        return self.clock() - work.sent_at + waits <= WAITS_WITHIN_S

    def _time_for_a_dial(self) -> bool:
        return self.time_left_s() >= self.settings.total_timeout_s + DIAL_MARGIN_S

    def _dial(self, outgoing: Outgoing, attempt: int) -> tuple[dict[str, Any], int | None, bool]:
        """One POST of `outgoing` as its attempt number `attempt`: its record, its Retry-After seconds, whether final."""
        started = self.clock()
        record: dict[str, Any] = {**outgoing.fields, "attempt": attempt, "at": iso_epoch(started)}
        retry_after, final = self._post(outgoing, record)
        record["elapsedMs"] = int((self.clock() - started) * 1000)
        return record, retry_after, final

    def _post(self, outgoing: Outgoing, attempt_record: dict[str, Any]) -> tuple[int | None, bool]:
        """Fills `attempt_record` with the outcome; (Retry-After seconds, final)."""
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
            return None, True
        except DeliveryFailed as failed:
            attempt_record.update({"status": "failed", "errorClass": failed.error_class})
            if failed.status is not None:
                attempt_record["httpStatus"] = failed.status
            return retry_after_s(failed.retry_after), failed.status in outgoing.final_statuses
        except Exception:  # a signing secret that cannot be read, a bug: recorded and retried like any failure
            caught(logger, "delivery-attempt", "delivery attempt failed inside the worker", noticeId=attempt_record["noticeId"])
            attempt_record.update({"status": "failed", "errorClass": "internal"})
        return None, False

    def send_dead_letter(self, work: Outgoing, attempted: Attempted) -> None:
        attempted.kept["final"] = True
        history = [*self.deliveries.attempts(work.ref.run_id, work.ref.notice_id), attempted.kept]
        work.dead(history, attempted.kept["errorClass"] == "unprojectable")

    def _to_dlq(self, record: dict[str, Any]) -> None:
        self.sqs.send_message(QueueUrl=self.settings.dlq_url, MessageBody=json.dumps(record, allow_nan=False))

