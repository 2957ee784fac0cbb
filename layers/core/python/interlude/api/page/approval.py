"""The approval page a person opens from an e-mail or chat link: pure functions from an interrupt to HTML.

Server-side only: no script, no third-party asset, one nonce'd style sheet. Every value that reaches the
markup passes through `esc` (html.escape with quotes), so nothing from a payload or a form is reflected raw.
The form a page carries is generated from the interrupt: the approval's `actions` (refine and edit-accept ask
for their fields), the clarification's questions, or the top-level properties of its `resumeSchema`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from interlude.api import strict_json
from interlude.api.page import csrf
from interlude.api.page.graph import GraphNode, describe, render_svg

MAX_FORM_FIELDS = 200

ACTION_LABELS = {
    "accept": "Approve",
    "reject": "Reject",
    "ask": "Ask a question",
    "refine": "Request changes",
    "edit-accept": "Approve with my edits",
}
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
FOOTER = (
    "Sent by Interlude, the approval service your team uses. This page runs no scripts and loads nothing from "
    "other sites; your answer goes only to Interlude."
)
REFINE_SCOPES = (("whole", "The whole thing"), ("section", "One section"), ("items", "Some items"))

CSS = """
*{box-sizing:border-box}
body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d2330;background:#f4f5f7}
main{max-width:44rem;margin:0 auto;padding:1rem}
.card{background:#fff;border:1px solid #d9dde3;border-radius:10px;padding:1rem 1.1rem;margin:0 0 1rem}
h1{font-size:1.35rem;line-height:1.3;margin:.2rem 0 .6rem}
h2{font-size:1.05rem;margin:0 0 .5rem}
.kicker{font-size:.8rem;letter-spacing:.04em;text-transform:uppercase;color:#5b6474;margin:0}
.muted{color:#5b6474;font-size:.9rem}
.desc{white-space:pre-wrap;overflow-wrap:anywhere}
pre{background:#f0f2f5;border-radius:6px;padding:.75rem;overflow:auto;font-size:.85rem;margin:0;white-space:pre-wrap;
overflow-wrap:anywhere}
label{display:block;font-weight:600;margin:.6rem 0 .25rem}
input[type=text],input[type=number],select,textarea{width:100%;font:inherit;padding:.55rem .6rem;border:1px solid #b8bfca;
border-radius:6px;background:#fff}
textarea{min-height:5.5rem}
textarea.json{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.85rem;min-height:9rem}
.check{display:flex;gap:.5rem;align-items:center;font-weight:600;margin:.6rem 0}
.buttons{display:flex;flex-wrap:wrap;gap:.6rem;margin-top:.9rem}
button{font:inherit;font-weight:600;padding:.7rem 1.1rem;border-radius:8px;border:1px solid #1d4ed8;background:#1d4ed8;
color:#fff;min-height:2.9rem;flex:1 1 10rem;cursor:pointer}
button.reject{background:#fff;color:#b42318;border-color:#b42318}
button.secondary{background:#fff;color:#1d4ed8}
details{margin-top:.9rem;border-top:1px solid #e3e6ea;padding-top:.6rem}
summary{cursor:pointer;font-weight:600;color:#1d4ed8}
.banner{border-radius:10px;padding:1rem 1.1rem;margin:0 0 1rem;border:1px solid}
.banner h1{margin:0 0 .3rem}
.ok{background:#ecfdf3;border-color:#75e0a7}
.info{background:#eff4ff;border-color:#a4bcfd}
.warn{background:#fffaeb;border-color:#fec84b}
.bad{background:#fef3f2;border-color:#fda29b}
.graph-wrap{overflow-x:auto}
svg.graph{display:block;max-width:100%;height:auto;margin:0 auto}
svg .node rect{fill:#fff;stroke:#98a2b3;stroke-width:1.5}
svg .s-completed rect{fill:#ecfdf3;stroke:#12b76a}
svg .s-failed rect{fill:#fef3f2;stroke:#f04438}
svg .s-skipped rect{fill:#f2f4f7;stroke:#d0d5dd;stroke-dasharray:4 3}
svg .s-suspended rect,svg .s-queued rect,svg .s-sleeping rect{fill:#fffaeb;stroke:#f79009}
svg .gate rect{stroke-width:3.5}
svg .gate.s-suspended rect{fill:#fef0c7;stroke:#dc6803}
svg .label{font:600 13px system-ui,sans-serif;fill:#1d2330}
svg .sub{font:11px system-ui,sans-serif;fill:#5b6474}
svg .gate .sub{font-weight:700}
svg .gate.s-suspended .sub{fill:#93370d}
svg .edge{fill:none;stroke:#98a2b3;stroke-width:1.5}
svg .edge.back{stroke-dasharray:5 4}
svg .arrowhead{fill:#98a2b3}
ul.steps{margin:.6rem 0 0;padding-left:1.2rem;font-size:.9rem;color:#5b6474}
ul.steps .here{color:#93370d;font-weight:700}
footer{font-size:.8rem;color:#5b6474;text-align:center;margin:1.5rem 0}
mark.unfilled{background:#fef0c7;color:#93370d;border-radius:4px;padding:0 .25rem;font-style:italic}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.2rem .8rem;margin:.4rem 0 .5rem;font-size:.9rem}
dl.facts dt{color:#5b6474}dl.facts dd{margin:0;overflow-wrap:anywhere}
@media (max-width:30rem){main{padding:.6rem}.card{padding:.85rem}h1{font-size:1.2rem}button{flex-basis:100%}}
"""


class FormError(ValueError):
    """A submitted form that does not make a resume value; the message is shown to the person."""


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


def esc(value: Any) -> str:
    return escape(str(value), quote=True)


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
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="robots" content="noindex, nofollow">'
        # No favicon request: the page loads nothing but itself.
        '<link rel="icon" href="data:,">'
        f"<title>{esc(UNFILLED_RE.sub(lambda m: f'(not filled: {m.group(1)})', title))}</title>"
        f'<style nonce="{esc(style_nonce)}">{CSS}</style></head>'
        f"<body><main>{body}<footer>{esc(FOOTER)}</footer></main></body></html>"
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


# A reference a template could not fill stays `{{path}}` in the payload; the page never shows it raw.
UNFILLED_RE = re.compile(r"\{\{\s*([^{}]{1,200}?)\s*\}\}")


def shown(value: Any) -> str:
    """Escaped text with every unfilled `{{path}}` marked as a value that could not be filled."""
    return UNFILLED_RE.sub(
        lambda m: f'<mark class="unfilled" title="not filled: {m.group(1)}">not filled ({m.group(1)})</mark>', esc(value)
    )


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
    parts: list[str] = []
    if error:
        parts.append(_banner("bad", "That did not go through", error + " Nothing was changed; try again below."))
    parts.append('<section class="card">')
    parts.append(f'<p class="kicker">{esc(_kind_words(payload))}</p>')
    parts.append(f"<h1>{shown(title_of(payload))}</h1>")
    if data.get("description"):
        parts.append(f'<p class="desc">{shown(data["description"])}</p>')
    parts.append(_facts(view))
    parts.append("</section>")
    parts.append(_artifact(payload))
    if csrf_field is None:
        parts.append(
            _banner("info", "View only", "This link lets you see this request, not decide it. Ask for a decision link.")
        )
    else:
        parts.append(_form(view, csrf_field))
    parts.append(_where(view))
    return "".join(parts)


def _kind_words(payload: Mapping[str, Any]) -> str:
    return {
        # Nouns, not "needed": the same heading stands above the outcome once it is decided.
        "approval": "Approval request",
        "clarification": "Question",
        "external-event": "Waiting for an event",
    }.get(str(payload.get("kind")), "Request")


def _facts(view: View) -> str:
    data = view.payload.get("data") or {}
    rows = []
    if view.asked_by:
        rows.append(("Asked by", view.asked_by))
    if view.asked_at:
        rows.append(("Asked on", when(view.asked_at, view.time_zone)))
    if view.workflow_name:
        rows.append(("Workflow", view.workflow_name))
    if view.nodes:
        rows.append(("Step", view.step_name(view.node_id)))
    listed = "".join(f"<dt>{esc(name)}</dt><dd>{esc(value)}</dd>" for name, value in rows)
    facts = [f"This link works until {esc(expiry_words(view.expires_at, view.time_zone))}."]
    required = data.get("requiredApprovals")
    if view.payload.get("kind") == "approval" and isinstance(required, int) and required > 1:
        facts.append(f"{esc(required)} approvals are needed; {esc(view.votes)} counted so far.")
    if data.get("approversList"):
        facts.append("Only the named approvers can decide.")
    return (f'<dl class="facts">{listed}</dl>' if listed else "") + f'<p class="muted">{" ".join(facts)}</p>'


def _artifact(payload: Mapping[str, Any]) -> str:
    data = payload.get("data") or {}
    kind = payload.get("kind")
    content: Any = None
    heading = "Details"
    if kind == "approval":
        if "artifactData" in data:
            content = data["artifactData"]
            heading = f"What you are approving ({data.get('artifactType', 'artifact')})"
    elif kind == "clarification":
        return ""
    elif kind == "custom":
        content = data.get("payload")
    else:
        content = {k: v for k, v in data.items() if k not in ("title", "description")}
    if content is None:
        return ""
    return f'<section class="card"><h2>{esc(heading)}</h2><pre>{shown(pretty(content))}</pre></section>'


def pretty(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, allow_nan=False)


def _hidden_csrf(csrf_field: str) -> str:
    return f'<input type="hidden" name="{csrf.FIELD}" value="{esc(csrf_field)}">'


def _form(view: View, csrf_field: str) -> str:
    payload = view.payload
    kind = payload.get("kind")
    if kind == "approval":
        return _approval_form(payload, csrf_field)
    fields = form_fields(payload)
    inner = "".join(_widget(f) for f in fields)
    return (
        '<section class="card"><h2>Your answer</h2><form method="post" action="">'
        f"{_hidden_csrf(csrf_field)}{inner}"
        '<div class="buttons"><button type="submit" name="action" value="submit">Send</button></div></form></section>'
    )


def _approval_form(payload: Mapping[str, Any], csrf_field: str) -> str:
    data = payload.get("data") or {}
    actions = [a for a in data.get("actions") or [] if a in ACTION_LABELS]
    out = ['<section class="card"><h2>Your decision</h2>']
    simple = [a for a in ("accept", "reject", "ask") if a in actions]
    if simple:
        buttons = "".join(
            f'<button type="submit" name="action" value="{a}" class="{"reject" if a == "reject" else ""}">'
            f"{esc(ACTION_LABELS[a])}</button>"
            for a in simple
        )
        out.append(
            f'<form method="post" action="">{_hidden_csrf(csrf_field)}'
            '<label for="feedback">Comment (optional)</label>'
            '<textarea id="feedback" name="feedback" maxlength="10000"></textarea>'
            f'<div class="buttons">{buttons}</div></form>'
        )
    if "refine" in actions:
        options = "".join(f'<option value="{v}">{esc(t)}</option>' for v, t in REFINE_SCOPES)
        out.append(
            f'<details><summary>{esc(ACTION_LABELS["refine"])}</summary><form method="post" action="">'
            f"{_hidden_csrf(csrf_field)}"
            f'<label for="refine_scope">What should change</label><select id="refine_scope" name="refine_scope">{options}'
            "</select>"
            '<label for="refine_text">What to change, and why</label>'
            '<textarea id="refine_text" name="refine_text" required maxlength="10000"></textarea>'
            '<div class="buttons"><button type="submit" name="action" value="refine" class="secondary">'
            f"{esc(ACTION_LABELS['refine'])}</button></div></form></details>"
        )
    if "edit-accept" in actions:
        current = pretty(data.get("artifactData")) if "artifactData" in data else ""
        out.append(
            f'<details><summary>{esc(ACTION_LABELS["edit-accept"])}</summary><form method="post" action="">'
            f"{_hidden_csrf(csrf_field)}"
            '<label for="edited">The artifact as it should be (JSON)</label>'
            f'<textarea id="edited" class="json" name="edited" required spellcheck="false">{esc(current)}</textarea>'
            '<div class="buttons"><button type="submit" name="action" value="edit-accept" class="secondary">'
            f"{esc(ACTION_LABELS['edit-accept'])}</button></div></form></details>"
        )
    out.append("</section>")
    return "".join(out)


# -- fields generated from a schema ---------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    name: str  # the form field's name: f0, f1, …
    key: str  # the resume value's key ("" for a whole-value JSON field)
    label: str
    schema: Mapping[str, Any]
    required: bool


def form_fields(payload: Mapping[str, Any]) -> list[Field]:
    schema = payload.get("resumeSchema") or {}
    if payload.get("kind") == "clarification":
        return _question_fields(payload.get("data") or {}, schema)
    props = schema.get("properties") if schema.get("type") == "object" else None
    if isinstance(props, dict) and props:
        required = set(schema.get("required") or [])
        return [
            Field(f"f{i}", key, str(sub.get("title") or key) if isinstance(sub, dict) else key, sub or {}, key in required)
            for i, (key, sub) in enumerate(props.items())
        ]
    return [Field("resume_json", "", "Your answer (JSON)", {"type": "json"}, True)]


def _question_fields(data: Mapping[str, Any], schema: Mapping[str, Any]) -> list[Field]:
    """A clarification's questions, each answered in its own field (all required)."""
    props = schema.get("properties") or {}
    return [
        Field(f"f{i}", q["id"], q.get("question") or q["id"], q.get("schema") or props.get(q["id"]) or {}, True)
        for i, q in enumerate(data.get("questions") or [])
    ]


def _field_kind(schema: Mapping[str, Any]) -> str:
    if isinstance(schema.get("enum"), list) and schema["enum"] and all(
        isinstance(v, str | int | float) and not isinstance(v, bool) for v in schema["enum"]
    ):
        return "enum"
    t = schema.get("type")
    if t in ("boolean", "number", "integer"):
        return str(t)
    if t == "string" or not schema:
        return "string"
    return "json"


def _widget(f: Field) -> str:
    kind = _field_kind(f.schema)
    req = " required" if f.required and kind != "boolean" else ""
    label = esc(f.label)
    if kind == "boolean":
        return f'<div class="check"><input type="checkbox" id="{f.name}" name="{f.name}" value="yes"><label for="{f.name}">{label}</label></div>'
    head = f'<label for="{f.name}">{label}{"" if f.required else " (optional)"}</label>'
    if kind == "enum":
        options = "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in f.schema["enum"])
        blank = "" if f.required else '<option value=""></option>'
        return f'{head}<select id="{f.name}" name="{f.name}"{req}>{blank}{options}</select>'
    if kind in ("number", "integer"):
        step = "1" if kind == "integer" else "any"
        return f'{head}<input type="number" step="{step}" id="{f.name}" name="{f.name}"{req}>'
    if kind == "string":
        limit = f.schema.get("maxLength")
        if isinstance(limit, int) and limit <= 200:
            return f'{head}<input type="text" id="{f.name}" name="{f.name}" maxlength="{limit}"{req}>'
        return f'{head}<textarea id="{f.name}" name="{f.name}"{req}></textarea>'
    return f'{head}<textarea class="json" id="{f.name}" name="{f.name}" spellcheck="false"{req}></textarea>'


# -- from a submitted form to a resume value ---------------------------------------------------------------


def one(form: Mapping[str, Sequence[str]], name: str) -> str | None:
    values = form.get(name)
    return values[0] if values else None


def resume_from_form(payload: Mapping[str, Any], form: Mapping[str, Sequence[str]]) -> Any:
    """The resume value a submitted form stands for; FormError when the form cannot make one."""
    if payload.get("kind") == "approval":
        return _approval_resume(payload, form)
    fields = form_fields(payload)
    if len(fields) == 1 and fields[0].key == "":
        return _json_field(one(form, fields[0].name), "your answer")
    value: dict[str, Any] = {}
    for f in fields:
        raw = one(form, f.name)
        kind = _field_kind(f.schema)
        if kind == "boolean":
            value[f.key] = raw is not None
            continue
        if raw is None or raw.strip() == "":
            if f.required:
                raise FormError(f"Please answer “{f.label}”.")
            continue
        value[f.key] = _coerce(raw, kind, f)
    return value


def _coerce(raw: str, kind: str, f: Field) -> Any:
    if kind == "enum":
        for option in f.schema["enum"]:
            if str(option) == raw:
                return option
        raise FormError(f"“{f.label}” must be one of the listed choices.")
    if kind == "integer":
        try:
            return int(raw.strip())
        except ValueError:
            raise FormError(f"“{f.label}” must be a whole number.") from None
    if kind == "number":
        try:
            number = float(raw.strip())
        except ValueError:
            raise FormError(f"“{f.label}” must be a number.") from None
        if not math.isfinite(number):
            raise FormError(f"“{f.label}” must be a number.")
        return int(number) if number.is_integer() and "." not in raw and "e" not in raw.lower() else number
    if kind == "json":
        return _json_field(raw, f"“{f.label}”")
    return raw


def _json_field(raw: str | None, what: str) -> Any:
    if raw is None or not raw.strip():
        raise FormError(f"Please fill in {what}.")
    try:
        return strict_json.loads(raw)
    except strict_json.StrictJsonError as exc:
        # Strict as a body: a page answer lands in the same event log as an API one.
        detail = "" if exc.field == "body" else f" (at {exc.field})"
        raise FormError(f"{what[0].upper()}{what[1:]} is not valid JSON{detail}.") from None


def _approval_resume(payload: Mapping[str, Any], form: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    actions = (payload.get("data") or {}).get("actions") or []
    action = one(form, "action")
    if action not in actions or action not in ACTION_LABELS:
        raise FormError("Choose one of the buttons this request offers.")
    value: dict[str, Any] = {"action": action}
    feedback = (one(form, "feedback") or "").strip()
    if feedback and action in ("accept", "reject", "ask"):
        value["feedback"] = feedback
    if action == "ask" and not feedback:
        raise FormError("Write your question in the comment box, then press “Ask a question”.")
    if action == "refine":
        value["refineFeedback"] = _refine_feedback(form)
    if action == "edit-accept":
        value["editedArtifactData"] = _json_field(one(form, "edited"), "the edited artifact")
    return value


def _refine_feedback(form: Mapping[str, Sequence[str]]) -> dict[str, str]:
    scope = one(form, "refine_scope") or "whole"
    if scope not in {v for v, _ in REFINE_SCOPES}:
        raise FormError("Choose what should change.")
    text = (one(form, "refine_text") or "").strip()
    if not text:
        raise FormError("Say what should change before requesting changes.")
    return {"scope": scope, "text": text}


# -- where the run stands ---------------------------------------------------------------------------------


def _where(view: View) -> str:
    if not view.nodes:
        return ""
    steps = "".join(
        f'<li class="{"here" if nid == view.node_id else ""}">{esc(view.step_name(nid))}: {esc(words)}</li>'
        for nid, words in describe(view.nodes, view.node_id)
    )
    return (
        '<section class="card"><h2>Where the run stands</h2>'
        f'<div class="graph-wrap">{render_svg(view.nodes, view.edges, view.node_id, view.viewer_decides)}</div>'
        f'<ul class="steps">{steps}</ul></section>'
    )


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
    parts = [_banner(cls, heading, sentence)]
    if view is not None and view.payload:
        parts.append(
            f'<section class="card"><p class="kicker">{esc(_kind_words(view.payload))}</p>'
            f"<h1>{esc(title_of(view.payload))}</h1></section>"
        )
    if view is not None:
        parts.append(_where(view))
    return "".join(parts)


def _banner(cls: str, heading: str, sentence: str) -> str:
    return f'<section class="banner {cls}" role="status"><h1>{esc(heading)}</h1><p>{esc(sentence)}</p></section>'
