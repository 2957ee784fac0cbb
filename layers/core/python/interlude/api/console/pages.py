"""The console's pages: pure functions from what the services answered to HTML.

The approval page's discipline (interlude.api.page.approval): no script, no third-party asset, one nonce'd style
sheet, and every value that reaches the markup passes through `esc`. Every page is a form or a link away from
every action, so it works without JavaScript and from the keyboard; landmarks, labels and captions name what
a screen reader announces.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from interlude.api.page import approval
from interlude.api.page.graph import GraphNode, describe, render_svg
from interlude.domain.ids import to_wire

esc = approval.esc
pretty = approval.pretty

CSS = (
    approval.CSS
    + """
main{max-width:90rem}
.skip{position:absolute;left:-999px;top:0;background:#1d4ed8;color:#fff;padding:.5rem .8rem;z-index:2}
.skip:focus{left:.5rem}
header.top{background:#1d2330;color:#fff}
header.top .bar{max-width:90rem;margin:0 auto;padding:.5rem 1rem;display:flex;flex-wrap:wrap;gap:.4rem 1rem;
align-items:center}
header.top .brand{font-weight:700;margin-right:auto}
header.top nav ul{list-style:none;display:flex;flex-wrap:wrap;gap:.25rem;margin:0;padding:0}
header.top nav a{color:#fff;text-decoration:none;padding:.45rem .6rem;border-radius:6px;display:inline-block}
header.top nav a[aria-current=page]{background:#3b4557;font-weight:700}
header.top nav a:hover{text-decoration:underline}
header.top .who{font-size:.85rem;color:#d0d5dd;margin:0}
header.top form{margin:0}
header.top button{background:transparent;border:1px solid #98a2b3;color:#fff;min-height:0;padding:.35rem .7rem;
flex:none;font-size:.85rem}
a{color:#1d4ed8}
a:focus-visible,button:focus-visible,input:focus-visible,select:focus-visible,textarea:focus-visible,
summary:focus-visible{outline:3px solid #f79009;outline-offset:2px}
.table-wrap{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:.9rem}
caption{text-align:left;font-weight:600;padding:0 0 .4rem}
th,td{text-align:left;padding:.45rem .5rem;border-bottom:1px solid #e3e6ea;vertical-align:top;overflow-wrap:anywhere}
th{font-size:.8rem;text-transform:uppercase;letter-spacing:.03em;color:#5b6474;overflow-wrap:normal;white-space:nowrap}
.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.85rem}
.pill{display:inline-block;border-radius:999px;padding:.05rem .55rem;font-size:.8rem;font-weight:600;
background:#f2f4f7;border:1px solid #d0d5dd}
.pill.s-completed,.pill.s-active{background:#ecfdf3;border-color:#75e0a7}
.pill.s-failed,.pill.s-revoked,.pill.s-cancelled,.pill.s-expired{background:#fef3f2;border-color:#fda29b}
.pill.s-waiting-approval,.pill.s-waiting-input,.pill.s-waiting-external{background:#fffaeb;border-color:#fec84b}
.filters{display:flex;flex-wrap:wrap;gap:.6rem;align-items:flex-end}
.filters label{margin:0 0 .2rem}
.filters>div{flex:1 1 12rem}
.filters button{flex:0 0 auto}
button.small{min-height:2.2rem;padding:.35rem .8rem;flex:0 0 auto;font-size:.9rem}
.grid2{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,22rem),1fr));gap:1rem}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.25rem .9rem;margin:0}
dl.facts dt{color:#5b6474}
dl.facts dd{margin:0;overflow-wrap:anywhere}
ol.timeline{list-style:none;margin:0;padding:0}
ol.timeline li{border-left:3px solid #d0d5dd;padding:.3rem 0 .5rem .8rem;margin-left:.3rem}
ol.timeline .when{color:#5b6474;font-size:.8rem}
ol.timeline details{margin-top:.2rem;border:0;padding:0}
.secret{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;background:#fff;border:1px dashed #12b76a;
padding:.5rem;overflow-wrap:anywhere;display:block}
.pager{display:flex;gap:1rem;margin-top:.8rem}
@media (max-width:30rem){header.top .bar{padding:.5rem .6rem}}
@media (max-width:48rem){
.table-wrap table,.table-wrap tbody,.table-wrap tr,.table-wrap td,.table-wrap caption{display:block;width:100%}
.table-wrap thead{position:absolute;left:-9999px;top:auto;width:1px;height:1px;overflow:hidden}
.table-wrap tr{border-bottom:1px solid #d0d5dd;padding:.45rem 0}
.table-wrap td{border:0;padding:.12rem 0;display:grid;grid-template-columns:6.5rem minmax(0,1fr);gap:.5rem}
.table-wrap td::before{content:attr(data-label);font-size:.75rem;text-transform:uppercase;letter-spacing:.03em;
color:#5b6474;padding-top:.15rem}
}
"""
)

NAV = (("inbox", "Inbox"), ("runs", "Runs"), ("workflows", "Workflows"), ("keys", "Keys"), ("audit", "Audit"))
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


# -- the document ------------------------------------------------------------------------------------


def document(
    title: str, body: str, style_nonce: str, frame: Frame | None, current: str = "", go_to: str | None = None
) -> str:
    """`go_to`: a console path the browser moves on to at once (a meta refresh: no script needed)."""
    refresh = f'<meta http-equiv="refresh" content="0;url={esc(go_to)}">' if go_to else ""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="robots" content="noindex, nofollow">'
        f"{refresh}"
        '<link rel="icon" href="data:,">'
        f"<title>{esc(title)} · Interlude console</title>"
        f'<style nonce="{esc(style_nonce)}">{CSS}</style></head>'
        f'<body><a class="skip" href="#main">Skip to content</a>{_header(frame, current)}'
        f'<main id="main" tabindex="-1">{body}<footer>Interlude console · server-rendered, no script, '
        "nothing loaded from anywhere else</footer></main></body></html>"
    )


def _header(frame: Frame | None, current: str) -> str:
    if frame is None:
        return '<header class="top"><div class="bar"><span class="brand">Interlude console</span></div></header>'
    links = "".join(
        f'<li><a href="/console/{slug}"{" aria-current=page" if slug == current else ""}>{esc(label)}</a></li>'
        for slug, label in NAV
    )
    return (
        '<header class="top"><div class="bar"><span class="brand">Interlude console</span>'
        f'<nav aria-label="Console sections"><ul>{links}</ul></nav>'
        f'<p class="who">Signed in as <strong>{esc(frame.subject_id)}</strong> · tenant {esc(frame.tenant)}</p>'
        f'<form method="post" action="/console/sign-out">{hidden_proof(frame.proof)}'
        '<button type="submit">Sign out</button></form></div></header>'
    )


def hidden_proof(proof: str) -> str:
    return f'<input type="hidden" name="csrf" value="{esc(proof)}">'


def banner(notice: Notice | None) -> str:
    if notice is None:
        return ""
    lines = "".join(f"<li>{esc(line)}</li>" for line in notice.lines)
    return (
        f'<section class="banner {esc(notice.cls)}" role="status"><h2>{esc(notice.heading)}</h2>'
        + (f"<p>{esc(notice.sentence)}</p>" if notice.sentence else "")
        + (f"<ul>{lines}</ul>" if lines else "")
        + "</section>"
    )


def pill(status: str) -> str:
    return f'<span class="pill s-{esc(status)}">{esc(status)}</span>'


def table(caption: str, headings: Sequence[str], rows: Sequence[Sequence[str]], empty: str) -> str:
    """Cells are markup already escaped by the caller. On a narrow screen each row stacks into a card, each cell
    labelled by its heading (data-label); the ARIA roles keep it a table for screen readers whatever its display."""
    if not rows:
        return f'<p class="muted">{esc(empty)}</p>'
    head = "".join(f'<th scope="col" role="columnheader">{esc(h)}</th>' for h in headings)
    body = "".join(
        '<tr role="row">'
        + "".join(f'<td role="cell" data-label="{esc(h)}">{cell}</td>' for h, cell in zip(headings, row, strict=True))
        + "</tr>"
        for row in rows
    )
    return (
        f'<div class="table-wrap"><table role="table"><caption>{esc(caption)}</caption>'
        f'<thead role="rowgroup"><tr role="row">{head}</tr></thead><tbody role="rowgroup">{body}</tbody></table></div>'
    )


def facts(pairs: Sequence[tuple[str, str]]) -> str:
    """Values are markup already escaped by the caller."""
    return '<dl class="facts">' + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in pairs) + "</dl>"


# -- sign in, and messages ----------------------------------------------------------------------------


def sign_in(proof: str, notice: Notice | None = None) -> str:
    return (
        banner(notice) + '<section class="card"><h1>Sign in</h1>'
        '<p class="muted">Paste an Interlude API key. It is checked once and exchanged for a session that ends '
        "after an hour, when you sign out, or as soon as the key is revoked; the key itself is not kept.</p>"
        f'<form method="post" action="/console/sign-in">{hidden_proof(proof)}'
        '<label for="api_key">API key</label>'
        '<input type="password" id="api_key" name="api_key" autocomplete="off" spellcheck="false" required '
        'aria-describedby="api_key_hint" maxlength="200">'
        '<p id="api_key_hint" class="muted">It starts with <span class="mono">il_</span>.</p>'
        '<div class="buttons"><button type="submit">Sign in</button></div></form></section>'
    )


def message(notice: Notice, link: tuple[str, str] | None = None) -> str:
    after = f'<p><a href="{esc(link[0])}">{esc(link[1])}</a></p>' if link else ""
    return banner(notice) + after


# -- deciding (inbox and run pages) ------------------------------------------------------------------


def decision_form(run_id: str, node_id: str, payload: Mapping[str, Any], proof: str, prefix: str) -> str:
    """The inline decision form for one open interrupt, posting to the console's decide route."""
    action = f"{run_href(run_id)}/interrupts/{quote(node_id, safe='')}"
    hidden = hidden_proof(proof) + f'<input type="hidden" name="back" value="{esc(prefix.split("-")[0])}">'
    if payload.get("kind") == "approval":
        return _approval_buttons(action, hidden, payload, prefix)
    fields = "".join(_widget(f, prefix) for f in approval.form_fields(payload))
    return (
        f'<form method="post" action="{esc(action)}">{hidden}{fields}'
        '<div class="buttons"><button type="submit" class="small" name="action" value="submit">Send answer</button>'
        "</div></form>"
    )


def _approval_buttons(action: str, hidden: str, payload: Mapping[str, Any], prefix: str) -> str:
    actions = [a for a in (payload.get("data") or {}).get("actions") or [] if a in approval.ACTION_LABELS]
    simple = [a for a in ("accept", "reject", "ask") if a in actions]
    buttons = "".join(
        f'<button type="submit" class="small{" reject" if a == "reject" else ""}" name="action" value="{a}">'
        f"{esc(approval.ACTION_LABELS[a])}</button>"
        for a in simple
    )
    out = (
        f'<form method="post" action="{esc(action)}">{hidden}'
        f'<label for="{prefix}-feedback">Comment (optional)</label>'
        f'<textarea id="{prefix}-feedback" name="feedback" maxlength="10000"></textarea>'
        f'<div class="buttons">{buttons}</div></form>'
    )
    if "refine" in actions:
        options = "".join(f'<option value="{v}">{esc(t)}</option>' for v, t in approval.REFINE_SCOPES)
        out += (
            f'<details><summary>{esc(approval.ACTION_LABELS["refine"])}</summary>'
            f'<form method="post" action="{esc(action)}">{hidden}'
            f'<label for="{prefix}-scope">What should change</label>'
            f'<select id="{prefix}-scope" name="refine_scope">{options}</select>'
            f'<label for="{prefix}-refine">What to change, and why</label>'
            f'<textarea id="{prefix}-refine" name="refine_text" required maxlength="10000"></textarea>'
            '<div class="buttons"><button type="submit" class="small secondary" name="action" value="refine">'
            f"{esc(approval.ACTION_LABELS['refine'])}</button></div></form></details>"
        )
    if "edit-accept" in actions:
        data = payload.get("data") or {}
        current = pretty(data.get("artifactData")) if "artifactData" in data else ""
        out += (
            f'<details><summary>{esc(approval.ACTION_LABELS["edit-accept"])}</summary>'
            f'<form method="post" action="{esc(action)}">{hidden}'
            f'<label for="{prefix}-edited">The artifact as it should be (JSON)</label>'
            f'<textarea id="{prefix}-edited" class="json" name="edited" required spellcheck="false">{esc(current)}'
            '</textarea><div class="buttons"><button type="submit" class="small secondary" name="action" '
            f'value="edit-accept">{esc(approval.ACTION_LABELS["edit-accept"])}</button></div></form></details>'
        )
    return out


def _widget(f: approval.Field, prefix: str) -> str:
    """One answer field; ids carry the item's prefix so several forms share a page."""
    ident = f"{prefix}-{f.name}"
    label = esc(f.label) + ("" if f.required else " (optional)")
    schema = f.schema
    if schema.get("type") == "boolean":
        return (
            f'<div class="check"><input type="checkbox" id="{ident}" name="{f.name}" value="yes">'
            f'<label for="{ident}">{esc(f.label)}</label></div>'
        )
    req = " required" if f.required else ""
    head = f'<label for="{ident}">{label}</label>'
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        options = "".join(f'<option value="{esc(v)}">{esc(v)}</option>' for v in schema["enum"])
        return f'{head}<select id="{ident}" name="{f.name}"{req}>{options}</select>'
    json_class = ' class="json"' if schema.get("type") not in ("string", "number", "integer", None) else ""
    return f'{head}<textarea id="{ident}"{json_class} name="{f.name}" spellcheck="false"{req}></textarea>'


def votes_table(votes: Sequence[Mapping[str, Any]], caption: str = "Votes") -> str:
    rows = [
        [esc(_voter(v)), esc(v.get("action", "")), esc(v.get("at", "")), esc(v.get("surface", ""))] for v in votes
    ]
    return table(caption, ("Who", "Decision", "When", "Surface"), rows, "No votes yet.")


def _voter(vote: Mapping[str, Any]) -> str:
    """Whose vote it is, and who cast it when a delegate did."""
    who = str(vote.get("principal", ""))
    cast_by = vote.get("castBy")
    if isinstance(cast_by, Mapping):
        cast_by = cast_by.get("subjectId") or cast_by.get("principal")
    return f"{who} (cast by {cast_by})" if cast_by and cast_by != who else who


# -- inbox --------------------------------------------------------------------------------------------


def inbox(frame: Frame, items: Sequence[Mapping[str, Any]], next_cursor: str | None, notice: Notice | None) -> str:
    parts = [banner(notice), '<h1>Inbox</h1><p class="muted">Requests waiting for a decision you may make, '
             "newest first. Deciding here counts exactly as deciding through the API or a link.</p>"]
    if not items:
        parts.append('<section class="card"><p>Nothing is waiting for you.</p></section>')
    for i, item in enumerate(items):
        payload = item.get("payload") or {}
        data = payload.get("data") or {}
        heading_id = f"item-{i}"
        parts.append(
            f'<section class="card" aria-labelledby="{heading_id}">'
            f'<p class="kicker">{esc(item.get("kind", ""))} · {esc(item.get("workflowId", ""))}</p>'
            f'<h2 id="{heading_id}">{esc(approval.title_of(payload))}</h2>'
            + (f'<p class="desc">{esc(data["description"])}</p>' if data.get("description") else "")
            + facts(
                [
                    ("Run", f'<a href="{esc(run_href(item["runId"]))}" class="mono">{esc(item["runId"])}</a>'),
                    ("Step", esc(item.get("nodeId", ""))),
                    ("Asked", esc(item.get("raisedAt", ""))),
                    # A gate the signed-in principal may decide as someone's delegate (issue 14 item 4).
                    *([("On behalf of", esc(", ".join(item["onBehalfOf"])))] if item.get("onBehalfOf") else []),
                ]
            )
            + (votes_table(item.get("votes") or []) if item.get("votes") else "")
            + decision_form(item["runId"], item["nodeId"], payload, frame.proof, f"inbox-{i}")
            + "</section>"
        )
    if next_cursor:
        parts.append(f'<p class="pager"><a href="/console/inbox?{esc(urlencode({"cursor": next_cursor}))}">Older requests</a></p>')
    return "".join(parts)


# -- runs ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunsView:
    runs: Sequence[Mapping[str, Any]]
    next_cursor: str | None
    status: str | None
    workflow_id: str | None


def runs(frame: Frame, view: RunsView, notice: Notice | None) -> str:
    status_options = '<option value="">Any status</option>' + "".join(
        f'<option value="{s}"{" selected" if s == view.status else ""}>{esc(s)}</option>' for s in RUN_STATUSES
    )
    parts = [
        banner(notice),
        "<h1>Runs</h1>",
        '<section class="card"><h2>Find runs</h2><form method="get" action="/console/runs" class="filters">',
        '<div><label for="f-status">Status</label>'
        f'<select id="f-status" name="status">{status_options}</select></div>'
        '<div><label for="f-workflow">Workflow id</label>'
        f'<input type="text" id="f-workflow" name="workflowId" value="{esc(view.workflow_id or "")}"></div>'
        '<div><label for="f-run">Run id (opens it)</label><input type="text" id="f-run" name="runId" class="mono"></div>'
        '<button type="submit" class="small">Find</button></form></section>',
    ]
    rows = [
        [
            f'<input type="checkbox" name="runId" value="{esc(r["runId"])}" id="sel-{i}" '
            f'aria-label="Select run {esc(r["runId"])}">',
            f'<a class="mono" href="{esc(run_href(r["runId"]))}">{esc(r["runId"])}</a>',
            esc(r.get("workflowId", "")),
            pill(str(r.get("status", ""))),
            esc(r.get("startedAt") or r.get("createdAt") or ""),
        ]
        for i, r in enumerate(view.runs)
    ]
    parts.append(
        '<section class="card"><form method="post" action="/console/runs/cancel">'
        f"{hidden_proof(frame.proof)}"
        + table("Runs, newest first", ("Select", "Run", "Workflow", "Status", "Started"), rows, "No runs match.")
        + '<label for="cancel-reason">Reason for cancelling (optional)</label>'
        '<input type="text" id="cancel-reason" name="reason" maxlength="500">'
        '<div class="buttons"><button type="submit" class="small reject">Cancel selected runs</button></div>'
        "</form></section>"
    )
    if view.next_cursor:
        query = {"cursor": view.next_cursor}
        if view.status:
            query["status"] = view.status
        if view.workflow_id:
            query["workflowId"] = view.workflow_id
        parts.append(f'<p class="pager"><a href="/console/runs?{esc(urlencode(query))}">Next page</a></p>')
    return "".join(parts)


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


def run(frame: Frame, view: RunView, notice: Notice | None) -> str:
    snap = view.snapshot
    run_id = str(snap["runId"])
    ext = (snap.get("extensions") or {}).get("interlude.run") or {}
    summary = facts(
        [
            ("Status", pill(str(snap.get("status")))),
            ("Workflow", f'<a href="/console/workflows/{esc(quote(str(snap["workflowId"]), safe=""))}?'
             f'version={esc(ext.get("workflowVersion", ""))}">{esc(snap["workflowId"])}</a> '
             f'(version {esc(ext.get("workflowVersion", "?"))})'),
            ("Started", esc(snap.get("startedAt", "—"))),
            ("Ended", esc(snap.get("completedAt", "—"))),
            ("Waiting at", esc(snap.get("currentNodeId", "—"))),
        ]
    )
    cancel = ""
    if snap.get("status") not in ("completed", "failed", "cancelled"):
        cancel = (
            f'<form method="post" action="/console/runs/cancel">{hidden_proof(frame.proof)}'
            f'<input type="hidden" name="runId" value="{esc(run_id)}">'
            '<div class="buttons"><button type="submit" class="small reject">Cancel this run</button></div></form>'
        )
    steps = "".join(f"<li>{esc(nid)}: {esc(words)}</li>" for nid, words in describe(view.nodes, ""))
    parts = [
        banner(notice),
        f'<p class="kicker">Run</p><h1 class="mono">{esc(run_id)}</h1>',
        '<div class="grid2">',
        f'<section class="card"><h2>Summary</h2>{summary}{cancel}</section>',
        '<section class="card"><h2>Graph</h2>'
        f'<div class="graph-wrap">{render_svg(view.nodes, view.edges, "")}</div>'
        f'<ul class="steps" aria-label="Steps and their states">{steps}</ul></section>',
        "</div>",
        _open_gates(frame, run_id, view.open_interrupts),
        _timeline(run_id, view.events, view.more_events_after),
        '<section class="card"><h2>Callback deliveries</h2>' + _deliveries(view.deliveries) + "</section>",
    ]
    if view.notifications is not None:
        parts.append('<section class="card"><h2>Notifications</h2>' + _notifications(view.notifications) + "</section>")
    if view.tokens is not None:
        parts.append('<section class="card"><h2>Tokens minted</h2>' + _records(view.tokens, "tokens") + "</section>")
    for heading, sentence in view.unavailable:
        parts.append(f'<section class="card"><h2>{esc(heading)}</h2><p class="muted">{esc(sentence)}</p></section>')
    return "".join(parts)


def _open_gates(frame: Frame, run_id: str, open_interrupts: Mapping[str, Mapping[str, Any]]) -> str:
    if not open_interrupts:
        return '<section class="card"><h2>Open gates</h2><p class="muted">No gate is waiting.</p></section>'
    out = ['<section class="card"><h2>Open gates</h2>']
    for i, (node_id, interrupt) in enumerate(open_interrupts.items()):
        payload = interrupt.get("payload") or {}
        data = payload.get("data") or {}
        required = data.get("requiredApprovals")
        out.append(
            f"<h3>{esc(node_id)}: {esc(approval.title_of(payload))}</h3>"
            + facts(
                [
                    ("Kind", esc(interrupt.get("kind", ""))),
                    ("Asked", esc(interrupt.get("raisedAt", ""))),
                    ("Deadline", esc(interrupt.get("deadline", "none"))),
                    *([("Approvals needed", esc(required))] if isinstance(required, int) else []),
                ]
            )
            + votes_table(interrupt.get("votes") or [], f"Votes on {node_id}")
        )
        if interrupt.get("mayDecide"):
            out.append(decision_form(run_id, node_id, payload, frame.proof, f"run-{i}"))
    out.append("</section>")
    return "".join(out)


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


def event_summary(event: Mapping[str, Any]) -> str:
    """One readable line for an event: what happened, to which step, decided how and by whom."""
    payload = event.get("payload") or {}
    words = EVENT_WORDS.get(str(event.get("type")), str(event.get("type")))
    bits = [words]
    if event.get("nodeId"):
        bits.append(f"· {event['nodeId']}")
    for name in ("kind", "action", "decision", "reason"):
        if isinstance(payload.get(name), str):
            bits.append(f"· {name} {payload[name]}")
    who = payload.get("resolvedBy")
    if isinstance(who, dict) and who.get("subjectId"):
        bits.append(f"· by {who['subjectId']}")
    error = payload.get("error")
    if isinstance(error, dict) and error.get("message"):
        bits.append(f"· {error['message']}")
    return " ".join(bits)


def _timeline(run_id: str, events: Sequence[Mapping[str, Any]], more_after: int | None) -> str:
    items = "".join(
        f'<li><span class="when">#{esc(e.get("sequence"))} · {esc(e.get("timestamp", ""))}</span><br>'
        f"{esc(event_summary(e))}"
        + (
            f'<details><summary>Payload</summary><pre>{esc(pretty(e.get("payload")))}</pre></details>'
            if e.get("payload")
            else ""
        )
        + "</li>"
        for e in events
    )
    more = (
        f'<p class="pager"><a href="{esc(run_href(run_id))}?after={esc(more_after)}">Later events</a></p>'
        if more_after is not None
        else ""
    )
    body = f'<ol class="timeline">{items}</ol>' if items else '<p class="muted">No events yet.</p>'
    return f'<section class="card"><h2>Timeline</h2>{body}{more}</section>'


def _deliveries(deliveries: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        [
            esc(d.get("at", "")),
            esc(d.get("event") or d.get("type") or ""),
            esc(d.get("attempt", "")),
            esc(d.get("outcome") or d.get("status") or ""),
            esc(d.get("httpStatus") or d.get("statusCode") or ""),
        ]
        for d in deliveries
    ]
    return table("Delivery attempts", ("When", "Notice", "Attempt", "Outcome", "HTTP"), rows, "No callback deliveries.")


def _who(actor: Any) -> str:
    if not isinstance(actor, Mapping):
        return ""
    return f"{actor.get('subjectId', '?')} ({actor.get('surface', '?')})"


def _target(target: Any) -> str:
    if not isinstance(target, Mapping):
        return ""
    return " ".join(f"{k} {v}" for k, v in target.items())


def _notifications(entries: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        [
            esc(n.get("at") or n.get("queuedAt") or ""),
            esc(n.get("principalId", "")),
            esc(n.get("purpose", "")),
            esc(n.get("channel") or "—"),
            esc(n.get("outcome") or n.get("status") or ""),
        ]
        for n in entries
    ]
    return table("Who was told, how", ("When", "Who", "Why", "Channel", "Outcome"), rows, "No notifications.")


def _records(records: Sequence[Mapping[str, Any]], what: str) -> str:
    if not records:
        return f'<p class="muted">No {esc(what)}.</p>'
    return "".join(f"<details><summary>{esc(_record_line(r))}</summary><pre>{esc(pretty(r))}</pre></details>" for r in records)


def _record_line(record: Mapping[str, Any]) -> str:
    keys = ("at", "createdAt", "timestamp", "type", "action", "channel", "status", "outcome", "nodeId", "intent")
    return " · ".join(str(record[k]) for k in keys if isinstance(record.get(k), str | int)) or "entry"


# -- workflows ----------------------------------------------------------------------------------------


def workflows(
    frame: Frame,
    listed: Sequence[Mapping[str, Any]],
    notice: Notice | None,
    page: int = 1,
    total_pages: int = 1,
) -> str:
    parts = [
        banner(notice),
        "<h1>Workflows</h1>",
        '<section class="card"><h2>Open a workflow</h2><form method="get" action="/console/workflows" class="filters">'
        '<div><label for="wf-id">Workflow id</label><input type="text" id="wf-id" name="workflowId" required></div>'
        '<button type="submit" class="small">Open</button></form></section>',
    ]
    rows = []
    for w in listed:
        workflow_id = str(w.get("id") or w.get("workflowId"))
        rows.append(
            [
                f'<a href="/console/workflows/{esc(quote(workflow_id, safe=""))}">{esc(workflow_id)}</a>',
                esc(w.get("name") or ""),
                esc(w.get("latestVersion") or w.get("version") or ""),
                esc(w.get("face") or ""),
                esc(w.get("updatedAt") or w.get("createdAt") or ""),
            ]
        )
    parts.append(
        '<section class="card">'
        + table("Workflows, by id", ("Workflow", "Name", "Latest version", "Face", "Updated"), rows, "No workflows yet.")
        + "</section>"
    )
    if page < total_pages:
        parts.append(f'<p class="pager"><a href="/console/workflows?page={page + 1}">Next page</a></p>')
    return "".join(parts)


def workflow(
    frame: Frame, got: Mapping[str, Any], nodes: Sequence[GraphNode], edges: Sequence[tuple[str, str]]
) -> str:
    workflow_id = str(got["workflowId"])
    version = int(got["version"])
    latest = int(got.get("latestVersion") or version)
    base = f"/console/workflows/{quote(workflow_id, safe='')}"
    versions = " ".join(
        f'<a href="{esc(base)}?version={v}"{" aria-current=page" if v == version else ""}>{v}</a>'
        for v in range(latest, max(0, latest - 50), -1)
    )
    steps = "".join(f"<li>{esc(n.id)} ({esc(n.type_id)})</li>" for n in nodes)
    return (
        f'<p class="kicker">Workflow</p><h1>{esc(workflow_id)}</h1>'
        f'<section class="card"><h2>Versions</h2><p>Showing version {version} of {latest}.</p>'
        f'<nav aria-label="Versions"><p>{versions}</p></nav></section>'
        '<section class="card"><h2>The definition drawn</h2>'
        f'<div class="graph-wrap">{render_svg(nodes, edges, "")}</div>'
        f'<ul class="steps" aria-label="Steps">{steps}</ul></section>'
        '<section class="card"><h2>The definition as JSON</h2>'
        f'<pre>{esc(json.dumps(got["definition"], indent=2, ensure_ascii=False, allow_nan=False))}</pre></section>'
    )


# -- keys ---------------------------------------------------------------------------------------------


def keys(
    frame: Frame,
    listed: Sequence[Mapping[str, Any]],
    next_cursor: str | None,
    notice: Notice | None,
    created: Mapping[str, Any] | None = None,
    scopes: Sequence[str] = (),
) -> str:
    parts = [banner(notice), "<h1>API keys</h1>"]
    if created is not None:
        parts.append(
            '<section class="banner ok" role="status"><h2>Key created</h2>'
            "<p>Copy it now: it is shown only this once.</p>"
            f'<code class="secret" id="new-key">{esc(created["apiKey"])}</code></section>'
        )
    rows = []
    for i, k in enumerate(listed):
        revoke = ""
        if k.get("status") == "active":
            revoke = (
                f'<form method="post" action="/console/keys/{esc(k["keyId"])}/revoke">{hidden_proof(frame.proof)}'
                f'<button type="submit" class="small reject" id="revoke-{i}" '
                f'aria-label="Revoke key {esc(k["keyId"])}">Revoke</button></form>'
            )
        subject = (k.get("subject") or {}).get("subjectId", "")
        rows.append(
            [
                f'<span class="mono">{esc(k["keyId"])}</span>',
                esc(subject),
                esc(", ".join(k.get("scopes") or [])),
                pill(str(k.get("status", ""))),
                esc(k.get("createdAt", "")),
                revoke,
            ]
        )
    parts.append(
        '<section class="card">'
        + table("The tenant's keys, oldest first", ("Key", "Subject", "Scopes", "Status", "Created", ""), rows, "No keys.")
        + (f'<p class="pager"><a href="/console/keys?{esc(urlencode({"cursor": next_cursor}))}">More keys</a></p>' if next_cursor else "")
        + "</section>"
    )
    boxes = "".join(
        f'<div class="check"><input type="checkbox" id="scope-{i}" name="scope" value="{esc(s)}">'
        f'<label for="scope-{i}">{esc(s)}</label></div>'
        for i, s in enumerate(scopes)
    )
    parts.append(
        '<section class="card"><h2>Create a key</h2>'
        f'<form method="post" action="/console/keys">{hidden_proof(frame.proof)}'
        '<label for="key-subject">Subject (who holds the key)</label>'
        '<input type="text" id="key-subject" name="subjectId" required maxlength="256">'
        f'<fieldset><legend>Scopes</legend>{boxes}</fieldset>'
        '<div class="buttons"><button type="submit" class="small">Create key</button></div></form></section>'
    )
    return "".join(parts)


# -- audit --------------------------------------------------------------------------------------------


def audit(frame: Frame, entries: Sequence[Mapping[str, Any]], next_cursor: str | None, notice: Notice | None) -> str:
    parts = [
        banner(notice),
        '<h1>Audit</h1><p class="muted">The tenant\'s audit trail, newest first: every decision and vote, cancel, key '
        "change, token mint and settings change, hash-chained (<span class=\"mono\">interlude audit verify</span> "
        "re-walks it).</p>",
    ]
    rows = [
        [
            esc(f"{e.get('chain', '')}:{e.get('seq', '')}"),
            esc(e.get("at", "")),
            esc(e.get("action", "")),
            esc(_who(e.get("actor"))),
            esc(_target(e.get("target"))),
            f"<details><summary>Entry</summary><pre>{esc(pretty(e))}</pre></details>",
        ]
        for e in entries
    ]
    parts.append(
        '<section class="card">'
        + table("Audit entries, newest first", ("Chain:#", "When", "What", "Who", "On", ""), rows, "No audit entries yet.")
        + "</section>"
    )
    if next_cursor:
        parts.append(f'<p class="pager"><a href="/console/audit?{esc(urlencode({"cursor": next_cursor}))}">Older entries</a></p>')
    return "".join(parts)
