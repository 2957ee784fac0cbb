"""Issue 16 item 6: the first install says what it is doing and names each package it installs (not minutes of
silence), and the Quick start names what `make test` needs from outside PyPI."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_first_install_announces_itself_and_names_each_package_it_installs():
    # What `make dev` runs when .venv is missing or older than pyproject.toml (`-n`: print, do not run).
    plan = subprocess.run(["make", "-n", "-W", "pyproject.toml", "venv"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    lines = plan.splitlines()
    install = next(i for i, line in enumerate(lines) if "-e '.[dev]'" in line)
    assert any(line.startswith("echo ") and "first time takes a few minutes" in line for line in lines[:install])
    # uv, not quiet and unfiltered: it prints each large download as it comes and names every package it installed
    # (" + name==version"), where pip's output had to be filtered to a line per package.
    assert "uv pip install" in lines[install]
    assert "--quiet" not in lines[install]
    assert "|" not in lines[install]


def test_the_quick_start_names_what_make_test_needs_and_what_happens_without_it():
    quick = (REPO / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "**Node.js**" in quick
    assert "missing system packages: nodejs" in quick
    assert "**Chromium**" in quick
    assert "skipped" in quick
    # What the README says is what the script does.
    script = (REPO / "scripts" / "ensure_system_deps.sh").read_text()
    assert "need+=(nodejs)" in script
    assert "missing system packages" in script
