"""Every function's handler imports on the runtime's Python from its layers alone (`make test` runs it).

The layers are built as the deployment builds them: the locked dependencies (interlude_cdk/layer-requirements.lock,
hashes required) and the interlude package as layer.stage_package lays it out (without the local stack). The
wheels are this machine's platform's (the lock hashes every platform's): the deployed arm64 ones cannot load here.
Each handler (wiring.FUNCTIONS) is then imported by the runtime's Python with -I -S, its sys.path the function's code,
the two layers and the standard library, nothing else, and without the system's time zone database: a module that
only the development environment has, or a zone only the system knows, fails the check and is named.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import runtime_python

from interlude import sdk_clients
from interlude.adapters import sdk_data
from interlude.wiring import FUNCTIONS, Function
from interlude_cdk.bytecode import INVALIDATION_MODE
from interlude_cdk.layer import LOCK_FILE, stage_package

PROJECT = runtime_python.PROJECT
FUNCTIONS_DIR = PROJECT / "functions"
BUILD = runtime_python.CACHE / "layers"

# Run as `python -I -S -B -c IMPORT_HANDLER paths handler`: what Lambda does on a cold start, then one zone lookup.
IMPORT_HANDLER = """
import importlib, json, sys, time, zoneinfo
paths, handler = json.loads(sys.argv[1]), sys.argv[2]
sys.path[:0] = paths
zoneinfo.reset_tzpath([])
started = time.perf_counter()
module, _, name = handler.rpartition(".")
entry = getattr(importlib.import_module(module), name)
assert callable(entry), f"{handler} is not callable"
zoneinfo.ZoneInfo("Europe/Paris")
print(json.dumps({"seconds": time.perf_counter() - started, "modules": len(sys.modules)}))
"""
# What Lambda's environment holds before the function's own variables.
LAMBDA_ENVIRONMENT = {"LANG": "en_US.UTF-8", "TZ": ":UTC", "PATH": "/usr/local/bin:/usr/bin:/bin", "AWS_REGION": "us-east-1"}


def required_environment() -> dict[str, str]:
    """A value for every variable a cold start cannot do without (each handler's import runs interlude.config.check).
    What the construct really gives each function is tests/infra/test_function_environment.py's to check; this check
    is about modules, so a name stands in for each value."""
    from interlude.config import actions, delivery, notify, queues, runtime, scheduler, secrets  # noqa: F401 - each group
    from interlude.config.reading import EnvironmentSettings, required

    return {name: "set-at-deploy" for group in EnvironmentSettings.__subclasses__() for name in required(group)}


def build_layers(python: Path) -> list[Path]:
    """The dependencies and package layers' python/ directories, built for python's platform."""
    key = hashlib.sha256(LOCK_FILE.read_bytes() + str(python.resolve()).encode() + b"sdk-data").hexdigest()[:16]
    dependencies = BUILD / f"dependencies-{key}" / "python"
    if not dependencies.is_dir():
        shutil.rmtree(BUILD, ignore_errors=True)
        partial = dependencies.with_name("partial")
        uv = Path(sys.executable).parent / "uv"
        subprocess.run(
            [str(uv), "pip", "install", "--quiet", "--python", str(python), "--no-deps", "--require-hashes",
             "--only-binary", ":all:", "-r", str(LOCK_FILE), "--target", str(partial)],
            check=True, env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
        )  # fmt: skip
        sdk_data.write(partial / sdk_clients.PACKAGED_MODELS, partial / "botocore" / "data")  # as build_dependencies
        compile_as_shipped(python, partial)
        partial.rename(dependencies)
    package = BUILD / "package" / "python"
    shutil.rmtree(package.parent, ignore_errors=True)
    stage_package(package)
    compile_as_shipped(python, package)
    return [dependencies, package]


def compile_as_shipped(python: Path, directory: Path) -> None:
    """Bytecode as the deployed layers carry it (interlude_cdk/bytecode.py), here by the runtime's Python itself."""
    subprocess.run(
        [str(python), "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", INVALIDATION_MODE, str(directory)],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip


def import_handler(python: Path, function: Function, layers: list[Path], functions_dir: Path = FUNCTIONS_DIR) -> dict:
    """{"seconds", "modules"} of the handler's import, or {"error": the last line of its traceback}."""
    paths = [str(functions_dir / function.name), *map(str, layers)]
    done = subprocess.run(
        [str(python), "-I", "-S", "-B", "-c", IMPORT_HANDLER, json.dumps(paths), function.handler],
        env={**LAMBDA_ENVIRONMENT, **required_environment(), "AWS_LAMBDA_FUNCTION_NAME": function.name},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]}
    return json.loads(done.stdout)


def main() -> int:
    python = runtime_python.interpreter(runtime_python.runtime_version())
    if not python.is_file():
        print(f"error: no runtime Python at {python}: run `make runtime-python`", file=sys.stderr)
        return 1
    started = time.monotonic()
    layers = build_layers(python)
    version = subprocess.run([str(python), "-c", "import platform; print(platform.python_version())"],
                             check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    print(f"Importing each handler on Python {version} (-I -S) from its layers alone, no system zone database:")
    failed = 0
    for function in FUNCTIONS:
        outcome = import_handler(python, function, layers)
        if "error" in outcome:
            failed += 1
            print(f"  {function.name:<10} {function.handler}: FAILED: {outcome['error']}")
        else:
            print(
                f"  {function.name:<10} {function.handler}: {outcome['modules']} modules in {outcome['seconds']:.2f} s"
            )
    print(f"layer imports: {len(FUNCTIONS) - failed} passed, {failed} failed ({time.monotonic() - started:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
