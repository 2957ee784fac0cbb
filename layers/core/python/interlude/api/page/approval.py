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
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from interlude.api.page import csrf, forms, templating
from interlude.api.page.graph import Drawing, GraphNode, describe, drawing
from interlude.api.page.text import pretty, unfilled_in_words

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

    @property
    def viewer_decides(self) -> bool:
        return self.intent == "resolve"

    def step_name(self, node_id: str) -> str:
        return next((n.label for n in self.nodes if n.id == node_id), node_id)


@dataclass(frozen=True)
class Result:
    """What happened to a decision (or a link), in plain words."""

    kind: str  # decided | recorded | already | expired | invalid | not-found | forbidden | cross-site | vote-cast | ...
    action: str | None = None
    run_status: str | None = None
    detail: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# -- the document --------------------------------------------------------------------------------------


def security_headers(style_nonce: str) -> dict[str, str]:
    return {
        "Content-Security-Policy": (
            f"default-src 'none'; style-src 'nonce-{style_nonce}'; img-src 'self' data:; form-action 'self'; "
            "frame-ancestors 'none'; base-uri 'none'"
        ),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
        "X-Frame-Options": "DENY",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Cross-Origin-Resource-Policy": "same-origin",
    }


def document(title: str, body: str, style_nonce: str) -> str:
    return templating.render(
        "page/layout.html", title=unfilled_in_words(title), body=templating.markup(body), style_nonce=style_nonce
    )


def expiry_words(expires_at: int, time_zone: str | None = None) -> str:
    return when(datetime.fromtimestamp(expires_at, UTC), time_zone)


def when(moment: datetime | str, time_zone: str | None = None) -> str:
    """A moment in the approver's time zone with UTC beside it ("Tue 1 Dec 2026, 14:05 (Europe/Paris) · 13:05
    UTC"); in UTC alone when the zone is unknown or is UTC."""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    utc = moment.astimezone(UTC)
    zone = _zone(time_zone)
    if zone is None:
        return f"{_day(utc)}, {utc:%H:%M} UTC"
    local = utc.astimezone(zone)
    return f"{_day(local)}, {local:%H:%M} ({time_zone}) · {utc:%H:%M} UTC"


def _day(moment: datetime) -> str:
    return f"{moment:%a} {moment.day} {moment:%b %Y}"


def _zone(name: str | None) -> ZoneInfo | None:
    if not name or name in ("UTC", "Etc/UTC"):
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def title_of(payload: Mapping[str, Any]) -> str:
    data = payload.get("data") or {}
    kind = payload.get("kind")
    if kind == "approval":
        return str(data.get("title") or "Approval requested")
    if kind == "clarification":
        return "A few questions need your answer"
    if kind == "external-event":
        return f"Waiting for {data.get('eventType', 'an event')}"
    if kind == "custom":
        return f"Input requested: {data.get('customKind', 'custom')}"
    return f"Input requested ({kind})"


# -- the open interrupt ------------------------------------------------------------------------------


def render_open(view: View, *, style_nonce: str, csrf_field: str | None, error: str | None = None) -> str:
    """The page for an open interrupt; `csrf_field` (the hidden form proof) None renders it read-only (an inspect token)."""
    payload = view.payload
    data = payload.get("data") or {}
    return templating.render(
        "page/approval.html",
        error=error + " Nothing was changed; try again below." if error else None,
        kind_words=_kind_words(payload),
        title=title_of(payload),
        description=data.get("description") or None,
        facts=_facts(view),
        notes=_notes(view),
        artifact=_artifact(payload),
        approval=payload.get("kind") == "approval",
        forms=None if csrf_field is None else forms.gate_forms(payload),
        hidden_fields=None if csrf_field is None else [(csrf.FIELD, csrf_field)],
        where=_where(view),
    )


def _kind_words(payload: Mapping[str, Any]) -> str:
    return {
        # Nouns, not "needed": the same heading stands above the outcome once it is decided.
        "approval": "Approval request",
        "clarification": "Question",
        "external-event": "Waiting for an event",
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
    content: str


def _artifact(payload: Mapping[str, Any]) -> Artifact | None:
    data = payload.get("data") or {}
    kind = payload.get("kind")
    content: Any = None
    heading = "Details"
    if kind == "approval":
        if "artifactData" in data:
            content = data["artifactData"]
            heading = f"What you are approving ({data.get('artifactType', 'artifact')})"
    elif kind == "clarification":
        return None
    elif kind == "custom":
        content = data.get("payload")
    else:
        content = {k: v for k, v in data.items() if k not in ("title", "description")}
    return None if content is None else Artifact(heading, pretty(content))


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
    "expired": ("warn", "This link has expired", "Decision links stop working after a while. Ask for a new link."),
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
    if kind == "already":
        return _already_words(result, run)
    if kind == "forbidden":
        return "bad", "You cannot decide this request", result.detail or "This link does not allow a decision."
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


def _already_words(result: Result, run: str) -> tuple[str, str, str]:
    """A link opened again after its request was decided: what was decided, by whom and when, if known."""
    decided = result.extra.get("decision")
    tail = f" The run is {run}." if run else ""
    if result.extra.get("status") == "cancelled":
        return "info", "No longer open", "This request was withdrawn when its run was cancelled. Nothing was changed." + tail
    if result.extra.get("timedOut"):
        return "info", "No longer open", f"This request timed out{_at(result)} before anyone decided. Nothing was changed.{tail}"
    if decided:
        who = result.extra.get("by") or "someone"
        what = DECISION_WORDS.get(str(decided), "answered")
        sentence = f"{who} {what} this request{_at(result)}. Nothing was changed."
        return "info", "Already decided", sentence[0].upper() + sentence[1:] + tail
    return "warn", "Already decided", "This request was already decided, or its run was stopped. Nothing was changed." + tail


def _at(result: Result) -> str:
    return f" on {result.extra['at']}" if result.extra.get("at") else ""


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
        kind_words=_kind_words(view.payload) if view is not None and view.payload else None,
        title=title_of(view.payload) if view is not None and view.payload else None,
        where=_where(view) if view is not None else None,
    )
