"""The console's pages: from what the services answered to what templates/*.html draw.

The approval page's discipline (interlude.api.page): no script, no third-party asset, one nonce'd style sheet, every
value escaped by the templates, the same layout and the same gate forms. This module decides what each page says
(the words, the rows, which forms); the templates own every tag. Every page is a form or a link away from every
action, so it works without JavaScript and from the keyboard; landmarks, labels and captions name what a screen
reader announces.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from interlude.api.page import approval, forms, templating
from interlude.api.page.graph import GraphNode, describe, drawing
from interlude.api.page.names import Names
from interlude.api.page.text import Cell, cell_of, pretty
from interlude.domain.ids import principal_subject, to_wire

SECTIONS = (
    ("inbox", "Inbox"),
    ("runs", "Runs"),
    ("workflows", "Workflows"),
    ("keys", "Keys"),
    ("audit", "Audit"),
    ("dead-letters", "Dead letters"),
)
RUN_STATUSES = (
    "pending",
    "running",
    "waiting-approval",
    "waiting-input",
    "waiting-external",
    "completed",
    "failed",
    "cancelled",
)


@dataclass(frozen=True)
class Frame:
    """Who is signed in, and the proof every form of the page carries."""

    subject_id: str
    tenant: str
    proof: str
    scopes: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Notice:
    """A banner at the top of a page: ok | info | warn | bad."""

    cls: str
    heading: str
    sentence: str = ""
    # Lines shown under the sentence (per-id results of a bulk action).
    lines: tuple[str, ...] = field(default_factory=tuple)


def run_href(run_id: str) -> str:
    return f"/console/runs/{to_wire(run_id)}"


def _query_href(path: str, query: Mapping[str, str]) -> str:
    return f"{path}?{urlencode(query)}"


# -- the document ------------------------------------------------------------------------------------


def document(
    title: str, body: str, style_nonce: str, frame: Frame | None, current: str = "", go_to: str | None = None
) -> str:
    """`go_to`: a console path the browser moves on to at once (a meta refresh: no script needed)."""
    return templating.render(
        "console/layout.html",
        title=title,
        body=templating.markup(body),
        style_nonce=style_nonce,
        frame=frame,
        current=current,
        go_to=go_to,
        sections=SECTIONS,
    )


def see_other(location: str) -> str:
    """The body of a 303: a link where the browser goes on its own."""
    return templating.render("console/see_other.html", location=location)


# -- sign in, and messages ----------------------------------------------------------------------------


def sign_in(proof: str, notice: Notice | None = None) -> str:
    return templating.render("console/sign_in.html", proof=proof, notice=notice)


def message(notice: Notice, link: tuple[str, str] | None = None) -> str:
    return templating.render("console/message.html", notice=notice, link=link)


# -- deciding (inbox and run pages) ------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """An open gate's forms as the console shows them, posting to its decide route (forms.gate_forms)."""

    action: str
    hidden_fields: tuple[tuple[str, str], ...]
    # Several gates share a page: each one's ids start with its own prefix.
    id_prefix: str
    forms: list[forms.Form]


# A gate's form filled in again: (run id, node id, what it is filled with) — a refused answer or an example.
Filled = tuple[str, str, forms.Answer]


def decision(
    run_id: str,
    node_id: str,
    payload: Mapping[str, Any],
    proof: str,
    prefix: str,
    filled: Filled | None = None,
    labels: Mapping[str, str] | None = None,
) -> Decision:
    # `back`: the page the decision returns to (inbox | run).
    hidden = (("csrf", proof), ("back", prefix.split("-")[0]))
    action = f"{run_href(run_id)}/interrupts/{quote(node_id, safe='')}"
    answer = filled[2] if filled is not None and filled[:2] == (run_id, node_id) else None
    return Decision(action, hidden, f"{prefix}-", forms.gate_forms(payload, answer, labels))


@dataclass(frozen=True)
class Asked:
    """What a gate asks, to read before deciding: its kind, title, message and what is being decided."""

    kind: str
    title: str
    message: Cell | None
    artifact: approval.Artifact | None


def asked(payload: Mapping[str, Any], labels: Mapping[str, str]) -> Asked:
    title, message = approval.headline(payload)
    return Asked(approval.kind_words(payload), title, cell_of(message) if message else None, approval.artifact_of(payload, labels))


def vote_rows(votes: Sequence[Mapping[str, Any]], people: Mapping[str, str] | None = None) -> list[tuple[str, str, str, str]]:
    """(who, decision, when, surface) of each vote, people by name (`people`: subject id -> what the directory calls
    them; else their subject id)."""
    return [(_voter(v, people or {}), str(v.get("action", "")), str(v.get("at", "")), str(v.get("surface", ""))) for v in votes]


def votes_table(votes: Sequence[Mapping[str, Any]], caption: str = "Votes") -> str:
    return templating.render("console/votes.html", votes=vote_rows(votes), caption=caption)


def voters(votes: Sequence[Mapping[str, Any]]) -> set[str]:
    """The subject ids of who voted and who cast a vote for them."""
    found = {principal_subject(str(v.get("principal", ""))) for v in votes}
    found |= {c for v in votes if (c := _cast_by(v))}
    return found


def _voter(vote: Mapping[str, Any], people: Mapping[str, str]) -> str:
    """Whose vote it is, and who cast it when a delegate did."""
    who = _person(principal_subject(str(vote.get("principal", ""))), people)
    cast_by = _cast_by(vote)
    cast = _person(cast_by, people) if cast_by else ""
    return f"{who} (cast by {cast})" if cast and cast != who else who


def _cast_by(vote: Mapping[str, Any]) -> str | None:
    """The subject id of the delegate who cast this vote (a principal, as the vote stores it), if one did."""
    cast_by = vote.get("castBy")
    return principal_subject(cast_by) if isinstance(cast_by, str) and cast_by else None


# -- inbox --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InboxEntry:
    asked: Asked
    # The workflow's name (None: an unnamed inline definition), the step's.
    workflow: str | None
    step: str
    run_id: str
    raised_at: str
    # Whose gate the signed-in principal decides as a delegate (issue 14 item 4), in words; None: their own.
    on_behalf_of: str | None
    votes: list[tuple[str, str, str, str]]
    decision: Decision

    @property
    def run_href(self) -> str:
        return run_href(self.run_id)


def inbox(
    frame: Frame,
    items: Sequence[Mapping[str, Any]],
    next_cursor: str | None,
    notice: Notice | None,
    names: Mapping[str, Names] | None = None,
    filled: Filled | None = None,
    people: Mapping[str, str] | None = None,
) -> str:
    """`names`: by run id, what its workflow calls its parts (a run missing from it is named by its ids); `people`:
    by subject id, what the directory calls the voters."""
    entries = []
    for i, item in enumerate(items):
        payload = item.get("payload") or {}
        named = (names or {}).get(str(item["runId"])) or Names(str(item.get("workflowId", "")))
        node_id = str(item.get("nodeId", ""))
        labels = named.labels_of(node_id)
        entries.append(
            InboxEntry(
                asked=asked(payload, labels),
                workflow=named.workflow,
                step=named.step(node_id),
                run_id=str(item["runId"]),
                raised_at=str(item.get("raisedAt", "")),
                on_behalf_of=", ".join(item["onBehalfOf"]) if item.get("onBehalfOf") else None,
                votes=vote_rows(item.get("votes") or [], people),
                decision=decision(item["runId"], node_id, payload, frame.proof, f"inbox-{i}", filled, labels),
            )
        )
    older = _query_href("/console/inbox", {"cursor": next_cursor}) if next_cursor else None
    return templating.render("console/inbox.html", notice=notice, entries=entries, older=older)


# -- runs ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunsView:
    runs: Sequence[Mapping[str, Any]]
    next_cursor: str | None
    status: str | None
    workflow_id: str | None


@dataclass(frozen=True)
class RunRow:
    run_id: str
    workflow_id: str
    status: str
    started: str

    @property
    def href(self) -> str:
        return run_href(self.run_id)


def runs(frame: Frame, view: RunsView, notice: Notice | None) -> str:
    rows = [
        RunRow(str(r["runId"]), str(r.get("workflowId", "")), str(r.get("status", "")), str(r.get("startedAt") or r.get("createdAt") or ""))
        for r in view.runs
    ]
    next_page = None
    if view.next_cursor:
        query = {"cursor": view.next_cursor}
        if view.status:
            query["status"] = view.status
        if view.workflow_id:
            query["workflowId"] = view.workflow_id
        next_page = _query_href("/console/runs", query)
    return templating.render(
        "console/runs.html",
        frame=frame,
        notice=notice,
        statuses=RUN_STATUSES,
        status=view.status,
        workflow_id=view.workflow_id or "",
        rows=rows,
        next_page=next_page,
    )


# -- one run ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunView:
    snapshot: Mapping[str, Any]
    nodes: Sequence[GraphNode]
    edges: Sequence[tuple[str, str]]
    # node id → its open interrupt (payload, votes, …), for the open gates section.
    open_interrupts: Mapping[str, Mapping[str, Any]]
    events: Sequence[Mapping[str, Any]]
    more_events_after: int | None
    deliveries: Sequence[Mapping[str, Any]]
    # Sections whose source is not there yet: (heading, sentence).
    unavailable: Sequence[tuple[str, str]] = ()
    notifications: Sequence[Mapping[str, Any]] | None = None
    tokens: Sequence[Mapping[str, Any]] | None = None
    names: Names | None = None
    # subject id -> what the directory calls them
    people: Mapping[str, str] = field(default_factory=dict)
    filled: Filled | None = None
    # The step of a run failed at its HTTP call that the session may take again (None: none).
    retry_step: str | None = None


@dataclass(frozen=True)
class OpenGate:
    step: str
    asked: Asked
    facts: list[tuple[str, str]]
    votes: list[tuple[str, str, str, str]]
    # None: the signed-in principal may not decide it.
    decision: Decision | None


@dataclass(frozen=True)
class TimelineEntry:
    sequence: str
    timestamp: str
    summary: str
    # The event's payload as pretty JSON; "" when it has none.
    payload: str


@dataclass(frozen=True)
class Record:
    """A record shown folded: one line, and the whole of it as JSON."""

    line: str
    json: str


def run(frame: Frame, view: RunView, notice: Notice | None) -> str:
    snap = view.snapshot
    run_id = str(snap["runId"])
    ext = (snap.get("extensions") or {}).get("interlude.run") or {}
    workflow_id = str(snap["workflowId"])
    names = view.names or Names(workflow_id)
    later = None if view.more_events_after is None else f"{run_href(run_id)}?after={view.more_events_after}"
    return templating.render(
        "console/run.html",
        frame=frame,
        notice=notice,
        run_id=run_id,
        status=str(snap.get("status")),
        rejected=rejection(snap, view.events, view.people),
        workflow_id=workflow_id,
        workflow=names.workflow or "an unnamed workflow",
        workflow_href=_query_href(f"/console/workflows/{quote(workflow_id, safe='')}", {"version": str(ext.get("workflowVersion", ""))}),
        workflow_version=str(ext.get("workflowVersion", "?")),
        started=str(snap.get("startedAt", "—")),
        ended=str(snap.get("completedAt", "—")),
        waiting_at=names.step(str(snap["currentNodeId"])) if snap.get("currentNodeId") else "—",
        may_cancel=snap.get("status") not in ("completed", "failed", "cancelled"),
        retry=None
        if view.retry_step is None
        else (names.step(view.retry_step), f"{run_href(run_id)}/actions/{quote(view.retry_step, safe='')}/retry"),
        graph=drawing(view.nodes, view.edges, ""),
        steps=[f"{names.step(nid)}: {words}" for nid, words in describe(view.nodes, "")],
        gates=[
            _open_gate(frame, run_id, i, node_id, interrupt, names, view.filled, view.people)
            for i, (node_id, interrupt) in enumerate(view.open_interrupts.items())
        ],
        timeline=[_timeline_entry(e, names, view.people) for e in view.events],
        later=later,
        deliveries=[_delivery_row(d) for d in view.deliveries],
        notifications=None if view.notifications is None else [_notification_row(n) for n in view.notifications],
        tokens=None if view.tokens is None else [Record(_record_line(r), pretty(r)) for r in view.tokens],
        unavailable=view.unavailable,
    )


def _open_gate(
    frame: Frame,
    run_id: str,
    i: int,
    node_id: str,
    interrupt: Mapping[str, Any],
    names: Names,
    filled: Filled | None,
    people: Mapping[str, str],
) -> OpenGate:
    payload = interrupt.get("payload") or {}
    required = (payload.get("data") or {}).get("requiredApprovals")
    facts = [
        ("Asked", str(interrupt.get("raisedAt", ""))),
        ("Deadline", str(interrupt.get("deadline", "none"))),
        *([("Approvals needed", str(required))] if isinstance(required, int) else []),
    ]
    may_decide = interrupt.get("mayDecide")
    labels = names.labels_of(node_id)
    return OpenGate(
        names.step(node_id),
        asked(payload, labels),
        facts,
        vote_rows(interrupt.get("votes") or [], people),
        decision(run_id, node_id, payload, frame.proof, f"run-{i}", filled, labels) if may_decide else None,
    )


def rejection(snapshot: Mapping[str, Any], events: Sequence[Mapping[str, Any]], people: Mapping[str, str]) -> str | None:
    """A run a rejection stopped, as people say it ("Rejected by Ana: too casual"), never as a failure; None for any
    other run. Who and why come from the rejection's `interrupt.resolved` on this page of the timeline."""
    if (snapshot.get("error") or {}).get("code") != "approval_rejected":
        return None
    resolved = next(
        (e.get("payload") or {} for e in reversed(events) if e.get("type") == "interrupt.resolved" and (e.get("payload") or {}).get("decision") == "rejected"),
        {},
    )
    if resolved.get("reason") == "timeout":
        return "Rejected automatically: nobody decided in time"
    who = _person((resolved.get("resolvedBy") or {}).get("subjectId"), people)
    value: Mapping[str, Any] = resolved["resumeValue"] if isinstance(resolved.get("resumeValue"), Mapping) else {}
    why = next((value[k] for k in ("comment", "feedback") if isinstance(value.get(k), str)), "")
    return "Rejected" + (f" by {who}" if who else "") + (f": {why}" if why else "")


def _person(subject_id: Any, people: Mapping[str, str]) -> str:
    return people.get(str(subject_id), str(subject_id)) if subject_id else ""


EVENT_WORDS = {
    "run.started": "Run started",
    "run.completed": "Run completed",
    "run.failed": "Run failed",
    "run.cancelled": "Run cancelled",
    "node.started": "Step started",
    "node.completed": "Step completed",
    "node.failed": "Step failed",
    "node.skipped": "Step skipped",
    "node.cancelled": "Step cancelled",
    "node.suspended": "Step waiting",
    "node.resumed": "Step resumed",
    "interrupt.requested": "Asked for a decision",
    "approval.requested": "Approval requested",
    "interrupt.resolved": "Decided",
    "approval.received": "Vote received",
}


def event_summary(event: Mapping[str, Any], names: Names | None = None, people: Mapping[str, str] | None = None) -> str:
    """One readable line for an event: what happened, to which step (by name), decided how and by whom."""
    payload = event.get("payload") or {}
    words = EVENT_WORDS.get(str(event.get("type")), str(event.get("type")))
    bits = [words]
    if event.get("nodeId"):
        bits.append(f"· {names.step(str(event['nodeId'])) if names else event['nodeId']}")
    for name in ("kind", "action", "decision", "reason"):
        if isinstance(payload.get(name), str):
            bits.append(f"· {name} {payload[name]}")
    who = payload.get("resolvedBy")
    if isinstance(who, dict) and who.get("subjectId"):
        bits.append(f"· by {_person(who['subjectId'], people or {})}")
    error = payload.get("error")
    if isinstance(error, dict) and error.get("message"):
        bits.append(f"· {error['message']}")
    return " ".join(bits)


def _timeline_entry(event: Mapping[str, Any], names: Names | None = None, people: Mapping[str, str] | None = None) -> TimelineEntry:
    payload = event.get("payload")
    return TimelineEntry(
        str(event.get("sequence")), str(event.get("timestamp", "")), event_summary(event, names, people), pretty(payload) if payload else ""
    )


def _delivery_row(d: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(
        str(v)
        for v in (
            d.get("at", ""),
            d.get("event") or d.get("type") or "",
            d.get("attempt", ""),
            d.get("outcome") or d.get("status") or "",
            d.get("httpStatus") or d.get("statusCode") or "",
        )
    )


def _notification_row(n: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(
        str(v)
        for v in (
            n.get("at") or n.get("queuedAt") or "",
            n.get("principalId", ""),
            n.get("purpose", ""),
            n.get("channel") or "—",
            n.get("outcome") or n.get("status") or "",
        )
    )


def _who(actor: Any) -> str:
    if not isinstance(actor, Mapping):
        return ""
    return f"{actor.get('subjectId', '?')} ({actor.get('surface', '?')})"


def _target(target: Any) -> str:
    if not isinstance(target, Mapping):
        return ""
    return " ".join(f"{k} {v}" for k, v in target.items())


def _record_line(record: Mapping[str, Any]) -> str:
    keys = ("at", "createdAt", "timestamp", "type", "action", "channel", "status", "outcome", "nodeId", "intent")
    return " · ".join(str(record[k]) for k in keys if isinstance(record.get(k), str | int)) or "entry"


# -- workflows ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkflowRow:
    workflow_id: str
    name: str
    latest_version: str
    face: str
    updated: str

    @property
    def href(self) -> str:
        return f"/console/workflows/{quote(self.workflow_id, safe='')}"


def workflows(
    frame: Frame,
    listed: Sequence[Mapping[str, Any]],
    notice: Notice | None,
    page: int = 1,
    total_pages: int = 1,
) -> str:
    rows = [
        WorkflowRow(
            str(w.get("id") or w.get("workflowId")),
            str(w.get("name") or ""),
            str(w.get("latestVersion") or w.get("version") or ""),
            str(w.get("face") or ""),
            str(w.get("updatedAt") or w.get("createdAt") or ""),
        )
        for w in listed
    ]
    next_page = f"/console/workflows?page={page + 1}" if page < total_pages else None
    return templating.render("console/workflows.html", notice=notice, rows=rows, next_page=next_page)


def workflow(
    frame: Frame, got: Mapping[str, Any], nodes: Sequence[GraphNode], edges: Sequence[tuple[str, str]]
) -> str:
    workflow_id = str(got["workflowId"])
    version = int(got["version"])
    latest = int(got.get("latestVersion") or version)
    base = f"/console/workflows/{quote(workflow_id, safe='')}"
    return templating.render(
        "console/workflow.html",
        workflow_id=workflow_id,
        version=version,
        latest=latest,
        versions=[(v, f"{base}?version={v}") for v in range(latest, max(0, latest - 50), -1)],
        graph=drawing(nodes, edges, ""),
        steps=[f"{n.label} ({n.type_id})" for n in nodes],
        definition=json.dumps(got["definition"], indent=2, ensure_ascii=False, allow_nan=False),
    )


# -- keys ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyRow:
    key_id: str
    subject: str
    scopes: str
    status: str
    created: str


def keys(
    frame: Frame,
    listed: Sequence[Mapping[str, Any]],
    next_cursor: str | None,
    notice: Notice | None,
    created: Mapping[str, Any] | None = None,
    scopes: Sequence[str] = (),
) -> str:
    rows = [
        KeyRow(
            str(k["keyId"]),
            str((k.get("subject") or {}).get("subjectId", "")),
            ", ".join(k.get("scopes") or []),
            str(k.get("status", "")),
            str(k.get("createdAt", "")),
        )
        for k in listed
    ]
    return templating.render(
        "console/keys.html",
        frame=frame,
        notice=notice,
        created_key=None if created is None else str(created["apiKey"]),
        rows=rows,
        more=_query_href("/console/keys", {"cursor": next_cursor}) if next_cursor else None,
        scopes=scopes,
    )


# -- dead letters -------------------------------------------------------------------------------------

# Why a delivery was dead-lettered, in words (the dead letter's `reason`).
DEAD_REASONS = {"retries_exhausted": "Every attempt failed", "payload_unprojectable": "Its event could not be sent"}


@dataclass(frozen=True)
class DeadLetterRow:
    webhook_id: str
    delivery_id: str
    run_id: str
    run_href: str
    event: str
    attempts: int
    why: str
    since: str


@dataclass(frozen=True)
class SubscriptionDeadLetters:
    url: str
    rows: list[DeadLetterRow]


def dead_letters(
    frame: Frame, groups: Sequence[tuple[Mapping[str, Any], Sequence[Mapping[str, Any]]]], notice: Notice | None
) -> str:
    """Each subscription (its URL) with its dead letters, newest first, each with a Retry button."""
    shown = [
        SubscriptionDeadLetters(
            str(subscription["url"]),
            [
                DeadLetterRow(
                    str(subscription["webhookId"]),
                    str(d["deliveryId"]),
                    str(d["runId"]),
                    run_href(str(d["runId"])),
                    EVENT_WORDS.get(str(d["eventType"]), str(d["eventType"])),
                    int(d["attempts"]),
                    DEAD_REASONS.get(str(d["reason"]), str(d["reason"]))
                    + (f" (last answer: HTTP {d['lastStatus']})" if d.get("lastStatus") else ""),
                    str(d["deadLetteredAt"]),
                )
                for d in listed
            ],
        )
        for subscription, listed in groups
    ]
    return templating.render("console/dead_letters.html", frame=frame, notice=notice, groups=shown)


# -- audit --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditRow:
    place: str  # chain:seq
    at: str
    action: str
    who: str
    target: str
    json: str


def audit(frame: Frame, entries: Sequence[Mapping[str, Any]], next_cursor: str | None, notice: Notice | None) -> str:
    rows = [
        AuditRow(
            f"{e.get('chain', '')}:{e.get('seq', '')}",
            str(e.get("at", "")),
            str(e.get("action", "")),
            _who(e.get("actor")),
            _target(e.get("target")),
            pretty(e),
        )
        for e in entries
    ]
    older = _query_href("/console/audit", {"cursor": next_cursor}) if next_cursor else None
    return templating.render("console/audit.html", notice=notice, rows=rows, older=older)

