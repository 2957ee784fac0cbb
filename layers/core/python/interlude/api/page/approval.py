"""The approval page a person opens from an e-mail or chat link: what it says about an interrupt, drawn by templates.

Server-side only: no script, no third-party asset, one nonce'd style sheet. The templates (templates/approval.html,
result.html, on the shared layout.html) escape every value; this module decides the words. The form a page carries
is forms.gate_forms' (the same the console's inbox shows): the approval's `actions`, the clarification's questions,
or the top-level properties of its `resumeSchema`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from interlude.api.page import csrf, forms, templating
from interlude.api.page.graph import Drawing, GraphNode, describe, drawing
from interlude.api.page.text import Cell, cell_of, unfilled_in_words
from interlude.domain.ids import MODULEX_INTERRUPT_KIND
from interlude.domain.moments import spoken
from interlude.rules.wording import headline

DECIDED_WORDS = {
    "accept": "You approved this request.",
    "edit-accept": "You approved this request with your edits.",
    "reject": "You rejected this request.",
    "refine": "You sent this request back for changes.",
}
RUN_WORDS = {
    "pending": "about to start",
    "running": "running again",
    "waiting-approval": "waiting for another decision",
    "waiting-input": "waiting for more input",
    "waiting-external": "waiting for an outside event",
    "completed": "completed",
    "failed": "stopped with a failure",
    "cancelled": "cancelled",
}


@dataclass(frozen=True)
class View:
    """What the page shows about one interrupt and its run."""

    payload: Mapping[str, Any]
    node_id: str
    intent: str
    run_status: str
    expires_at: int
    nodes: Sequence[GraphNode] = ()
    edges: Sequence[tuple[str, str]] = ()
    # Votes already counted on the gate (asks excluded).
    votes: int = 0
    # Who started the run (a directory display name, else the subject id), when the gate asked (ISO 8601), the
    # workflow's name, and the approver's IANA time zone (None: UTC only).
    asked_by: str | None = None
    asked_at: str | None = None
    workflow_name: str | None = None
    time_zone: str | None = None
    # The gate's labels for its artifact's fields (its `fieldLabels`), by dotted path.
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def viewer_decides(self) -> bool:
        return self.intent == "resolve"

    def step_name(self, node_id: str) -> str:
        return next((n.label for n in self.nodes if n.id == node_id), node_id)


@dataclass(frozen=True)
class Result:
    """What happened to a decision (or a link), in plain words."""

    kind: str  # decided | recorded | already | expired | invalid | not-found | forbidden | not-accepted | cross-site |
    # vote-cast | ...
    action: str | None = None
    run_status: str | None = None
    detail: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# -- the document --------------------------------------------------------------------------------------


def document(title: str, body: str, style_nonce: str) -> str:
    return templating.render(
        "page/layout.html", title=unfilled_in_words(title), body=templating.markup(body), style_nonce=style_nonce
    )


def expiry_words(expires_at: int, time_zone: str | None = None) -> str:
    return when(datetime.fromtimestamp(expires_at, UTC), time_zone)


def when(moment: datetime | str, time_zone: str | None = None) -> str:
    """A moment in the approver's time zone with UTC beside it, worded as the mail that linked here words it."""
    return spoken(moment, time_zone)


def title_of(payload: Mapping[str, Any]) -> str:
    """What the request is called: an approval's title, a ModuleX interrupt's first line, else what its kind asks."""
    return headline(payload)[0]


# -- the open interrupt ------------------------------------------------------------------------------


def render_open(
    view: View,
    *,
    style_nonce: str,
    csrf_field: str | None,
    error: str | None = None,
    answer: forms.Answer | None = None,
) -> str:
    """The page for an open interrupt; `csrf_field` (the hidden form proof) None renders it read-only (an inspect
    token). `answer`: what the form is filled with (a refused answer, with what to fix; an example)."""
    payload = view.payload
    title, message = headline(payload)
    return templating.render(
        "page/approval.html",
        error=error + " Nothing was changed; try again below." if error else None,
        kind_words=kind_words(payload),
        title=title,
        message=cell_of(message) if message else None,
        facts=_facts(view),
        notes=_notes(view),
        artifact=artifact_of(payload, view.labels),
        connect=_connect(payload),
        approval=payload.get("kind") == "approval",
        forms=None if csrf_field is None else forms.gate_forms(payload, answer, view.labels),
        hidden_fields=None if csrf_field is None else [(csrf.FIELD, csrf_field)],
        where=_where(view),
    )


def kind_words(payload: Mapping[str, Any]) -> str:
    return {
        # Nouns, not "needed": the same heading stands above the outcome once it is decided.
        "approval": "Approval request",
        "clarification": "Question",
        "external-event": "Waiting for an event",
        "credential": "Account connection",
        "low-confidence": "Decision check",
        "conversation.start": "Conversation",
        "conversation.exchange": "Conversation",
        "conversation.close": "Conversation",
    }.get(str(payload.get("kind")), "Request")


def _facts(view: View) -> list[tuple[str, str]]:
    rows = []
    if view.asked_by:
        rows.append(("Asked by", view.asked_by))
    if view.asked_at:
        rows.append(("Asked on", when(view.asked_at, view.time_zone)))
    if view.workflow_name:
        rows.append(("Workflow", view.workflow_name))
    if view.nodes:
        rows.append(("Step", view.step_name(view.node_id)))
    return rows


def _notes(view: View) -> str:
    data = view.payload.get("data") or {}
    notes = [f"This link works until {expiry_words(view.expires_at, view.time_zone)}."]
    required = data.get("requiredApprovals")
    if view.payload.get("kind") == "approval" and isinstance(required, int) and required > 1:
        notes.append(f"{required} approvals are needed; {view.votes} counted so far.")
    if data.get("approversList"):
        notes.append("Only the named approvers can decide.")
    return " ".join(notes)


@dataclass(frozen=True)
class Artifact:
    heading: str
    content: Cell


def artifact_of(payload: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> Artifact | None:
    """What is being decided, as a table to read (None: the request shows nothing beyond its words)."""
    data = payload.get("data") or {}
    kind = payload.get("kind")
    heading = "Details"
    if kind == "approval":
        if "artifactData" not in data:
            return None
        content, heading = data["artifactData"], "What you are approving"
    elif kind == "custom" and data.get("customKind") == MODULEX_INTERRUPT_KIND:
        content = (data.get("payload") or {}).get("data") or None
    elif kind == "custom":
        inner = data.get("payload")
        content = {k: v for k, v in inner.items() if k not in ("title", "description")} if isinstance(inner, Mapping) else inner
    elif kind == "low-confidence":
        content, heading = data.get("decision"), "The agent's decision"
    elif kind == "external-event":
        content, heading = data.get("correlation") or None, "The event it waits for"
    else:
        return None
    return None if content is None or content == {} else Artifact(heading, cell_of(content, labels))


def _connect(payload: Mapping[str, Any]) -> tuple[str, str] | None:
    """A credential request's link to connect the account (the host's own https page), and its words."""
    data = payload.get("data") or {}
    url = data.get("connectUrl")
    if payload.get("kind") != "credential" or not isinstance(url, str) or not url.startswith("https://"):
        return None
    return url, f"Connect {data.get('provider', 'the account')}"


# -- where the run stands ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Where:
    graph: Drawing
    # (this is the gate, "step: its state") in workflow order
    steps: list[tuple[bool, str]]


def _where(view: View) -> Where | None:
    if not view.nodes:
        return None
    steps = [(nid == view.node_id, f"{view.step_name(nid)}: {words}") for nid, words in describe(view.nodes, view.node_id)]
    return Where(drawing(view.nodes, view.edges, view.node_id, view.viewer_decides), steps)


# -- outcomes -------------------------------------------------------------------------------------------


# Outcomes whose words depend on nothing but the outcome: (banner class, heading, sentence).
_FIXED_OUTCOME_WORDS: dict[str, tuple[str, str, str]] = {
    "vote-cast": ("warn", "You already voted", "You have already voted on this request. Nothing was changed."),
    "invalid": ("bad", "This link is not valid", "Check that you opened the whole link, or ask for a new one."),
    "not-found": ("bad", "Nothing to decide here", "The request this link points to does not exist."),
    "cross-site": (
        "bad",
        "Not sent from this page",
        "The decision did not come from this request's own page, so nothing was changed. Open the link and "
        "decide there.",
    ),
}


def outcome_words(result: Result) -> tuple[str, str, str]:
    """(banner class, heading, sentence) for a result."""
    kind = result.kind
    fixed = _FIXED_OUTCOME_WORDS.get(kind)
    if fixed is not None:
        return fixed
    run = RUN_WORDS.get(result.run_status or "", result.run_status or "")
    if kind == "decided":
        said = DECIDED_WORDS.get(result.action or "", "You answered this request.")
        if result.action == "reject" and result.run_status == "failed":
            # The workflow stops on a rejection unless it routes one: that is the decision taking effect.
            return "ok", "Decision recorded", f"{said} The run stopped at this step, as it does when this is rejected."
        return "ok", "Decision recorded", f"{said} The run is now {run}."
    if kind == "answered":
        return "ok", "Answer recorded", f"Thank you, your answer was recorded. The run is now {run}."
    if kind == "recorded":
        return _recorded_words(result)
    if kind == "expired" and not _closed(result):
        return "warn", "This link has expired", _expired_words(result)
    if kind in ("already", "expired"):
        return _already_words(result, run)
    if kind == "forbidden":
        return "bad", "You cannot decide this request", result.detail or "This link does not allow a decision."
    if kind == "not-accepted":
        # A form the page did not send as drawn (one that repeats a field, or holds too many).
        return "bad", "That was not accepted", f"{result.detail} Nothing was changed; open the link again and decide there."
    return "bad", "Something went wrong", result.detail or "Nothing was changed. Try again in a moment."


# What a closed interrupt's resolution says was decided (interrupt.resolved's `decision` / `action`).
DECISION_WORDS = {
    "granted": "approved",
    "accept": "approved",
    "edit-accept": "approved with edits",
    "rejected": "rejected",
    "reject": "rejected",
    "refine": "sent back for changes",
    "overridden": "approved by override",
}


def _closed(result: Result) -> bool:
    extra = result.extra
    return bool(extra.get("decision") or extra.get("timedOut") or extra.get("status") in ("cancelled", "withdrawn"))


def _expired_words(result: Result) -> str:
    """A link past its time whose request is still open: which request, and whom to ask for a new link."""
    extra = result.extra
    title = f" to “{extra['title']}”" if extra.get("title") else ""
    ended = f" stopped working on {extra['expiredAt']}" if extra.get("expiredAt") else " has stopped working"
    asker = extra.get("askedBy")
    overrides = [str(p) for p in extra.get("overrides") or []]
    whom = []
    if asker:
        whom.append(f"{asker}, who asked for this decision")
    if overrides:
        whom.append(f"{_either(overrides)}, who may decide it in anyone's place")
    if not whom:
        return f"This link{title}{ended}. Ask whoever sent it for a new link."
    return f"This link{title}{ended}. The request is still open: for a new link, ask {'; or '.join(whom)}."


def _either(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _already_words(result: Result, run: str) -> tuple[str, str, str]:
    """A link opened again (or too late) once its request was closed: decided by whom, when and with what comment;
    timed out and rejected on its own; withdrawn with its run's cancellation, and why."""
    extra = result.extra
    tail = f" The run is {run}." if run else ""
    if extra.get("status") == "cancelled":
        who = f" by {extra['by']}" if extra.get("by") else ""
        why = f": “{extra['reason']}”" if extra.get("reason") else ""
        return "info", "No longer open", f"This request was withdrawn: its run was cancelled{who}{_at(result)}{why}. Nothing was changed."
    if extra.get("status") == "withdrawn":
        return "info", "No longer open", f"This request was withdrawn{_at(result)} when its run stopped. Nothing was changed.{tail}"
    if extra.get("timedOut"):
        then = "was rejected automatically" if extra.get("kind") in ("approval", None) else "closed without an answer"
        return "info", "Timed out", f"Nobody decided in time: this request timed out{_at(result)} and {then}. Nothing was changed.{tail}"
    decided = extra.get("decision")
    if decided:
        who = extra.get("by") or "Someone"
        what = DECISION_WORDS.get(str(decided), "answered")
        comment = f": “{extra['comment']}”" if extra.get("comment") else ""
        if what == "rejected" and result.run_status == "failed":
            tail = " The run stopped at this step."
        return "info", "Already decided", f"{who} {what} this request{_at(result)}{comment}. Nothing was changed.{tail}"
    return "warn", "Already decided", "This request was already decided, or its run was stopped. Nothing was changed." + tail


def _at(result: Result) -> str:
    return f" on {result.extra['at']}" if result.extra.get("at") else ""


def verdict(extra: Mapping[str, Any]) -> str:
    """How a closed gate is shown where the run stands: "rejected by Ana: too casual" (a rejection is a decision,
    never a failure to a person); "" when its state says it well enough."""
    if extra.get("timedOut"):
        return "timed out, rejected automatically" if extra.get("kind") == "approval" else "timed out"
    if extra.get("status") == "cancelled":
        return "withdrawn, the run was cancelled"
    if DECISION_WORDS.get(str(extra.get("decision"))) != "rejected":
        return ""
    by = f" by {extra['by']}" if extra.get("by") else ""
    return f"rejected{by}" + (f": {extra['comment']}" if extra.get("comment") else "")


def _recorded_words(result: Result) -> tuple[str, str, str]:
    """A question or a vote recorded while the request stays open."""
    if result.action == "ask":
        return "info", "Question recorded", "Your question was recorded. The request stays open for a decision."
    needed = result.extra.get("required")
    counted = result.extra.get("counted")
    tail = f" {counted} of {needed} approvals are in." if needed and counted is not None else ""
    return "info", "Your vote was counted", f"The request stays open until enough people have decided.{tail}"


def render_result(result: Result, view: View | None) -> str:
    cls, heading, sentence = outcome_words(result)
    return templating.render(
        "page/result.html",
        cls=cls,
        heading=heading,
        sentence=sentence,
        kind_words=kind_words(view.payload) if view is not None and view.payload else None,
        title=title_of(view.payload) if view is not None and view.payload else None,
        where=_where(view) if view is not None else None,
    )
