"""Print what a cold resolve costs: the CPU of a new API instance from its process start to the resolve's answer.

Each round is a fresh interpreter, as Lambda starts one: the environment the construct gives the API function
(TABLE_NAME, LOG_LEVEL, POWERTOOLS_SERVICE_NAME, AWS_LAMBDA_FUNCTION_NAME, the JSON log format), modules from bytecode
(a private PYTHONPYCACHEPREFIX, filled by an untimed first round, as the layers ship the runtime's bytecode), the
handler imported as Lambda's runtime imports it (`importlib.import_module("handler")` from the function's directory),
then one `POST /runs/{runId}/interrupts/gate` with an API key through `lambda_handler`: the key read, the run and its
audit chain read, the decision committed. DynamoDB is moto's server on 127.0.0.1 in this (parent) process, so the
child's CPU is the function's own, its HTTP client's included, as it would be against DynamoDB. Figures: CPU seconds
of the child (`time.process_time()`, user + system, from the process's start), split into the interpreter's start,
the handler's import and the first request; medians over the rounds, with the load average.

The child reaches DynamoDB over HTTPS, as a deployed instance does, so its first request pays what TLS costs its
client: urllib3 loads the CA bundle into the SSL context for each new connection, then the handshake (key exchange,
the chain's signatures). A TLS-terminating forwarder in this process (bench/_tls.py; its CPU is not the child's)
listens on 127.0.0.1 for `https://localhost:PORT` in front of moto's server, with a chain of AWS's shape made at run
time into the temporary directory (root, intermediate, server; RSA 2048). The child's AWS_CA_BUNDLE is the bundle its
botocore loads by default (`botocore.httpsession.get_cert_path(True)`, run on the child's interpreter) with that root
appended: production's size. The header line says what was negotiated, the bundle's size and the handshakes the
forwarder made (one per resolve: every round opens one connection). With --plain-http the child talks plain HTTP to
moto, as the bench did before ADR 0164's "Later: the cold resolve over TLS": for comparison.

The child finds the SDK data the layer ships (interlude.adapters.sdk_data, written into a directory named by
INTERLUDE_SDK_DATA; the layer has it beside botocore); with --botocore-data it reads botocore's own, as before the layer shipped it.

With --snapstart, each round also plays a SnapStart restore: a stand-in for the runtime's `snapshot_restore_py`
records the hooks the handler registers; the import and the before-snapshot hooks (priming) run, untimed, as at
publication; then the after-restore hooks and the first request are timed: what a restored instance pays. The
after-restore hooks drop the SDK clients and their pooled connections, so that first request opens a new TLS
connection too.
With --python PATH, the child (the API instance) runs on that interpreter: `make bench` passes the functions' runtime
Python (.venv-runtime, made by `make runtime-python`), since a function's cold start is its runtime's, and the
development Python is a stand-in that costs about a fifth more here (ADR 0130). DynamoDB (moto) stays in this process.

With --instructions, the same cold resolve (one more round, no SnapStart) is also counted under valgrind's callgrind:
instructions executed from the process's start to the answer, split at the same marks (each mark a run stopped there),
with PYTHONHASHSEED fixed. The timed medians move with what else the machine runs (the same instructions measured 245
ms at load 0.8 and 333 ms at load 1.3, ADR 0145); the count does not, so it is the figure to compare two trees by.
With --snapstart, a restored instance's first request is counted too (a run stopped after priming, one at the
answer). It needs valgrind on the PATH and adds about a minute. --profile DIR (implies --instructions) keeps
callgrind's profiles there (callgrind.start, callgrind.import, callgrind.answer; callgrind.restored-primed,
callgrind.restored-answer) for callgrind_annotate.
Usage: .venv/bin/python bench/cold_resolve.py [rounds] [--snapstart] [--botocore-data] [--python PATH]
       [--instructions] [--profile DIR] [--plain-http]
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from _tls import TlsForwarder

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "layers" / "core" / "python"))
GOAL_COLD_MS = 250
GOAL_RESTORED_MS = 60
RESTORED = {"BENCH_SNAPSTART": "1"}  # the child plays a SnapStart restore

PROBE = r"""
import json, os, sys, time, types, uuid
started = time.process_time()  # the interpreter's start, site imports included
if os.environ.get("BENCH_EXIT_AT") == "start":
    os._exit(0)
restore_hooks, snapshot_hooks = [], []
if os.environ.get("BENCH_SNAPSTART"):
    # The managed runtime's module, as functions/api/handler.py imports it: hooks recorded, run below.
    stand_in = types.ModuleType("snapshot_restore_py")
    stand_in.register_after_restore = lambda hook, *a, **k: restore_hooks.append((hook, a, k))
    stand_in.register_before_snapshot = lambda hook, *a, **k: snapshot_hooks.append((hook, a, k))
    sys.modules["snapshot_restore_py"] = stand_in
sys.path.insert(0, sys.argv[1])
import importlib
handler = importlib.import_module("handler")
imported = time.process_time()
if os.environ.get("BENCH_EXIT_AT") == "import":
    os._exit(0)
for hook, a, k in snapshot_hooks:
    hook(*a, **k)
primed = time.process_time()
if os.environ.get("BENCH_EXIT_AT") == "primed":
    os._exit(0)
for hook, a, k in restore_hooks:
    hook(*a, **k)
run_id, bearer = sys.argv[2], sys.argv[3]
path = f"/runs/{run_id.replace('/', '%2F')}/interrupts/gate"
headers = {"authorization": bearer, "content-type": "application/json", "host": "bench"}
event = {"version": "2.0", "routeKey": "POST /runs/{runId}/interrupts/{nodeId}", "rawPath": path, "rawQueryString": "",
         "headers": headers, "body": json.dumps({"resumeValue": {"action": "accept"}}), "isBase64Encoded": False,
         "requestContext": {"accountId": "123456789012", "apiId": "bench", "domainName": "bench",
                            "requestId": str(uuid.uuid4()), "routeKey": "POST /runs/{runId}/interrupts/{nodeId}",
                            "stage": "$default", "http": {"method": "POST", "path": path, "protocol": "HTTP/1.1",
                                                          "sourceIp": "127.0.0.1", "userAgent": "bench"}}}
context = types.SimpleNamespace(function_name="interlude-api", memory_limit_in_mb=512, aws_request_id=str(uuid.uuid4()),
                                invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:interlude-api")
answer = handler.lambda_handler(event, context)
answered = time.process_time()
assert answer["statusCode"] == 200, answer
print(json.dumps({"start": started, "import": imported - started, "prime": primed - imported,
                  "request": answered - primed, "total": answered}), flush=True)
os._exit(0)  # the answer is the end of what is measured: the interpreter's teardown is not counted (--instructions)
"""


def child_env(endpoint: str, cache: str, sdk_data: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "AWS_PROFILE", "AWS_CA_BUNDLE")}
    env.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ACCOUNT_ID_ENDPOINT_MODE="disabled",
        TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries",
        LOG_LEVEL="INFO",
        POWERTOOLS_SERVICE_NAME="interlude",
        AWS_LAMBDA_FUNCTION_NAME="interlude-api",
        AWS_LAMBDA_LOG_FORMAT="JSON",
        PYTHONPYCACHEPREFIX=cache,
        PYTHONPATH=str(ROOT / "layers" / "core" / "python"),
    )
    if sdk_data:
        from interlude import sdk_clients
        from interlude.adapters import sdk_data
        from interlude.config.runtime import SDK_DATA_ENV

        env[SDK_DATA_ENV] = str(Path(cache) / sdk_clients.PACKAGED_MODELS)
        sdk_data.write(Path(env[SDK_DATA_ENV]))
    return env


def waiting_runs(count: int) -> tuple[list[str], str]:
    """`count` runs waiting at their gate, and an admin key's bearer header, made through the services (untimed)."""
    import boto3

    from interlude import wiring
    from interlude.composition import Services, compose
    from interlude.domain.models.requests import CreateKeyRequest, CreateRunRequest
    from interlude.domain.models.workflow import WorkflowDefinition
    from interlude.store.facade import Store
    from interlude.store.provisioning import create_tables
    from tests.support.local_stack import FIXTURES

    compose()
    create_tables(boto3.client("dynamodb"), "bench")
    services = Services(Store("bench", "bench-entries"))
    created = services.keys.issue_key("bench", CreateKeyRequest(subjectId="admin", scopes=list(wiring.ALL_SCOPES)))
    bearer = f"Bearer {created['apiKey']}"
    principal = services.keys.authenticate(bearer)
    definition = json.loads((FIXTURES / "conformance-approval.json").read_text())
    services.workflows.put_workflow(principal, definition["id"], WorkflowDefinition.model_validate(definition))
    request = CreateRunRequest.model_validate({"workflowId": definition["id"]})
    return [services.lifecycle.create_run(principal, request).runId for _ in range(count)], bearer


def option_value(option: str) -> str | None:
    return sys.argv[sys.argv.index(option) + 1] if option in sys.argv else None


def child_python() -> str:
    """The API instance's interpreter: --python PATH (a relative one from where the bench was started: the child runs
    in the temporary directory), else this one."""
    given = option_value("--python")
    return os.path.abspath(given) if given and os.sep in given else given or sys.executable


def main() -> None:
    python = child_python()
    values = {option_value(option) for option in ("--python", "--profile")}
    args = [a for a in sys.argv[1:] if not a.startswith("--") and a not in values]
    rounds = int(args[0]) if args else 5
    snapstart = "--snapstart" in sys.argv
    count = "--instructions" in sys.argv or "--profile" in sys.argv
    profile_dir = option_value("--profile")
    plain = "--plain-http" in sys.argv
    if count and shutil.which("valgrind") is None:
        sys.exit("--instructions needs valgrind on the PATH")
    sys.path.insert(0, str(ROOT))
    from interlude.local.moto_server import LockedMotoServer

    server = LockedMotoServer().start()
    os.environ.update(
        AWS_ENDPOINT_URL=server.endpoint, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1", AWS_ACCOUNT_ID_ENDPOINT_MODE="disabled", TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries",
    )
    counted: dict[str, int] = {}
    reached = "DynamoDB over plain HTTP"
    try:
        variants = [("cold", {})] + ([("restored", RESTORED)] if snapstart else [])
        # The untimed first round's, the timed rounds', then one for each variant counted under callgrind.
        answered = 1 + rounds * len(variants) + (len(variants) if count else 0)
        runs, bearer = waiting_runs(answered)
        found: dict[str, list[dict[str, float]]] = {name: [] for name, _ in variants}
        with tempfile.TemporaryDirectory(prefix="cold-resolve-pyc-") as cache, contextlib.ExitStack() as stack:
            env = child_env(server.endpoint, cache, sdk_data="--botocore-data" not in sys.argv)
            if not plain:
                forwarder = stack.enter_context(over_tls(env, server.endpoint, Path(cache)))
            probe(runs.pop(), bearer, env)  # compiles into the private cache, untimed
            for _ in range(rounds):
                for name, extra in variants:
                    found[name].append(probe(runs.pop(), bearer, {**env, **extra}))
            load = ", ".join(f"{x:.1f}" for x in os.getloadavg())  # the timed rounds' (callgrind's own runs follow)
            if count:
                counted = count_marks(runs, bearer, env, snapstart, profile_dir)
            if not plain:
                bundle = Path(env["AWS_CA_BUNDLE"]).stat().st_size
                reached = (
                    f"DynamoDB over TLS on loopback ({', '.join(sorted(forwarder.negotiated))}; CA bundle {bundle / 1024:.0f} KB; "
                    f"{forwarder.handshakes} handshakes for {answered} resolves)"
                )
    finally:
        server.stop()
    data = "botocore's own SDK data" if "--botocore-data" in sys.argv else "the layer's SDK data"
    version = subprocess.run([python, "-c", "import platform; print(platform.python_version())"], capture_output=True, text=True)
    print(
        f"rounds={rounds}, CPU ms (user + system) of a new API instance on Python {version.stdout.strip()} reading {data},"
        f" {reached}, medians; load average {load}"
    )
    cold = found["cold"]
    median = {k: statistics.median(r[k] * 1000 for r in cold) for k in ("start", "import", "request", "total")}
    print(
        f"  cold resolve: {median['total']:.0f} ms from process start to the answer (interpreter start "
        f"{median['start']:.0f}, handler import {median['import']:.0f}, first request {median['request']:.0f}); "
        f"goal ≤ {GOAL_COLD_MS} ms: {'met' if median['total'] <= GOAL_COLD_MS else 'NOT MET'}"
    )
    if counted:
        total, start, imported = counted["answer"], counted["start"], counted["import"]
        print(
            f"  instructions of the same cold resolve (callgrind, one round; load-independent): {total / 1e6:,.0f} M "
            f"from process start to the answer (interpreter start {start / 1e6:,.0f}, handler import "
            f"{(imported - start) / 1e6:,.0f}, first request {(total - imported) / 1e6:,.0f})"
        )
    if snapstart:
        restored = found["restored"]
        request = statistics.median(r["request"] * 1000 for r in restored)
        prime = statistics.median(r["prime"] * 1000 for r in restored)
        restored_count = (counted["restored answer"] - counted["restored primed"]) / 1e6 if counted else 0
        print(
            f"  restored from a SnapStart snapshot: the first request {request:.0f} ms after restore (its after-restore "
            f"hooks included; before-snapshot priming {prime:.0f} ms, paid at publication)"
            + (f", {restored_count:,.0f} M instructions (callgrind, one round)" if counted else "")
            + f"; goal ≤ {GOAL_RESTORED_MS} ms: {'met' if request <= GOAL_RESTORED_MS else 'NOT MET'}"
        )


@contextlib.contextmanager
def over_tls(env: dict[str, str], upstream: str, directory: Path) -> Iterator[TlsForwarder]:
    """The child's endpoint made HTTPS, as a deployed instance's: a forwarder in this process in front of `upstream`,
    its root appended to the CA bundle the child's botocore would load by default (`AWS_CA_BUNDLE`)."""
    found = subprocess.run(
        [child_python(), "-c", "from botocore.httpsession import get_cert_path; print(get_cert_path(True))"],
        capture_output=True, text=True, env=env, cwd=tempfile.gettempdir(), check=True,
    )
    address = urlsplit(upstream)
    with TlsForwarder((str(address.hostname), int(address.port or 80)), directory) as forwarder:
        env.update(AWS_ENDPOINT_URL=forwarder.endpoint, AWS_CA_BUNDLE=str(forwarder.ca_bundle(Path(found.stdout.strip()))))
        yield forwarder


def count_marks(runs: list[str], bearer: str, env: dict[str, str], snapstart: bool, profile_dir: str | None) -> dict[str, int]:
    """The cold resolve counted under callgrind, stopped at each mark (only the last run resolves its run); with
    `snapstart`, a restored one too, stopped after priming and at its answer."""
    marks = [(mark, mark, {}) for mark in ("start", "import", "answer")]
    if snapstart:
        marks += [(f"restored {mark}", mark, RESTORED) for mark in ("primed", "answer")]
    counted = {}
    for name, mark, extra in marks:
        out = str(Path(profile_dir) / f"callgrind.{name.replace(' ', '-')}") if profile_dir else os.devnull
        run_id = runs.pop() if mark == "answer" else runs[-1]
        counted[name] = instructions(run_id, bearer, {**env, **extra}, mark, out)
    return counted


def probe_command(run_id: str, bearer: str) -> list[str]:
    return [child_python(), "-c", PROBE, str(ROOT / "functions" / "api"), run_id, bearer]


def probe(run_id: str, bearer: str, env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run(probe_command(run_id, bearer), capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def instructions(run_id: str, bearer: str, env: dict[str, str], exit_at: str = "answer", out: str = os.devnull) -> int:
    """Instructions the child executes from its process start to `exit_at` ("import": the handler imported; "primed":
    its before-snapshot hooks run; "answer": the resolve answered), counted under callgrind; `out`: where callgrind
    writes its profile."""
    command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *probe_command(run_id, bearer)]
    env = {**env, "PYTHONHASHSEED": "0", "BENCH_EXIT_AT": exit_at}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    found = re.findall(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or not found:
        raise SystemExit(done.stderr[-3000:])
    return int(found[-1])


if __name__ == "__main__":
    main()
