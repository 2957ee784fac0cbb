"""The import contracts of pyproject.toml ([tool.importlinter]) hold on the real tree and fail the build when a
module imports upward: checked on a copy of the package with one offending module added."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "layers" / "core" / "python" / "interlude"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(package_root: Path) -> subprocess.CompletedProcess[str]:
    # Wide enough that no contract name or import chain is wrapped.
    env = {**os.environ, "PYTHONPATH": str(package_root), "COLUMNS": "400"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(REPO / "pyproject.toml"), "--no-cache"],
        cwd=package_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_contracts_hold_on_the_real_tree():
    result = lint_imports(PACKAGE.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("offender", "source", "contract", "chain"),
    [
        (
            "engine/reaches_up.py",
            "from interlude.api import http\n",
            "Layers import one way BROKEN",
            "interlude.engine.reaches_up -> interlude.api.http",
        ),
        (
            "rules/talks_to_aws.py",
            "import boto3\n",
            "are pure: no AWS SDK",
            "interlude.rules.talks_to_aws -> boto3",
        ),
        (
            "faces/modulex/picks_a_status.py",
            "from interlude.api.errors import status_of\n",
            "HTTP statuses are chosen only at the API edge",
            "interlude.faces.modulex.picks_a_status -> interlude.api.errors",
        ),
        (
            "app/picks_a_status.py",
            "from http import HTTPStatus\n",
            "HTTP statuses are chosen only at the API edge",
            "interlude.app.picks_a_status -> http",
        ),
        (
            "app/uses_the_inbox.py",
            "from interlude.app import inbox\n",
            "No cycles between sibling packages or modules",
            "- .uses_the_inbox -> .inbox",
        ),
        (
            "worker/reads_the_table.py",
            "from interlude.store import facade\n",
            "The task worker is a client",
            "interlude.worker.reads_the_table -> interlude.store.facade",
        ),
    ],
    ids=[
        "engine-imports-the-http-edge",
        "rules-import-boto3",
        "a-face-imports-the-status-mapping",
        "a-service-imports-http-statuses",
        "no-new-module-is-allowed-to-close-a-cycle",
        "the-worker-imports-the-server",
    ],
)
def test_an_offending_import_breaks_its_contract(tmp_path, offender, source, contract, chain):
    copy = tmp_path / "python"
    shutil.copytree(PACKAGE, copy / "interlude", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "interlude" / offender).write_text(source)
    if offender.startswith("app/"):
        # app.inbox importing the new module while it imports app.inbox: a cycle between two siblings.
        inbox = copy / "interlude" / "app" / "inbox.py"
        inbox.write_text(inbox.read_text() + "\nfrom interlude.app import uses_the_inbox  # noqa: E402,F401\n")
    result = lint_imports(copy)
    assert result.returncode != 0, result.stdout
    broken = result.stdout.split("Broken contracts", 1)[-1]
    assert contract.split(" BROKEN")[0] in broken
    if contract.endswith("BROKEN"):
        assert contract in result.stdout
    assert chain in result.stdout
