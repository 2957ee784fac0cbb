"""The layers' bytecode, compiled at build time by the Lambda runtime's own Python version.

`/opt` (where layers are unpacked) is read-only on Lambda: without bytecode in the layer, every cold start of every
function compiles boto3, botocore, pydantic, Powertools and Interlude from source and cannot keep the result. The
bytecode must come from the runtime's Python minor version (3.14), which this machine need not have: pyodide
(CPython compiled to WebAssembly, pinned in the project's package.json, run by Node) compiles it. Bytecode does not
depend on the platform, only on the minor version, so the arm64 runtime uses it.

Every `.pyc` is hash-based and unchecked (PEP 552): CDK's asset zips keep no modification times, so a timestamp
`.pyc` would be judged stale and recompiled on every cold start; a layer never changes once published, so the
runtime need not compare the source either. Anything missing (Node, pyodide) or wrong (pyodide's Python is not the
runtime's, a file does not compile) raises LayerBuildError saying what to run: a layer never ships half compiled.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


class LayerBuildError(RuntimeError):
    """A layer cannot be built as it must ship (layer.py raises it too, and re-exports it)."""

RUNNER = Path(__file__).resolve().parent / "pyodide_run.mjs"
# The checkout root (infra/interlude_cdk/ is two levels down); an installed package has no node_modules there.
PROJECT_ROOT = Path(__file__).resolve().parents[2]
PYODIDE_VERSION = "314.0.8"
# `make node-deps` runs it (and make layer, synth, deploy and test run that).
INSTALL_COMMAND = "make node-deps"
INVALIDATION_MODE = "unchecked-hash"
# Files a locked package ships as .py but that are not Python for the runtime (templates, fixtures for another
# version), as paths relative to the compiled tree: each is named here with why, and its failure is then reported,
# not fatal. Any other failure fails the build. None so far (`make layer` compiles every file of the lock).
NOT_PYTHON: dict[str, str] = {}

# Runs inside pyodide: refuses another minor version before writing anything, then compiles every .py file under
# /mnt in place (`__pycache__/<name>.cpython-3XX.pyc`, as the runtime looks for it), collecting each failure.
_COMPILE = """
import json, os, py_compile, sys, warnings
expected = {expected!r}
found = f"{{sys.version_info.major}}.{{sys.version_info.minor}}"
result = {{"python": sys.version.split()[0], "cache_tag": sys.implementation.cache_tag, "compiled": 0, "failed": []}}
# Warnings about the source (invalid escapes) are the packages' business, and the runtime will not compile them.
warnings.simplefilter("ignore")
if found == expected:
    for directory, subdirectories, names in os.walk("/mnt"):
        subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
        for name in sorted(n for n in names if n.endswith(".py")):
            path = os.path.join(directory, name)
            try:
                py_compile.compile(path, doraise=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
                result["compiled"] += 1
            except (py_compile.PyCompileError, UnicodeDecodeError) as error:
                message = str(getattr(error, "msg", error)).strip().splitlines() or [type(error).__name__]
                result["failed"].append([os.path.relpath(path, "/mnt"), message[-1]])
json.dumps(result)
"""


@dataclass(frozen=True)
class Compiled:
    python: str
    cache_tag: str
    files: int
    # Files of NOT_PYTHON that did not compile (relative path, the compiler's message).
    not_python: tuple[tuple[str, str], ...] = ()


def find_pyodide() -> Path:
    """The pinned pyodide package: the project's node_modules, or the working directory's (an installed interlude_cdk)."""
    for root in (PROJECT_ROOT, Path.cwd()):
        candidate = root / "node_modules" / "pyodide"
        if (candidate / "pyodide.mjs").is_file():
            return candidate
    raise LayerBuildError(
        "the layers' bytecode is compiled by pyodide (Python 3.14 as WebAssembly), and node_modules/pyodide is "
        f"missing: run `{INSTALL_COMMAND}` in the project root, or `npm install pyodide@{PYODIDE_VERSION}` where "
        "you synthesize."
    )


def run_python(directory: Path, code: str) -> str:
    """Run `code` in pyodide with `directory` mounted at /mnt; its last expression's value, as a string."""
    node = shutil.which("node")
    if node is None:
        raise LayerBuildError(
            "the layers' bytecode is compiled by pyodide under Node.js, and `node` is not on the PATH: install "
            f"Node.js 20 or newer (make system-deps), then run `{INSTALL_COMMAND}`."
        )
    command = [node, str(RUNNER), str(find_pyodide()), str(directory.resolve()), code]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise LayerBuildError(f"pyodide failed ({' '.join(command[:3])} …):\n{result.stderr.strip()[-2000:]}")
    return result.stdout.strip().splitlines()[-1]


def require_python(found: str, expected: str) -> None:
    """Refuse bytecode from a Python whose minor version is not the runtime's (the runtime would ignore it)."""
    if ".".join(found.split(".")[:2]) != expected:
        raise LayerBuildError(
            f"pyodide's Python is {found}, the functions run Python {expected}: its bytecode would be ignored by the "
            f"runtime. Pin the pyodide release of Python {expected} in package.json (and PYODIDE_VERSION in "
            f"infra/interlude_cdk/bytecode.py), then run `{INSTALL_COMMAND}`; or move layer.PYTHON_VERSION and the "
            "runtime together with it."
        )


def compile_tree(directory: Path, python_version: str) -> Compiled:
    """Compile every .py file under directory in place for Python `python_version`, hash-based and unchecked."""
    result = json.loads(run_python(directory, _COMPILE.format(expected=python_version)))
    require_python(result["python"], python_version)
    failed = dict(result["failed"])
    fatal = sorted(set(failed) - set(NOT_PYTHON))
    if fatal:
        listed = "\n".join(f"  {directory / path}: {failed[path]}" for path in fatal)
        raise LayerBuildError(
            f"{len(fatal)} file(s) under {directory} do not compile for Python {python_version}:\n{listed}\n"
            "Fix the source (interlude's own), or, for a locked package's file that is not meant to be imported, "
            "name it in infra/interlude_cdk/bytecode.py NOT_PYTHON with why."
        )
    return Compiled(
        python=result["python"],
        cache_tag=result["cache_tag"],
        files=result["compiled"],
        not_python=tuple(sorted(failed.items())),
    )


def foreign_bytecode(directory: Path, cache_tag: str) -> list[Path]:
    """Compiled files under directory that are not for `cache_tag` (another interpreter's caches)."""
    return sorted(p for p in directory.rglob("*.pyc") if not p.name.endswith(f".{cache_tag}.pyc"))


def cache_tag(python_version: str) -> str:
    return "cpython-" + python_version.replace(".", "")
