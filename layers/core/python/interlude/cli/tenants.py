"""`interlude tenants`: the operator surface of a managed deployment (issue 30 item 6), from the command line.

Every command invokes the deployment's `admin` function (lambda:InvokeFunction with the operator's AWS credentials;
`--stack NAME` finds it by the stack's outputs) or, with `--local`, the running local stack's (its Lambda endpoint).
The CLI holds no rule of its own: it shows the function's answers as tables, or as JSON with `--json`, and a refusal as
one line. `delete` calls the function until the deletion is done (it waits out the grace period first), then prints
the report; a `resume` with more held work than one call hands back is called again the same way.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from interlude import wiring
from interlude.cli.client import CliError, count_between, table
from interlude.cli.deployment import stack_output
from interlude.cli.local import add_local_args

# How long `delete` sleeps between calls while the deletion waits for work in flight to end.
POLL_S = 5.0
# How much longer than the function's timeout a call's answer is waited for (the invocation's own overheads).
ANSWER_MARGIN_S = 30
MEASURES = (("lifecycles", "RUNS STARTED"), ("decisions", "DECISIONS"), ("notifications", "NOTIFICATIONS"))


def add_commands(sub: argparse._SubParsersAction) -> None:
    tenants = sub.add_parser("tenants", help="tenants of a managed deployment (the operator surface)")
    commands = tenants.add_subparsers(dest="tenants_command", required=True)

    create = commands.add_parser("create", help="create a tenant and its first admin key (printed once)")
    create.add_argument("tenant", metavar="TENANT")
    create.add_argument("--subject", default="admin", help="who holds the first admin key (default: admin)")
    create.add_argument("--scopes", default=",".join(wiring.ALL_SCOPES), help="its scopes, comma-separated (default: all)")
    listing = commands.add_parser("list", help="tenants with their usage this month")
    listing.add_argument("--limit", type=count_between(1, 200), default=50, metavar="1..200")
    listing.add_argument("--after", help="the tenant the previous page ended with")
    suspend = commands.add_parser("suspend", help="refuse every request of a tenant and hold its work")
    suspend.add_argument("tenant", metavar="TENANT")
    suspend.add_argument("--reason", help="why (kept on the tenant's record and in its audit log)")
    resume = commands.add_parser("resume", help="let a suspended tenant act again; its held work goes on")
    resume.add_argument("tenant", metavar="TENANT")
    delete = commands.add_parser("delete", help="delete a suspended tenant and everything it holds")
    delete.add_argument("tenant", metavar="TENANT")
    delete.add_argument("--no-wait", action="store_true", help="make one call and show where the deletion stands")
    usage = commands.add_parser("usage", help="a tenant's usage of a month (the billing document)")
    usage.add_argument("tenant", metavar="TENANT")
    usage.add_argument("--month", help="YYYY-MM (default: this month)")
    for command in (create, listing, suspend, resume, delete, usage):
        add_local_args(command)
        command.add_argument("--json", action="store_true", help="print the answer as JSON")
        command.set_defaults(func=_run, in_process=False)


def _run(args: argparse.Namespace) -> int:
    invoke = _invoker(args)
    command = args.tenants_command
    if command == "create":
        scopes = [s for s in args.scopes.split(",") if s]
        answer = invoke({"operation": "create", "tenant": args.tenant, "subjectId": args.subject, "scopes": scopes})
        human = (
            f"tenant {answer['tenant']} created\n"
            f"  first admin key (shown once): {answer['apiKey']}\n"
            f"  key id: {answer['keyId']}"
        )
    elif command == "list":
        answer = invoke({"operation": "list", "limit": args.limit, **({"after": args.after} if args.after else {})})
        human = _tenants_table(answer)
    elif command == "suspend":
        answer = invoke({"operation": "suspend", "tenant": args.tenant, **({"reason": args.reason} if args.reason else {})})
        human = f"tenant {answer['tenant']} is suspended (since {answer.get('suspendedAt')})"
    elif command == "resume":
        answer = _resumed(invoke, args.tenant)
        human = _resumed_in_words(answer)
    elif command == "delete":
        answer = _deleted(invoke, args.tenant, args.no_wait, quiet=args.json)
        human = _report(answer) if answer.get("done") else _where(answer)
    else:
        answer = invoke({"operation": "usage", "tenant": args.tenant, **({"month": args.month} if args.month else {})})
        human = _usage(answer)
    print(json.dumps(answer, indent=2) if args.json else human)
    return 0


def operator_client(endpoint: str | None = None) -> Any:
    """The Lambda client a call of the operator surface is made with. It waits as long as the function may run (a
    deletion's call takes up to its timeout less a minute; the SDK's default gives up after 60 s) and sends each call
    once: a call sent again behind the operator's back would create a tenant twice (the first admin key, shown once,
    lost) or run a deletion's call beside itself. A call that fails is said in one line; the operator runs it again."""
    import boto3
    from botocore.config import Config

    waited = wiring.function(wiring.OPERATOR_FUNCTION).timeout_s + ANSWER_MARGIN_S
    config = Config(read_timeout=waited, retries={"total_max_attempts": 1})
    return boto3.client("lambda", endpoint_url=endpoint, config=config)


def _invoker(args: argparse.Namespace) -> Any:
    """A function of one request to the `admin` function's answer."""
    if args.local:
        from interlude.cli.local import local_state, use_local_stack
        from interlude.local.lambda_runtime import FUNCTION_NAME_PREFIX

        use_local_stack(args)
        endpoint = local_state(args).get("lambdaEndpoint")
        if not endpoint:
            raise CliError("this local stack serves no operator surface (started by an older Interlude?)")
        client, name = operator_client(endpoint), f"{FUNCTION_NAME_PREFIX}{wiring.OPERATOR_FUNCTION}"
    else:
        name = stack_output(args, wiring.OUTPUT_ADMIN_FUNCTION) or ""
        if not name:
            raise CliError("name the deployment with --stack (or $INTERLUDE_STACK), or use --local")
        client = operator_client()
    return invoker(client, name)


def invoker(client: Any, name: str) -> Any:
    """A function of one request to the answer of the function `name` (a refusal raises OperatorRefused)."""

    def invoke(request: dict[str, Any]) -> dict[str, Any]:
        from botocore.exceptions import ConnectionClosedError, ReadTimeoutError

        try:
            got = client.invoke(FunctionName=name, Payload=json.dumps(request).encode())
        except (ConnectionClosedError, ReadTimeoutError):
            raise CliError(
                f"the answer to `{request['operation']}` was lost on the way: it may have been done; "
                "`interlude tenants list` shows where each tenant stands (a deletion or a resume goes on when run again)"
            ) from None
        answer: dict[str, Any] = json.loads(got["Payload"].read() or b"{}")
        if got.get("FunctionError"):
            raise CliError(f"the operator surface failed: {answer.get('errorMessage', answer)}")
        if "error" in answer:
            raise OperatorRefused(answer)
        return answer

    return invoke


class OperatorRefused(CliError):
    """The operator surface refused the request: its answer `{error, message, details?}`."""

    def __init__(self, answer: dict[str, Any]) -> None:
        super().__init__(f"{answer['error']}: {answer.get('message', '')}")
        self.answer = answer


# The field of a resume's later calls (ADR 0202), which an `admin` function of 0.11.0 refuses as one it does not know.
HAND_BACK_ONLY = "handBackOnly"
EARLIER_RELEASE = (
    "the deployment runs an earlier release of Interlude, which goes on handing back held work only by resuming the "
    "tenant again: the rest goes back that way (a suspension made while it goes back would be undone)"
)


def _resumed(invoke: Any, tenant: str) -> dict[str, Any]:
    """The resume, called again while held work remains: each later call only hands back (a suspension made meanwhile
    stands, and ends the calls). A deployment of 0.11.0 (a rollback) refuses that call: its own resume goes on instead,
    and the operator is told, and told again if one of those calls made active a tenant suspended meanwhile."""
    answer: dict[str, Any] = invoke({"operation": "resume", "tenant": tenant})
    handed, resumed_at = answer["handedBack"], answer.get("resumedAt")
    later: dict[str, Any] = {"operation": "resume", "tenant": tenant, HAND_BACK_ONLY: True}
    while answer.get("remaining"):
        try:
            answer = invoke(later)
        except OperatorRefused as refused:
            if HAND_BACK_ONLY not in later or not _unknown_field(refused.answer, HAND_BACK_ONLY):
                raise
            print(EARLIER_RELEASE, file=sys.stderr, flush=True)
            later = {"operation": "resume", "tenant": tenant}
            continue
        handed += answer["handedBack"]
        if HAND_BACK_ONLY not in later and answer.get("resumedAt") != resumed_at:
            # Resumed anew between two calls: suspended meanwhile, and made active again, by that call or another's.
            resumed_at = answer.get("resumedAt")
            print(
                f"tenant {tenant} was suspended while its held work went back, and is active again (the earlier "
                f"release's resume makes a suspended tenant active): suspend it again if it should stay suspended",
                file=sys.stderr,
                flush=True,
            )
    return {**answer, "handedBack": handed}


def _unknown_field(refusal: dict[str, Any], field: str) -> bool:
    """Whether `refusal` is a validation_error naming `field` (what 0.11.0 answers a field it does not know)."""
    errors = (refusal.get("details") or {}).get("errors") if refusal.get("error") == "validation_error" else None
    return isinstance(errors, list) and any(isinstance(e, dict) and e.get("path") == field for e in errors)


def _resumed_in_words(answer: dict[str, Any]) -> str:
    went_on = f"{answer['handedBack']} held piece(s) of work went on"
    if answer["status"] == "active":
        return f"tenant {answer['tenant']} is active; {went_on}"
    return (
        f"tenant {answer['tenant']} was suspended again while it was resumed ({went_on} before): the rest stays held "
        f"until it is resumed"
    )


def _deleted(invoke: Any, tenant: str, once: bool, quiet: bool) -> dict[str, Any]:
    while True:
        answer: dict[str, Any] = invoke({"operation": "delete", "tenant": tenant})
        if answer.get("done") or once:
            return answer
        if not quiet:
            print(_where(answer), file=sys.stderr, flush=True)
        time.sleep(min(POLL_S, float(answer.get("waitSeconds") or 0)))


PHASES = {
    "waiting": "waiting for work already under way to end",
    "schedules": "deleting its schedules",
    "secrets": "deleting its secrets",
    "items": "deleting its data",
}


def _where(answer: dict[str, Any]) -> str:
    if answer.get("busy"):
        return f"tenant {answer['tenant']}: another call is deleting it; run the command again to follow it"
    step = PHASES.get(answer.get("phase", ""), "deleting")
    return f"tenant {answer['tenant']}: {step} (pass {answer.get('pass')}, {answer.get('items', 0)} items so far)"


def _report(answer: dict[str, Any]) -> str:
    report = answer.get("report") or {}
    rows: list[tuple[str, Any]] = [
        ("items deleted", report.get("items")),
        ("of which API keys", report.get("apiKeys")),
        ("secrets deleted", report.get("secrets")),
        ("schedules deleted", report.get("schedules")),
        ("live connections closed", report.get("liveConnections")),
        ("passes over the table", report.get("passes")),
        ("items read in them", report.get("itemsRead")),
        ("started", report.get("startedAt")),
        ("finished", report.get("finishedAt")),
    ]
    usage = report.get("usage") or {}
    rows += [(f"{title.lower()} this month", usage.get(measure, 0)) for measure, title in MEASURES if usage]
    kept = "\n".join(f"  kept: {what}" for what in report.get("kept") or [])
    return f"tenant {answer['tenant']} is deleted\n" + _lines(rows) + ("\n" + kept if kept else "")


STATUSES = {"deleting": "being deleted"}


def _tenants_table(answer: dict[str, Any]) -> str:
    rows = [
        (
            t["tenant"],
            "active, held work going back" if t.get("handingBack") else STATUSES.get(t["status"], t["status"]),
            t.get("suspendedAt") or t.get("createdAt"),
            *(t["usage"].get(measure, 0) for measure, _ in MEASURES),
            _size(t["usage"].get("storageBytes", 0)),
        )
        for t in answer["tenants"]
    ]
    headers = ("TENANT", "STATUS", "SINCE", *(title for _, title in MEASURES), "HISTORY WRITTEN")
    listed = table(headers, rows, "no tenants")
    notes = [note for t in answer["tenants"] if (note := _unfinished(t))]
    return "\n".join([listed, *notes]) + (f"\nmore: --after {answer['after']}" if answer.get("after") else "")


def _unfinished(tenant: dict[str, Any]) -> str | None:
    """A line on a resume or a deletion that has not ended, in words: what is left, and what goes on with it."""
    name = tenant["tenant"]
    if tenant.get("handingBack"):
        return (
            f"{name}: the work held while it was suspended is still going back to its runs; it goes on by itself "
            f"within minutes (`interlude tenants resume {name}` sends it now)"
        )
    deletion = tenant.get("deletion")
    if deletion is None:
        return None
    step = PHASES.get(deletion.get("phase", ""), "deleting")
    return (
        f"{name}: its deletion has not finished, {step} (pass {deletion.get('pass', 1)}, {deletion.get('items', 0)} "
        f"items deleted so far); `interlude tenants delete {name}` goes on from there"
    )


def _usage(answer: dict[str, Any]) -> str:
    rows: list[tuple[str, Any]] = [(title.lower(), answer.get(measure, 0)) for measure, title in MEASURES]
    rows.append(("history written", _size(answer.get("storageBytes", 0))))
    state = f"closed {answer['closedAt']}" if answer.get("closedAt") else "so far (the month is not over)"
    return f"tenant {answer['tenant']}, {answer['month']}: {state}\n" + _lines(rows)


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} bytes"
    scaled = float(count)
    for unit in ("KB", "MB", "GB"):
        scaled /= 1024
        if scaled < 1024 or unit == "GB":
            break
    return f"{scaled:.1f} {unit}"


def _lines(rows: list[tuple[str, Any]]) -> str:
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"  {name.ljust(width)}  {'-' if value is None else value}" for name, value in rows)
