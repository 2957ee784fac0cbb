"""Print each Lambda entry point's cold import cost as a ratio to `import boto3` (what any Python function on AWS pays).

Paired runs: each round imports functions/<name>/handler.py in one fresh interpreter, as Lambda's runtime imports it
(`importlib.import_module("handler")` from the function's directory), and `boto3` in another, back to back, at the
same call depth (the rounds vary it: PROBE says why), and takes the ratio of their CPU times (process time, so a
loaded machine's waiting is not counted). The figure is the median ratio over the rounds. Goal: ≤ 1.5× each.

Beside it, each function's floor: the same paired ratio for importing only what the function cannot do without
(FLOORS: boto3, the Powertools modules it uses, pydantic where its invocations validate with it), so the distance
between the two columns is what Interlude's own modules and their choices cost. A floor is imported the best way we
know and the way the handlers import: inside `coldstart.importing()` (the cyclic collector off, what the import
made frozen), with the Powertools packages it touches registered as its handler registers them
(`coldstart.lazy_package`: the API's `event_handler`, every consumer's `utilities.data_classes`). `import boto3`, the
denominator, stays what a plain function pays: collector on, nothing registered.

Both sides import from bytecode: the probes share a private cache (PYTHONPYCACHEPREFIX, filled by one untimed import
of each target first), whatever PYTHONDONTWRITEBYTECODE says. Without it the figure depended on the environment:
where bytecode is not written (PYTHONDONTWRITEBYTECODE set, as where these figures were taken), every probe compiled
Interlude's modules from source while boto3's came compiled from site-packages: about a fifth of the API's figure.
From bytecode is also how the functions import since the layers ship the runtime's bytecode (infra/interlude_cdk/bytecode.py);
bench/bytecode.py prints what the deployment paid before, compiling every layer's module on every cold start.
With --instructions, each figure is instead counted once under valgrind's callgrind (instructions executed, the
interpreter's own start subtracted from both sides): load-independent, where the timed ratios move by ±0.2 between two
runs on a quiet shared machine. It needs valgrind on the PATH (not installed by the project: a developer's tool) and
takes a few minutes.
Usage: .venv/bin/python bench/cold_import.py [rounds] | --instructions
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "layers" / "core" / "python"))
from interlude import wiring  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GOAL = 1.5
# What each function must import whatever Interlude does: boto3 (every one talks to AWS), the Powertools modules it
# uses (the logger; the HTTP resolver's own module for the API; the batch utility and its record class for the stream
# and queue consumers), each with the lazy registrations its handler makes, and pydantic where an invocation validates
# a model (a request body, or a run read from the table). Runnable statements, run as floor_program() wraps them:
# inside the collector pause, with coldstart's names in scope.
POWERTOOLS_BATCH = "lazy_package(DATA_CLASSES)\nfrom aws_lambda_powertools.utilities.batch import BatchProcessor"
# pydantic as a function that validates pays for it: importing BaseModel alone leaves out pydantic.fields and the
# constraint types (annotated_types) that the first model class with a field loads. Without the plugin scan, as the
# handlers set it (functions/api/handler.py).
PYDANTIC_MODEL = (
    "os.environ.setdefault('PYDANTIC_DISABLE_PLUGINS', '__all__')\n"
    "from pydantic import BaseModel\nclass Floor(BaseModel): value: int"
)
FLOORS: dict[str, tuple[str, ...]] = {
    "api": (
        "import boto3",
        "from aws_lambda_powertools import Logger",
        "lazy_package(EVENT_HANDLER, by_name=False)\nlazy_package(DATA_CLASSES)",
        "from aws_lambda_powertools.event_handler.api_gateway import APIGatewayHttpResolver",
        PYDANTIC_MODEL,
    ),
    "dispatch": (
        "import boto3",
        "from aws_lambda_powertools import Logger",
        POWERTOOLS_BATCH,
        "from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord",
        PYDANTIC_MODEL,
    ),
    "callbacks": (
        "import boto3",
        "from aws_lambda_powertools import Logger",
        POWERTOOLS_BATCH,
        "from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord",
    ),
    # The audit sweep (every minute, in every deployment) reads no run; a deadline's path is a first-use row (below).
    "timeouts": ("import boto3", "from aws_lambda_powertools import Logger"),
    # It queues each new event-log item's name: no record class, no batch utility, no model.
    "stream": ("import boto3", "from aws_lambda_powertools import Logger"),
    # A turn of the table's migrations per queue message.
    "migrate": (
        "import boto3",
        "from aws_lambda_powertools import Logger",
        POWERTOOLS_BATCH,
        "from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord",
    ),
    # The operator surface (issue 30 item 6): one operation per invocation, its event a pydantic model.
    "admin": ("import boto3", "from aws_lambda_powertools import Logger", PYDANTIC_MODEL),
    "actions": (
        "import boto3",
        "from aws_lambda_powertools import Logger",
        POWERTOOLS_BATCH,
        "from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord",
        PYDANTIC_MODEL,
    ),
    "notify": (
        "import boto3",
        "from aws_lambda_powertools import Logger",
        POWERTOOLS_BATCH,
        "from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord",
        PYDANTIC_MODEL,
    ),
}
# A path whose imports a function leaves to its first invocation on that path: (function, path, what that first
# invocation runs). Printed as the handler's import plus that, so what was deferred stays in view.
FIRST_USE: tuple[tuple[str, str, str], ...] = (
    ("timeouts", "a deadline, reminder or task check", "module.run_services()"),  # the service, the engine, pydantic
    # The API's route modules load with the first request that matches one (api/app.py ROUTE_MODULES); the runs
    # module (createRun, getRun, poll, cancel; a resolve loads api/run_decisions.py) and its answer models are what a
    # lifecycle's requests load.
    ("api", "a run route (POST /runs)", "from interlude.api import app\napp.load_routes('POST', '/runs')"),
    # Every record runs the whole outbox, so its first record loads every outbox handler (the composition's).
    ("dispatch", "its first record", "from interlude.composition import services; services().outbox"),
    # The inbox routes' module and their answers (domain/models/answers/inbox); bench/first_requests.py times whole
    # first requests, validators and caches included.
    ("api", "an inbox page (GET /interrupts)", "from interlude.api import app\napp.load_routes('GET', '/interrupts')"),
    # The worker and its clients; an action's outcome lands on its run through the engine's run rules, which
    # app/actions.py loads with the first outcome (nearly every message has one).
    ("actions", "its first message", "module.worker()\nimport interlude.engine.run"),
    ("notify", "its first message", "module.worker()"),
    # A raised gate's or a reminder's message signs a link with the key ring, read with the session's own client
    # (adapters/secret_values.py; Powertools' provider made a boto3 session of its own: docs/adr/0163).
    (
        "notify",
        "its first message with a link (the key ring's client)",
        "module.worker()\nfrom interlude.adapters import secret_values\nsecret_values._client()",
    ),
    # The whole store and the services load with the first turn that uses them (a turn of the migrations: the store;
    # a finished run's retention, the queue's commonest message: the services too); the deploy's answer uses neither.
    ("migrate", "a turn of the migrations (the store)", "module.store()"),
    ("migrate", "a finished run's retention turn (the services)", "module.services().retention"),
)
# A handler is imported as Lambda's runtime imports it: its directory first on sys.path, importlib.import_module("handler").
# Each probe runs its import DEPTH frames down (BENCH_DEPTH): on CPython 3.11 the interpreter's frame stack grows in
# chunks it maps and unmaps as calls cross a chunk's end, so an import that happens to run at a chunk boundary maps
# and unmaps thousands of times (dispatch's, loaded at the probe's old depth: 6,449 mmap calls against 1,517 for
# `import handler`; ≈ 25 ms of system time, 0.15× of its ratio). The timed rounds vary the depth, handler, boto3 and
# floor of a round alike, so no figure rests on where a harness's stack happens to sit.
PROBE = """
import importlib, os, sys, time
os.environ.setdefault("TABLE_NAME", "bench")
os.environ.setdefault("ENTRIES_TABLE_NAME", "bench-entries")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

def load():
    if sys.argv[1] == "nothing":
        return None
    if sys.argv[1] == "boto3":
        import boto3
        return None
    if sys.argv[1] == "floor":
        exec(sys.argv[2], {"__name__": "floor", "os": os})
        return None
    sys.path.insert(0, os.path.dirname(sys.argv[1]))
    module = importlib.import_module("handler")
    exec(sys.argv[2] if len(sys.argv) > 2 else "", {"module": module})
    return module

def at(depth):
    return load() if depth == 0 else at(depth - 1)

depth = int(os.environ.get("BENCH_DEPTH", "0"))
t0 = time.process_time()
at(depth)
print(time.process_time() - t0)
"""
# The depths the timed rounds cycle through (frames of the probe's own above the import).
DEPTHS = 8


def floor_program(statements: tuple[str, ...]) -> str:
    """A floor's statements, imported as a handler imports (functions/*/handler.py): the collector paused."""
    body = textwrap.indent("\n".join(statements), "    ")
    return (
        "from interlude.coldstart import DATA_CLASSES, EVENT_HANDLER, importing, lazy_package\n"
        f"with importing():\n{body}\n"
    )


def probe_env(cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    # The floor's probe imports interlude.coldstart (the collector pause, the lazy registrations).
    path = os.pathsep.join(p for p in (str(ROOT / "layers" / "core" / "python"), env.get("PYTHONPATH")) if p)
    return {**env, "PYTHONPYCACHEPREFIX": cache, "PYTHONPATH": path}


def probe(target: str, floor: tuple[str, ...] = (), then: str = "") -> list[str]:
    """`floor`: statements run instead of a handler; `then`: code run after the handler's import, counted with it."""
    args = [target, floor_program(floor)] if floor else [target, then] if then else [target]
    return [sys.executable, "-c", PROBE, *args]


def cpu_seconds(target: str, env: dict[str, str], floor: tuple[str, ...] = (), then: str = "", depth: int = 0) -> float:
    env = {**env, "BENCH_DEPTH": str(depth)}
    out = subprocess.run(probe(target, floor, then), capture_output=True, text=True, check=True, env=env)
    return float(out.stdout.strip().splitlines()[-1])


def instructions(target: str, env: dict[str, str], floor: tuple[str, ...] = (), then: str = "") -> int:
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *probe(target, floor, then)]
    out = subprocess.run(command, capture_output=True, text=True, check=True, env={**env, "PYTHONHASHSEED": "0"})
    return int(re.findall(r"Collected : (\d+)", out.stderr)[-1])


def main() -> None:
    counted = "--instructions" in sys.argv[1:]
    if counted and shutil.which("valgrind") is None:
        sys.exit("--instructions needs valgrind on the PATH")
    with tempfile.TemporaryDirectory(prefix="cold-import-pyc-") as cache:
        if counted:
            count(probe_env(cache))
        else:
            measure(int(sys.argv[1]) if len(sys.argv) > 1 else 7, probe_env(cache))


def handler_paths() -> dict[str, str]:
    return {
        fn.name: str(ROOT / "functions" / fn.name / (fn.handler.rpartition(".")[0] + ".py")) for fn in wiring.FUNCTIONS
    }


def warm(targets: dict[str, str], env: dict[str, str]) -> None:
    """Compile everything the probes import into the private cache (untimed, uncounted)."""
    for target in ["boto3", *targets.values()]:
        cpu_seconds(target, env)
    for name in targets:
        cpu_seconds("floor", env, FLOORS[name])
    for name, _, then in FIRST_USE:
        cpu_seconds(targets[name], env, then=then)


def count(env: dict[str, str]) -> None:
    targets = handler_paths()
    warm(targets, env)
    start = instructions("nothing", env)
    boto = instructions("boto3", env) - start
    print(
        f"{'function':<12} {'import (M instr.)':>18} {'ratio':>7} {'floor':>7}   goal ≤ {GOAL}×; import boto3: {boto / 1e6:.0f} M"
    )
    for name, path in targets.items():
        own = instructions(path, env) - start
        floor = instructions("floor", env, FLOORS[name]) - start
        verdict = "meets" if own / boto <= GOAL else "misses"
        print(f"{name:<12} {own / 1e6:>18.0f} {own / boto:>6.2f}× {floor / boto:>6.2f}×   {verdict}")
    for name, path_name, then in FIRST_USE:
        first = instructions(targets[name], env, then=then) - start
        print(f"  {name}, first use on {path_name}: {first / boto:.2f}× (once per instance, on that path)")


def measure(rounds: int, env: dict[str, str]) -> None:
    targets = handler_paths()
    warm(targets, env)
    print(
        f"{'function':<12} {'import (ms CPU)':>16} {'boto3 (ms CPU)':>15} {'ratio':>7} {'floor':>7}   "
        f"goal ≤ {GOAL}×, rounds={rounds}; floor = boto3 + the Powertools modules used + pydantic where validated, "
        "imported as the handlers import"
    )
    for name, path in targets.items():
        own, base, ratios, floors = [], [], [], []
        for round_ in range(rounds):
            depth = round_ % DEPTHS
            handler, boto = cpu_seconds(path, env, depth=depth), cpu_seconds("boto3", env, depth=depth)
            floor = cpu_seconds("floor", env, FLOORS[name], depth=depth)
            own.append(handler)
            base.append(boto)
            ratios.append(handler / boto)
            floors.append(floor / boto)
        ratio = statistics.median(ratios)
        verdict = "meets" if ratio <= GOAL else "misses"
        print(
            f"{name:<12} {statistics.median(own) * 1000:>16.0f} {statistics.median(base) * 1000:>15.0f} "
            f"{ratio:>6.2f}× {statistics.median(floors):>6.2f}×   {verdict}"
        )
    for name, path_name, then in FIRST_USE:
        pairs = [
            (cpu_seconds(targets[name], env, then=then, depth=r % DEPTHS), cpu_seconds("boto3", env, depth=r % DEPTHS))
            for r in range(rounds)
        ]
        first = statistics.median(mine / boto for mine, boto in pairs)
        own_ms = statistics.median(mine for mine, _ in pairs) * 1000
        print(
            f"  {name}, first use on {path_name}: {own_ms:.0f} ms CPU, {first:.2f}× (once per instance, on that path)"
        )


if __name__ == "__main__":
    main()
