"""The wheel a customer installs (`pip install 'interlude[cdk]'`) carries what its CDK app synthesizes from.

An installed interlude_cdk finds the Lambda handlers under <prefix>/share/interlude/functions
(infra/interlude_cdk/functions.py) and builds the layers from its own package data (the lock file, the bytecode script):
a function of wiring.FUNCTIONS missing from pyproject's data-files would stop that app's synthesis.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from interlude import wiring
from interlude.api.page import templating
from interlude_cdk import bytecode, layer

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "layers/core/python/interlude", "infra", "functions")


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory) -> set[str]:
    # Built from a copy, so the build's own directories never land in the checkout; offline: no build isolation.
    source = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        origin = PROJECT_ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "build"))
        else:
            shutil.copy2(origin, source / name)
    out = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out)]
    subprocess.run([*command, str(source)], check=True, capture_output=True, timeout=300)
    (wheel,) = out.glob("interlude-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_the_wheel_carries_every_functions_handler(wheel_files):
    shipped = {name.split(".data/data/", 1)[1] for name in wheel_files if ".data/data/" in name}
    for spec in wiring.FUNCTIONS:
        module = spec.handler.rpartition(".")[0]
        assert f"share/interlude/functions/{spec.name}/{module}.py" in shipped, spec.name


def test_the_wheel_carries_what_the_layers_are_built_from(wheel_files):
    assert f"interlude_cdk/{layer.LOCK_FILE.name}" in wheel_files
    assert f"interlude_cdk/{bytecode.RUNNER.name}" in wheel_files
    # The core package's data: the OpenWOP schemas the API validates with, and its type marker.
    assert "interlude/py.typed" in wheel_files
    assert any(name.startswith("interlude/domain/schemas/") and name.endswith(".json") for name in wheel_files)
    # And the pages' templates and style sheets, every one (the layer copies the installed package)
    for folder in templating.TEMPLATE_DIRS.values():
        for template in (p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            assert "interlude/" + template.relative_to(layer.INTERLUDE_DIR).as_posix() in wheel_files
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in wheel_files)
