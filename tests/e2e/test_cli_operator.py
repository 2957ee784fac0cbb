"""The operator's CLI against the local stack (issue 16, item 4): runs list|show|cancel, resolve, workflows
list|show|validate, keys list|create|revoke over HTTP; tables by default, --json everywhere, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from tests.support.local_stack import REPO, Api, cli, run_cli
from tests.support.modulex_example import worked_example


def as_json(done: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(done.stdout)


def one_line_refusal(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert lines[0].startswith("interlude: ")
    return lines[0]


def test_runs_list_show_resolve_and_cancel(api: Api, stack_info: dict[str, str]) -> None:
    workflow = api.fixture("conformance-approval")
    first = api.start(workflow)["runId"]
    second = api.start(workflow)["runId"]
    third = api.start(workflow)["runId"]

    listed = as_json(cli(stack_info, "runs", "list", "--workflow", workflow, "--json"))
    assert [r["runId"] for r in listed["runs"]] == [third, second, first]
    table = cli(stack_info, "runs", "list", "--workflow", workflow, "--status", "waiting-approval").stdout
    assert table.splitlines()[0].split() == ["CREATED", "STATUS", "WORKFLOW", "RUN", "WAITING", "ON"]
    assert first in table
    assert "Conformance: Approval" in table  # the workflow by its name; --json keeps its id
    assert workflow not in table
    assert "waiting for a decision" in table  # in words; --json keeps the protocol's value
    assert "waiting-approval" not in table

    decided = cli(stack_info, "resolve", first, "gate", "--action", "accept", "--comment", "fine")
    assert "accept recorded" in decided.stdout
    shown = cli(stack_info, "runs", "show", first).stdout
    assert "status    completed" in shown
    assert f"workflow  Conformance: Approval ({workflow}), version 1" in shown
    assert "done" in shown  # the gate's step, in words
    assert "Decided" in shown  # the timeline in words (interrupt.resolved) ...
    assert "interrupt.resolved" not in shown
    shown_json = as_json(cli(stack_info, "runs", "show", first.replace("/", "~2F"), "--json"))
    assert shown_json["run"]["status"] == "completed"
    assert shown_json["events"][0]["sequence"] == 0

    single = as_json(cli(stack_info, "runs", "cancel", second, "--json"))
    assert single["status"] == "cancelled"
    bulk = cli(stack_info, "runs", "cancel", third, second, "--reason", "tidy", check=False)
    assert bulk.returncode == 1  # one of them was refused, and says so in its row
    assert "cancelled" in bulk.stdout
    assert "refused: " in bulk.stdout
    assert "run_terminal" not in bulk.stdout  # the refusal in words; --json keeps its code

    refused = one_line_refusal(cli(stack_info, "resolve", first, "gate", "--action", "accept", check=False))
    assert "409 interrupt_already_resolved" in refused
    missing = one_line_refusal(cli(stack_info, "runs", "show", f"{api.tenant}/{'A' * 24}", check=False))
    assert missing == f"interlude: no run {api.tenant}/{'A' * 24} in tenant {api.tenant}"


def test_runs_show_says_a_rejection_as_people_say_it(api: Api, stack_info: dict[str, str]) -> None:
    run_id = api.start(api.fixture("conformance-approval"))["runId"]
    ana = api.new_key(["approvals:respond", "runs:read"], subject="ana")
    assert api.resolve(run_id, "gate", {"action": "reject", "comment": "too casual"}, key=ana).status_code == 200

    shown = cli(stack_info, "runs", "show", run_id).stdout
    head, nodes = shown.split("\n\n")[:2]
    assert "status    Rejected by ana: too casual" in head
    assert "approval_rejected" not in head
    gate_row = nodes.splitlines()[1]
    assert gate_row.split("  ")[0] == "gate"
    assert "Rejected by ana: too casual" in gate_row
    assert "failed" not in gate_row
    # The API, and so --json, says what the protocol records
    run = as_json(cli(stack_info, "runs", "show", run_id, "--json"))["run"]
    assert (run["status"], run["error"]["code"]) == ("failed", "approval_rejected")


def test_workflows_list_show_and_validate_offline(api: Api, stack_info: dict[str, str], tmp_path: Path) -> None:
    openwop = api.fixture("conformance-noop")
    created = api.call("POST", "/workflows", {"workflow_schema": worked_example(), "name": "Refunds"}).json()
    table = cli(stack_info, "workflows", "list", "--page-size", "100").stdout
    assert openwop in table
    assert created["id"] in table
    listed = as_json(cli(stack_info, "workflows", "list", "--json", "--page-size", "100"))
    assert {w["id"]: w["face"] for w in listed["workflows"]}[created["id"]] == "modulex"
    assert "ModuleX  Refunds" in cli(stack_info, "workflows", "show", created["id"]).stdout
    assert "OpenWOP" in cli(stack_info, "workflows", "show", openwop).stdout

    good = tmp_path / "good.json"
    good.write_text((REPO / "tests/fixtures/openwop/conformance-approval.json").read_text())
    assert "valid openwop definition" in run_cli("workflows", "validate", str(good)).stdout
    modulex = tmp_path / "modulex.json"
    modulex.write_text(json.dumps(worked_example()))
    assert as_json(run_cli("workflows", "validate", str(modulex), "--json")) == {"valid": True, "face": "modulex"}

    # The same refusal the API gives for the same definition.
    bad_definition = {"nodes": [{"id": "a", "typeId": "core.noop"}], "edges": [{"sourceNodeId": "a", "targetNodeId": "zz"}]}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(bad_definition))
    offline = run_cli("workflows", "validate", str(bad), "--json", check=False)
    assert offline.returncode == 1
    by_api = api.put_workflow("validate-me", bad_definition)
    assert by_api.status_code == 400
    verdict = as_json(offline)
    assert {k: verdict[k] for k in ("error", "message", "details")} == by_api.json()
    line = run_cli("workflows", "validate", str(bad), check=False)
    assert line.returncode == 1
    assert "400 validation_error" in line.stdout
    assert "names no node" in line.stdout
    unreadable = one_line_refusal(run_cli("workflows", "validate", str(tmp_path / "none.json"), check=False))
    assert "cannot read" in unreadable


def test_keys_over_http_and_errors_in_one_line(api: Api, stack_info: dict[str, str]) -> None:
    holder = f"ops-{uuid.uuid4().hex[:6]}"
    assert api.call("PUT", f"/principals/{holder}", {"displayName": "Ops Robot"}).status_code == 201
    made = cli(stack_info, "keys", "create", "--subject", holder, "--scopes", "runs:read")
    assert "for Ops Robot (runs:read)" in made.stdout
    created = {"keyId": made.stdout.split()[1], "apiKey": made.stdout.split("secret (shown once): ")[1].strip()}
    table = cli(stack_info, "keys", "list").stdout
    assert table.splitlines()[0].split()[:4] == ["KEY", "STATUS", "HELD", "BY"]
    assert created["keyId"] in table
    assert "Ops Robot" in table  # the holder as the directory names them; --json keeps the subject
    assert holder not in table
    revoked = cli(stack_info, "keys", "revoke", created["keyId"]).stdout
    assert "revoked" in revoked
    audit = cli(stack_info, "audit", "list", "--limit", "5").stdout
    assert "Revoked a key" in audit
    assert f"key {created['keyId']}" in audit  # what it was about, in words; --json keeps the protocol's fields
    assert "key.revoked" not in audit
    assert "keyId=" not in audit
    refused = api.call("GET", "/runs", key=created["apiKey"])
    assert refused.status_code == 401
    gone = one_line_refusal(cli(stack_info, "keys", "revoke", "0000000000000000", check=False))
    assert "404 not_found" in gone

    # Environment instead of flags; an unreachable deployment and a refused key are one line each.
    env = {**os.environ, "INTERLUDE_URL": "http://127.0.0.1:9", "INTERLUDE_API_KEY": "il_x"}
    done = subprocess.run(
        [sys.executable, "-m", "interlude.cli", "runs", "list", "--state-file", "/nonexistent"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
    )
    assert "cannot reach http://127.0.0.1:9" in one_line_refusal(done)
    bad_key = one_line_refusal(
        run_cli("runs", "list", "--url", stack_info["baseUrl"], "--key", "il_0000000000000000_nope", check=False)
    )
    assert "401 unauthenticated" in bad_key


def test_runs_list_finds_runs_by_tag_time_words_and_status(api: Api, stack_info: dict[str, str]) -> None:
    """`runs list --tag T --tag U --since --until --search Q --status S,S --workflow PREFIX` (issue 29, items 1 and 4)."""
    workflow = api.fixture("conformance-approval")
    tag = f"batch-{uuid.uuid4().hex[:8]}"
    first = api.start(workflow, tags=[tag, "eu"])["runId"]
    second = api.start(workflow, tags=[tag])["runId"]
    third = api.start(workflow, tags=[tag, "eu"])["runId"]
    assert api.resolve(third, "gate", {"action": "accept"}).status_code == 200
    api.wait_status(third, {"completed"})

    def listed(*flags: str) -> list[str]:
        return [r["runId"] for r in as_json(cli(stack_info, "runs", "list", "--tag", tag, *flags, "--json"))["runs"]]

    assert listed("--tag", "eu") == [third, first]
    since = api.run(second)["startedAt"]  # a run starts as it is created
    assert listed("--since", since) == [third, second]
    assert listed("--until", since) == [first]
    assert listed("--search", "Conformance approval", "--status", "waiting-approval,failed", "--workflow", workflow[:-3]) == [second, first]
    assert listed("--search", "nothing-like-it") == []
    as_protocol = as_json(cli(stack_info, "runs", "list", "--tag", tag, "--json"))
    assert [r["status"] for r in as_protocol["runs"]] == ["completed", "waiting-approval", "waiting-approval"]

    table = cli(stack_info, "runs", "list", "--tag", tag).stdout
    assert table.count("waiting for a decision") == 2
    assert "waiting-approval" not in table
    shown = cli(stack_info, "runs", "show", first).stdout
    assert "status    waiting for a decision" in shown
    assert "an approval" in shown  # what the open gate waits for

    refused = one_line_refusal(cli(stack_info, "runs", "list", "--search", "- -", check=False))
    assert "400 validation_error" in refused
    assert "q must hold a word" in refused
    assert "no comma" in one_line_refusal(cli(stack_info, "runs", "list", "--tag", "a,b", check=False))
    assert "--since takes" in one_line_refusal(cli(stack_info, "runs", "list", "--since", "yesterday", check=False))
