"""Replay what failed (issue 30, item 5): a dead-lettered webhook delivery, callback notice or notification sent again,
one at a time or all of a scope's at once (a recovery), and a run whose core.http action failed run again from there.

Replays ride the leased-work mechanism (store.leases, adapters.leased_work), not beside it: the unit's ledger item is
reopened (dead -> pending, one conditional write; its attempts kept, a new round of attempts) and its message queued
again, so its worker claims the next attempt of the same unit. A delivery keeps its id, which is the `webhook-id` its
receiver deduplicates by; and of any number of replays asked for at once, one reopen wins and the others are refused,
so a dead letter is sent again once. A transition's callback notices delivered together (format 10, ADR 0155) are
replayed together, whichever of their ids is named: their one record is reopened and every notice not delivered gets a
round of its own, in order. A webhook dead letter leaves the subscription's dead-letter listing in the reopen's
transaction (and comes back, newly dated, if the new round fails too). A unit is replayed at most MAX_REPLAYS times.

A recovery replays every dead letter of a scope (a subscription's between `since` and `until`, a run's callback
notices, a run's notifications): a job, one per scope at a time (store.recoveries), counted before it starts and
refused past MAX_RECOVERY, taken TURN units a turn within the request, each turn recorded conditionally on its
number. A request cut off leaves its job running; once it has recorded nothing for store.recoveries.STALE_S, a new
recovery of the scope replaces it and counts again only what is still dead (a unit replayed is no longer dead).

A core.http action's effect is reopened likewise (failed -> pending), and the run, failed at that action and at
nothing else, runs again from it (engine.run.retry_action): the action is requested anew with the same effect, and
the effect record decides what happens: the call made once (a new attempt, with the same Idempotency-Key), or, if the
effect completed meanwhile (a business identity another run performed), its recorded outcome landed without a call.

Dependencies, declared: `runs` (the run operations: tenant-checked reads, commits, workflows, the store and clock
they share) and `outbox` (the port through which messages are made and queued: adapters.replay_outbox.ReplayOutbox).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, Protocol

from interlude.app import audit_entries as audit_log
from interlude.app.retries import MAX_RACE_RETRIES, busy
from interlude.domain.built_once import built_once
from interlude.domain.clock import iso
from interlude.domain.errors import Conflict, Forbidden, Invalid, NotFound
from interlude.domain.ids import tenant_bound, tenant_of
from interlude.engine import run as engine
from interlude.engine.actions import provider_key
from interlude.rules import notice_bundles, run_search
from interlude.rules.retention import effect_expiry
from interlude.store import attributes as a
from interlude.store import layout
from interlude.store.deliveries import BUNDLE, DeliveryStore, Notice, bundle_ref, notice_sk
from interlude.store.effects import EffectStore, LedgerEntry
from interlude.store.layout import marked_message, run_pk
from interlude.store.leases import PENDING, REOPENED_AT, REOPENED_FROM, Ledger, Reopened, Writes
from interlude.store.notifications import PREFIX as NOTIFICATION_PREFIX
from interlude.store.notifications import Notification, NotificationStore
from interlude.store.recoveries import RecoveryStore, recovery_key
from interlude.store.transactions import LostRace
from interlude.store.webhooks import dead_letters_pk

if TYPE_CHECKING:
    from interlude.app.ports import DefinitionSource, RunLedger, Subscriptions, TenantLimits
    from interlude.domain.clock import Clock
    from interlude.domain.models.run import RunState
    from interlude.rules.auth import Principal
    from interlude.store.facade import Store
    from interlude.store.webhooks import WebhookStore

# How many times one unit may be replayed: its attempts stay bounded ((MAX_REPLAYS + 1) rounds of its worker's).
MAX_REPLAYS = 20
# The most dead letters one recovery replays: a larger one is refused before anything is sent (narrow the window).
# Its request replays them all (about three writes each), well inside the API's 29 seconds.
MAX_RECOVERY = 500
# Units a recovery's turn takes (the progress recorded after each).
TURN = 50
# A callback notice's id (adapters.delivery.notices.notice_id) and a notification's (adapters.notify.messages).
CALLBACK_PREFIX = "ntc_"
UNIT_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")

Queue = Literal["callbacks", "notifications"]
Family = Literal["webhook-deliveries", "callback-deliveries", "notifications"]
# Where each family's job item lives under its scope's partition (store.recoveries).
FAMILY_KEYS: dict[Family, str | None] = {
    "webhook-deliveries": None,
    "callback-deliveries": "deliveries",
    "notifications": "notifications",
}


class Outbox(Protocol):
    """How a replay's messages are made and queued (adapters.replay_outbox; a test may record them instead)."""

    def webhook_delivery(self, webhook_id: str, run_id: str, event: dict[str, Any]) -> dict[str, Any]: ...

    def notice_id(self, run_id: str, sequence: int) -> str: ...

    def notices(self, state: RunState, events: list[dict[str, Any]]) -> list[dict[str, Any]]: ...

    def bundled(self, messages: list[dict[str, Any]]) -> dict[str, Any]: ...

    def notification(self, tenant: str, run_id: str, record: dict[str, Any]) -> dict[str, Any]: ...

    def send(self, queue: Queue, tenant: str, messages: list[dict[str, Any]]) -> None: ...


class Unrebuildable(Exception):
    """The unit's message cannot be made again (the event it reports is no longer in its run's log)."""


@dataclass
class Replay:
    store: Store
    runs: RunLedger
    definitions: DefinitionSource
    subscriptions: Subscriptions
    webhooks: WebhookStore
    limits: TenantLimits
    # How many days the tenant keeps an effect record (app/tenants.py).
    retention_days: Callable[[str], int]
    outbox: Outbox
    clock: Clock
    step_budget: int

    @built_once
    def deliveries(self) -> DeliveryStore:
        return DeliveryStore(self.store)

    @built_once
    def notifications(self) -> NotificationStore:
        return NotificationStore(self.store)

    @built_once
    def recoveries(self) -> RecoveryStore:
        return RecoveryStore(self.store.table, self.store.client, self.store.entries_table)

    def now_iso(self) -> str:
        return iso(self.clock())

    # -- one unit ---------------------------------------------------------------------------------------------------

    def retry_webhook_delivery(self, principal: Principal, webhook_id: str, delivery_id: str) -> dict[str, Any]:
        self.subscriptions.subscription(principal, webhook_id)
        if tenant_of(delivery_id) != principal.tenant:
            raise Forbidden("the delivery id belongs to another tenant", code="id_tenant_mismatch")
        found = self.webhooks.dead_letter(webhook_id, delivery_id, self.now_iso())
        if found is None:
            raise NotFound("no dead letter of this subscription has that delivery id")
        record, listed = found
        reopened = _rebuilt(partial(self._webhook, record, listed))
        return {**_replayed(reopened, "the delivery"), "deliveryId": delivery_id, "webhookId": webhook_id, "runId": record["runId"]}

    def retry_run_delivery(self, principal: Principal, run_id: str, delivery_id: str) -> dict[str, Any]:
        state, _ = self.runs.load_run(principal.tenant, run_id)
        if not delivery_id.startswith(CALLBACK_PREFIX):
            raise NotFound("the run has no callback delivery with that id")
        reopened = _rebuilt(partial(self._callback, state, delivery_id))
        return {**_replayed(reopened, "the callback delivery"), "deliveryId": delivery_id, "runId": run_id}

    def retry_notification(self, principal: Principal, run_id: str, notification_id: str) -> dict[str, Any]:
        state, _ = self.runs.load_run(principal.tenant, run_id)
        reopened = self._notification(state, notification_id, None)
        return {**_replayed(reopened, "the notification"), "notificationId": notification_id, "runId": run_id}

    def _webhook(self, record: dict[str, Any], listed_sk: str) -> Reopened:
        webhook_id, run_id = record["webhookId"], record["runId"]
        ref, held = self._located(Notice(run_id, record["deliveryId"].split("/", 1)[1], record["eventType"]))
        sequence = self._sequence(run_id, held, lambda e: e.get("eventId") == record["eventId"])
        event = {"sequence": sequence, "eventId": record["eventId"], "type": record["eventType"]}
        message = self.outbox.webhook_delivery(webhook_id, run_id, event)
        writes = Writes(also=self.webhooks.dead_letter_deletes(webhook_id, listed_sk))
        reopened = self.deliveries.reopen(ref, held, self.now_iso(), MAX_REPLAYS, writes)
        undo = Writes(also=self.webhooks.dead_letter_puts(record))
        self._queue(self.deliveries, ref, reopened, "callbacks", tenant_of(run_id), [message], undo)
        return reopened

    def _callback(self, state: RunState, notice_id: str) -> Reopened:
        ref, held = self._located(Notice(state.runId, notice_id, ""))
        if held is None:
            # A notice delivered in a bundle (format 10) that is not its first: the bundle is replayed.
            found = self.deliveries.bundle_of(state.runId, notice_id)
            if found is None:
                return Reopened("missing")
            ref, held = found
        if held.get(BUNDLE):
            return self._bundle(state, held, ref.where)
        sequence = self._sequence(state.runId, held, lambda e: self.outbox.notice_id(state.runId, e["sequence"]) == notice_id)
        event = self.webhooks.read_event(state.runId, sequence)
        messages = [m for m in self.outbox.notices(state, [event] if event else []) if m["notice"]["id"] == notice_id]
        if not messages:
            raise Unrebuildable(f"event {sequence} of the run makes no callback notice any more")
        reopened = self.deliveries.reopen(ref, held, self.now_iso(), MAX_REPLAYS)
        self._queue(self.deliveries, ref, reopened, "callbacks", state.tenant, messages)
        return reopened

    def _bundle(self, state: RunState, held: dict[str, Any], where: str) -> Reopened:
        """A dead bundle of notices (format 10) reopened, each notice not delivered with a round of its own, and its
        message queued again (its delivered notices are not dialled again). `where`: the table its record is in."""
        parts = held[BUNDLE]
        ref = bundle_ref(state.runId, parts, where)
        message = self._bundle_message(state, parts, allow_links=True)
        if message is None:
            raise Unrebuildable("an event the notices report makes no callback notice any more")
        writes = Writes(sets={BUNDLE: a.packed(notice_bundles.reopened_parts(parts))})
        reopened = self.deliveries.reopen(ref, held, self.now_iso(), MAX_REPLAYS, writes)
        self._queue(self.deliveries, ref, reopened, "callbacks", state.tenant, [message])
        return reopened

    def _bundle_message(self, state: RunState, parts: list[dict[str, Any]], allow_links: bool) -> dict[str, Any] | None:
        """A bundle's message made again from the events its notices report; None when one of them is gone, or (not
        `allow_links`) would mint a decision link."""
        events = [self.webhooks.read_event(state.runId, int(p["sequence"])) for p in parts]
        if any(e is None or (not allow_links and e.get("type") == "interrupt.requested") for e in events):
            return None
        ids = [p["id"] for p in parts]
        made = {m["notice"]["id"]: m for m in self.outbox.notices(state, [e for e in events if e is not None])}
        if any(i not in made for i in ids):
            return None
        return self.outbox.bundled([made[i] for i in ids])

    def _notification(self, state: RunState, notification_id: str, held: dict[str, Any] | None) -> Reopened:
        ref = Notification(state.runId, notification_id, {})
        if held is None:
            held = self.notifications.read(ref)
        if held is None:
            return Reopened("missing")
        kept = held.get("message")
        message = json.loads(kept) if kept else self.outbox.notification(state.tenant, state.runId, json.loads(held["record"]))
        reopened = self.notifications.reopen(ref, held, self.now_iso(), MAX_REPLAYS)
        self._queue(self.notifications, ref, reopened, "notifications", state.tenant, [message])
        return reopened

    def _queue(
        self,
        ledger: Ledger[Any],
        ref: Any,
        reopened: Reopened,
        queue: Queue,
        tenant: str,
        messages: list[dict[str, Any]],
        undo: Writes | None = None,
    ) -> None:
        """The reopened unit's messages queued; if they cannot be, the reopen undone (dead again, `undo` with it),
        so no unit is left pending with no message to attempt it."""
        if reopened.outcome != "reopened":
            return
        if isinstance(ref, Notice):
            messages = [marked_message(m, ref.where) for m in messages]
        try:
            self.outbox.send(queue, tenant, messages)
        except Exception:
            ledger.undo_reopen(ref, reopened, undo)
            raise

    def _located(self, ref: Notice) -> tuple[Notice, dict[str, Any] | None]:
        """A delivery's record in whichever table it is (store/layout.py), and its ref naming that table."""
        found = self.deliveries.located(ref)
        return found if found is not None else (ref, None)

    def _sequence(self, run_id: str, held: dict[str, Any] | None, reports: Callable[[dict[str, Any]], bool]) -> int:
        """The sequence of the event a delivery reports: kept on its ledger item, or (an item the release before
        replays wrote) found in its run's log."""
        if held is not None and "sequence" in held:
            return int(held["sequence"])
        for event in self.store.read_events(run_id):
            if reports(event):
                return int(event["sequence"])
        raise Unrebuildable("the event the delivery reports is no longer in its run's log")

    # -- a replay that stopped between its reopen and its send ------------------------------------------------------

    def requeue(self, run_id: str, sk: str) -> str:
        """The unit at `sk` of the run, reopened but never queued (its replay stopped between the reopen and the send;
        the daily sweep finds it: interlude.migrations.sweeps), queued now: `queued`. A callback notice whose message
        would mint a decision link (a worker's grant, not the sweep's), or whose event is gone, is made dead again
        instead, to be replayed: `dead`. `moved`: its round began meanwhile (a duplicate message is harmless, but
        none is needed)."""
        tenant = tenant_of(run_id)
        if sk.startswith(NOTIFICATION_PREFIX):
            note = Notification(run_id, sk.removeprefix(NOTIFICATION_PREFIX), {})
            held = self.notifications.read(note)
            if held is None or not stuck(held):
                return "moved"
            kept = held.get("message")
            message = json.loads(kept) if kept else self.outbox.notification(tenant, run_id, json.loads(held["record"]))
            self.outbox.send("notifications", tenant, [message])
            return "queued"
        notice_id = sk.removeprefix(notice_sk(""))
        ref, got = self._located(Notice(run_id, notice_id, ""))
        if got is None or not stuck(got):
            return "moved"
        alone = "sequence" in got and not got.get(BUNDLE)
        event = self.webhooks.read_event(run_id, int(got["sequence"])) if alone else None
        messages: list[dict[str, Any]] = []
        if got.get(BUNDLE):
            ref = bundle_ref(run_id, got[BUNDLE], ref.where)
            head = self.store.get_run(run_id)
            bundle = self._bundle_message(head[0], got[BUNDLE], allow_links=False) if head else None
            messages = [bundle] if bundle else []
        elif event is not None and "webhookId" in got:
            reported = {"sequence": event["sequence"], "eventId": event["eventId"], "type": event["type"]}
            messages = [self.outbox.webhook_delivery(got["webhookId"], run_id, reported)]
        elif event is not None and event.get("type") != "interrupt.requested" and (head := self.store.get_run(run_id)):
            messages = [m for m in self.outbox.notices(head[0], [event]) if m["notice"]["id"] == notice_id]
        if messages:
            self.outbox.send("callbacks", tenant, [marked_message(m, ref.where) for m in messages])
            return "queued"
        attempts = int(got.get("attempts", 0))
        self.deliveries.undo_reopen(ref, Reopened("reopened", attempt=attempts + 1))
        return "dead"

    # -- a core.http action -----------------------------------------------------------------------------------------

    def reopen_failed_effect(
        self, run_id: str, node_id: str, effect_id: str, keying: str, now: datetime, items_expire: int | None = None
    ) -> dict[str, Any] | None:
        """The effect record of `run_id`'s action `node_id`, reopened if it failed, so the next attempt calls again
        (at most MAX_REPLAYS times: interlude.replay_limit_reached); the record as it was read (None: none). Otherwise
        the effect is pending or claimed (a retry whose run did not commit, or another run's work), completed (its
        outcome lands without a call), or gone with its retention (a new effect record). `items_expire`: the run's
        items' provisional expiry, which a reopen keeps the record and its ledger entry to at least (ADR 0142)."""
        effects = EffectStore(self.store)
        expires = effect_expiry(now.timestamp(), self.retention_days(tenant_of(run_id)), items_expire)
        entry = LedgerEntry(run_id, node_id, effect_id, keying, provider_key(effect_id), expires)
        held = effects.read(entry)
        if held is not None and held.get("status") == effects.DEAD:
            writes = effects.reopening(entry, int(held.get("attempts", 0)), now.timestamp())
            reopened = effects.reopen(entry, held, iso(now), MAX_REPLAYS, writes)
            if reopened.outcome == "limit":
                raise _limit(reopened, "the action")
        return held

    def retry_action(self, principal: Principal, run_id: str, node_id: str, surface: str = "api") -> dict[str, Any]:
        """The run, failed at its core.http action `node_id`, runs again from there (see the module's words)."""
        for _ in range(MAX_RACE_RETRIES):
            state, version = self.runs.load_run(principal.tenant, run_id)
            definition = self.definitions.workflow(state.tenant, state.workflowId, state.workflowVersion)
            if node_id not in state.nodes:
                raise NotFound(f"the run has no step {node_id!r}")
            why = engine.action_not_retryable(state, definition, node_id)
            if why is not None:
                raise Conflict(why, {"runStatus": state.status, "nodeId": node_id}, code="interlude.action_not_retryable")
            now = self.clock()
            build = partial(engine.retry_action, state, definition, node_id, now, self.step_budget)
            pending = build().state.actions.get(node_id)
            if pending is None:
                raise Conflict("the action's request cannot be made again", {"nodeId": node_id}, code="interlude.action_not_retryable")
            # The run runs again: its items take their provisional expiry back (app/retention.py), the effect too.
            items_expire = run_search.open_expiry(run_search.items_expiry(state.searchExpiry), now.timestamp())
            held = self.reopen_failed_effect(run_id, node_id, pending.effectId, pending.keying, now, items_expire)
            entry_draft = audit_log.entry(
                principal.tenant,
                audit_log.actor(principal, surface),
                "run.action-retried",
                {"runId": run_id, "nodeId": node_id},
                iso(now),
                {"effectId": pending.effectId},
            )
            open_runs = self.limits.limits(principal.tenant).open_runs
            try:
                transition = self.runs.commit_or_fail(
                    build, version, now, node_id, open_runs_limit=open_runs, audit=entry_draft
                )
            except LostRace:
                continue
            attempt = int((held or {}).get("attempts", 0)) + 1
            return {
                "runId": run_id,
                "nodeId": node_id,
                "effectId": pending.effectId,
                "status": transition.state.status,
                "attempt": attempt,
            }
        raise busy("the run kept changing while its action was retried; retry")

    # -- recoveries -------------------------------------------------------------------------------------------------

    def recover_webhook(
        self, principal: Principal, webhook_id: str, since: datetime, until: datetime | None
    ) -> dict[str, Any]:
        self.subscriptions.subscription(principal, webhook_id)
        now = self.clock()
        window = {"since": iso(since), "until": iso(min(until or now, now))}
        if window["since"] > window["until"]:
            raise Invalid("since must not be after until", {"field": "since"})
        matched = self.webhooks.count_dead_letters(webhook_id, window["since"], window["until"], MAX_RECOVERY)
        key = recovery_key(dead_letters_pk(webhook_id), FAMILY_KEYS["webhook-deliveries"])
        return self._start(principal, key, "webhook-deliveries", {"webhookId": webhook_id, **window}, matched)

    def webhook_recovery(self, principal: Principal, webhook_id: str) -> dict[str, Any]:
        """The subscription's latest recovery as its last turn recorded it: its counts so far, or in the end."""
        self.subscriptions.subscription(principal, webhook_id)
        got = self.recoveries.get(recovery_key(dead_letters_pk(webhook_id), FAMILY_KEYS["webhook-deliveries"]))
        if got is None:
            raise NotFound("no recovery of this subscription's dead letters was started")
        return got[0]

    def recover_run(self, principal: Principal, run_id: str, family: Family) -> dict[str, Any]:
        state, _ = self.runs.load_run(principal.tenant, run_id)
        prefix, dead, tables = self._ledger_of(family)
        matched = self.recoveries.count_dead(run_pk(state.runId), prefix, dead, MAX_RECOVERY, tables)
        key = recovery_key(run_pk(state.runId), FAMILY_KEYS[family])
        return self._start(principal, key, family, {"runId": state.runId}, matched)

    def _start(
        self, principal: Principal, key: a.Item, family: Family, scope: dict[str, Any], matched: int
    ) -> dict[str, Any]:
        if matched > MAX_RECOVERY:
            raise Invalid(
                f"more than {MAX_RECOVERY} dead letters would be sent again; recover a narrower window at a time",
                {"limit": MAX_RECOVERY},
                code="interlude.recovery_too_large",
            )
        now = self.clock()
        record = {
            "kind": family,
            **scope,
            "status": "running" if matched else "completed",
            "matched": matched,
            "queued": 0,
            "skipped": 0,
            "startedAt": iso(now),
            "startedBy": principal.subject.get("subjectId"),
        }
        if not matched:
            record["finishedAt"] = record["startedAt"]
        if not self.recoveries.start(key, record, now.timestamp()):
            running = self.recoveries.get(key)
            raise Conflict(
                "a recovery of these dead letters is running; it can be followed until it completes",
                {"recovery": running[0] if running else None},
                code="interlude.recovery_running",
            )
        while record["status"] == "running":
            record = self.turn(key)
        return record

    def turn(self, key: a.Item) -> dict[str, Any]:
        """One turn of the job `key` names: up to TURN units from where the last turn stopped, replayed, recorded.
        Returns the job's record (as another copy of this turn recorded it, when one did first)."""
        got = self.recoveries.get(key)
        if got is None or got[0]["status"] != "running":
            return got[0] if got else {"status": "completed"}
        record, turn, cursor = got
        queued, skipped, cursor = self._take(record, cursor)
        now = self.clock()
        record = {**record, "queued": record["queued"] + queued, "skipped": record["skipped"] + skipped}
        if cursor is None:
            record.update({"status": "completed", "finishedAt": iso(now)})
        if not self.recoveries.record_turn(key, turn, record, cursor, now.timestamp()):
            again = self.recoveries.get(key)
            return again[0] if again else record
        return record

    def _take(self, record: dict[str, Any], cursor: str | None) -> tuple[int, int, str | None]:
        """Replay one turn's units: (queued, skipped, where the next turn starts)."""
        outcomes: list[str] = []
        family: Family = record["kind"]
        if family == "webhook-deliveries":
            page, cursor = self.webhooks.dead_letters_between(
                record["webhookId"], record["since"], record["until"], cursor, TURN
            )
            outcomes = [self._settled(partial(self._webhook, r, s)) for r, s in page]
        else:
            prefix, dead, tables = self._ledger_of(family)
            items, cursor = self.recoveries.dead_page(run_pk(record["runId"]), prefix, dead, cursor, TURN, tables)
            got = self.store.get_run(record["runId"])
            if got is None:
                return 0, len(items), None
            state = got[0]
            for item in items:
                # N#{noticeId}, N#{noticeId}+ (a bundle: its key's unit reads it), NT#{notificationId}
                unit = item["sk"].split("#", 1)[1]
                if family == "callback-deliveries":
                    outcomes.append(self._settled(partial(self._callback, state, unit)))
                else:
                    outcomes.append(self._settled(partial(self._notification, state, unit, item)))
        queued = outcomes.count("reopened")
        return queued, len(outcomes) - queued, cursor

    @staticmethod
    def _settled(replay: Callable[[], Reopened]) -> str:
        try:
            return replay().outcome
        except Unrebuildable:
            return "unrebuildable"

    def _ledger_of(self, family: Family) -> tuple[str, str, tuple[str, ...]]:
        """The sort-key prefix and dead status of a run's ledger items of `family`, and the tables they may be in."""
        if family == "callback-deliveries":
            return notice_sk(CALLBACK_PREFIX), self.deliveries.DEAD, layout.DELIVERY_RECORDS.read()
        return NOTIFICATION_PREFIX, self.notifications.DEAD, (layout.FIRST,)


def stuck(held: dict[str, Any] | None) -> bool:
    """Whether a unit was reopened and no attempt of its new round was claimed or recorded (its message may never have
    been queued)."""
    return (
        held is not None
        and held.get("status") == PENDING
        and REOPENED_AT in held
        and int(held.get("attempts", 0)) == int(held.get(REOPENED_FROM, -1))
    )


def unit_id(value: str, field: str) -> str:
    """A notice's or notification's id as a path names it (400 otherwise)."""
    if not UNIT_ID.fullmatch(value):
        raise Invalid(f"{field} is not an id this host issues", {"field": field})
    return value


def bound_delivery(value: str) -> str:
    """A webhook delivery's tenant-bound id (400 otherwise)."""
    tenant, _, opaque = value.partition("/")
    if not tenant or not UNIT_ID.fullmatch(opaque):
        raise Invalid("deliveryId is not a delivery id this host issues", {"field": "deliveryId"})
    return tenant_bound(tenant, opaque)


def _rebuilt(replay: Callable[[], Reopened]) -> Reopened:
    """One unit's replay; a unit whose message cannot be made again (its event is no longer in its run's log) is
    not found (404), never a server error."""
    try:
        return replay()
    except Unrebuildable as exc:
        raise NotFound(f"it cannot be sent again: {exc}") from None


def _replayed(reopened: Reopened, what: str) -> dict[str, Any]:
    """The answer to a replay of one unit, or the refusal of it."""
    if reopened.outcome == "missing":
        raise NotFound(f"{what} is not known here")
    if reopened.outcome == "not_dead":
        raise Conflict(
            f"{what} is not dead-lettered (it is {reopened.status or 'gone'}): only a dead letter is sent again",
            {"status": reopened.status},
            code="interlude.not_dead_lettered",
        )
    if reopened.outcome == "limit":
        raise _limit(reopened, what)
    return {"status": "queued", "attempt": reopened.attempt, "replay": reopened.reopens}


def _limit(reopened: Reopened, what: str) -> Conflict:
    return Conflict(
        f"{what} was sent again {reopened.reopens} times already, the most a dead letter is",
        {"replays": reopened.reopens, "limit": MAX_REPLAYS},
        code="interlude.replay_limit_reached",
    )
