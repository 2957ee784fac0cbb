"""`interlude workflows put FILE`, `interlude runs start WF [--wait]` and the values `interlude resolve` sends (issue
29, item 4): a run's whole lifecycle from the command line, as clients of the HTTP API. What a person reads is in
words: where a run waits and what it asks, how it ended; `--json` prints the API's answers."""

from __future__ import annotations

import argparse
import json
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from interlude.cli.client import (
    Client,
    CliError,
    DisplayNames,
    Refused,
    StepIds,
    add_endpoint_args,
    printed,
    segment,
    wire,
)
from interlude.cli.files import face_of, read_json
from interlude.cli.inbox import WAITS_FOR, summary
from interlude.domain.outcomes import in_words

# How long `runs start --wait` follows a run that neither waits nor ends, unless told (--timeout).
DEFAULT_WAIT_S = 120
# One long-poll of the run's events (the API holds at most 60 s; the local stack less).
POLL_S = 20
STILL = ("pending", "running")
# A run's status as a person says it (every table and sentence of the CLI; `--json` keeps the protocol's values).
STATUS_WORDS = {
    "pending": "about to start",
    "running": "running",
    "waiting-approval": "waiting for a decision",
    "waiting-input": "waiting for input",
    "waiting-external": "waiting for an outside event",
    "completed": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
}
# A step's status as a person says it (the console's run graph says the same: api/page/graph.py).
NODE_STATUS_WORDS = {
    "pending": "not reached yet",
    "queued": "queued",
    "running": "in progress",
    "suspended": "waiting",
    "completed": "done",
    "failed": "failed",
    "skipped": "skipped",
}


def status_in_words(status: str) -> str:
    return STATUS_WORDS.get(status, status)


WHEN_HELP = "an RFC 3339 time (2026-12-05T09:00:00+01:00), a date (2026-12-05, midnight UTC) or a time ago (90m, 12h, 7d)"
_AGO = re.compile(r"^(\d{1,6})([mhd])$")
_AGO_SECONDS = {"m": 60, "h": 3600, "d": 86400}


def instant_of(text: str, flag: str, now: datetime | None = None) -> str:
    """A `--since`/`--until` value as the API takes it (RFC 3339, UTC): a time as written (UTC when it names no
    offset), a date's midnight UTC, or that long before now."""
    ago = _AGO.fullmatch(text.strip())
    if ago:
        moment = (now or datetime.now(UTC)) - timedelta(seconds=int(ago[1]) * _AGO_SECONDS[ago[2]])
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise CliError(f"{flag} takes {WHEN_HELP}; not {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat(timespec="milliseconds")


def typed(text: str) -> Any:
    """A value given on the command line (`--input amount=2150`, `--answer q1=blue`): JSON when it reads as JSON (a
    number, true/false/null, an object, an array, a "quoted" string), else the text as written."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def pairs(given: list[str] | None, flag: str, as_written: bool = False) -> dict[str, Any]:
    """`k=v` arguments as an object, the later of two equal keys winning; each value typed (JSON where it reads as
    JSON), or `as_written`."""
    out: dict[str, Any] = {}
    for pair in given or []:
        name, equals, value = pair.partition("=")
        if not equals or not name:
            raise CliError(f"{flag} {pair!r}: write it as name=value")
        out[name] = value if as_written else typed(value)
    return out


# -- workflows put ---------------------------------------------------------------------------------------------------


def _workflows_put(args: argparse.Namespace) -> int:
    raw = read_json(args.file)
    if not isinstance(raw, dict):
        raise CliError(f"{args.file} holds no workflow definition (a JSON object)")
    client = Client.of(args)
    if face_of(raw) == "modulex":
        body = raw if "workflow_schema" in raw else {"workflow_schema": raw, **({"name": raw["name"]} if isinstance(raw.get("name"), str) else {})}
        if args.id:  # a new version of that ModuleX workflow; the API names a new one itself
            path = f"/workflows/{segment(args.id)}"
            try:
                known = "workflow_schema" in client.call("GET", path)
            except Refused as refused:
                if refused.status != 404:
                    raise
                known = False
            if not known:
                raise CliError(f"no ModuleX workflow {args.id}: leave out --id, and the API names the new one")
            answer = client.call("PUT", path, body)
        else:
            answer = client.call("POST", "/workflows", body)
    else:
        workflow_id = args.id or raw.get("id")
        if not isinstance(workflow_id, str) or not workflow_id:
            raise CliError(f"{args.file} names no workflow id: give --id ID, or an \"id\" in the file")
        body = {**raw, "id": workflow_id}  # --id names it, whatever the file's own id
        answer = client.call("PUT", f"/workflows/{segment(workflow_id)}", body)
    return printed(args, answer, registered(answer))


def registered(answer: dict[str, Any]) -> str:
    if "workflow_schema" in answer:  # a ModuleX workflow's record
        return f"workflow {answer['id']} ({answer.get('name') or 'unnamed'}): version {answer['latest_version']} registered (ModuleX)"
    definition = answer.get("definition") or {}
    named = f" ({definition['name']})" if definition.get("name") else ""
    steps = len(definition.get("nodes") or [])
    return f"workflow {answer['workflowId']}{named}: version {answer['version']} registered, {steps} step{'s' * (steps != 1)}"


# -- runs start [--wait] ---------------------------------------------------------------------------------------------


def _runs_start(args: argparse.Namespace) -> int:
    inputs: dict[str, Any] = {}
    if args.input_file:
        inputs = read_json(args.input_file)
        if not isinstance(inputs, dict):
            raise CliError(f"{args.input_file} holds no inputs (a JSON object of name: value)")
    inputs |= pairs(args.input, "--input")
    body: dict[str, Any] = {"workflowId": args.workflow, "inputs": inputs}
    if args.tag:
        body["tags"] = list(dict.fromkeys(args.tag))
    client = Client.of(args)
    started = client.call("POST", "/runs", body)
    if not args.wait:
        said = status_in_words(started["status"])
        return printed(args, started, f"run {started['runId']} started; it is {said} (`--wait` follows it)")
    if not args.json:
        print(f"run {started['runId']} started", flush=True)
    run, events = follow(client, started["runId"], args.timeout)
    printed(args, {"run": run, "events": events}, state_in_words(client, run, events))
    return 1 if run["status"] in ("failed", "cancelled") else 0


def follow(client: Client, run_id: str, timeout_s: float) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The run and its events once it waits at a gate or has ended; a CliError if it does neither within
    `timeout_s`. Follows the event log (long polls), never a busy loop."""
    deadline = time.monotonic() + timeout_s
    events: list[dict[str, Any]] = []
    after: int | None = None
    while True:
        left = deadline - time.monotonic()
        page = client.call(
            "GET", f"/runs/{wire(run_id)}/events/poll", query={"afterSequence": after, "timeout": max(1, min(POLL_S, int(left)))}
        )
        events += page["events"]
        if events:
            after = events[-1]["sequence"]
        caught_up = after is None or after >= page["lastSequence"]
        if caught_up and page["status"] not in STILL:
            return client.call("GET", f"/runs/{wire(run_id)}"), events
        if caught_up and time.monotonic() >= deadline:
            raise CliError(f"run {run_id} is still {page['status']} after {timeout_s:g} s: see `interlude runs show {run_id}`")


def state_in_words(client: Client, run: dict[str, Any], events: list[dict[str, Any]]) -> str:
    """Where the run waits and what each open gate asks (with the command that answers it), or how it ended."""
    steps = StepIds(client)
    run_id = run["runId"]
    status = run["status"]
    if status == "completed":
        return f"run {run_id} completed"
    if status == "cancelled":
        return f"run {run_id} was cancelled"
    if status == "failed":
        failed = (run.get("extensions") or {}).get("interlude.run", {}).get("failedNodeId")
        verdict = verdicts_of(run, DisplayNames(client)).get(failed or "")
        if verdict:
            return f"run {run_id} ended at {steps.of(run['workflowId'], failed)}: {verdict}"
        error = run.get("error") or {}
        at = f" at {steps.of(run['workflowId'], failed)}" if failed else ""
        return f"run {run_id} failed{at}: {error.get('message') or 'no reason recorded'}"
    asked = {e["nodeId"]: e["payload"] for e in events if e["type"] == "interrupt.requested" and isinstance(e.get("payload"), dict)}
    gates = (run.get("extensions") or {}).get("interlude.run", {}).get("openInterrupts") or {}
    lines = []
    for node, gate in gates.items():
        step = steps.of(run["workflowId"], node)
        requested = asked.get(node) or {}
        title = titled(gate["kind"], requested)
        lines.append(f"run {run_id} waits at {step} for {WAITS_FOR.get(gate['kind'], 'an answer')}" + (f": {title}" if title else ""))
        lines += [f"  {line}" for line in how_to_answer(run_id, step, gate["kind"], requested)]
    return "\n".join(lines) or f"run {run_id} is {status}"


def titled(kind: str, asked: dict[str, Any]) -> str:
    """A gate's title as the inbox shows it; a clarification's questions are listed under it instead, an outside
    event is named by its type (its correlation is JSON)."""
    if kind == "clarification":
        return ""
    if kind == "external-event":
        return str((asked.get("data") or {}).get("eventType") or "")
    return summary({"kind": kind, "payload": asked})


def how_to_answer(run_id: str, step: str, kind: str, asked: dict[str, Any]) -> list[str]:
    """The command that answers a gate: an approval's actions, a clarification's questions, the fields a custom gate's
    answer requires (its resume schema's, or a ModuleX interrupt's `resume_schema`), else the whole value as JSON."""
    command = f"interlude resolve {run_id} {step}"
    payload = asked.get("data") or {}
    actions = payload.get("actions")
    if kind in ("approval", "low-confidence") and isinstance(actions, list) and actions:
        return [f"decide: {command} --action {'|'.join(str(a) for a in actions)}"]
    questions = [q for q in payload.get("questions") or [] if isinstance(q, dict) and q.get("id")]
    if questions:
        listed = [f"{q['id']}: {q.get('question') or q.get('label') or ''}".rstrip(": ") for q in questions]
        return listed + [f"answer: {command} " + " ".join(f"--answer {q['id']}=…" for q in questions)]
    inner = payload.get("payload")
    schema = asked.get("resumeSchema") or (inner.get("resume_schema") if isinstance(inner, dict) else None) or {}
    fields = (schema.get("required") or list(schema.get("properties") or {})) if schema.get("type") == "object" else []
    if fields:
        return [f"answer: {command} " + " ".join(f"--answer {f}=…" for f in fields) + " (or --value JSON)"]
    return [f"answer: {command} --value JSON"]


def verdicts_of(run: dict[str, Any], names: DisplayNames) -> dict[str, str]:
    """How each rejected gate reads to a person ("Rejected by Ana Lima: too casual", the decider by their directory
    name), where the protocol says `failed`."""
    outcomes = run.get("variables") or {}
    return {
        node: in_words(outcomes[node], names.of(outcomes[node].get("decidedBy")))
        for node, state in run["nodeStates"].items()
        if state["status"] == "failed" and isinstance(outcomes.get(node), dict) and outcomes[node].get("decision") == "rejected"
    }


# -- resolve: the value sent ---------------------------------------------------------------------------------------


def resume_value(args: argparse.Namespace) -> tuple[Any, str]:
    """The resume value `interlude resolve` sends, and how its answer names it: `--value` as written, `--answer`s as
    an object (a clarification's answers, a custom gate's fields), or an approval's `--action` with its comment,
    feedback (refine) or edited artifact (edit-accept)."""
    given = [flag for flag, value in (("--value", args.value), ("--answer", args.answer), ("--action", args.action)) if value]
    if len(given) != 1:
        raise CliError("give one of --action, --answer id=value … or --value JSON")
    approval_only = [f for f, v in (("--comment", args.comment), ("--feedback", args.feedback), ("--edited", args.edited)) if v is not None]
    if approval_only and not args.action:
        raise CliError(f"{', '.join(approval_only)} go with --action")
    if args.value is not None:
        try:
            return json.loads(args.value), "the value"
        except ValueError as exc:
            raise CliError(f"--value is not JSON: {exc}") from None
    if args.answer:
        return pairs(args.answer, "--answer"), "the answers"
    needs = {"refine": ("--feedback", args.feedback), "edit-accept": ("--edited", args.edited)}.get(args.action)
    if needs and needs[1] is None:
        raise CliError(f"--action {args.action} needs {needs[0]}")
    value: dict[str, Any] = {"action": args.action}
    if args.comment:
        value["comment"] = args.comment
    if args.feedback is not None:
        value["refineFeedback"] = {"scope": "whole", "text": args.feedback}
    if args.edited is not None:
        try:
            value["editedArtifactData"] = json.loads(args.edited)
        except ValueError as exc:
            raise CliError(f"--edited is not JSON: {exc}") from None
    return value, args.action


def add_resolve_args(resolve: argparse.ArgumentParser) -> None:
    resolve.add_argument("--action", help="an approval's action: accept, reject, refine, edit-accept (the gate's actions)")
    resolve.add_argument("--comment", help="with --action: why")
    resolve.add_argument("--feedback", help="with --action refine: what to change")
    resolve.add_argument("--edited", metavar="JSON", help="with --action edit-accept: the artifact as edited")
    resolve.add_argument(
        "--answer", action="append", metavar="ID=VALUE", help="a clarification's answer, or a custom gate's field (repeat)"
    )
    resolve.add_argument("--value", metavar="JSON", help="the whole resume value, for any kind (custom, ModuleX)")


# -- the parser ------------------------------------------------------------------------------------------------------


def add_run_commands(runs: Any) -> None:
    start = runs.add_parser("start", help="start a run of a workflow (POST /runs); --wait follows it to a gate or its end")
    add_endpoint_args(start)
    start.add_argument("workflow", metavar="WF", help="the workflow id")
    start.add_argument("--input", action="append", metavar="NAME=VALUE", help="an input (JSON, else text); repeat")
    start.add_argument("--input-file", metavar="F", help="a JSON object of inputs (--input wins on a name in both)")
    start.add_argument("--tag", action="append", help="a tag of the run; repeat")
    start.add_argument("--wait", action="store_true", help="follow the run until it waits at a gate or ends")
    start.add_argument("--timeout", type=float, default=DEFAULT_WAIT_S, help=f"with --wait: seconds (default {DEFAULT_WAIT_S})")
    start.set_defaults(func=_runs_start, in_process=False)


def add_workflow_commands(workflows: Any) -> None:
    put = workflows.add_parser("put", help="register a workflow definition (a new version) from a JSON file")
    add_endpoint_args(put)
    put.add_argument("file", metavar="FILE", help="an OpenWOP definition (its id, or --id), or a ModuleX one")
    put.add_argument("--id", help="register under this id (default: the definition's own; a new ModuleX workflow gets one)")
    put.set_defaults(func=_workflows_put, in_process=False)
