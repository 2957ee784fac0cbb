"""A run's whole lifecycle from the CLI (issue 29, item 4), as transcripts against the local stack: `workflows put FILE`
registers a definition (the API's refusal as one line), `runs start --wait` follows the run to its gate and says in
words what the gate asks and how to answer it, and `resolve` answers every kind: an approval's actions (refine with
feedback, edit-accept with the edited artifact, reject), a clarification's `--answer`s, a custom gate's `--value`.
`runs show` names a rejecting decider by their directory name."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

from tests.support.local_stack import REPO, Api, cli
from tests.support.modulex_example import worked_example

# What a person must never read in the CLI's words (BRIEF: no escaped ids, raw JSON or protocol field names).
PROTOCOL = ("~2F", "{", "resumeSchema", "resumeValue", "interrupt.requested", "waiting-approval", "waiting-input")


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def in_words(text: str) -> str:
    assert not [p for p in PROTOCOL if p in text], text
    return text


def definition_file(tmp_path: Path, definition: dict[str, Any], name: str = "workflow.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(definition))
    return path


def test_workflows_put_runs_start_wait_and_resolve_an_approval(api: Api, stack_info: dict[str, str], tmp_path: Path) -> None:
    workflow_id = f"refund-{uuid.uuid4().hex[:8]}"
    definition = {**json.loads((REPO / "examples/refund-with-changes.json").read_text()), "id": workflow_id}
    put = cli(stack_info, "workflows", "put", str(definition_file(tmp_path, definition))).stdout.strip()
    assert put == f"workflow {workflow_id} (Refund, with changes requested): version 1 registered, 5 steps"
    again = json.loads(cli(stack_info, "workflows", "put", str(definition_file(tmp_path, definition)), "--json").stdout)
    assert (again["workflowId"], again["version"]) == (workflow_id, 2)
    assert api.call("GET", f"/workflows/{workflow_id}").json()["version"] == 2

    # An invalid definition: the API's own refusal, in one line; a file without an id says what to give.
    broken = {"id": workflow_id, "nodes": [{"id": "a", "typeId": "core.noop"}], "edges": [{"sourceNodeId": "a", "targetNodeId": "zz"}]}
    refused = one_line(cli(stack_info, "workflows", "put", str(definition_file(tmp_path, broken, "broken.json")), check=False))
    assert refused == "interlude: 400 validation_error: the workflow definition is not valid — edges/0/targetNodeId: names no node: 'zz'"
    assert api.call("GET", f"/workflows/{workflow_id}").json()["version"] == 2
    nameless = definition_file(tmp_path, {k: v for k, v in definition.items() if k != "id"}, "nameless.json")
    assert "names no workflow id: give --id ID" in one_line(cli(stack_info, "workflows", "put", str(nameless), check=False))
    assert "is not JSON" in one_line(cli(stack_info, "workflows", "put", str(REPO / "README.md"), check=False))

    # Start with typed inputs (a number stays a number), an input file and a tag; --wait stops at the gate.
    (tmp_path / "inputs.json").write_text(json.dumps({"reason": "arrived broken", "orderId": "A-0"}))
    started = cli(
        stack_info, "runs", "start", workflow_id, "--input", "orderId=A-7", "--input", "amount=2150",
        "--input-file", str(tmp_path / "inputs.json"), "--tag", "refund", "--wait",
    ).stdout
    first, waits, decide = started.strip().splitlines()
    run_id = first.removeprefix("run ").removesuffix(" started")
    assert first == f"run {run_id} started"
    assert in_words(waits) == f"run {run_id} waits at review for an approval: Refund 2150 for order A-7?"
    assert decide.strip() == f"decide: interlude resolve {run_id} review --action accept|refine|reject"
    run = api.run(run_id)
    assert run["inputs"] == {"orderId": "A-7", "amount": 2150, "reason": "arrived broken"}
    assert run["tags"] == ["refund"]

    # Refine needs its feedback (said before anything is sent); with it the run drafts again and asks again.
    assert one_line(cli(stack_info, "resolve", run_id, "review", "--action", "refine", check=False)) == (
        "interlude: --action refine needs --feedback"
    )
    refined = cli(stack_info, "resolve", run_id, "review", "--action", "refine", "--feedback", "say sorry").stdout
    assert refined.strip() == f"{run_id}  review: refine recorded; run waiting for a decision"
    assert api.run(run_id)["variables"]["draft"]["changesAsked"] == "say sorry"
    assert "give one of --action, --answer" in one_line(cli(stack_info, "resolve", run_id, "review", check=False))
    assert "--comment go with --action" in one_line(
        cli(stack_info, "resolve", run_id, "review", "--answer", "q=1", "--comment", "x", check=False)
    )

    rejected = cli(stack_info, "resolve", run_id, "review", "--action", "reject", "--comment", "no").stdout
    assert rejected.strip() == f"{run_id}  review: reject recorded; run completed"  # it tells the requester


def test_a_rejection_names_the_decider_by_their_directory_name(api: Api, stack_info: dict[str, str]) -> None:
    subject = f"ana-{uuid.uuid4().hex[:6]}"
    assert api.call("PUT", f"/principals/{subject}", {"displayName": "Ana Lima"}).status_code == 201
    ana = api.new_key(["approvals:respond", "runs:read"], subject=subject)
    run_id = api.start(api.fixture("conformance-approval"))["runId"]
    cli(stack_info, "resolve", run_id, "gate", "--action", "reject", "--comment", "not this one", "--key", ana)
    head, nodes = cli(stack_info, "runs", "show", run_id).stdout.split("\n\n")[:2]
    assert "status    Rejected by Ana Lima: not this one" in head
    assert "Rejected by Ana Lima: not this one" in nodes.splitlines()[1]
    assert subject not in head + nodes
    # A key that may not read the directory (keys:admin) sees the subject, as before.
    reader = api.new_key(["runs:read", "workflows:read"])
    assert f"status    Rejected by {subject}: not this one" in cli(stack_info, "runs", "show", run_id, "--key", reader).stdout


def test_resolve_answers_a_clarification_an_edit_and_a_custom_gate(api: Api, stack_info: dict[str, str], tmp_path: Path) -> None:
    asks = f"ask-{uuid.uuid4().hex[:8]}"
    clarification = json.loads((REPO / "tests/fixtures/openwop/conformance-clarification.json").read_text())
    assert "version 1 registered, 1 step" in cli(
        stack_info, "workflows", "put", str(definition_file(tmp_path, clarification)), "--id", asks
    ).stdout
    started = cli(stack_info, "runs", "start", asks, "--wait").stdout.strip().splitlines()
    run_id = started[0].removeprefix("run ").removesuffix(" started")
    assert [in_words(line) for line in started[1:]] == [
        f"run {run_id} waits at ask for answers",
        "  q1: What is your favorite color?",
        f"  answer: interlude resolve {run_id} ask --answer q1=…",
    ]
    answered = cli(stack_info, "resolve", run_id, "ask", "--answer", "q1=blue").stdout
    assert answered.strip() == f"{run_id}  ask: the answers recorded; run completed"
    assert api.run(run_id)["variables"]["ask"] == {"q1": "blue"}

    edits = f"edit-{uuid.uuid4().hex[:8]}"
    gate = {"title": "Send this?", "artifactData": {"text": "hi"}, "actions": ["accept", "edit-accept", "reject"]}
    edit_definition = {"id": edits, "nodes": [{"id": "review", "typeId": "core.approvalGate", "config": gate}]}
    cli(stack_info, "workflows", "put", str(definition_file(tmp_path, edit_definition, "edit.json")))
    run_id = api.start(edits)["runId"]
    assert "--action edit-accept needs --edited" in one_line(
        cli(stack_info, "resolve", run_id, "review", "--action", "edit-accept", check=False)
    )
    edited = cli(stack_info, "resolve", run_id, "review", "--action", "edit-accept", "--edited", '{"text": "hello"}').stdout
    assert edited.strip() == f"{run_id}  review: edit-accept recorded; run completed"
    assert api.run(run_id)["variables"]["review"]["editedArtifactData"] == {"text": "hello"}

    customs = f"custom-{uuid.uuid4().hex[:8]}"
    schema = {"type": "object", "required": ["size"], "properties": {"size": {"type": "integer"}}, "additionalProperties": False}
    config = {"kind": "custom", "data": {"customKind": "pick-size", "payload": {"title": "How many?"}}, "resumeSchema": schema}
    cli(stack_info, "workflows", "put", str(definition_file(tmp_path, {"id": customs, "nodes": [{"id": "pick", "typeId": "core.interrupt", "config": config}]}, "custom.json")))
    started = cli(stack_info, "runs", "start", customs, "--wait").stdout.strip().splitlines()
    run_id = started[0].removeprefix("run ").removesuffix(" started")
    assert started[1:] == [
        f"run {run_id} waits at pick for a decision: How many?",
        f"  answer: interlude resolve {run_id} pick --answer size=… (or --value JSON)",
    ]
    wrong = one_line(cli(stack_info, "resolve", run_id, "pick", "--answer", "size=many", check=False))
    assert wrong.startswith("interlude: 400 ")
    assert "Traceback" not in wrong
    valued = cli(stack_info, "resolve", run_id, "pick", "--value", '{"size": 3}').stdout
    assert valued.strip() == f"{run_id}  pick: the value recorded; run completed"
    assert api.run(run_id)["variables"]["pick"] == {"size": 3}
    assert "--value is not JSON" in one_line(cli(stack_info, "resolve", run_id, "pick", "--value", "{size", check=False))


def test_runs_start_wait_says_how_a_run_ended(api: Api, stack_info: dict[str, str]) -> None:
    done = cli(stack_info, "runs", "start", api.fixture("conformance-noop"), "--wait").stdout.strip().splitlines()
    run_id = done[0].removeprefix("run ").removesuffix(" started")
    assert done[1:] == [f"run {run_id} completed"]
    as_json = json.loads(cli(stack_info, "runs", "start", api.fixture("conformance-noop"), "--wait", "--json").stdout)
    assert as_json["run"]["status"] == "completed"
    assert as_json["events"][0]["type"] == "run.started"
    approval = api.fixture("conformance-approval")
    started = cli(stack_info, "runs", "start", approval).stdout.strip()
    assert started.endswith(" started; it is waiting for a decision (`--wait` follows it)")
    missing = one_line(cli(stack_info, "runs", "start", "no-such-workflow", check=False))
    assert missing.startswith("interlude: 404 ")
    assert "write it as name=value" in one_line(cli(stack_info, "runs", "start", "x", "--input", "loose", check=False))


def test_a_modulex_workflow_from_put_to_resolve_by_its_authors_step_ids(api: Api, stack_info: dict[str, str], tmp_path: Path) -> None:
    put = cli(stack_info, "workflows", "put", str(definition_file(tmp_path, worked_example(), "modulex.json"))).stdout
    assert put.startswith("workflow ")
    assert put.strip().endswith("(Approve before sending): version 1 registered (ModuleX)")
    workflow_id = put.split()[1]
    modulex_file = str(tmp_path / "modulex.json")
    again = cli(stack_info, "workflows", "put", modulex_file, "--id", workflow_id).stdout
    assert again.strip() == f"workflow {workflow_id} (Approve before sending): version 2 registered (ModuleX)"
    unknown = one_line(cli(stack_info, "workflows", "put", modulex_file, "--id", "my-modulex", check=False))
    assert unknown == "interlude: no ModuleX workflow my-modulex: leave out --id, and the API names the new one"
    started = cli(stack_info, "runs", "start", workflow_id, "--input", "request=refund", "--wait").stdout.strip().splitlines()
    run_id = started[0].removeprefix("run ").removesuffix(" started")
    assert [in_words(line) for line in started[1:]] == [
        f"run {run_id} waits at node_approval for a decision: Approve sending this draft?",
        f"  answer: interlude resolve {run_id} node_approval --answer approved=… (or --value JSON)",
    ]
    # The step as its author wrote it, though the API names it by the engine's escaped id.
    done = cli(stack_info, "resolve", run_id, "node_approval", "--answer", "approved=true", "--answer", "notes=fine").stdout
    assert done.strip() == f"{run_id}  node_approval: the answers recorded; run completed"
    assert api.run(run_id)["variables"]["node~5Fapproval"] == {"approved": True, "notes": "fine"}
