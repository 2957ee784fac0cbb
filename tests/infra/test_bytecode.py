"""The layers ship bytecode the Lambda runtime (Python 3.14) uses as it is: no cold start compiles them.

The bytecode is checked by Python 3.14 itself (pyodide, as the build compiles it, but with this file's own check):
the magic number is that Python's, each file is hash-based and unchecked, and its hash is its source's.
Needs node_modules/pyodide (`make node-deps`, run by `make test`); no test reaches the npm registry.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from interlude_cdk import LayerBuildError, bytecode
from interlude_cdk import layer as layer_module
from tests.infra.conftest import stand_in_layer

RUNTIME_TAG = "cpython-" + layer_module.PYTHON_VERSION.replace(".", "")

# Run inside pyodide over the tree mounted at /mnt: every .pyc, judged as the runtime's import system judges it.
CHECK = """
import importlib.util, json, os, sys
checked, wrong = 0, []
for directory, _, names in os.walk("/mnt"):
    for name in names:
        if not name.endswith(".pyc"):
            continue
        pyc = os.path.join(directory, name)
        source = importlib.util.source_from_cache(pyc)
        data = open(pyc, "rb").read(16)
        flags = int.from_bytes(data[4:8], "little")
        expected_hash = importlib.util.source_hash(open(source, "rb").read())
        if data[:4] != importlib.util.MAGIC_NUMBER or flags != 1 or data[8:16] != expected_hash:
            wrong.append(os.path.relpath(pyc, "/mnt"))
        checked += 1
json.dumps({"python": sys.version.split()[0], "checked": checked, "wrong": wrong})
"""


def judged_by_the_runtime_python(directory: Path) -> dict:
    return json.loads(bytecode.run_python(directory, CHECK))


def staged_asset(synth, layer) -> Path:
    """The directory synthesis staged for a layer's asset (what `cdk deploy` zips and uploads)."""
    return synth.outdir / synth.resources[synth.logical_id(layer)]["Metadata"]["aws:asset:path"]


def test_every_module_of_the_package_layer_ships_bytecode_the_runtime_uses(synth):
    # Given the package layer as synthesis bundled it (tests/infra/conftest.py: the app with a stand-in prebuilt layer)
    package = staged_asset(synth, synth.interlude.core_layers.package)
    sources = sorted(package.rglob("*.py"))
    assert len(sources) > 100
    # Then each module has its runtime bytecode beside it, where the runtime looks for it
    missing = [s for s in sources if not (s.parent / "__pycache__" / f"{s.stem}.{RUNTIME_TAG}.pyc").is_file()]
    assert missing == []
    # And nothing compiled for another Python ships (this machine's caches stay out)
    compiled = sorted(package.rglob("*.pyc"))
    assert [p for p in compiled if not p.name.endswith(f".{RUNTIME_TAG}.pyc")] == []
    assert len(compiled) == len(sources)
    # And Python 3.14 takes each file as valid for its source, without looking at a modification time
    verdict = judged_by_the_runtime_python(package)
    assert verdict["python"].startswith(layer_module.PYTHON_VERSION + ".")
    assert verdict == {**verdict, "checked": len(compiled), "wrong": []}


def test_python_314_imports_the_shipped_bytecode_without_looking_at_the_source(tmp_path):
    # Given a module compiled as the layers are, whose source then changes (as a zip without mtimes would look)
    (tmp_path / "shipped.py").write_text("ORIGIN = 'bytecode'\n")
    layer_module.compile_for_runtime(tmp_path)
    (tmp_path / "shipped.py").write_text("ORIGIN = 'source'\n")
    # When Python 3.14 imports it / Then it runs the bytecode (no recompilation on a cold start)
    imported = bytecode.run_python(tmp_path, "import sys; sys.path.insert(0, '/mnt'); import shipped; shipped.ORIGIN")
    assert imported == "bytecode"


def test_a_file_that_does_not_compile_fails_the_build_and_is_named(tmp_path):
    (tmp_path / "good.py").write_text("VALUE = 1\n")
    (tmp_path / "package").mkdir()
    (tmp_path / "package" / "broken.py").write_text("def f(:\n    pass\n")
    with pytest.raises(LayerBuildError, match=r"(?s)1 file\(s\) .* do not compile for Python 3\.14.*package/broken\.py"):
        layer_module.compile_for_runtime(tmp_path)


def test_bytecode_of_another_python_minor_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "module.py").write_text("VALUE = 1\n")
    # When the build asks for another minor version than pyodide's Python (the runtime moved, the pin did not)
    with pytest.raises(LayerBuildError, match=r"pyodide's Python is 3\.14\.\d+, the functions run Python 3\.13"):
        bytecode.compile_tree(tmp_path, "3.13")
    # Then nothing was compiled
    assert not list(tmp_path.rglob("*.pyc"))
    # And the check compares minor versions only (a patch release makes the same bytecode)
    bytecode.require_python("3.14.9", "3.14")
    with pytest.raises(LayerBuildError, match="make"):
        bytecode.require_python("3.15.0", "3.14")


def test_the_build_says_what_to_run_without_pyodide_or_node(tmp_path, monkeypatch):
    monkeypatch.setattr(bytecode, "PROJECT_ROOT", tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LayerBuildError, match=r"node_modules/pyodide is missing: run `make node-deps`"):
        bytecode.compile_tree(tmp_path, layer_module.PYTHON_VERSION)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LayerBuildError, match=r"`node` is not on the PATH"):
        bytecode.compile_tree(tmp_path, layer_module.PYTHON_VERSION)


def test_a_prebuilt_layer_made_before_it_shipped_bytecode_is_refused(offline):
    from app import build_app

    old = stand_in_layer(offline / "layer")
    stamp = {key: value for key, value in layer_module.stamp().items() if key != "bytecode"}
    (old / layer_module.STAMP).write_text(json.dumps(stamp))
    with pytest.raises(LayerBuildError, match=re.escape(f"run `{layer_module.BUILD_COMMAND}`")):
        build_app(context={"layerDir": str(old)}, outdir=str(offline / "out"))


def test_a_prebuilt_dependencies_layer_ships_the_runtime_bytecode_and_no_other(synth):
    # Given conftest's stand-in prebuilt directory: one module, its runtime bytecode and a stray cache of this
    # machine's Python / Then the runtime's bytecode ships and the stray cache does not
    dependencies = staged_asset(synth, synth.interlude.core_layers.dependencies)
    assert sorted(p.name for p in dependencies.rglob("*.pyc")) == [f"stand_in.{RUNTIME_TAG}.pyc"]


def test_bundling_the_package_again_in_one_process_gives_the_same_compiled_tree(tmp_path):
    # The second bundle reuses the first one's compilation (pyodide starts once per process for one package tree)
    first, second = tmp_path / "first", tmp_path / "second"
    for output in (first, second):
        assert layer_module._CopyPackage().try_bundle(str(output))
    assert layer_module.tree_digest(first) == layer_module.tree_digest(second)
    assert len(list(second.rglob(f"*.{RUNTIME_TAG}.pyc"))) == len(list(second.rglob("*.py")))


def test_pyodide_is_pinned_exactly_with_its_integrity_hash_where_the_build_says():
    root = Path(__file__).resolve().parents[2]
    assert json.loads((root / "package.json").read_text())["dependencies"]["pyodide"] == bytecode.PYODIDE_VERSION
    locked = json.loads((root / "package-lock.json").read_text())["packages"]["node_modules/pyodide"]
    assert locked["version"] == bytecode.PYODIDE_VERSION
    assert locked["integrity"].startswith("sha512-")
    # pyodide's major version names its Python (314: 3.14), the runtime's
    assert bytecode.PYODIDE_VERSION.split(".")[0] == layer_module.PYTHON_VERSION.replace(".", "")
