"""`make test`'s runtime-Python steps: the interpreter's version and archive, and the check of each handler's import.

scripts/runtime_python.py fetches the interpreter and scripts/check_layer_imports.py imports every handler on it
from its layers alone; here each one's decisions are checked on this machine's Python, with no network.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import pytest
import tzdata

from interlude.wiring import Function
from interlude_cdk import layer as layer_module

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
PROBE = Function(name="probe", handler="handler.lambda_handler")


@pytest.fixture
def scripts(monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))
    return importlib.import_module("runtime_python"), importlib.import_module("check_layer_imports")


def test_the_runtime_python_is_the_version_the_functions_are_deployed_on(scripts):
    runtime_python, _ = scripts
    assert runtime_python.runtime_version() == layer_module.PYTHON_VERSION
    assert layer_module.RUNTIME.name == f"python{layer_module.PYTHON_VERSION}"


def test_the_archive_is_the_mirror_of_this_machines_own_release_in_either_source_format(scripts, tmp_path):
    runtime_python, _ = scripts
    (tmp_path / "os-release").write_text('NAME="Debian GNU/Linux"\nVERSION_CODENAME=bookworm\n')
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "sources.list.d" / "other.sources").write_text(
        "Types: deb\nURIs: https://packages.example.org/apt\nSuites: nodistro\nComponents: main\n\n"
        "Types: deb deb-src\n# a comment\nURIs: https://mirror.example.org/debian\nSuites: bookworm bookworm-updates\n"
    )
    assert runtime_python.debian_mirror(etc, tmp_path / "os-release") == "https://mirror.example.org/debian"

    (etc / "sources.list.d" / "other.sources").unlink()
    (etc / "sources.list").write_text("# deb http://old.example.org/debian bookworm main\n"
                                      "deb [arch=amd64 signed-by=/k.gpg] http://one.example.org/debian bookworm main\n")  # fmt: skip
    assert runtime_python.debian_mirror(etc, tmp_path / "os-release") == "http://one.example.org/debian"


def handler_in(tmp_path: Path, source: str) -> Path:
    code = tmp_path / "functions" / PROBE.name
    code.mkdir(parents=True)
    (code / "handler.py").write_text(source)
    return tmp_path / "functions"


def test_a_handler_importing_what_only_the_development_environment_has_fails_and_is_named(scripts, tmp_path):
    _, check = scripts
    # Given a handler that imports pytest (installed here, in no layer) and a layer with the zone database
    functions = handler_in(tmp_path, "import pytest\nlambda_handler = print\n")
    layer = tmp_path / "layer"
    shutil.copytree(Path(tzdata.__file__).parent, layer / "tzdata")
    # When it is imported with only its layers on the path / Then the missing module is named
    outcome = check.import_handler(Path(sys.executable), PROBE, [layer], functions)
    assert outcome == {"error": "ModuleNotFoundError: No module named 'pytest'"}
    # And once a layer carries it, the import passes
    (layer / "pytest.py").write_text("")
    assert set(check.import_handler(Path(sys.executable), PROBE, [layer], functions)) == {"seconds", "modules"}


def test_a_layer_without_the_zone_database_fails_whatever_database_the_system_has(scripts, tmp_path):
    _, check = scripts
    functions = handler_in(tmp_path, "lambda_handler = print\n")
    layer = tmp_path / "layer"
    layer.mkdir()

    outcome = check.import_handler(Path(sys.executable), PROBE, [layer], functions)

    assert outcome == {"error": "zoneinfo._common.ZoneInfoNotFoundError: 'No time zone found with key Europe/Paris'"}
