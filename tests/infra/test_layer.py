"""The dependencies layer cannot ship broken: it comes from a hashed lock file, or synthesis stops and says why."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from app import build_app
from interlude_cdk import LayerBuildError
from interlude_cdk import layer as layer_module
from tests.infra.conftest import stand_in_layer

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEV_ONLY = ("moto", "pytest", "ruff", "aws-cdk-lib", "cdk-nag", "cfn-lint", "playwright", "openwop-client")


def requirement_names(lines) -> set[str]:
    return {re.split(r"[\[<>=~! ;]", line.strip(), maxsplit=1)[0].lower().replace("_", "-") for line in lines}


def test_the_lock_pins_every_runtime_dependency_with_hashes_and_nothing_of_development():
    text = layer_module.LOCK_FILE.read_text()
    entries = re.findall(r"^([A-Za-z0-9_.\-]+)==(\S+) \\\n((?:    --hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)", text, re.M)
    pinned = {name.lower() for name, _, _ in entries}
    # Every requirement line of the lock is an exact pin followed by its hashes
    assert len(entries) == len([line for line in text.splitlines() if line and not line.startswith((" ", "#"))])
    declared = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert requirement_names(declared) <= pinned
    assert not pinned & set(DEV_ONLY)


def test_synthesis_fails_with_what_to_run_when_the_layer_dir_holds_no_dependencies(offline):
    # Given the bare package sources as the "layer" (what a deploy without `make layer` used to ship)
    with pytest.raises(LayerBuildError, match=re.escape(layer_module.BUILD_COMMAND)) as failure:
        build_app(context={"layerDir": "layers/core/python"}, outdir=str(offline / "out"))
    # Then synthesis stops and says that the functions would ship without their dependencies
    assert "without pydantic" in str(failure.value)


def test_synthesis_fails_when_the_prebuilt_layer_is_of_another_lock(offline):
    stale = stand_in_layer(offline / "layer")
    (stale / layer_module.STAMP).write_text(json.dumps({**layer_module.stamp(), "lock_sha256": "0" * 64}))
    with pytest.raises(LayerBuildError, match=r"not for the current lock file .*make layer"):
        build_app(context={"layerDir": str(stale)}, outdir=str(offline / "out"))


def test_building_the_layer_during_synthesis_fails_loudly_when_pip_cannot_get_the_wheels(offline, monkeypatch):
    # Given no layerDir (the layer is bundled during synthesis) and a pip that may reach no package index
    empty = offline / "no-wheels"
    empty.mkdir()
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(empty))
    # When the app synthesizes / Then it fails, naming the lock file and what to run instead
    with pytest.raises(Exception, match=r"(?s)could not install the layer's locked dependencies.*make layer"):
        build_app(outdir=str(offline / "out"))[0].synth()
