"""Run `interlude dev` as a real subprocess on loopback, exactly as a developer would, and talk HTTP to it."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import boto3
import requests

REPO = Path(__file__).resolve().parents[2]
# Vendored OpenWOP conformance fixtures (Apache-2.0, see the NOTICE beside them).
FIXTURES = REPO / "tests" / "fixtures" / "openwop"

T = TypeVar("T")


@dataclass
class Api:
    base_url: str
    api_key: str
    tenant: str
    session: requests.Session = field(default_factory=requests.Session)

    @classmethod
    def of(cls, info: dict[str, str]) -> Api:
        """The seeded admin of a running stack (the dict `running_stack` yields)."""
        return cls(info["baseUrl"], info["apiKey"], info["tenant"])

    def headers(self, key: str | None = None, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.api_key}", "Content-Type": "application/json", **extra}

    def call(self, method: str, path: str, body: Any = None, key: str | None = None, **extra: str) -> requests.Response:
        data = body if isinstance(body, str | bytes) or body is None else json.dumps(body)
        return self.session.request(
            method, self.base_url + path, data=data, headers=self.headers(key, **extra), timeout=30
        )

    def put_workflow(self, workflow_id: str, definition: dict[str, Any], key: str | None = None) -> requests.Response:
        return self.call("PUT", f"/workflows/{workflow_id}", definition, key)

    def fixture(self, name: str) -> str:
        """Register a shared OpenWOP fixture under a unique id; returns that id."""
        definition = json.loads((FIXTURES / f"{name}.json").read_text())
        workflow_id = f"{name}-{uuid.uuid4().hex[:8]}"
        definition["id"] = workflow_id
        got = self.put_workflow(workflow_id, definition)
        assert got.status_code == 201, got.text
        return workflow_id

    def start(self, workflow_id: str, key: str | None = None, **body: Any) -> dict[str, Any]:
        got = self.call("POST", "/runs", {"workflowId": workflow_id, **body}, key)
        assert got.status_code == 201, got.text
        return got.json()

    def run(self, run_id: str, key: str | None = None) -> dict[str, Any]:
        got = self.call("GET", f"/runs/{wire(run_id)}", key=key)
        assert got.status_code == 200, got.text
        return got.json()

    def resolve(self, run_id: str, node_id: str, resume_value: Any, key: str | None = None) -> requests.Response:
        return self.call("POST", f"/runs/{wire(run_id)}/interrupts/{node_id}", {"resumeValue": resume_value}, key)

    def events(self, run_id: str, after: int | None = None) -> list[dict[str, Any]]:
        query = "?timeout=1" + (f"&afterSequence={after}" if after is not None else "")
        got = self.call("GET", f"/runs/{wire(run_id)}/events/poll{query}")
        assert got.status_code == 200, got.text
        return got.json()["events"]

    def new_key(self, scopes: list[str], subject: str | None = None, **extra: Any) -> str:
        got = self.call(
            "POST", "/keys", {"subjectId": subject or f"user-{uuid.uuid4().hex[:6]}", "scopes": scopes, **extra}
        )
        assert got.status_code == 201, got.text
        return got.json()["apiKey"]

    def wait_status(self, run_id: str, statuses: set[str], timeout_s: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            snap = self.run(run_id)
            if snap["status"] in statuses or time.monotonic() > deadline:
                return snap
            time.sleep(0.05)


def wire(run_id: str) -> str:
    return run_id.replace("/", "~2F")


def until(predicate: Callable[[], T], timeout_s: float, interval_s: float = 0.05) -> T:
    """Poll `predicate` until it returns something truthy or `timeout_s` has passed; returns its last value.

    The stack works asynchronously (queues, schedules, instance caches): wait for the effect, never a fixed time.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            # Said, since a test that asserts on the value next may still pass and wait out the whole bound on every
            # run (a refused requests.Response is falsy): the warnings summary names it.
            warnings.warn(f"until: nothing truthy within {timeout_s} s ({value!r})", stacklevel=2)
            return value
        time.sleep(interval_s)


def quiesce(info: dict[str, str], timeout_s: float = 60.0) -> None:
    """Wait until every background effect of what the running stack was asked so far has landed: its control endpoint
    answers once each pump (the stream's, the queues', the schedules') has completed a poll begun after the call that
    found nothing to move (interlude.local.pump.quiesce). Deterministic where repeated reads of the table only guess."""
    got = requests.post(f"{info['controlEndpoint']}/quiesce", params={"timeoutSeconds": timeout_s}, timeout=timeout_s + 30)
    assert got.status_code == 200, got.text


def run_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`interlude <args>` as a developer runs it from the repo; a failure fails the test unless `check` is off."""
    done = subprocess.run(
        [sys.executable, "-m", "interlude.cli", *args], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def cli(info: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`interlude <args> --state-file <its state file>`: a command aimed at the running stack `info` describes."""
    return run_cli(*args, "--state-file", info["stateFile"], check=check)


# `interlude` commands run one after another in one process, each as `main(argv)` runs it from the command line (its
# exit status, its output): what a test does many times that is not itself under test (a tenant's first key: the
# command composes the application, about 0.9 s of CPU for each new process).
COMMAND_LOOP = """
import contextlib, io, json, sys
from interlude.cli.main import main
for line in sys.stdin:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(json.loads(line))
        except SystemExit as stopped:
            code = stopped.code if isinstance(stopped.code, int) else (print(stopped.code, file=sys.stderr) or 1)
    print(json.dumps({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}), flush=True)
"""
_command_loops: dict[str, subprocess.Popen[str]] = {}


def in_command_loop(state_file: str, *args: str) -> str:
    """`interlude <args> --state-file <state_file>` in the stack's command loop (COMMAND_LOOP); its output."""
    loop = _command_loops.get(state_file)
    if loop is None or loop.poll() is not None:
        loop = subprocess.Popen(
            [sys.executable, "-c", COMMAND_LOOP], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        _command_loops[state_file] = loop
    assert loop.stdin is not None
    assert loop.stdout is not None
    loop.stdin.write(json.dumps([*args, "--state-file", state_file]) + "\n")
    loop.stdin.flush()
    line = loop.stdout.readline()
    assert line, f"the command loop of {state_file} ended"
    done = json.loads(line)
    assert done["code"] == 0, done["stderr"]
    return str(done["stdout"])


def end_command_loop(state_file: str) -> None:
    loop = _command_loops.pop(state_file, None)
    if loop is not None:
        assert loop.stdin is not None
        loop.stdin.close()
        try:
            loop.wait(timeout=10)
        except subprocess.TimeoutExpired:
            loop.kill()


def tenant_admin_key(info: dict[str, str], tenant: str, subject: str = "admin") -> str:
    """An every-scope API key for another tenant of the running stack, made with the CLI (in its command loop)."""
    made = in_command_loop(info["stateFile"], "keys", "create", "--local", "--tenant", tenant, "--subject", subject, "--scopes", "all")
    created = json.loads(made)
    assert created["tenant"] == tenant
    return created["apiKey"]


def stack_client(info: dict[str, str], service: str) -> Any:
    """A boto3 client for the running stack's moto server, to look behind the API."""
    return boto3.client(
        service,
        endpoint_url=info["motoEndpoint"],
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


class LocalStackProcess:
    def __init__(self, tmp: Path, extra_env: dict[str, str] | None = None, own_group: bool = False) -> None:
        """`own_group`: the stack leads a process group of its own (its instances and fork server in it), as a shell
        job or `timeout` runs it, so a signal can be sent to the whole group."""
        self.state_file = tmp / "local.json"
        self.log = (tmp / "local-stack.log").open("w")
        env = {**os.environ, **(extra_env or {})}
        env.pop("AWS_ENDPOINT_URL", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "interlude.cli", "dev", "--port", "0", "--state-file", str(self.state_file)],
            cwd=REPO,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            process_group=0 if own_group else None,
        )

    def wait(self, timeout_s: float = 120.0) -> dict[str, str]:
        # Generous: a loaded machine (other suites, Chromium) may take seconds to spawn the API instances.
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"local stack exited with {self.proc.returncode}; see {self.log.name}")
            if self.state_file.exists():
                info = json.loads(self.state_file.read_text())
                try:
                    if requests.get(info["baseUrl"] + "/.well-known/openwop", timeout=10).ok:
                        return info
                except requests.RequestException:
                    pass
            time.sleep(0.1)
        raise TimeoutError("local stack did not start")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@contextlib.contextmanager
def running_stack(tmp: Path, extra_env: dict[str, str] | None = None) -> Iterator[dict[str, str]]:
    """A local stack of its own for the block: its state file's fields plus `stateFile`."""
    stack = LocalStackProcess(tmp, extra_env)
    try:
        yield {**stack.wait(), "stateFile": str(stack.state_file)}
    finally:
        end_command_loop(str(stack.state_file))
        stack.stop()
