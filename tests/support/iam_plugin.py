"""The suite's IAM check (issue 25, item 2), as pytest hooks: record every AWS call while the tests run, then at the
end of the session evaluate them against the synthesized roles; a call that would be denied fails the session, and
the summary lists the grants no call used.

The controller makes the record directory and hands it on in the environment (xdist's workers, each local stack and
its instance processes inherit it; tests/support/aws_calls.py). The templates are the ones the infra tests
synthesize (they write them into the same directory); a session that ran no infra test synthesizes them once in a
subprocess, and keeps them in pytest's cache under a digest of every file synthesis reads.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from interlude.config.local import PROCESS_HOOK_ENV
from tests.support import aws_calls
from tests.support.iam_check import REPO, SIMULATOR_PACKAGE, Deployment, check, read_records, summary_lines
from tests.support.iam_templates import APPS, write

TITLE = "AWS calls against the synthesized roles (issue 25)"
# Set (to anything): the record directory is left in place, to read what was recorded.
KEEP_ENV = "INTERLUDE_AWS_CALLS_KEEP"
TEMPLATES = "templates"
_summary: list[str] = []


def record_directory() -> Path:
    return Path(os.environ[aws_calls.LOG_DIR_ENV])


def keep_template(name: str, stack: Any, template: dict[str, Any]) -> None:
    """What an infra test synthesized, for the check at the end of the session (when one records)."""
    from tests.support.iam_check import deployment_export

    if aws_calls.LOG_DIR_ENV in os.environ:
        write(record_directory() / TEMPLATES, deployment_export(name, stack, template))


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    if not _is_worker(config):
        os.environ[aws_calls.LOG_DIR_ENV] = tempfile.mkdtemp(prefix="interlude-aws-calls-")
        os.environ[PROCESS_HOOK_ENV] = aws_calls.PROCESS_HOOK
    aws_calls.install()


def _cdk_version() -> str:
    """aws-cdk-lib's version where synthesis runs: here, or in the project's venv (a run on the runtime Python)."""
    try:
        return importlib.metadata.version("aws-cdk-lib")
    except importlib.metadata.PackageNotFoundError:
        found = sorted((REPO / ".venv").glob("lib/python*/site-packages/aws_cdk_lib-*.dist-info"))
        return found[-1].name.split("-", 1)[1].removesuffix(".dist-info") if found else "none"


def _sources_digest() -> str:
    """Every input of a synthesis: the apps, the construct, the package it reads wiring from, the CDK's version."""
    digest = hashlib.sha256(_cdk_version().encode())
    paths = [
        REPO / "cdk.json",
        REPO / "package-lock.json",
        *APPS.values(),
        *(p.parent / "cdk.json" for p in APPS.values()),
    ]
    for root in (REPO / "infra" / "interlude_cdk", REPO / "layers" / "core" / "python" / "interlude"):
        paths += sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in paths:
        if path.exists():
            digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _synth_python() -> str:
    """This Python, or the project's venv's when this one has no CDK (a run on the functions' runtime Python)."""
    return sys.executable if importlib.util.find_spec("aws_cdk") else str(REPO / ".venv" / "bin" / "python")


def templates(config: pytest.Config) -> list[Deployment]:
    """The infra tests' syntheses of this session, else the cached ones of these sources, else new ones."""
    here = record_directory() / TEMPLATES
    cache = None
    if getattr(config, "cache", None) is not None:
        cache = Path(config.cache.mkdir("interlude-iam-templates")) / _sources_digest()
    missing = [name for name in APPS if not (here / f"{name}.json").exists()]
    if missing and cache is not None:
        for name in list(missing):
            if (cache / f"{name}.json").exists():
                here.mkdir(parents=True, exist_ok=True)
                shutil.copy(cache / f"{name}.json", here / f"{name}.json")
                missing.remove(name)
    if missing:
        subprocess.run(
            [_synth_python(), "-m", "tests.support.iam_templates", str(here), *missing], cwd=REPO, check=True
        )
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
        for name in APPS:
            shutil.copy(here / f"{name}.json", cache / f"{name}.json")
    return [Deployment(json.loads((here / f"{name}.json").read_text())) for name in APPS]


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _is_worker(session.config) or aws_calls.LOG_DIR_ENV not in os.environ:
        return
    directory = record_directory()
    try:
        calls, reach = read_records(directory)
        if not calls or exitstatus == pytest.ExitCode.INTERRUPTED:
            return
        if not SIMULATOR_PACKAGE.exists():
            _summary.append("not checked: the IAM simulator is not installed (`make node-deps`)")
            return
        try:
            report = check(templates(session.config), calls, reach)
        except Exception as problem:  # a template the check cannot read, a simulator that failed: say so, and fail
            _summary.append(f"FAILED: the check could not run: {problem}")
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        _summary.extend(summary_lines(report))
        if report.denials:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    finally:
        if KEEP_ENV in os.environ:
            _summary.append(f"recorded calls kept in {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _summary:
        terminalreporter.write_sep("=", TITLE)
        for line in _summary:
            terminalreporter.write_line(line)
