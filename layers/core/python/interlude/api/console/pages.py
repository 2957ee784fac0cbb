"""The console's pages: from what the services answered to what templates/*.html draw.

The approval page's discipline (interlude.api.page): no script, no third-party asset, one nonce'd style sheet, every
value escaped by the templates, the same layout and the same gate forms. This module decides what each page says
(the words, the rows, which forms); the templates own every tag. Every page is a form or a link away from every
action, so it works without JavaScript and from the keyboard; landmarks, labels and captions name what a screen
reader announces.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from interlude.api.console import readable
from interlude.api.page import approval, forms, templating
from interlude.api.page.graph import STATUS_WORDS, GraphNode, describe, drawing
from interlude.api.page.names import Names
from interlude.api.page.text import Cell, cell_of, spelled
from interlude.domain.event_words import EVENT_WORDS, event_in_words
from interlude.domain.ids import principal_subject, to_wire
from interlude.domain.models.workflow import WorkflowDefinition

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
    # What the directory calls the key's holder; None: it has no name for them (the header then names the key).
    holder: str | None = None

    @property
    def signed_in_as(self) -> str:
        return signed_in_words(self.holder, self.scopes)


def signed_in_words(holder: str | None, scopes: frozenset[str]) -> str:
    """Who is signed in, as the header says it: the holder's directory name, else the kind of key (never the key's
    subject: a protocol value the person never chose to be called by)."""
    if holder:
        return f"Signed in as {holder}"
    return "Signed in with an administrator key" if "keys:admin" in scopes else "Signed in with a key"


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


# A page following runs still moving reloads itself this often (a meta refresh: the strict CSP holds, no script).
LIVE_REFRESH_S = 10


def step_href(run_id: str, node_id: str) -> str:
    """The run page with this step's input and output open (the panel's anchor)."""
    return f"{_query_href(run_href(run_id), {'step': node_id})}#io"


def _query_href(path: str, query: Mapping[str, str]) -> str:
    return f"{path}?{urlencode(query)}"


# -- the document ------------------------------------------------------------------------------------


def document(
    title: str,
    body: str,
    style_nonce: str,
    frame: Frame | None,
    current: str = "",
    go_to: str | None = None,
    refresh_s: int | None = None,
) -> str:
    """`go_to`: a console path the browser moves on to at once (a meta refresh: no script needed); `refresh_s`: the
    page reloads itself this often (a run still moving)."""
    return templating.render(
        "console/layout.html",
        title=title,
        body=templating.markup(body),
        style_nonce=style_nonce,
        frame=frame,
        current=current,
        go_to=go_to,
        refresh_s=refresh_s,
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
class Claim:
    """Who works an open gate, in words, and the forms that change it (issue 29 item 3)."""

    # "Claimed by Ana", "Assigned to Bo by Ana"; None: nobody works it.
    words: str | None
    # The forms' actions (None: not offered): claim (nobody works it), release (the session's subject holds or
    # assigned it), assign; none when the session may not change who works it.
    claim: str | None
    release: str | None
    assign: str | None
    hidden_fields: tuple[tuple[str, str], ...]
    id_prefix: str


def claim_of(
    run_id: str,
    node_id: str,
    assignee: str | None,
    assigned_by: str | None,
    frame: Frame,
    prefix: str,
    people: Mapping[str, str],
    allowed: bool,
) -> Claim:
    base = f"{run_href(run_id)}/interrupts/{quote(node_id, safe='')}"
    words = None
    if assignee:
        who = readable.person(assignee, people)
        by = readable.person(assigned_by, people)
        words = f"Claimed by {who}" if assigned_by in (None, assignee) else f"Assigned to {who} by {by}"
    me = frame.subject_id
    return Claim(
        words,
        f"{base}/claim" if allowed and not assignee else None,
        f"{base}/release" if allowed and assignee and me in (assignee, assigned_by) else None,
        f"{base}/assignee" if allowed else None,
        (("csrf", frame.proof), ("back", prefix.split("-")[0])),
        f"{prefix}-",
    )


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
    them; else their subject id), each decision in words (approval.DECISION_WORDS)."""
    return [(_voter(v, people or {}), _decided(v), str(v.get("at", "")), str(v.get("surface", ""))) for v in votes]


def _decided(vote: Mapping[str, Any]) -> str:
    action = str(vote.get("action", ""))
    return approval.DECISION_WORDS.get(action, action)


def votes_table(votes: Sequence[Mapping[str, Any]], caption: str = "Votes") -> str:
    return templating.render("console/votes.html", votes=vote_rows(votes), caption=caption)


def voters(votes: Sequence[Mapping[str, Any]]) -> set[str]:
    """The subject ids of who voted and who cast a vote for them."""
    found = {principal_subject(str(v.get("principal", ""))) for v in votes}
    found |= {c for v in votes if (c := _cast_by(v))}
    return found


def _voter(vote: Mapping[str, Any], people: Mapping[str, str]) -> str:
    """Whose vote it is, and who cast it when a delegate did."""
    who = readable.person(principal_subject(str(vote.get("principal", ""))), people)
    cast_by = _cast_by(vote)
    cast = readable.person(cast_by, people) if cast_by else ""
    return f"{who} (cast by {cast})" if cast and cast != who else who


def _cast_by(vote: Mapping[str, Any]) -> str | None:
    """The subject id of the delegate who cast this vote (a principal, as the vote stores it), if one did."""
    cast_by = vote.get("castBy")
    return principal_subject(cast_by) if isinstance(cast_by, str) and cast_by else None


# -- inbox --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunContext:
    """What the console shows of a run beside a decision: what its workflow calls its parts, its inputs, and when
    each open gate is due."""

    names: Names
    inputs: Mapping[str, Any] = field(default_factory=dict)
    # node id -> its deadline (ISO)
    due: Mapping[str, str] = field(default_factory=dict)
    # node id -> (who works it, who assigned it)
    assignees: Mapping[str, tuple[str | None, str | None]] = field(default_factory=dict)
    # How the run's caller wrote its numbers (RunState.writtenNumbers): its gates' payloads show them so.
    written: Mapping[str, str] = field(default_factory=dict)


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
    # The run's inputs to read beside the form (None: it has none); when it is due; who may still vote.
    inputs: Cell | None = None
    due: str | None = None
    still: str | None = None
    # Who works it and the forms that change it.
    claim: Claim | None = None

    @property
    def run_href(self) -> str:
        return run_href(self.run_id)


# The inbox's orders and claim filters (GET /interrupts' `sort` and `claim`): (value, words). Each orders or filters
# the whole inbox, page after page.
INBOX_SORTS = (("newest", "Newest first"), ("oldest", "Oldest first"), ("due", "Due first"))
INBOX_CLAIMS = (("mine", "Claimed by me or assigned to me"), ("unclaimed", "Nobody works it"))


@dataclass(frozen=True)
class InboxQuery:
    """The inbox's filters (those GET /interrupts takes) and its order."""

    kind: str | None = None
    workflow_id: str | None = None
    sort: str = "newest"
    claim: str | None = None

    def filters(self) -> dict[str, str]:
        """As GET /interrupts names them (the inbox service's filters)."""
        asked = {"kind": self.kind, "workflowId": self.workflow_id, "claim": self.claim}
        return {k: v for k, v in asked.items() if v} | ({"sort": self.sort} if self.sort != "newest" else {})

    def href(self, **changed: str) -> str:
        query = {
            "kind": self.kind,
            "workflowId": self.workflow_id,
            "sort": self.sort if self.sort != "newest" else None,
            "claim": self.claim,
            **changed,
        }
        return _query_href("/console/inbox", {k: v for k, v in query.items() if v})


def kind_choices(kinds: Sequence[str]) -> list[tuple[str, str]]:
    """Each interrupt kind in words, told apart where two share the same words."""
    said = [approval.kind_words({"kind": k}) for k in kinds]
    return [(k, w if said.count(w) == 1 else f"{w} ({k.split('.')[-1]})") for k, w in zip(kinds, said, strict=True)]


def inbox(
    frame: Frame,
    items: Sequence[Mapping[str, Any]],
    next_cursor: str | None,
    notice: Notice | None,
    contexts: Mapping[str, RunContext] | None = None,
    filled: Filled | None = None,
    people: Mapping[str, str] | None = None,
    query: InboxQuery | None = None,
    kinds: Sequence[str] = (),
    may_claim: bool = False,
    workflows: Sequence[tuple[str, str]] = (),
) -> str:
    """`contexts`: by run id, what its workflow calls its parts, its inputs, its gates' deadlines and who works them
    (a run missing from it is named by its ids); `people`: by subject id, what the directory calls the voters;
    `may_claim`: the session may claim, release and assign (the claim routes' scope); `workflows`: the Workflow
    filter's choices (RunsView.workflows)."""
    query = query or InboxQuery()
    contexts = contexts or {}
    entries = []
    for i, item in enumerate(items):
        context = contexts.get(str(item["runId"])) or RunContext(Names(str(item.get("workflowId", ""))))
        payload = spelled(item.get("payload") or {}, context.written)
        named = context.names
        node_id = str(item.get("nodeId", ""))
        labels = named.labels_of(node_id)
        votes = item.get("votes") or []
        assignee, assigned_by = context.assignees.get(node_id, (None, None))
        entries.append(
            InboxEntry(
                asked=asked(payload, labels),
                workflow=named.workflow,
                step=named.step(node_id),
                run_id=str(item["runId"]),
                raised_at=str(item.get("raisedAt", "")),
                on_behalf_of=", ".join(readable.person(p, people or {}) for p in item["onBehalfOf"]) if item.get("onBehalfOf") else None,
                votes=vote_rows(votes, people),
                decision=decision(item["runId"], node_id, payload, frame.proof, f"inbox-{i}", filled, labels),
                inputs=cell_of(context.inputs) if context.inputs else None,
                due=context.due.get(node_id),
                still=readable.still_to_vote(payload, votes, voters(votes), people or {}),
                claim=claim_of(item["runId"], node_id, assignee, assigned_by, frame, f"inbox-{i}", people or {}, may_claim),
            )
        )
    older = query.href(cursor=next_cursor) if next_cursor else None
    return templating.render(
        "console/inbox.html",
        notice=notice,
        entries=entries,
        older=older,
        query=query,
        kinds=kind_choices(kinds),
        sorts=INBOX_SORTS,
        claims=INBOX_CLAIMS,
        workflows=workflows,
    )


# -- runs ---------------------------------------------------------------------------------------------


# The run search's fields, as the runs page asks them (GET /runs's own parameters; `metadata.<key>` besides).
RUN_SEARCH_FIELDS = ("q", "tags", "status", "workflowId", "workflowIdPrefix", "createdAfter", "createdBefore")


@dataclass(frozen=True)
class RunsView:
    runs: Sequence[Mapping[str, Any]]
    next_cursor: str | None
    # What the search asked, as typed (RUN_SEARCH_FIELDS and metadata.<key>; blank ones left out).
    asked: Mapping[str, str] = field(default_factory=dict)
    # The metadata keys the tenant declared searchable: one field each.
    searchable: Sequence[str] = ()
    # The person asked this list to reload itself (live=on).
    live: bool = False
    # (id, name) of the tenant's workflows, offered as choices for the Workflow filter; empty: too many to list, the
    # filter is a text field.
    workflows: Sequence[tuple[str, str]] = ()

    @property
    def refreshes(self) -> bool:
        """It reloads itself: asked to, and some run on it is still moving."""
        return self.live and self.moving

    @property
    def moving(self) -> bool:
        return any(r.get("status") not in ("completed", "failed", "cancelled") for r in self.runs)


@dataclass(frozen=True)
class RunRow:
    run_id: str
    workflow_id: str
    # What a person calls the workflow (its name; None: an unnamed inline ModuleX definition).
    workflow: str | None
    status: str
    started: str
    tags: str = ""

    @property
    def href(self) -> str:
        return run_href(self.run_id)


def runs(frame: Frame, view: RunsView, notice: Notice | None) -> str:
    rows = [
        RunRow(
            str(r["runId"]),
            str(r.get("workflowId", "")),
            r.get("workflowName"),
            str(r.get("status", "")),
            str(r.get("startedAt") or r.get("createdAt") or ""),
            ", ".join(r.get("tags") or []),
        )
        for r in view.runs
    ]
    asked = dict(view.asked)
    next_page = _query_href("/console/runs", {**asked, "cursor": view.next_cursor}) if view.next_cursor else None
    live_href = _query_href("/console/runs", {**asked, "live": "off" if view.live else "on"}) if view.moving else None
    return templating.render(
        "console/runs.html",
        frame=frame,
        notice=notice,
        statuses=RUN_STATUSES,
        chosen=set((asked.get("status") or "").split(",")),
        asked=asked,
        searchable=[(key, f"metadata.{key}") for key in view.searchable],
        rows=rows,
        next_page=next_page,
        live=view.live,
        live_href=live_href,
        refresh_s=LIVE_REFRESH_S,
        workflows=view.workflows,
    )


@dataclass(frozen=True)
class Confirmation:
    """A destructive action asked once more before it is done: the same form posted again with confirm=yes."""

    heading: str
    sentence: str
    lines: tuple[str, ...]
    action: str
    hidden_fields: tuple[tuple[str, str], ...]
    button: str
    back: str


def confirm(frame: Frame, confirmation: Confirmation) -> str:
    return templating.render("console/confirm.html", frame=frame, confirm=confirmation)


def confirm_cancel(frame: Frame, run_ids: Sequence[str], reason: str) -> str:
    many = len(run_ids) > 1
    return confirm(
        frame,
        Confirmation(
            f"Cancel {len(run_ids)} runs?" if many else "Cancel this run?",
            "Cancelling stops " + ("these runs" if many else "the run") + " for good: open gates close unanswered and "
            "nothing after them happens. It cannot be undone." + (f" Reason: {reason}" if reason else ""),
            tuple(run_ids),
            "/console/runs/cancel",
            (*(("runId", r) for r in run_ids), *((("reason", reason),) if reason else ())),
            f"Yes, cancel {len(run_ids)} runs" if many else "Yes, cancel this run",
            run_href(run_ids[0]) if not many else "/console/runs",
        ),
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
    # Whether the run has dead-lettered callback notices / notifications the session may send again.
    recover_deliveries: bool = False
    recover_notifications: bool = False
    # The step whose input and output are shown (None: the run's), and what is known of it.
    selected: str | None = None
    step: readable.StepInputs | None = None
    # The page reloads itself every LIVE_REFRESH_S (True), may be asked to (False), or the run has ended (None).
    live: bool | None = None
    # The session may fork the run, and redrive it (a failed run).
    may_fork: bool = False


@dataclass(frozen=True)
class OpenGate:
    step: str
    asked: Asked
    facts: list[tuple[str, str]]
    votes: list[tuple[str, str, str, str]]
    # None: the signed-in principal may not decide it.
    decision: Decision | None
    # The run's inputs, read beside the form (None: it has none).
    inputs: Cell | None = None
    claim: Claim | None = None


@dataclass(frozen=True)
class TimelineEntry:
    sequence: str
    timestamp: str
    summary: str
    # What of its payload is worth reading, as fields (None: its line says it all).
    details: readable.Shown | None
    # Its step's input and output (None: a run event).
    step_href: str | None = None
    selected: bool = False


@dataclass(frozen=True)
class InputOutput:
    """The Input / Output panel: of the whole run, or of the step chosen in the graph or the timeline."""

    # What it shows: "the run" or the step's name.
    subject: str
    # The step's state in words ("" for the run).
    state: str
    given: list[readable.Shown]
    gave: list[readable.Shown]
    # Back to the whole run's (None: the run's is shown).
    run_href: str | None


def run(frame: Frame, view: RunView, notice: Notice | None) -> str:
    snap = view.snapshot
    run_id = str(snap["runId"])
    ext = (snap.get("extensions") or {}).get("interlude.run") or {}
    workflow_id = str(snap["workflowId"])
    names = view.names or Names(workflow_id)
    later = None if view.more_events_after is None else f"{run_href(run_id)}?after={view.more_events_after}"
    rejected = rejection(snap, view.events, view.people)
    graph = drawing(view.nodes, view.edges, "")
    linked = [
        dataclasses.replace(
            drawn,
            href=step_href(run_id, node.id),
            classes=drawn.classes + (" chosen" if node.id == view.selected else ""),
        )
        for drawn, node in zip(graph.nodes, view.nodes, strict=True)
    ]
    return templating.render(
        "console/run.html",
        frame=frame,
        notice=notice,
        run_id=run_id,
        status=str(snap.get("status")),
        rejected=rejected,
        failure=None if rejected else failure(snap, names),
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
        graph=dataclasses.replace(graph, nodes=linked),
        steps=[
            (f"{names.step(nid)}: {words}", step_href(run_id, nid), nid == view.selected)
            for nid, words in describe(view.nodes, "")
        ],
        io=input_output(view, run_id, names),
        live=view.live,
        live_href=None
        if view.live is None
        else _query_href(
            run_href(run_id),
            {**({"step": view.selected} if view.selected else {}), "live": "off" if view.live else "on"},
        ),
        refresh_s=LIVE_REFRESH_S,
        lineage=lineage(ext),
        fork_action=f"{run_href(run_id)}/fork" if view.may_fork else None,
        redrive=(
            (names.step(str(ext["failedNodeId"])) if ext.get("failedNodeId") else "where it failed", f"{run_href(run_id)}/redrive")
            if view.may_fork and snap.get("status") == "failed"
            else None
        ),
        last_sequence=str(view.events[-1]["sequence"]) if view.events else "0",
        gates=[
            _open_gate(frame, run_id, i, node_id, interrupt, names, view.filled, view.people, snap.get("inputs"))
            for i, (node_id, interrupt) in enumerate(view.open_interrupts.items())
        ],
        timeline=[_timeline_entry(e, run_id, names, view.people, view.selected) for e in view.events],
        later=later,
        deliveries=[_delivery_row(d) for d in view.deliveries],
        recover_deliveries=f"{run_href(run_id)}/deliveries/recover" if view.recover_deliveries else None,
        recover_notifications=f"{run_href(run_id)}/notifications/recover" if view.recover_notifications else None,
        notifications=None
        if view.notifications is None
        else [_notification_row(n, view.people) for n in view.notifications],
        tokens=None if view.tokens is None else [token_row(r, names, view.people) for r in view.tokens],
        unavailable=view.unavailable,
    )


def lineage(ext: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(how, run id, its page) of the run this one was forked from, then of each run forked from it."""
    found = []
    ancestry = ext.get("ancestry") or {}
    if ancestry.get("sourceRunId"):
        how = (
            "Redriven from"
            if ancestry.get("redrive")
            else "Replayed from"
            if ancestry.get("mode") == "replay"
            else f"Branched at event #{ancestry.get('fromSeq')} from"
        )
        found.append((how, str(ancestry["sourceRunId"]), run_href(str(ancestry["sourceRunId"]))))
    found += [("Forked as", str(r), run_href(str(r))) for r in ext.get("forkRunIds") or []]
    return found


def failure(snapshot: Mapping[str, Any], names: Names) -> str | None:
    """A failed run's error, first thing on its page: where and why (None: it did not fail)."""
    if snapshot.get("status") != "failed" and not snapshot.get("error"):
        return None
    failed_at = ((snapshot.get("extensions") or {}).get("interlude.run") or {}).get("failedNodeId")
    where = f" at {names.step(str(failed_at))}" if failed_at else ""
    return f"Failed{where}: {readable.error_words(snapshot.get('error'))}"


def input_output(view: RunView, run_id: str, names: Names) -> InputOutput:
    snap = view.snapshot
    if view.selected is None or view.step is None:
        done = snap.get("status") == "completed"
        given = [s for s in [readable.shown("Inputs", snap.get("inputs"))] if s]
        variables = snap.get("variables")
        if isinstance(variables, Mapping):  # the steps' results, by the names people know the steps by
            variables = {names.step(str(key)): value for key, value in variables.items()}
        gave = [s for s in [readable.shown("Results" if done else "Results so far", variables)] if s]
        if snap.get("error"):
            gave.insert(0, readable.Shown("What went wrong", cell_of(readable.error_words(snap["error"]))))
        return InputOutput("the run", "", given, gave, None)
    state = next((n.status for n in view.nodes if n.id == view.selected), "pending")
    given, gave = readable.step_panel(view.step, names.labels_of(view.selected), view.people)
    return InputOutput(names.step(view.selected), STATUS_WORDS.get(state, state), given, gave, f"{run_href(run_id)}#io")


def _open_gate(
    frame: Frame,
    run_id: str,
    i: int,
    node_id: str,
    interrupt: Mapping[str, Any],
    names: Names,
    filled: Filled | None,
    people: Mapping[str, str],
    inputs: Any = None,
) -> OpenGate:
    payload = interrupt.get("payload") or {}
    required = (payload.get("data") or {}).get("requiredApprovals")
    votes = interrupt.get("votes") or []
    still = readable.still_to_vote(payload, votes, voters(votes), people)
    facts = [
        ("Asked", str(interrupt.get("raisedAt", ""))),
        ("Deadline", str(interrupt.get("deadline", "none"))),
        *([("Approvals needed", str(required))] if isinstance(required, int) else []),
        *([("May still vote", still)] if still else []),
    ]
    may_decide = interrupt.get("mayDecide")
    labels = names.labels_of(node_id)
    return OpenGate(
        names.step(node_id),
        asked(payload, labels),
        facts,
        vote_rows(interrupt.get("votes") or [], people),
        decision(run_id, node_id, payload, frame.proof, f"run-{i}", filled, labels) if may_decide else None,
        cell_of(inputs) if inputs else None,
        claim_of(
            run_id, node_id, interrupt.get("assignee"), interrupt.get("assignedBy"), frame, f"run-{i}", people, bool(interrupt.get("mayClaim"))
        ),
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
    who = readable.person((resolved.get("resolvedBy") or {}).get("subjectId"), people)
    value: Mapping[str, Any] = resolved["resumeValue"] if isinstance(resolved.get("resumeValue"), Mapping) else {}
    why = next((value[k] for k in ("comment", "feedback") if isinstance(value.get(k), str)), "")
    return "Rejected" + (f" by {who}" if who else "") + (f": {why}" if why else "")


def _timeline_entry(
    event: Mapping[str, Any], run_id: str, names: Names, people: Mapping[str, str], selected: str | None
) -> TimelineEntry:
    node_id = str(event["nodeId"]) if event.get("nodeId") else None
    return TimelineEntry(
        str(event.get("sequence")),
        str(event.get("timestamp", "")),
        readable.event_summary(event, names, people),
        readable.event_details(event, names.labels_of(node_id) if node_id else None),
        step_href(run_id, node_id) if node_id else None,
        node_id is not None and node_id == selected,
    )


def _delivery_row(d: Mapping[str, Any]) -> tuple[str, ...]:
    """(when, which notice, attempt, what came of it, the HTTP status) in words."""
    return (
        str(d.get("at", "")),
        event_in_words(str(d.get("event") or d.get("type") or "")),
        str(d.get("attempt", "")),
        readable.delivery_words(d),
        str(d.get("httpStatus") or d.get("statusCode") or ""),
    )


def _notification_row(n: Mapping[str, Any], people: Mapping[str, str]) -> tuple[str, ...]:
    """(when, who, why they were told, channel, what came of it) in words."""
    outcome = str(n.get("outcome") or n.get("status") or "")
    said = readable.NOTIFICATION_OUTCOMES.get(outcome, outcome)
    if n.get("reason") and n.get("reason") != outcome:
        said += f": {readable.NOTIFICATION_REASONS.get(str(n['reason']), str(n['reason']))}"
    if n.get("errorClass"):
        said += f" ({readable.notification_failure_words(str(n['errorClass']))})"
    return (
        str(n.get("at") or n.get("queuedAt") or ""),
        readable.person(n.get("principalId"), people),
        readable.purpose_words(str(n.get("purpose", ""))),
        str(n.get("channel") or "—"),
        said,
    )


def token_row(entry: Mapping[str, Any], names: Names, people: Mapping[str, str]) -> tuple[str, ...]:
    """A link minted for the run (its audit entry), as the "Links made" table's row."""
    details = entry.get("details") or {}
    node_id = (entry.get("target") or {}).get("nodeId")
    return (
        str(entry.get("at", "")),
        readable.actor_words(entry.get("actor"), people),
        names.step(str(node_id)) if node_id else "—",
        readable.person(details.get("principal"), people) or "whoever holds it",
        readable.DETAIL_VALUES["intent"].get(str(details.get("intent")), "look, not decide"),
        str(details.get("expiresAt") or "—"),
    )


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


# The Start run form's own field beside the workflow's inputs (its names are f0, f1, ...: never this one).
TAGS_FIELD = "tags"


def start_run_form(schema: Mapping[str, Any], answer: forms.Answer | None) -> forms.Form:
    """The workflow's declared inputs asked as a gate's answer is (forms.schema_form), and the run's tags."""
    drawn = forms.schema_form(schema, answer, forms.Button("start", "Start run")) if schema.get("properties") else None
    said = (answer.posted.get(TAGS_FIELD) or [""])[0] if answer is not None else ""
    tags = forms.Field(TAGS_FIELD, "Tags (optional, one a line)", "lines", value=said, error=(answer.errors.get(TAGS_FIELD) if answer else None))
    fields = (*(drawn.fields if drawn else ()), tags)
    return forms.Form(fields, (forms.Button("start", "Start run"),))


def workflow(
    frame: Frame,
    got: Mapping[str, Any],
    nodes: Sequence[GraphNode],
    edges: Sequence[tuple[str, str]],
    start: forms.Form | None = None,
    notice: Notice | None = None,
    definition: WorkflowDefinition | None = None,
) -> str:
    """`start`: the Start run form (None: the session may not start runs, or this is not the latest version);
    `definition`: the version's, parsed (else read from `got`)."""
    definition = definition or WorkflowDefinition.model_validate(got["definition"])
    workflow_id = str(got["workflowId"])
    version = int(got["version"])
    latest = int(got.get("latestVersion") or version)
    base = f"/console/workflows/{quote(workflow_id, safe='')}"
    return templating.render(
        "console/workflow.html",
        workflow_id=workflow_id,
        # Its name (an unnamed inline ModuleX definition's id is a hash nobody chose).
        title=definition.display_name(workflow_id) or "An unnamed workflow",
        version=version,
        latest=latest,
        versions=[(v, f"{base}?version={v}") for v in range(latest, max(0, latest - 50), -1)],
        graph=drawing(nodes, edges, ""),
        steps=readable.definition_in_words(definition),
        download=(
            f"{workflow_id}-v{version}.json",
            "data:application/json;charset=utf-8,"
            + quote(json.dumps(got["definition"], indent=2, ensure_ascii=False, allow_nan=False), safe=""),
        ),
        frame=frame,
        notice=notice,
        start=start,
        start_action=f"{base}/runs",
    )


# -- keys ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyRow:
    key_id: str
    # Who holds the key, as the directory names them (else the id the key was made for).
    holder: str
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
    people: Mapping[str, str] | None = None,
) -> str:
    """`people`: by subject id, what the directory calls the keys' holders."""
    rows = [
        KeyRow(
            str(k["keyId"]),
            readable.person((k.get("subject") or {}).get("subjectId"), people or {}),
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


def audit(
    frame: Frame,
    entries: Sequence[Mapping[str, Any]],
    next_cursor: str | None,
    notice: Notice | None,
    people: Mapping[str, str] | None = None,
) -> str:
    """`people`: by subject id, what the directory calls those who acted and those the entries name."""
    rows = [readable.audit_line(e, people or {}, run_href) for e in entries]
    older = _query_href("/console/audit", {"cursor": next_cursor}) if next_cursor else None
    return templating.render("console/audit.html", notice=notice, rows=rows, older=older)

