"""The CLI's small findings of issue 29 (item 4), as transcripts against the local stack: `keys create` grants only the
scopes it is told; a refused action names the allowed ones; a missing run is named in words; a stopped stack, a closed
pipe and a refused clock move are one line each with a non-zero exit, never "unexpected …"; the state file is found
from any directory inside the checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from interlude import wiring
from tests.support.local_stack import REPO, Api, cli, run_cli


def one_line(done: subprocess.CompletedProcess[str], exit_code: int = 1) -> str:
    assert done.returncode == exit_code, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "unexpected" not in done.stderr
    assert lines[0].startswith("interlude: ")
    return lines[0]


def interlude(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """`interlude <args>` in `cwd`, told nothing of a deployment by the environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("INTERLUDE_URL", "INTERLUDE_API_KEY")}
    return subprocess.run(
        [sys.executable, "-m", "interlude.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def stopped_stack(tmp_path: Path) -> Path:
    """A state file of a local stack that is no longer running (nothing listens on its ports)."""
    state = tmp_path / "stopped.json"
    dead = "http://127.0.0.1:9"
    state.write_text(json.dumps({"baseUrl": dead, "apiKey": "il_x", "tenant": "demo", "motoEndpoint": dead, "clockFile": str(tmp_path / "clock")}))
    return state


def test_keys_create_grants_only_the_scopes_it_is_told(stack_info: dict[str, str]) -> None:
    refused = cli(stack_info, "keys", "create", "--subject", "ops-bot", check=False)
    assert refused.returncode == 2
    assert "the following arguments are required: --scopes" in refused.stderr
    helped = run_cli("keys", "create", "--help").stdout
    assert all(scope in " ".join(helped.split()) for scope in wiring.ALL_SCOPES)

    narrow = json.loads(cli(stack_info, "keys", "create", "--subject", "ops-bot", "--scopes", "runs:read", "--json").stdout)
    assert narrow["scopes"] == ["runs:read"]
    every = json.loads(cli(stack_info, "keys", "create", "--subject", "ops-admin", "--scopes", "all", "--json").stdout)
    assert sorted(every["scopes"]) == sorted(wiring.ALL_SCOPES)


def test_a_refused_action_names_the_allowed_ones(api: Api, stack_info: dict[str, str]) -> None:
    run_id = api.start(api.fixture("conformance-approval"))["runId"]
    refused = one_line(cli(stack_info, "resolve", run_id, "gate", "--action", "approve", check=False))
    assert "400 validation_error" in refused
    assert "action 'approve' is not one this gate allows; it allows accept, reject" in refused


def test_a_missing_run_is_named_in_words(api: Api, stack_info: dict[str, str]) -> None:
    tenant = api.tenant
    # Too short to be any run's id (the API refuses its form), and well formed but no run's.
    for missing in (f"{tenant}/nope", f"{tenant}/{'A' * 24}"):
        assert one_line(cli(stack_info, "runs", "show", missing, check=False)) == f"interlude: no run {missing} in tenant {tenant}"
        assert one_line(cli(stack_info, "runs", "cancel", missing, check=False)) == f"interlude: no run {missing} in tenant {tenant}"
    resolved = one_line(cli(stack_info, "resolve", f"{tenant}~2Fnope", "gate", "--action", "accept", check=False))
    assert resolved == f"interlude: no run {tenant}/nope in tenant {tenant}"
    assert one_line(cli(stack_info, "runs", "show", "nope", check=False)) == "interlude: no run nope: a run id reads tenant/id"


def test_a_stopped_stack_is_one_line(tmp_path: Path) -> None:
    state = str(stopped_stack(tmp_path))
    for command in (("runs", "list"), ("inbox",), ("audit", "list"), ("outbox", "--local")):
        line = one_line(interlude(*command, "--state-file", state))
        assert line.startswith("interlude: cannot reach http://127.0.0.1:9"), line
    local = one_line(interlude("tenant", "settings", "--local", "--tenant", "demo", "--state-file", state))
    assert local.startswith(f"interlude: the local stack of {state} is not running"), local
    for not_one in ("[]", "{"):
        (tmp_path / "not-one.json").write_text(not_one)
        line = one_line(interlude("runs", "list", "--state-file", str(tmp_path / "not-one.json")))
        assert line == f"interlude: {tmp_path / 'not-one.json'} is not a local stack's state file"
    assert one_line(interlude("inbox", "--state-file", str(tmp_path))).endswith("is not a local stack's state file")
    never_started = str(tmp_path / "none" / "local.json")
    for command in (("clock", "advance", "5"), ("outbox", "--local")):
        line = one_line(interlude(*command, "--state-file", never_started))
        assert line == f"interlude: no local stack: {never_started} does not exist (start one with `make dev`)"


def test_a_closed_pipe_is_one_line(stack_info: dict[str, str]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("INTERLUDE_URL", "INTERLUDE_API_KEY")}
    reader = subprocess.Popen(
        [sys.executable, "-m", "interlude.cli", "workflows", "list", "--json", "--state-file", stack_info["stateFile"]],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert reader.stdout is not None
    assert reader.stderr is not None
    reader.stdout.close()  # as `| head -0` does: the reader is gone before the answer is printed
    errors = reader.stderr.read()
    assert reader.wait(timeout=60) == 1
    assert errors.strip() == "interlude: the output was closed before all of it was written"


def test_a_refused_clock_move_is_one_line(tmp_path: Path) -> None:
    state = str(stopped_stack(tmp_path))
    line = one_line(interlude("clock", "advance", "-5", "--state-file", state))
    assert line == "interlude: cannot move the clock by -5 s: the clock only moves forward"
    assert json.loads(interlude("clock", "advance", "5", "--state-file", state).stdout)["offsetSeconds"] == 5


def test_the_state_file_is_found_from_any_directory_inside_the_checkout(
    api: Api, stack_info: dict[str, str], tmp_path: Path
) -> None:
    checkout = tmp_path / "checkout"
    deep = checkout / "layers" / "core"
    deep.mkdir(parents=True)
    (checkout / ".interlude").mkdir()
    shutil.copy(stack_info["stateFile"], checkout / ".interlude" / "local.json")
    workflow = api.fixture("conformance-noop")

    for where in (checkout, deep):
        listed = interlude("workflows", "list", "--json", "--page-size", "100", cwd=where)
        assert listed.returncode == 0, listed.stderr
        assert workflow in {w["id"] for w in json.loads(listed.stdout)["workflows"]}
    assert one_line(interlude("workflows", "list", cwd=tmp_path)).startswith("interlude: give --url and --key")


def test_an_id_argument_stays_inside_its_path_segment(api: Api, stack_info: dict[str, str]) -> None:
    # `?` (or `#`, `/..`) in an id the command is given must not make it name another thing: the key, the workflow,
    # the node are each refused as written, and the thing whose id it starts with is untouched.
    made = json.loads(cli(stack_info, "keys", "create", "--subject", "kept", "--scopes", "runs:read", "--json").stdout)
    refused = one_line(cli(stack_info, "keys", "revoke", f"{made['keyId']}?x", check=False))
    assert refused.startswith("interlude: 404 not_found"), refused
    assert api.call("GET", "/runs", key=made["apiKey"]).status_code == 200
    workflow = api.fixture("conformance-approval")
    assert "400 validation_error" in one_line(cli(stack_info, "workflows", "show", f"{workflow}?x", check=False))
    run_id = api.start(workflow)["runId"]
    assert "validation_error" in one_line(cli(stack_info, "runs", "retry-action", run_id, "gate?x", check=False))
