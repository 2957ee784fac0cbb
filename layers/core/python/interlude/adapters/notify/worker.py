"""The notify worker (issue 14): one SQS message is one recipient's notification, sent over their channels.

A leased worker (adapters.leased_work): the claim, the retries with backoff and the dead letter are the template's.
One attempt reads the run and skips when there is nothing left to ask (the gate settled, or — for a reminder — the
recipient voted); reads the recipient's directory entry; mints their personal decision link; sends each of their
channels not yet sent (e-mail through SES, Slack through the tenant's incoming webhook or bot token, egress-checked
and pinned like callbacks); records every channel's outcome, and for a bot token's message the channel and ts Slack
answered, so that a `closed` notice (the gate decided, timed out or withdrawn) can replace each such message with
the outcome through chat.update (issue 28 item 6). A failed channel is retried, and after the last attempt a
content-free dead letter goes to the DLQ. A channel set up that fails so that no retry changes it (an address mail
cannot go to, a Slack token revoked, a bot token removed since its message was posted) is `final` in the record and not
tried again; a notification none of whose channels was sent for such a failure is `undeliverable` (docs/adr/0208).
Nothing here blocks a resolve.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger
from botocore.exceptions import BotoCoreError, ClientError

from interlude.adapters.leased_work import Attempted, LeasedWorker, Work
from interlude.adapters.notify.messages import (
    CLOSED,
    ESCALATION,
    RAISED,
    Content,
    closed_message,
    closed_words,
    decision_buttons_fit,
    is_reminder,
    mime_email,
    reminder_asks,
    reminds,
    slack_message,
)
from interlude.adapters.secret_values import secret_value_if_set
from interlude.app.caught import caught
from interlude.config.notify import NotifySettings
from interlude.domain.clock import epoch_of, iso_epoch
from interlude.domain.ids import secret_name, workflow_display_name
from interlude.domain.models.principals import PrincipalEntry, sendable_address
from interlude.domain.models.run import OpenInterrupt, RunState
from interlude.rules.slack import button_value
from interlude.rules.tokens.issuer import interrupt_token
from interlude.rules.tokens.scheme import KeyRing
from interlude.rules.wording import headline, in_lines
from interlude.store.directory import DirectoryStore
from interlude.store.leases import Claim
from interlude.store.notifications import Notification, NotificationStore, kept_record
from interlude.store.runs import RunStore
from interlude.store.tenants import handed_back_at
from interlude.store.workflow_reads import read_workflow

if TYPE_CHECKING:
    from interlude.rules.egress import Resolver

logger = Logger(service="interlude-notify", child=True)
USER_AGENT = "interlude-notify/1"
LEASE_MARGIN_S = 30.0
SLACK_SECRET_CACHE_S = 60.0
# Read of Slack's answer: chat.postMessage answers the message as posted (its blocks), a few KB.
SLACK_ANSWER_BYTES = 16 * 1024
# Web API refusals no retry changes: the message is gone or may no longer be edited, the token is not one.
FINAL_SLACK_ERRORS = frozenset(
    {"message_not_found", "cant_update_message", "edit_window_closed", "channel_not_found", "invalid_auth", "not_authed", "account_inactive", "token_revoked"}
)
# The reason a notification was not sent when a channel set up for it failed for good, and the outcome it is counted
# under (Notifications{outcome}). Its item settles as `skipped`, the settled status every release reads (0.11.0 would
# claim an item of a status it does not know again): the record's reason tells it from a skip.
UNDELIVERABLE = "undeliverable"
# The error class of a closed gate's Slack messages when the tenant's bot token that posted them is gone.
CREDENTIAL_GONE = "credential_gone"


class ChannelFailed(Exception):
    def __init__(self, error_class: str, final: bool = False) -> None:
        super().__init__(error_class)
        self.error_class = error_class
        self.final = final


def failed_outcome(exc: ChannelFailed) -> dict[str, Any]:
    """A channel's failed outcome as the record keeps it: `final` when no retry changes it."""
    return {"outcome": "failed", "errorClass": exc.error_class, **({"final": True} if exc.final else {})}


class NotConfigured(Exception):
    """The channel is not set up for this deployment or tenant: nothing to retry."""


@dataclass(frozen=True)
class Recipient(Work[Notification]):
    """One recipient's notification, as queued."""

    message: dict[str, Any]


@dataclass
class Worker(LeasedWorker[Recipient]):
    store: RunStore
    sqs: Any
    ses: Any
    secrets: Any
    ring: Callable[[], KeyRing]
    settings: NotifySettings
    resolve: Resolver | None = None
    clock: Callable[[], float] = time.time
    rand: Callable[[], float] = field(default=random.random)
    ca_file: str | None = None

    MESSAGE = "notification"

    def __post_init__(self) -> None:
        self.notifications = NotificationStore(self.store)
        self.directory = DirectoryStore(self.store)

    @property
    def ledger(self) -> NotificationStore:
        return self.notifications

    # -- one message ------------------------------------------------------------------------------------

    def receive(self, message: dict[str, Any]) -> Recipient:
        nid = message["id"]
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
        cfg = self.settings
        lease_s = 2 * (cfg.connect_timeout_s + cfg.total_timeout_s) + LEASE_MARGIN_S
        ref = Notification(message["runId"], nid, initial, message)
        return Recipient(ref, f"notification {nid}", lease_s, cfg.max_attempts, message)

    def attempt(self, work: Recipient, claim: Claim) -> Attempted:
        """sent | skipped, or failed (None); the record kept gains the reason or each channel's outcome."""
        kept = dict(kept_record(claim) or work.ref.record)
        kept["channels"] = dict(kept.get("channels") or {})
        try:
            status = self._send(work.message, kept, claim.attempt)
        except Exception:  # a bug or an unreadable store: recorded and retried like any failure
            nid = work.ref.notification_id
            caught(logger, "notification-attempt", "notification attempt failed inside the worker", notificationId=nid)
            kept["error"] = "internal"
            status = "failed"
        return Attempted(status if status in ("sent", "skipped") else None, kept)

    def settle(self, work: Recipient, claim: Claim, status: str, kept: dict[str, Any]) -> str:
        ended = super().settle(work, claim, status, kept)
        return UNDELIVERABLE if ended == "skipped" and kept.get("reason") == UNDELIVERABLE else ended

    def send_dead_letter(self, work: Recipient, attempted: Attempted) -> None:
        attempted.kept["final"] = True
        body = json.dumps(self._dead_letter_record(work.message, attempted.kept), allow_nan=False)
        self.sqs.send_message(QueueUrl=self.settings.dlq_url, MessageBody=body)

    def _send(self, message: dict[str, Any], kept: dict[str, Any], attempt: int) -> str:
        """sent | skipped | failed; `kept` gains the reason or each channel's outcome."""
        if message["purpose"] == CLOSED:
            return self._update_closed(message, kept, attempt)
        found = self._addressee(message)
        if isinstance(found, str):
            kept["reason"] = found
            return "skipped"
        state, interrupt, entry = found
        channels = entry.reachable_channels()
        content = self._content(state, message, interrupt, entry)
        failed = False
        for channel in channels:
            previous = kept["channels"].get(channel) or {}
            if previous.get("outcome") in ("sent", "not_configured") or previous.get("final"):
                continue
            outcome, retry = self._send_over(channel, state.tenant, entry, content)
            kept["channels"][channel] = {"attempt": attempt, **outcome}
            failed = failed or retry
        if failed:
            return "failed"
        if not any(c.get("outcome") == "sent" for c in kept["channels"].values()):
            # Set up and failed for good is no "nothing set up": the log says which, the operator sees it counted.
            gave_up = any(c.get("final") for c in kept["channels"].values())
            kept["reason"] = UNDELIVERABLE if gave_up else "not_configured"
            return "skipped"
        return "sent"

    def _send_over(self, channel: str, tenant: str, entry: PrincipalEntry, content: Content) -> tuple[dict[str, Any], bool]:
        """The channel's outcome, and whether another attempt may change it."""
        at = iso_epoch(self.clock())
        posted: dict[str, Any] = {}
        try:
            if channel == "email":
                self._email(entry, content)
            else:
                posted = self._slack_post(tenant, entry, content)
        except NotConfigured:
            return {"at": at, "outcome": "not_configured"}, False
        except ChannelFailed as exc:
            return {"at": at, **failed_outcome(exc)}, not exc.final
        return {"at": at, "outcome": "sent", **posted}, False

    def _addressee(self, message: dict[str, Any]) -> tuple[RunState, OpenInterrupt | None, PrincipalEntry] | str:
        """The run, the interrupt and the recipient's entry, or why no one is to be asked (the skip's reason)."""
        got = self.store.get_run(message["runId"])
        if got is None:
            return "run_gone"
        state, _ = got
        interrupt = state.interrupts.get(message["nodeId"])
        if message["purpose"] != ESCALATION:
            if interrupt is None or interrupt.interruptId != message["interruptId"]:
                return "settled"
            if is_reminder(message["purpose"]) and not reminder_asks(interrupt, message):
                return "voted"
            if is_reminder(message["purpose"]) and not reminds(interrupt, message["principalId"]):
                return "assigned_elsewhere"
        record = self.directory.get(state.tenant, message["principalId"])
        entry = PrincipalEntry.model_validate(record["entry"]) if record else None
        if entry is None:
            return "not_in_directory"
        if not entry.reachable_channels():
            return "no_channel"
        return state, interrupt, entry

    # -- what it says ---------------------------------------------------------------------------------

    def _content(
        self, state: RunState, message: dict[str, Any], interrupt: OpenInterrupt | None, entry: PrincipalEntry
    ) -> Content:
        decision_value = form_value = None
        form = False
        questions: tuple[str, ...] = ()
        escalation = message["purpose"] == ESCALATION
        if escalation or interrupt is None:
            title, description, deadline, link, actions = message.get("title") or message["nodeId"], "", None, None, ()
        else:
            data = interrupt.payload.get("data") or {}
            # What the page the link opens says the request is, and the words under it (a value of the author's as
            # lines of text, never its JSON).
            title, words = headline(interrupt.payload)
            description = in_lines(words)
            deadline = interrupt.deadline
            actions = tuple(data.get("actions") or ())
            link = self._link(state, interrupt, message)
            if decision_buttons_fit(interrupt.payload):
                decision_value = button_value(state.runId, interrupt.nodeId, interrupt.interruptId)
            elif interrupt.kind != "approval":
                # A form's gate alone reads its schema and definition's nodes, and draws the modal: loaded by its
                # first message.
                from interlude.rules.answer_schema import asked
                from interlude.rules.slack_forms import modal_form

                form = True
                spec = modal_form(interrupt.payload, self._field_labels(state, interrupt.nodeId))
                asks = (spec or asked(interrupt.payload)).asks
                questions = tuple(a.label for a in asks if a.kind != "fixed")
                if spec is not None:
                    form_value = button_value(state.runId, interrupt.nodeId, interrupt.interruptId)
        return Content(
            purpose=message["purpose"],
            title=title,
            description=description,
            workflow_name=self._workflow_name(state),
            link=link,
            deadline=deadline,
            time_zone=entry.timeZone,
            recipient_name=entry.displayName or message["principalId"],
            asked_by=self._asked_by(state),
            actions=actions,
            on_behalf_of=() if escalation else self._people(state.tenant, message.get("onBehalfOf") or ()),
            decision_value=decision_value,
            form=form,
            questions=questions,
            form_value=form_value,
        )

    def _field_labels(self, state: RunState, node_id: str) -> dict[str, str]:
        """The gate's own words for its form's fields (its `fieldLabels`), as the page and the modal use them."""
        from interlude.domain.models.workflow import WorkflowDefinition
        from interlude.rules.answer_schema import field_labels

        raw = read_workflow(self.store, state.tenant, state.workflowId, state.workflowVersion)
        nodes = WorkflowDefinition.model_validate(raw).nodes if raw is not None else []
        return field_labels(next((n.config for n in nodes if n.id == node_id), {}))

    def _workflow_name(self, state: RunState) -> str | None:
        """What a person calls the run's workflow, as the approval page names it: read from the stored definition
        without validating it (its name is all a message says of it; the definition was validated when registered)."""
        raw = read_workflow(self.store, state.tenant, state.workflowId, state.workflowVersion)
        if raw is None:
            return state.workflowId
        name = raw.get("name")
        return workflow_display_name(name if isinstance(name, str) else None, state.workflowId)

    def _asked_by(self, state: RunState) -> str | None:
        """Who started the run, as the approval page names them: their display name, else their subject id."""
        return self._display_name(state.tenant, ((state.owner or {}).get("subject") or {}).get("subjectId"))

    def _link(self, state: RunState, interrupt: OpenInterrupt, message: dict[str, Any]) -> str:
        """The recipient's personal decision link: a token naming them, so their vote is theirs. It lives from the
        gate's raise (a reminder: from its due time), or from the hand-back of a notification held while its tenant was
        suspended, whichever is later (interlude.adapters.tenant_outside); never past the gate's deadline."""
        if message["purpose"] == RAISED:
            issued = epoch_of(interrupt.raisedAt)
        else:
            issued = float(message.get("due") or self.clock())
        handed_back = handed_back_at(message)
        if handed_back is not None:
            issued = max(issued, handed_back)
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
        address = sendable_address(entry.email)
        if address is None:
            # An entry kept from before the directory refused such an address: it would be none, or several, to a
            # mail reader, or SES could not send to it. Retrying changes nothing.
            raise ChannelFailed("address_invalid", final=True)
        request: dict[str, Any] = {
            "FromEmailAddress": cfg.from_address,
            "Destination": {"ToAddresses": [address]},
            "Content": {"Raw": {"Data": mime_email(cfg.from_address, address, content)}},
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
        """The tenant's Slack secret (None: it has none), as this instance keeps it (adapters/secret_values.py)."""
        name = secret_name(self.settings.slack_secret_prefix, tenant)
        try:
            value = secret_value_if_set(name, SLACK_SECRET_CACHE_S, client=self.secrets)
        except ClientError:
            raise ChannelFailed("secret_unreadable") from None
        config: dict[str, Any] | None = None if value is None else json.loads(value)
        return config

    def _slack_post(self, tenant: str, entry: PrincipalEntry, content: Content) -> dict[str, Any]:
        """Posts the message; for a bot token, answers where Slack keeps it ({channel, ts}: what chat.update names)."""
        config = self._slack_config(tenant)
        if not config:
            raise NotConfigured()
        if config.get("botToken"):
            answer = self._slack_api(config["botToken"], "chat.postMessage", slack_message(content, entry.slackUserId, channel=entry.slackUserId))
            where = {k: answer.get(k) for k in ("channel", "ts")}
            return where if all(isinstance(v, str) and v for v in where.values()) else {}
        self._slack_send(config["webhookUrl"], slack_message(content, entry.slackUserId), {})
        return {}

    def _slack_api(self, token: str, method: str, body: dict[str, Any]) -> dict[str, Any]:
        """One Web API call with the tenant's bot token: its answer, which is 200 with {"ok": false, "error"} when Slack
        refuses."""
        raw = self._slack_send(f"{self.settings.slack_api_url}/{method}", body, {"Authorization": f"Bearer {token}"})
        try:
            answer = json.loads(raw or b"{}")
        except ValueError:
            answer = {}
        if not isinstance(answer, dict) or not answer.get("ok"):
            error = str(answer.get("error") or "not_ok") if isinstance(answer, dict) else "not_ok"
            raise ChannelFailed(f"slack_{error[:64]}", final=error in FINAL_SLACK_ERRORS)
        return answer

    def _slack_send(self, url: str, body: dict[str, Any], headers: dict[str, str]) -> bytes:
        # Imported by the first Slack message: a deployment or tenant that notifies by e-mail alone never loads the
        # egress guard or the pinned HTTP client (tests/unit/test_cold_imports.py).
        from interlude.adapters.delivery.pinned_http import DeliveryFailed, post_pinned
        from interlude.rules.egress import EgressRefused, check_url

        cfg = self.settings
        headers = {"Content-Type": "application/json; charset=utf-8", "User-Agent": USER_AGENT, **headers}
        try:
            target = check_url(url, resolve=self.resolve, allow_loopback=cfg.allow_loopback)
            response = post_pinned(
                target,
                json.dumps(body, separators=(",", ":"), allow_nan=False).encode(),
                headers,
                connect_timeout=cfg.connect_timeout_s,
                total_timeout=cfg.total_timeout_s,
                max_response_bytes=SLACK_ANSWER_BYTES,
                ca_file=self.ca_file,
            )
        except EgressRefused:
            raise ChannelFailed("egress_denied") from None
        except DeliveryFailed as failed:
            raise ChannelFailed(failed.error_class, final=failed.status in (400, 403, 404, 410)) from None
        return response.body_excerpt

    # -- a closed gate ---------------------------------------------------------------------------------

    def _update_closed(self, message: dict[str, Any], kept: dict[str, Any], attempt: int) -> str:
        """Replaces each Slack message the recipient was sent of the gate with its outcome (chat.update, in their
        zone); sent | skipped | failed. Updating a message twice leaves it as once, so a retry updates them all."""
        tenant = message["tenant"]
        at = iso_epoch(self.clock())
        config = self._slack_config(tenant)
        if not config or not config.get("botToken"):
            # The bot token that posted the messages was removed or became a webhook since: none can be updated.
            gone = ChannelFailed(CREDENTIAL_GONE, final=True)
            kept["channels"]["slack"] = {"attempt": attempt, "at": at, **failed_outcome(gone), "updated": 0}
            kept["reason"] = UNDELIVERABLE
            return "skipped"
        record = self.directory.get(tenant, message["principalId"])
        entry = PrincipalEntry.model_validate(record["entry"]) if record else PrincipalEntry()
        outcome = dict(message.get("outcome") or {})
        words = closed_words(outcome, self._display_name(tenant, outcome.get("decidedBy")), entry.timeZone)
        replaced = closed_message(str(message.get("title") or message["nodeId"]), words)
        updated = 0
        try:
            for channel, ts in message.get("slackMessages") or ():
                self._slack_api(config["botToken"], "chat.update", {"channel": channel, "ts": ts, **replaced})
                updated += 1
        except ChannelFailed as exc:
            kept["channels"]["slack"] = {"attempt": attempt, "at": at, **failed_outcome(exc), "updated": updated}
            if not exc.final:
                return "failed"
            kept["reason"] = UNDELIVERABLE
            return "skipped"
        kept["channels"]["slack"] = {"attempt": attempt, "at": at, "outcome": "sent", "updated": updated}
        return "sent"

    def _people(self, tenant: str, principal_ids: Iterable[Any]) -> tuple[str, ...]:
        """What a person calls each principal (their directory display name, else their id)."""
        return tuple(name for name in (self._display_name(tenant, p) for p in principal_ids) if name)

    def _display_name(self, tenant: str, principal_id: Any) -> str | None:
        """What a person calls a principal: their directory display name, else their id."""
        if not isinstance(principal_id, str):
            return None
        record = self.directory.get(tenant, principal_id)
        return str((record or {}).get("entry", {}).get("displayName") or principal_id)

    # -- bookkeeping ----------------------------------------------------------------------------------

    def _dead_letter_record(self, message: dict[str, Any], kept: dict[str, Any]) -> dict[str, Any]:
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

