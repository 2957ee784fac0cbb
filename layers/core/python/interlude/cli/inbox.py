"""`interlude inbox`, `interlude tenant settings` and `interlude credentials grant` (issue 3)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from interlude.cli.client import Client, StepIds, add_endpoint_args
from interlude.cli.local import add_table_args, table_store
from interlude.domain.ids import MODULEX_INTERRUPT_KIND

COLUMNS = ("RAISED", "WAITS FOR", "WORKFLOW", "RUN", "STEP", "SUMMARY", "VOTES")
# What a gate of each kind waits for, as a person says it.
WAITS_FOR = {
    "approval": "an approval",
    "low-confidence": "a review",
    "custom": "a decision",
    "clarification": "answers",
    "credential": "a credential",
    "external-event": "an outside event",
    "conversation.start": "a reply",
    "conversation.exchange": "a reply",
    "conversation.close": "a reply",
}

MAX_CELL = 48


def summary(item: dict[str, Any]) -> str:
    data = item.get("payload", {}).get("data", {})
    kind = item.get("kind")
    if kind == "approval":
        return str(data.get("title", ""))
    if kind == "clarification":
        questions = data.get("questions") or [{}]
        extra = f" (+{len(questions) - 1})" if len(questions) > 1 else ""
        return str(questions[0].get("question", "")) + extra
    if kind == "external-event":
        correlation = data.get("correlation")
        pairs = ", ".join(f"{k} {v}" for k, v in sorted(correlation.items())) if isinstance(correlation, dict) else ""
        return f"{data.get('eventType')}" + (f" for {pairs}" if pairs else "")
    if kind == "custom" and data.get("customKind") == MODULEX_INTERRUPT_KIND:
        # A ModuleX interrupt: its message's first line, as the approval page titles it.
        return str((data.get("payload") or {}).get("message") or "").strip().split("\n", 1)[0]
    if kind == "custom":
        payload = data.get("payload")
        return str(payload.get("title") if isinstance(payload, dict) and payload.get("title") else data.get("customKind", ""))
    if kind == "low-confidence":
        return f"{data.get('agentId')}: {data.get('observed')} < {data.get('threshold')}"
    if kind == "credential":
        return f"{data.get('provider')} {','.join(data.get('scopes') or [])} ({data.get('reason')})"
    if kind and kind.startswith("conversation."):
        return str(data.get("prompt") or data.get("title") or data.get("conversationId"))
    return ""


def votes_cell(item: dict[str, Any]) -> str:
    votes = [v for v in item.get("votes", []) if v.get("action") != "ask"]
    if item.get("kind") != "approval":
        return "-"
    required = item.get("payload", {}).get("data", {}).get("requiredApprovals", 1)
    accepts = sum(1 for v in votes if v.get("action") in ("accept", "edit-accept"))
    rejects = sum(1 for v in votes if v.get("action") == "reject")
    return f"{accepts}/{required}" + (f" ({rejects} reject)" if rejects else "")


def _cell(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def render_table(items: list[dict[str, Any]], steps: StepIds | None = None) -> str:
    rows = [
        (
            item["raisedAt"],
            WAITS_FOR.get(item["kind"], "an answer"),
            steps.workflow(item["workflowId"]) if steps is not None else item["workflowId"],
            item["runId"],
            steps.of(item["workflowId"], item["nodeId"]) if steps is not None else item["nodeId"],
            summary(item),
            votes_cell(item),
        )
        for item in items
    ]
    cells = [tuple(_cell(c) for c in row) for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(COLUMNS)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(COLUMNS, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    if not items:
        lines.append("(no pending interrupts you may decide)")
    return "\n".join(lines)


def _inbox(args: argparse.Namespace) -> int:
    client = Client.of(args)
    query = {"status": "pending", "limit": str(args.limit)}
    named = (("kind", args.kind), ("workflowId", args.workflow), ("runId", args.run), ("sort", args.sort), ("claim", args.claim))
    for name, value in named:
        if value:
            query[name] = value
    items: list[dict[str, Any]] = []
    while True:
        page = client.call("GET", "/interrupts", query=query)
        items += page["interrupts"]
        if not args.all or not page.get("nextCursor"):
            break
        query["cursor"] = page["nextCursor"]
    if args.json:
        print(json.dumps({"interrupts": items, "nextCursor": None if args.all else page.get("nextCursor")}, indent=2))
    else:
        print(render_table(items, StepIds(client)))
        if page.get("nextCursor") and not args.all:
            print(f"more: --all, or the cursor {page['nextCursor']}")
    return 0


def _tenant_settings(args: argparse.Namespace) -> int:
    from interlude.app.tenant_facts import tenant_settings
    from interlude.composition import Services

    services = Services(table_store(args))
    patch: dict[str, Any] = {}
    if args.override_principals is not None:
        patch["overridePrincipals"] = [p for p in args.override_principals.split(",") if p]
    if args.event_retention_hours is not None:
        patch["eventRetentionHours"] = args.event_retention_hours
    if not patch:  # nothing to change: shown as GET /tenant/settings shows them, and nothing written
        settings = tenant_settings(services.interactions, args.tenant).model_dump(exclude_none=True)
        print(json.dumps({"tenant": args.tenant, "settings": settings}, indent=2))
        return 0
    # Merged onto what is stored, as PATCH /tenant/settings merges: the other settings stay as they are.
    print(json.dumps(services.tenants.patch_settings(args.tenant, patch, "cli"), indent=2))
    return 0


def _credentials_grant(args: argparse.Namespace) -> int:
    from interlude.composition import Services
    from interlude.domain.ids import check_author_id
    from interlude.domain.models.tenant_requests import CredentialGrantRequest
    from interlude.domain.validation import parse

    services = Services(table_store(args))
    scopes = [s for s in args.scopes.split(",") if s]
    request = parse(CredentialGrantRequest, {"scopes": scopes}, "credential grant")
    provider = check_author_id(args.provider, "provider")
    print(json.dumps(services.tenants.put_grant(args.tenant, provider, request, "cli"), indent=2))
    return 0


def _table_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenant", required=True)
    add_table_args(parser)


def add_commands(sub: Any) -> None:
    inbox = sub.add_parser("inbox", help="pending interrupts you may decide (GET /interrupts) as a table")
    add_endpoint_args(inbox)
    inbox.add_argument("--kind")
    inbox.add_argument("--workflow")
    inbox.add_argument("--run")
    # Checked by the service (app/inbox.py ORDERS, CLAIMS): an unknown one is refused naming it.
    inbox.add_argument("--sort", help="newest (the default), oldest, or due (soonest deadline first, then those with none)")
    inbox.add_argument("--claim", help="mine (gates you claimed or were assigned) or unclaimed (gates nobody works)")
    inbox.add_argument("--limit", type=int, default=25)
    inbox.add_argument("--all", action="store_true", help="follow the cursor to the end")
    inbox.set_defaults(func=_inbox, in_process=False)

    tenant = sub.add_parser("tenant", help="tenant settings").add_subparsers(dest="tenant_command", required=True)
    settings = tenant.add_parser(
        "settings", help="show the tenant's settings; with an option, change that one only (the rest stay)"
    )
    _table_args(settings)
    settings.add_argument("--override-principals", help="comma-separated subject ids (or issuer|subjectId)")
    settings.add_argument("--event-retention-hours", type=int)
    settings.set_defaults(func=_tenant_settings)

    credentials = sub.add_parser("credentials", help="credential grants").add_subparsers(
        dest="credentials_command", required=True
    )
    grant = credentials.add_parser("grant", help="record that the tenant holds a grant (never the material)")
    _table_args(grant)
    grant.add_argument("--provider", required=True)
    grant.add_argument("--scopes", required=True, help="comma-separated")
    grant.set_defaults(func=_credentials_grant)
