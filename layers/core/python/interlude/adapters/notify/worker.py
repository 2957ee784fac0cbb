"""The notify worker (issue 14): one SQS message is one recipient's notification, sent over their channels.

For each message: claim the next attempt of the notification (a copy of a settled one stops here); read the run
and skip when there is nothing left to ask (the gate settled, or — for a reminder — the recipient voted); read
the recipient's directory entry; mint their personal decision link; send each of their channels not yet sent
(e-mail through SES, Slack through the tenant's incoming webhook or bot token, egress-checked and pinned like
callbacks); record every channel's outcome. A failed channel is retried with backoff (the message's visibility),
and after the last attempt a content-free dead letter goes to the DLQ. Nothing here blocks a resolve.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Logger
from botocore.exceptions import BotoCoreError, ClientError

from interlude.adapters.delivery.pinned_http import DeliveryFailed, post_pinned
from interlude.adapters.delivery.retry import backoff_s
from interlude.adapters.notify.messages import (
    ESCALATION,
    RAISED,
    Content,
    is_reminder,
    mime_email,
    reminder_asks,
    slack_message,
)
from interlude.app.caught import caught
from interlude.config.notify import NotifySettings
from interlude.domain.clock import iso_epoch
from interlude.domain.ids import secret_name
from interlude.domain.models.principals import PrincipalEntry, zone_of
from interlude.domain.models.run import OpenInterrupt, RunState
from interlude.rules.egress import EgressRefused, Resolver, check_url
from interlude.rules.tokens.issuer import interrupt_token
from interlude.rules.tokens.scheme import KeyRing
from interlude.store import Store
from interlude.store.directory import DirectoryStore
from interlude.store.notifications import NotificationStore

logger = Logger(service="interlude-notify", child=True)
USER_AGENT = "interlude-notify/1"
LEASE_MARGIN_S = 30.0
SLACK_SECRET_CACHE_S = 60.0


class RetryLater(Exception):
    """The message stays on the queue (its visibility was set to the backoff); report it as a failed item."""


class ChannelFailed(Exception):
    def __init__(self, error_class: str, final: bool = False) -> None:
        super().__init__(error_class)
        self.error_class = error_class
        self.final = final


class NotConfigured(Exception):
    """The channel is not set up for this deployment or tenant: nothing to retry."""


@dataclass
class Worker:
    store: Store
    sqs: Any
    ses: Any
    secrets: Any
    ring: Callable[[], KeyRing]
    settings: NotifySettings
    resolve: Resolver | None = None
    clock: Callable[[], float] = time.time
    rand: Callable[[], float] = field(default=random.random)
    ca_file: str | None = None
    _slack: dict[str, tuple[float, dict[str, Any] | None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.notifications = NotificationStore(self.store)
        self.directory = DirectoryStore(self.store)

    # -- one message ------------------------------------------------------------------------------------

    def handle(self, record: dict[str, Any]) -> str:
        """Process one SQS record; returns the outcome (sent, skipped, dead, duplicate) or raises RetryLater."""
        message = json.loads(record["body"])
        run_id, nid = message["runId"], message["id"]
        cfg = self.settings
        lease_s = 2 * (cfg.connect_timeout_s + cfg.total_timeout_s) + LEASE_MARGIN_S
        initial = {
            "notificationId": nid,
            "principalId": message["principalId"],
            "purpose": message["purpose"],
            "nodeId": message["nodeId"],
            "interruptId": message["interruptId"],
            "queuedAt": iso_epoch(self.clock()),
            "channels": {},
        }
        if message.get("cut"):
            # The gate named more recipients than one visit notifies (app.directory.MAX_RECIPIENTS).
            initial["recipientsCut"] = True
        claim = self.notifications.claim(run_id, nid, initial, self.clock(), lease_s)
        if claim.outcome == "done":
            return "duplicate"
        if claim.outcome == "busy":
            self._hide(record, claim.retry_in_s)
            raise RetryLater(f"notification {nid} is being sent by another worker")
        kept = dict(claim.record or initial)
        kept["channels"] = dict(kept.get("channels") or {})
        try:
            status = self._attempt(message, kept, claim.attempt)
        except Exception:  # a bug or an unreadable store: recorded and retried like any failure
            caught(logger, "notification-attempt", "notification attempt failed inside the worker", notificationId=nid)
            kept["error"] = "internal"
            status = "failed"
        if status in ("sent", "skipped"):
            self.notifications.settle(run_id, nid, claim.attempt, kept, status)
            return status
        if claim.attempt >= cfg.max_attempts:
            kept["final"] = True
            # The dead letter goes first: a crash after it leaves a duplicate dead letter, never a lost one.
            self.sqs.send_message(QueueUrl=cfg.dlq_url, MessageBody=json.dumps(self._dead_letter(message, kept), allow_nan=False))
            self.notifications.settle(run_id, nid, claim.attempt, kept, "dead")
            return "dead"
        self.notifications.settle(run_id, nid, claim.attempt, kept, "pending")
        self._hide(record, backoff_s(claim.attempt, cfg.backoff_base_s, cfg.backoff_cap_s, self.rand))
        raise RetryLater(f"attempt {claim.attempt} of notification {nid} failed")

    def _attempt(self, message: dict[str, Any], kept: dict[str, Any], attempt: int) -> str:
        """sent | skipped | failed; `kept` gains the reason or each channel's outcome."""
        got = self.store.get_run(message["runId"])
        if got is None:
            kept["reason"] = "run_gone"
            return "skipped"
        state, _ = got
        pid = message["principalId"]
        interrupt = state.interrupts.get(message["nodeId"])
        if message["purpose"] != ESCALATION:
            if interrupt is None or interrupt.interruptId != message["interruptId"]:
                kept["reason"] = "settled"
                return "skipped"
            if is_reminder(message["purpose"]) and not reminder_asks(interrupt, message):
                kept["reason"] = "voted"
                return "skipped"
        record = self.directory.get(state.tenant, pid)
        entry = PrincipalEntry.model_validate(record["entry"]) if record else None
        if entry is None:
            kept["reason"] = "not_in_directory"
            return "skipped"
        channels = entry.reachable_channels()
        if not channels:
            kept["reason"] = "no_channel"
            return "skipped"
        content = self._content(state, message, interrupt, entry)
        failed = False
        for channel in channels:
            previous = kept["channels"].get(channel) or {}
            if previous.get("outcome") in ("sent", "not_configured"):
                continue
            outcome: dict[str, Any] = {"attempt": attempt, "at": iso_epoch(self.clock())}
            try:
                if channel == "email":
                    self._email(entry, content)
                else:
                    self._slack_post(state.tenant, entry, content)
                outcome["outcome"] = "sent"
            except NotConfigured:
                outcome["outcome"] = "not_configured"
            except ChannelFailed as exc:
                outcome.update({"outcome": "failed", "errorClass": exc.error_class})
                failed = failed or not exc.final
            kept["channels"][channel] = outcome
        if failed:
            return "failed"
        if not any(c.get("outcome") == "sent" for c in kept["channels"].values()):
            kept["reason"] = "not_configured"
            return "skipped"
        return "sent"

    # -- what it says ---------------------------------------------------------------------------------

    def _content(
        self, state: RunState, message: dict[str, Any], interrupt: OpenInterrupt | None, entry: PrincipalEntry
    ) -> Content:
        if message["purpose"] == ESCALATION or interrupt is None:
            title, description, deadline, link, actions = message.get("title") or message["nodeId"], "", None, None, ()
        else:
            data = interrupt.payload.get("data") or {}
            title = str(data.get("title") or data.get("prompt") or f"{interrupt.kind} at {interrupt.nodeId}")
            description = str(data.get("description") or "")
            deadline = interrupt.deadline
            actions = tuple(data.get("actions") or ())
            link = self._link(state, interrupt, message)
        return Content(
            purpose=message["purpose"],
            title=title,
            description=description,
            workflow_id=state.workflowId,
            run_id=state.runId,
            link=link,
            deadline=deadline,
            zone=zone_of(entry),
            recipient_name=entry.displayName or message["principalId"],
            actions=actions,
            on_behalf_of=tuple(message.get("onBehalfOf") or ()) if message["purpose"] != ESCALATION else (),
        )

    def _link(self, state: RunState, interrupt: OpenInterrupt, message: dict[str, Any]) -> str:
        """The recipient's personal decision link: a token naming them, so their vote is theirs."""
        if message["purpose"] == RAISED:
            issued = _epoch(interrupt.raisedAt)
        else:
            issued = float(message.get("due") or self.clock())
        token, _ = interrupt_token(
            self.ring(),
            state.runId,
            interrupt,
            issued,
            "resolve",
            principal=message["principalId"],
            default_s=self.settings.link_lifetime_s,
        )
        return f"{self.settings.public_base_url}/interrupts/{token}"

    # -- channels -------------------------------------------------------------------------------------

    def _email(self, entry: PrincipalEntry, content: Content) -> None:
        cfg = self.settings
        if not cfg.from_address or not entry.email:
            raise NotConfigured()
        request: dict[str, Any] = {
            "FromEmailAddress": cfg.from_address,
            "Destination": {"ToAddresses": [entry.email]},
            "Content": {"Raw": {"Data": mime_email(cfg.from_address, entry.email, content)}},
        }
        if cfg.configuration_set:
            request["ConfigurationSetName"] = cfg.configuration_set
        try:
            self.ses.send_email(**request)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "ses_error")
            # A refused message (bad address, unverified identity) does not get better by retrying.
            raise ChannelFailed(f"ses_{code}", final=code in ("MessageRejected", "InvalidParameterValue")) from None
        except BotoCoreError:
            raise ChannelFailed("io") from None

    def _slack_config(self, tenant: str) -> dict[str, Any] | None:
        hit = self._slack.get(tenant)
        if hit is None or hit[0] <= time.monotonic():
            name = secret_name(self.settings.slack_secret_prefix, tenant)
            try:
                value = json.loads(self.secrets.get_secret_value(SecretId=name)["SecretString"])
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                    raise ChannelFailed("secret_unreadable") from None
                value = None
            hit = (time.monotonic() + SLACK_SECRET_CACHE_S, value)
            self._slack[tenant] = hit
        return hit[1]

    def _slack_post(self, tenant: str, entry: PrincipalEntry, content: Content) -> None:
        config = self._slack_config(tenant)
        if not config:
            raise NotConfigured()
        cfg = self.settings
        headers = {"Content-Type": "application/json; charset=utf-8", "User-Agent": USER_AGENT}
        if config.get("botToken"):
            url = f"{cfg.slack_api_url}/chat.postMessage"
            headers["Authorization"] = f"Bearer {config['botToken']}"
            body = slack_message(content, entry.slackUserId, channel=entry.slackUserId)
        else:
            url = config["webhookUrl"]
            body = slack_message(content, entry.slackUserId)
        try:
            target = check_url(url, resolve=self.resolve, allow_loopback=cfg.allow_loopback)
            response = post_pinned(
                target,
                json.dumps(body, separators=(",", ":"), allow_nan=False).encode(),
                headers,
                connect_timeout=cfg.connect_timeout_s,
                total_timeout=cfg.total_timeout_s,
                max_response_bytes=16 * 1024,
                ca_file=self.ca_file,
            )
        except EgressRefused:
            raise ChannelFailed("egress_denied") from None
        except DeliveryFailed as failed:
            raise ChannelFailed(failed.error_class, final=failed.status in (400, 403, 404, 410)) from None
        if config.get("botToken"):
            # The Web API answers 200 with {"ok": false, "error"} when it refuses.
            try:
                answer = json.loads(response.body_excerpt or b"{}")
            except ValueError:
                answer = {}
            if not answer.get("ok"):
                raise ChannelFailed(f"slack_{str(answer.get('error') or 'not_ok')[:64]}")

    # -- bookkeeping ----------------------------------------------------------------------------------

    def _hide(self, record: dict[str, Any], seconds: int) -> None:
        self.sqs.change_message_visibility(
            QueueUrl=self.settings.queue_url,
            ReceiptHandle=record["receiptHandle"],
            VisibilityTimeout=max(0, min(int(seconds), 12 * 3600)),
        )

    def _dead_letter(self, message: dict[str, Any], kept: dict[str, Any]) -> dict[str, Any]:
        """What the DLQ keeps: identity and each channel's outcome; no address, link, token or secret."""
        return {
            "v": 1,
            "deadLetteredAt": iso_epoch(self.clock()),
            "tenant": message["tenant"],
            "runId": message["runId"],
            "notificationId": message["id"],
            "principalId": message["principalId"],
            "purpose": message["purpose"],
            "nodeId": message["nodeId"],
            "interruptId": message["interruptId"],
            "channels": kept.get("channels") or {},
        }


def _epoch(iso_text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso_text.replace("Z", "+00:00")).timestamp()
