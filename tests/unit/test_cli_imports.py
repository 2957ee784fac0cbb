"""The `interlude` commands that are clients of the HTTP API (runs, resolve, workflows list/show, inbox, audit, outbox,
keys without --tenant, clock) run without composing the application: no engine, store, boto3 or pydantic is
imported for them (each e2e test's CLI call is a fresh process). A command that runs a service in-process still
composes it. Imports checked in a fresh interpreter, as the command runs; bench-free: modules, not seconds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import json, sys
from interlude.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as stopped:  # a command that stops with one line (sys.exit) rather than returning
    code = stopped.code or 0
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""
# What an HTTP client command must not load.
NOT_FOR_HTTP = ("boto3", "botocore", "pydantic", "interlude.composition", "interlude.store", "interlude.engine", "interlude.app")


def run(*argv: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "layers/core/python"), "INTERLUDE_URL": "", "INTERLUDE_API_KEY": ""}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "argv",
    [
        ["runs", "list"],
        ["runs", "show", "t1/r1"],
        ["resolve", "t1/r1", "gate", "--action", "accept"],
        ["workflows", "list"],
        ["workflows", "put", "README.md"],
        ["runs", "start", "wf", "--wait"],
        ["inbox"],
        ["audit", "list"],
        ["keys", "list"],
        ["outbox"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_an_http_client_command_composes_nothing(argv, tmp_path):
    # No stack and no URL: the command stops at its endpoint with one line, having imported what it runs with.
    got = run(*argv, "--state-file", str(tmp_path / "absent.json"))
    assert got["code"] != 0
    loaded = [m for m in got["modules"] if any(m == b or m.startswith(b + ".") for b in NOT_FOR_HTTP)]
    assert loaded == []


def test_a_command_that_runs_the_service_here_still_composes_it(tmp_path):
    got = run(
        "keys", "list", "--tenant", "t1", "--table", "absent", "--entries-table", "absent-entries",
        "--state-file", str(tmp_path / "absent.json"),
    )
    assert "interlude.composition" in got["modules"]
    assert "interlude.app.keys" in got["modules"]


def test_a_local_command_finds_the_stack_without_loading_it(tmp_path):
    # `--local` reaches the running stack's AWS through its state file: moto's server and the stack's gateways stay
    # in `interlude dev` (loading them cost each such command about a second of CPU).
    got = run("tenants", "list", "--local", "--state-file", str(tmp_path / "absent.json"))
    assert got["code"] != 0
    assert "interlude.local.environment" in got["modules"]
    heavy = ("moto", "werkzeug", "interlude.local.stack", "interlude.local.http_gateway", "interlude.local.live_gateway")
    assert [m for m in got["modules"] if any(m == h or m.startswith(h + ".") for h in heavy)] == []
