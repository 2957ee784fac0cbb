"""`interlude runs list|show|cancel`, `interlude resolve`, `interlude links mint`, `interlude workflows
list|show|validate` and the HTTP side of `interlude keys list|create|revoke` (issue 16, item 4): clients of the HTTP
API, like `interlude inbox`. Human tables by default, `--json` everywhere."""

from __future__ import annotations

import argparse
import re
from typing import Any

from interlude.cli.client import (
    Client,
    CliError,
    DisplayNames,
    StepIds,
    add_endpoint_args,
    printed,
    run_call,
    segment,
    table,
    wire,
)
from interlude.cli.deliveries import add_run_commands
from interlude.cli.files import read_json
from interlude.cli.forks import add_fork_commands
from interlude.cli.inbox import WAITS_FOR
from interlude.cli.lifecycle import (
    NODE_STATUS_WORDS,
    WHEN_HELP,
    add_resolve_args,
    add_workflow_commands,
    instant_of,
    pairs,
    resume_value,
    status_in_words,
    verdicts_of,
)
from interlude.cli.lifecycle import add_run_commands as add_lifecycle_run_commands
from interlude.domain.event_words import event_in_words
from interlude.domain.ids import principal_subject

# A vote as a table says it (the protocol's actions stay in --json).
VOTE_WORDS = {"accept": "approved", "edit-accept": "approved with edits", "reject": "rejected", "refine": "asked for changes", "ask": "asked a question"}
RUN_COLUMNS = ("CREATED", "STATUS", "WORKFLOW", "RUN", "WAITING ON")


# -- runs ----------------------------------------------------------------------------------------------------------


def _runs_list(args: argparse.Namespace) -> int:
    if any("," in tag for tag in args.tag or ()):
        raise CliError("--tag: a tag holds no comma (give each tag its own --tag)")
    client = Client.of(args)
    query: dict[str, Any] = {
        "limit": args.limit,
        "workflowIdPrefix": args.workflow,
        "status": args.status,
        "tags": ",".join(dict.fromkeys(args.tag)) if args.tag else None,
        "createdAfter": instant_of(args.since, "--since") if args.since else None,
        "createdBefore": instant_of(args.until, "--until") if args.until else None,
        "q": args.search,
        "cursor": args.cursor,
    }
    query |= {f"metadata.{key}": value for key, value in pairs(args.metadata, "--metadata", as_written=True).items()}
    runs: list[dict[str, Any]] = []
    while True:
        page = client.call("GET", "/runs", query=query)
        runs += page["runs"]
        cursor = page.get("nextCursor")
        if not args.all or cursor is None:
            break
        query["cursor"] = cursor
    answer = {"runs": runs, **({"nextCursor": cursor} if cursor and not args.all else {})}
    steps = StepIds(client)
    rows = [
        (
            r.get("startedAt") or "-",
            status_in_words(r["status"]),
            steps.workflow(r["workflowId"]),
            r["runId"],
            steps.of(r["workflowId"], r.get("currentNodeId")),
        )
        for r in runs
    ]
    human = table(RUN_COLUMNS, rows, "(no runs)")
    if cursor and not args.all:
        human += f"\nmore: --all, or --cursor {cursor}"
    return printed(args, answer, human)


def _runs_show(args: argparse.Namespace) -> int:
    client = Client.of(args)
    run = run_call(client, "GET", args.run)
    events = client.call("GET", f"/runs/{wire(args.run)}/events/poll", query={"timeout": 1})["events"]
    answer = {"run": run, "events": events}
    extension = run.get("extensions", {}).get("interlude.run", {})
    steps = StepIds(client)

    def step(node_id: Any) -> Any:
        return steps.of(run["workflowId"], node_id)

    names = DisplayNames(client)
    verdicts = verdicts_of(run, names)
    workflow = steps.workflow(run["workflowId"])
    status = verdicts.get(extension.get("failedNodeId") or "") or status_in_words(run["status"])
    lines = [
        f"run       {run['runId']}",
        f"workflow  {workflow}" + (f" ({run['workflowId']})" if workflow != run["workflowId"] else "")
        + f", version {extension.get('workflowVersion', '?')}",
        f"status    {status}" + (f" at {step(run['currentNodeId'])}" if run.get("currentNodeId") else ""),
        f"owner     {names.of(run['owner']['subject'].get('subjectId')) or '-'}",
    ]
    ancestry = extension.get("ancestry")
    if ancestry:
        how = "redriven" if ancestry.get("redrive") else f"a {ancestry['mode']}"
        lines.append(f"from      {ancestry['sourceRunId']} ({how} from event {ancestry['fromSeq']})")
    if extension.get("forkRunIds"):
        lines.append(f"forks     {', '.join(extension['forkRunIds'])}")
    if run.get("error") and status == status_in_words(run["status"]):
        lines.append(f"error     {run['error'].get('message')}")
    nodes = [
        (step(n), verdicts.get(n) or NODE_STATUS_WORDS.get(s["status"], s["status"]), s["visits"])
        for n, s in run["nodeStates"].items()
    ]
    lines += ["", table(("NODE", "STATUS", "VISITS"), nodes, "(no nodes)")]
    gates = extension.get("openInterrupts", {})
    if gates:
        rows = [
            (step(node), WAITS_FOR.get(g["kind"], "an answer"), g["raisedAt"], ", ".join(f"{names.of(principal_subject(v['principal']))} {VOTE_WORDS.get(v['action'], v['action'])}" for v in g["votes"]) or "-")
            for node, g in gates.items()
        ]
        lines += ["", table(("OPEN GATE", "WAITS FOR", "RAISED", "VOTES"), rows, "")]
    timeline = [(e["sequence"], e.get("timestamp") or e.get("at"), event_in_words(e["type"]), step(e.get("nodeId"))) for e in events]
    lines += ["", table(("SEQ", "AT", "EVENT", "NODE"), timeline, "(no events)")]
    return printed(args, answer, "\n".join(lines))


def _runs_cancel(args: argparse.Namespace) -> int:
    client = Client.of(args)
    body = {"reason": args.reason} if args.reason else None
    if len(args.runs) == 1:
        cancelled = run_call(client, "POST", args.runs[0], "/cancel", body)
        return printed(args, cancelled, f"{cancelled['runId']}  {status_in_words(cancelled['status'])}")
    run_ids = [r.replace("~2F", "/") for r in args.runs]
    answer = client.call("POST", "/runs:bulk-cancel", {"runIds": run_ids, **(body or {})})
    rows = [
        (r["runId"], status_in_words(r["status"]) if r["ok"] else f"refused: {r['error']['message']}")
        for r in answer["results"]
    ]
    printed(args, answer, table(("RUN", "OUTCOME"), rows, ""))
    return 0 if all(r["ok"] for r in answer["results"]) else 1


def _resolve(args: argparse.Namespace) -> int:
    value, said = resume_value(args)
    client = Client.of(args)
    answer = run_call(client, "POST", args.run, f"/interrupts/{segment(args.node)}", {"resumeValue": value})
    return printed(args, answer, f"{answer['runId']}  {args.node}: {said} recorded; run {status_in_words(answer['status'])}")


# -- links (issue 28 item 5) -------------------------------------------------------------------------------------

TTL_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def ttl_seconds(text: str) -> int:
    """`3d`, `12h`, `90m`, `45s` or plain seconds, as seconds."""
    found = re.fullmatch(r"([0-9]{1,7})([smhd]?)", text.strip())
    if not found or int(found.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a lifetime such as 3d, 12h, 90m or 3600 (seconds)")
    return int(found.group(1)) * TTL_UNITS[found.group(2) or "s"]


def _links_mint(args: argparse.Namespace) -> int:
    client = Client.of(args)
    body: dict[str, Any] = {"principal": args.principal}
    if args.ttl is not None:
        body["lifetimeSeconds"] = args.ttl
    answer = client.call("POST", f"/runs/{wire(args.run)}/interrupts/{segment(args.node)}/links", body)
    return printed(args, answer, f"{answer['url']}\ndecides as {answer['principal']} until {answer['expiresAt']}")


# -- workflows ------------------------------------------------------------------------------------------------------


def _workflows_list(args: argparse.Namespace) -> int:
    client = Client.of(args)
    page = client.call("GET", "/workflows", query={"page": args.page, "page_size": args.page_size})
    rows = [(w["id"], w["face"], w["name"], w["latest_version"], w["updated_at"]) for w in page["workflows"]]
    human = table(("WORKFLOW", "FACE", "NAME", "VERSION", "UPDATED"), rows, "(no workflows)")
    if page["page"] < page["total_pages"]:
        human += f"\npage {page['page']} of {page['total_pages']}: --page {page['page'] + 1}"
    return printed(args, page, human)


def _workflows_show(args: argparse.Namespace) -> int:
    answer = Client.of(args).call("GET", f"/workflows/{segment(args.workflow)}")
    if "workflow_schema" in answer:  # a ModuleX workflow
        nodes = [(n.get("id"), n.get("type"), n.get("name")) for n in answer["workflow_schema"].get("nodes", [])]
        head = f"{answer['id']}  ModuleX  {answer['name']}  (version {answer['latest_version']}, {answer['status']})"
    else:
        nodes = [(n.get("id"), n.get("typeId"), n.get("name")) for n in answer["definition"].get("nodes", [])]
        head = f"{answer['workflowId']}  OpenWOP  {answer['definition'].get('name') or ''}  (version {answer['version']})"
    return printed(args, answer, head + "\n\n" + table(("NODE", "TYPE", "NAME"), nodes, "(no nodes)"))


def _workflows_validate(args: argparse.Namespace) -> int:
    from interlude.cli.validate import validate

    raw = read_json(args.file)
    face, refusal = validate(raw)
    if refusal is None:
        return printed(args, {"valid": True, "face": face}, f"{args.file}: a valid {face} definition")
    printed(args, {"valid": False, "face": face, **refusal}, f"{args.file}: {refusal['line']}")
    return 1


# -- keys (HTTP) ---------------------------------------------------------------------------------------------------

KEY_COLUMNS = ("KEY", "STATUS", "HELD BY", "SCOPES", "CREATED", "EXPIRES")


def keys_list_http(args: argparse.Namespace) -> int:
    client = Client.of(args)
    answer = client.call("GET", "/keys", query={"limit": args.limit, "cursor": args.cursor})
    names = DisplayNames(client)
    rows = [
        (k["keyId"], k["status"], names.of(k["subject"].get("subjectId")), ",".join(k["scopes"]), k["createdAt"], k.get("expiresAt"))
        for k in answer["keys"]
    ]
    human = table(KEY_COLUMNS, rows, "(no keys)")
    if answer.get("cursor"):
        human += f"\nmore: --cursor {answer['cursor']}"
    return printed(args, answer, human)


def keys_create_http(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {
        "subjectId": args.subject,
        "scopes": args.scopes,
        "groups": [g for g in (args.groups or "").split(",") if g],
        "roles": [r for r in (args.roles or "").split(",") if r],
        "kind": args.kind,
    }
    if args.expires_at:
        body["expiresAt"] = args.expires_at
    client = Client.of(args)
    created = client.call("POST", "/keys", body)
    holder = DisplayNames(client).of(created["subject"].get("subjectId"))
    human = f"key {created['keyId']} for {holder} ({','.join(created['scopes'])})\n"
    human += f"secret (shown once): {created['apiKey']}"
    return printed(args, created, human)


def keys_revoke_http(args: argparse.Namespace) -> int:
    revoked = Client.of(args).call("DELETE", f"/keys/{segment(args.key_id)}")
    return printed(args, revoked, f"{revoked['keyId']}  {revoked['status']}  since {revoked.get('revokedAt')}")


# -- the parser ------------------------------------------------------------------------------------------------------


def add_commands(sub: Any) -> None:
    runs = sub.add_parser("runs", help="start, list, show and cancel runs").add_subparsers(dest="runs_command", required=True)
    listing = runs.add_parser("list", help="the tenant's runs, newest first (GET /runs)")
    add_endpoint_args(listing)
    listing.add_argument("--workflow", metavar="PREFIX", help="only runs of workflows whose id starts with PREFIX")
    listing.add_argument(
        "--status", metavar="S[,S]", help="only runs in one of these statuses (e.g. waiting-approval,failed)"
    )
    listing.add_argument("--tag", action="append", metavar="T", help="only runs tagged T (repeat: runs holding all of them)")
    listing.add_argument("--since", metavar="WHEN", help="only runs created at or after WHEN: " + WHEN_HELP)
    listing.add_argument("--until", metavar="WHEN", help="only runs created before WHEN: " + WHEN_HELP)
    listing.add_argument("--search", metavar="Q", help="only runs whose title (workflow id and name, open gate's title) holds every word of Q")
    listing.add_argument(
        "--metadata", action="append", metavar="KEY=VALUE", help="only runs whose searchable metadata KEY equals VALUE (repeatable)"
    )
    listing.add_argument("--limit", type=int, default=25, help="runs per page (at most 100)")
    listing.add_argument("--cursor", help="the cursor a previous page printed")
    listing.add_argument("--all", action="store_true", help="follow the cursor to the end")
    listing.set_defaults(func=_runs_list, in_process=False)
    show = runs.add_parser("show", help="a run: status, nodes, open gates with votes, the event timeline")
    add_endpoint_args(show)
    show.add_argument("run", metavar="RUN", help="the run id (tenant/opaque, or its ~2F wire form)")
    show.set_defaults(func=_runs_show, in_process=False)
    cancel = runs.add_parser("cancel", help="cancel one run, or several at once (POST /runs:bulk-cancel)")
    add_endpoint_args(cancel)
    cancel.add_argument("runs", metavar="RUN", nargs="+")
    cancel.add_argument("--reason")
    cancel.set_defaults(func=_runs_cancel, in_process=False)
    add_run_commands(runs)  # runs retry-action (issue 30 item 5)
    add_lifecycle_run_commands(runs)  # runs start (issue 29 item 4)
    add_fork_commands(runs)  # runs fork, runs redrive (issue 29 item 2)

    resolve = sub.add_parser("resolve", help="decide the interrupt a run's node holds")
    add_endpoint_args(resolve)
    resolve.add_argument("run", metavar="RUN")
    resolve.add_argument("node", metavar="NODE")
    add_resolve_args(resolve)
    resolve.set_defaults(func=_resolve, in_process=False)

    links = sub.add_parser("links", help="decision links for the tools a team already uses").add_subparsers(
        dest="links_command", required=True
    )
    mint = links.add_parser("mint", help="a link that decides as a directory principal (links:mint or keys:admin)")
    add_endpoint_args(mint)
    mint.add_argument("run", metavar="RUN")
    mint.add_argument("node", metavar="NODE")
    mint.add_argument("--for", dest="principal", required=True, help="the directory principal the link decides as")
    mint.add_argument("--ttl", type=ttl_seconds, help="how long it lives: 3d, 12h, 90m, seconds (default: a day)")
    mint.set_defaults(func=_links_mint, in_process=False)

    workflows = sub.add_parser("workflows", help="list, show, validate and register workflows").add_subparsers(
        dest="workflows_command", required=True
    )
    wf_list = workflows.add_parser("list", help="workflows of both faces with their latest versions (GET /workflows)")
    add_endpoint_args(wf_list)
    wf_list.add_argument("--page", type=int, default=1)
    wf_list.add_argument("--page-size", type=int, default=50)
    wf_list.set_defaults(func=_workflows_list, in_process=False)
    wf_show = workflows.add_parser("show", help="a workflow's latest version (or ModuleX record)")
    add_endpoint_args(wf_show)
    wf_show.add_argument("workflow", metavar="WORKFLOW")
    wf_show.set_defaults(func=_workflows_show, in_process=False)
    validate = workflows.add_parser("validate", help="check a definition file offline, with the API's errors")
    validate.add_argument("file", metavar="FILE", help="an OpenWOP definition, or a ModuleX one (its workflow_schema)")
    validate.add_argument("--json", action="store_true")
    validate.set_defaults(func=_workflows_validate)
    add_workflow_commands(workflows)  # workflows put (issue 29 item 4)


def add_key_endpoint_args(parser: argparse.ArgumentParser) -> None:
    """`interlude keys …` over HTTP (without --tenant): the caller's own tenant, with a keys:admin key."""
    parser.add_argument("--url", help="base URL (default: $INTERLUDE_URL, else the local stack's)")
    parser.add_argument("--key", help="API key with keys:admin (default: $INTERLUDE_API_KEY, else the local stack's)")
    parser.add_argument("--json", action="store_true", help="print the answer as JSON (the default without --tenant: a table)")

