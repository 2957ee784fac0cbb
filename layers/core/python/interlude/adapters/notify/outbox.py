"""Queue notifications (issue 14): the dispatch outbox handler, and the reminders a schedule asks for.

From the run's event log, which is also what webhook subscriptions receive (`interrupt.requested` raises,
`interlude.escalation-requested` escalates):

* `interrupt.requested` of an approval still open → one message per recipient (its `audience`, else every
  principal its approversList, groups and roles make eligible, through the directory; and, where the tenant allows
  delegation, each out-of-office delegate of a recipient, naming whom they stand in for), and one Scheduler schedule
  per reminder the gate (or the tenant's settings) asks for; the same for a gate answered with a form
  (clarification, custom, low-confidence: `messages.asks_a_person`), its recipients its node's `audience`;
* `interlude.escalation-requested` → one message per escalation principal (the gate's, else the tenant's override
  principals);
* `interrupt.resolved` → the gate's reminder schedules are deleted (a reminder firing later finds the gate
  settled and sends nothing anyway);
* `interrupt.resolved` of such a gate, or `node.cancelled` of one (its run cancelled or failed with the gate open) → one `closed` message per recipient whose Slack messages of the gate the notify worker recorded (a bot
  token's chat.postMessage answers the message's channel and ts), naming those messages and the outcome: the worker
  replaces each with the outcome (chat.update), so nobody is left with buttons that can only answer "already
  decided" (issue 28 item 6). A message sent through an incoming webhook has no ts and cannot be updated.

Everything is keyed (notification ids derive from interrupt, purpose and recipient; schedule names from the
interrupt and the reminder's index), so a record handled twice queues the same notifications, which the worker
sends once. Nothing here runs inside a resolve.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from functools import cache, partial
from typing import TYPE_CHECKING, Any

from interlude.adapters.notify.messages import (
    ANSWERED,
    CLOSED,
    ESCALATION,
    RAISED,
    WITHDRAWN,
    asks_a_person,
    queue_message,
    reminder_purpose,
)
from interlude.adapters.queues import send_grouped
from interlude.adapters.scheduler import scheduler as scheduler_
from interlude.app.facts import asked_of, asks_nobody, recipients
from interlude.config.notify import notify_settings
from interlude.domain.ids import principal_subject
from interlude.domain.models.principals import PrincipalEntry
from interlude.domain.models.run import OpenInterrupt, RunState
from interlude.engine.deadlines import ESCALATION_EVENT, Deadline
from interlude.engine.visits import interrupt_id as visit_interrupt_id
from interlude.engine.visits import interrupt_key, visit_of
from interlude.rules import auth
from interlude.rules.interrupts.decide import named_by
from interlude.rules.interrupts.delegation import Delegator, still_asked, vote_in
from interlude.rules.wording import headline

if TYPE_CHECKING:
    from interlude.app.ports import DefinitionSource, DirectoryRecords, DispatchedRuns, NotificationLog
    from interlude.domain.clock import Clock
    from interlude.domain.models.tenants import TenantSettings

log = logging.getLogger(__name__)
RAISED_EVENT = "interrupt.requested"
RESOLVED_EVENT = "interrupt.resolved"
CANCELLED_EVENT = "node.cancelled"
WATCHED = {RAISED_EVENT, RESOLVED_EVENT, ESCALATION_EVENT, CANCELLED_EVENT}
APPROVAL_GATE = "core.approvalGate"
# The node types whose gates ask a person (their messages say so when the run ends with the gate open).
ASKING_GATES = {APPROVAL_GATE, "core.clarificationGate", "core.interrupt", "core.confidenceGate"}
# What a closed gate's message carries of the interrupt.resolved event (domain/outcomes.py's names).
OUTCOME_CARRIED = ("action", "decision", "reason")
# The tenant's settings as one record reads them: at the first need, once (a raised gate asks twice: whether
# delegation is allowed, the reminders' offsets; a resolve and an escalation once each, or not at all).
RecordSettings = Callable[[], "TenantSettings"]


def _open_asking(state: RunState, node_id: str | None, interrupt_id: str | None = None) -> OpenInterrupt | None:
    """The gate's interrupt while it is open and asks a person (an approval, or a form to fill)."""
    interrupt = state.interrupts.get(node_id or "")
    if interrupt is None or not asks_a_person(interrupt.payload):
        return None
    if interrupt_id is not None and interrupt.interruptId != interrupt_id:
        return None
    return interrupt


class NotificationOutbox:
    """The dispatch outbox handler (`on_events`) and the timeouts function's reminders (`enqueue_reminders`)."""

    def __init__(
        self,
        records: DispatchedRuns,
        directory: DirectoryRecords,
        tenant_settings: Callable[[str], TenantSettings],
        definitions: DefinitionSource,
        clock: Clock,
        log: NotificationLog | None = None,
    ) -> None:
        """`tenant_settings`: a tenant's settings as its limits in force were read (app/limits.py, cached briefly);
        `log`: the run's notification records, where the Slack messages a closed gate updates are found (None: none
        are)."""
        self.records = records
        self.log = log
        self.directory = directory
        self.tenant_settings = tenant_settings
        self.definitions = definitions
        self.clock = clock

    def _record_settings(self, tenant: str) -> RecordSettings:
        return cache(partial(self.tenant_settings, tenant))

    def on_events(self, run_id: str, events: list[dict[str, Any]]) -> None:
        if not any(e.get("type") in WATCHED for e in events):
            return
        got = self.records.run_head(run_id)  # a notification tells a gate's text, never the run's inputs
        if got is None:
            return
        state, _ = got
        settings = self._record_settings(state.tenant)
        messages: list[dict[str, Any]] = []
        for event in events:
            if event["type"] == RAISED_EVENT:
                messages += self._raised(state, event, settings)
            elif event["type"] == ESCALATION_EVENT:
                messages += self._escalation(state, event, settings)
            elif event["type"] == RESOLVED_EVENT:
                self._cancel_reminders(state, event, settings)
                messages += self._resolved(state, event)
            elif event["type"] == CANCELLED_EVENT:
                messages += self._withdrawn(state, event)
        send(messages)

    # -- a closed gate's Slack messages --------------------------------------------------------------

    def _resolved(self, state: RunState, event: dict[str, Any]) -> list[dict[str, Any]]:
        payload = event.get("payload") or {}
        node_id, interrupt_id = payload.get("nodeId"), payload.get("interruptId")
        if not asks_a_person(payload) or not node_id or not interrupt_id:
            return []
        value = payload.get("resumeValue")
        value = value if isinstance(value, dict) else {}
        outcome = {k: payload[k] for k in OUTCOME_CARRIED if payload.get(k) is not None}
        if payload.get("kind") != "approval":
            # A form's answer is no decision to name; its timeout rejects nothing.
            outcome = {"action": "timeout", "form": True} if outcome.get("action") == "timeout" else {"action": ANSWERED}
        outcome.update({k: value[k] for k in ("decidedBy", "comment") if isinstance(value.get(k), str)})
        if isinstance(event.get("timestamp"), str):
            outcome["at"] = event["timestamp"]
        return self._closed(state, node_id, interrupt_id, outcome)

    def _withdrawn(self, state: RunState, event: dict[str, Any]) -> list[dict[str, Any]]:
        """A gate that asks a person, open when its run was cancelled or failed: its messages say it was withdrawn."""
        node_id = event.get("nodeId")
        node = state.nodes.get(node_id or "")
        if node is None or self._type_of(state, str(node_id)) not in ASKING_GATES:
            return []
        reason = (event.get("payload") or {}).get("reason")
        words = {"run cancelled": "the run was cancelled", "run failed": "the run failed"}.get(str(reason), "the run ended")
        interrupt_id = visit_interrupt_id(state, str(node_id), node.visits)
        return self._closed(state, str(node_id), interrupt_id, {"action": WITHDRAWN, "reason": words})

    def _closed(self, state: RunState, node_id: str, interrupt_id: str, outcome: dict[str, Any]) -> list[dict[str, Any]]:
        """One `closed` message per recipient with Slack messages of this gate visit to update (one Query of the run's
        notification records, unless the visit can have none: `_told_nobody`), naming them."""
        if self.log is None or self._told_nobody(state, node_id, interrupt_id):
            return []
        posted: dict[str, list[list[str]]] = {}
        for item in self.log.of_run(state.runId):
            record = item["record"]
            slack = (record.get("channels") or {}).get("slack") or {}
            if record.get("interruptId") == interrupt_id and slack.get("ts") and slack.get("channel"):
                posted.setdefault(record["principalId"], []).append([slack["channel"], slack["ts"]])
        if not posted:
            return []
        title = self._title_asked(state, node_id, interrupt_id)
        return [
            queue_message(
                state.tenant, state.runId, node_id, interrupt_id, pid, CLOSED, title=title, outcome=outcome, slackMessages=messages
            )
            for pid, messages in posted.items()
        ]

    def _title_asked(self, state: RunState, node_id: str, interrupt_id: str) -> str:
        """The gate's title as the messages being replaced said it: rendered when it was asked, read from its
        interrupt's item (one GetItem), where the definition holds only its template (`Ship {{draft.title}}?`)."""
        visit = visit_of(state, node_id, interrupt_id)
        item = self.records.closed_interrupt(state.runId, interrupt_key(state.runId, node_id, visit)) if visit else None
        payload = (item or {}).get("payload")
        if isinstance(payload, dict):
            return headline(payload)[0]
        config = self.definitions.workflow(state.tenant, state.workflowId, state.workflowVersion).node(node_id).config
        return str(config.get("title") or node_id)

    def _told_nobody(self, state: RunState, node_id: str, interrupt_id: str) -> bool:
        """Whether no notification of the gate visit can exist: an approval whose node names nobody to ask (no raise
        or reminder tells anyone, whatever the directory holds: `asks_nobody`), that escalates to nobody, and on which
        nobody handed their vote over (a delegation lists the gate under the delegate's `P#` family, and the record
        that closed it names its inbox entries: app/dispatch.py HeldRuns.closed_gate). Every release since 0.9.0
        tells and lists a gate so. Anything else, and a close read other than with its record, asks the log."""
        closed = self.records.closed_gate(state.runId, interrupt_id)
        if closed is None or any(family.startswith("P#") for family in closed.families):
            return False
        node = self.definitions.workflow(state.tenant, state.workflowId, state.workflowVersion).node(node_id)
        return node.typeId == APPROVAL_GATE and node.config.get("onTimeout") != "escalate" and asks_nobody(node.config)

    def _type_of(self, state: RunState, node_id: str) -> str | None:
        definition = self.definitions.workflow(state.tenant, state.workflowId, state.workflowVersion)
        return next((n.typeId for n in definition.nodes if n.id == node_id), None)

    def _raised(self, state: RunState, event: dict[str, Any], settings: RecordSettings) -> list[dict[str, Any]]:
        interrupt = _open_asking(state, event.get("nodeId"))
        if interrupt is None or interrupt.key != (event.get("payload") or {}).get("key"):
            return []  # decided before this record was handled (or asks no person): nobody to ask
        people, cut = recipients(self.directory, state.tenant, self._asked_of(state, interrupt))
        self._schedule_reminders(state, interrupt, settings)
        base = {"cut": True} if cut else {}
        return [
            queue_message(state.tenant, state.runId, interrupt.nodeId, interrupt.interruptId, pid, RAISED, **base, **extra)
            for pid, extra in self._asked(state.tenant, interrupt, people, settings)
        ]

    def _asked_of(self, state: RunState, interrupt: OpenInterrupt) -> dict[str, Any]:
        """Where the gate names whom it asks (app.facts.asked_of): an approval's data, another gate's node config."""
        if interrupt.kind == "approval":
            return dict(interrupt.payload["data"])
        config = self.definitions.workflow(state.tenant, state.workflowId, state.workflowVersion).node(interrupt.nodeId).config
        return asked_of(interrupt.payload, config)

    def _asked(
        self, tenant: str, interrupt: OpenInterrupt, people: list[str], settings: RecordSettings
    ) -> list[tuple[str, dict[str, Any]]]:
        """Who a notification of the gate goes to, each with what its message names: the recipients whose own vote is
        not in, then each delegate holding a vote nobody has cast (issue 14 item 4), one entry per person."""
        allowed = bool(settings().allowDelegation)
        own = [pid for pid in people if still_asked(interrupt, pid, True, [], allowed)]
        delegates = self._delegates_asked(tenant, interrupt, own) if allowed else {}
        asked = []
        for pid in dict.fromkeys([*own, *delegates]):
            extra: dict[str, Any] = {} if allowed else {"delegation": False}
            if pid in delegates:
                extra["onBehalfOf"] = delegates[pid]
                if pid not in own:
                    extra["forSelf"] = False
            asked.append((pid, extra))
        return asked

    def _reminder_offsets_ms(self, state: RunState, node_id: str, settings: RecordSettings) -> list[int]:
        config = self.definitions.workflow(state.tenant, state.workflowId, state.workflowVersion).node(node_id).config
        asked = config.get("remindersMs")
        if asked is not None:
            return list(asked)
        return list(settings().remindersMs or ())

    def _reminders(self, state: RunState, interrupt: OpenInterrupt, settings: RecordSettings) -> list[Deadline]:
        raised = _epoch(interrupt.raisedAt)
        out = []
        for index, offset in enumerate(sorted(self._reminder_offsets_ms(state, interrupt.nodeId, settings))):
            due = raised + offset / 1000
            if interrupt.deadline is None or due < interrupt.deadline:
                out.append(Deadline("reminder", due, interrupt.nodeId, interrupt_id=interrupt.interruptId, visit=index))
        return out

    def _schedule_reminders(self, state: RunState, interrupt: OpenInterrupt, settings: RecordSettings) -> None:
        scheduler = scheduler_.from_env()
        if scheduler is None:
            return
        for reminder in self._reminders(state, interrupt, settings):
            scheduler.ensure(state.runId, reminder)

    def _cancel_reminders(self, state: RunState, event: dict[str, Any], settings: RecordSettings) -> None:
        scheduler = scheduler_.from_env()
        payload = event.get("payload") or {}
        node_id, interrupt_id = payload.get("nodeId"), payload.get("interruptId")
        if scheduler is None or not node_id or not interrupt_id:
            return
        if self._type_of(state, node_id) not in ASKING_GATES:
            return
        count = len(self._reminder_offsets_ms(state, node_id, settings))
        for index in range(count):
            scheduler.delete(state.runId, Deadline("reminder", 0, node_id, interrupt_id=interrupt_id, visit=index))

    def _escalation(self, state: RunState, event: dict[str, Any], settings: RecordSettings) -> list[dict[str, Any]]:
        payload = event.get("payload") or {}
        node_id, interrupt_id = payload.get("nodeId") or event.get("nodeId"), payload.get("interruptId")
        if not node_id or not interrupt_id:
            return []
        config = self.definitions.workflow(state.tenant, state.workflowId, state.workflowVersion).node(node_id).config
        principals = list(config.get("escalationPrincipals") or ())
        if not principals:
            principals = list(settings().overridePrincipals)
        people = [principal_subject(p) for p in principals]
        title = payload.get("title") or node_id
        return [
            queue_message(state.tenant, state.runId, node_id, interrupt_id, pid, ESCALATION, title=title)
            for pid in dict.fromkeys(people)
        ]

    def enqueue_reminders(self, body: dict[str, Any]) -> int:
        """A reminder's schedule fired (the timeouts function hands it here): queue it for those whose vote is not in
        (cast by them or for them, or handed over) and for each delegate who may cast a vote nobody has cast (issue 14
        item 4), one message per person naming the votes it asks for (`onBehalfOf`, `forSelf`)."""
        run_id, node_id, interrupt_id = body.get("runId"), body.get("nodeId"), body.get("interruptId")
        if not isinstance(run_id, str) or not isinstance(node_id, str) or not isinstance(interrupt_id, str):
            return 0
        got = self.records.get_run(run_id)
        if got is None:
            return 0
        state, _ = got
        interrupt = _open_asking(state, node_id, interrupt_id)
        if interrupt is None:
            return 0  # settled: reminders stop
        people, _ = recipients(self.directory, state.tenant, self._asked_of(state, interrupt))
        purpose = reminder_purpose(int(body.get("visit") or 0))
        messages = [
            queue_message(state.tenant, run_id, node_id, interrupt_id, pid, purpose, due=body.get("due"), **extra)
            for pid, extra in self._asked(state.tenant, interrupt, people, self._record_settings(state.tenant))
        ]
        send(messages)
        return len(messages)

    def _delegates_asked(self, tenant: str, interrupt: OpenInterrupt, waiting: list[str]) -> dict[str, list[str]]:
        """Delegates to remind, each with the principals whose votes they may cast and nobody has: those handed to them
        on this gate, and those of the gate's waiting principals now out of office with them as delegate (their entries:
        one BatchGetItem). Asked only where the tenant allows delegation (else the delegate could not vote)."""
        asked: dict[str, list[str]] = {}
        for vote in interrupt.votes:
            delegator = (vote.subject or {}).get("subjectId")
            if vote.action == "delegate" and vote.delegate and delegator and not vote_in(interrupt, delegator):
                asked.setdefault(vote.delegate, []).append(delegator)
        now = self.clock()
        data = interrupt.payload["data"]
        for pid, raw in self.directory.get_many(tenant, waiting).items():
            away = PrincipalEntry.model_validate(raw).outOfOffice
            if away is None or away.delegate == pid or not away.active(now):
                continue
            subject = {"issuer": auth.ISSUER, "subjectId": pid, "tenant": tenant}
            standing = Delegator(f"{auth.ISSUER}|{pid}", subject, tuple(raw.get("groups") or ()), tuple(raw.get("roles") or ()), "out-of-office")
            if named_by(data, standing):
                asked.setdefault(away.delegate, []).append(pid)
        return {delegate: list(dict.fromkeys(names)) for delegate, names in asked.items()}


def send(messages: list[dict[str, Any]]) -> None:
    if not messages:
        return
    queue_url = notify_settings().queue_url
    if not queue_url:
        # A deployment always sets it (wiring: dispatch and timeouts send to the queue); a bare test harness does not.
        log.warning("NOTIFICATION_QUEUE_URL is not set: %d notification(s) not queued", len(messages))
        return
    send_grouped(queue_url, [(m["tenant"], m) for m in messages], "notification")


def _epoch(iso_text: str) -> float:
    return datetime.fromisoformat(iso_text.replace("Z", "+00:00")).timestamp()
