"""The two Lambda layers every function carries: pinned third-party dependencies, and the interlude package.

Dependencies come only from the lock file beside this module (hashes checked by pip), as wheels for the
functions' platform. They are either built during synthesis (local bundling: pip on this machine, no Docker)
or taken from a directory `make layer` prebuilt, which must carry the stamp of the current lock file.
Anything else (a missing build, a stale one, pip failing) fails synthesis with what to run: a deploy can never
ship functions without their dependencies.

Both layers ship the runtime's bytecode (bytecode.py: compiled by Python 3.14 itself, hash-based and unchecked), so
no cold start compiles them; the stamp names it, so a build made before (or without) it is refused. The package
layer also carries the pages' templates compiled to Python modules (interlude.api.page.templating.compile_all),
bytecode too, so no first page parses a template.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

import interlude
from interlude import sdk_clients
from interlude.adapters import sdk_data
from interlude.api.page import templating
from interlude_cdk import bytecode
from interlude_cdk.bytecode import LayerBuildError

PACKAGE_DIR = Path(__file__).resolve().parent
LOCK_FILE = PACKAGE_DIR / "layer-requirements.lock"
INTERLUDE_DIR = Path(interlude.__file__).resolve().parent
# A repository checkout (the project itself: infra/interlude_cdk/ is two levels down); absent when interlude_cdk
# was pip-installed.
PROJECT_ROOT = PACKAGE_DIR.parents[1]
DEFAULT_BUILD_DIR = PROJECT_ROOT / "layers" / "core" / "build"
LAYER_DIR_CONTEXT_KEY = "layerDir"

# The newest Lambda Python runtime every locked wheel exists for (checked by `make layer`: pip refuses otherwise).
RUNTIME = lambda_.Runtime.PYTHON_3_14
ARCHITECTURE = lambda_.Architecture.ARM_64
PYTHON_VERSION = "3.14"
PLATFORM = "manylinux2014_aarch64"
STAMP = "interlude-layer.json"
BUILD_COMMAND = "make layer"
# Never copied into the interlude layer: this machine's interpreter caches (the layer's bytecode is compiled for
# the runtime after the copy), and the local stack (moto lives only there).
PACKAGE_EXCLUDE = ("__pycache__", "*.pyc", "local")
BYTECODE = f"{bytecode.cache_tag(PYTHON_VERSION)} {bytecode.INVALIDATION_MODE}"
# What of a prebuilt directory may ship: its sources and the runtime's bytecode, no other interpreter's caches.
PREBUILT_EXCLUDE = ("**/*.pyc", f"!**/__pycache__/*.{bytecode.cache_tag(PYTHON_VERSION)}.pyc")


def lock_sha256() -> str:
    return hashlib.sha256(LOCK_FILE.read_bytes()).hexdigest()


def stamp() -> dict[str, str]:
    return {"lock_sha256": lock_sha256(), "python": PYTHON_VERSION, "platform": PLATFORM, "bytecode": BYTECODE}


def pip_command(target: Path, python: str = sys.executable) -> list[str]:
    # --no-deps: the lock already lists every transitive dependency, each with its hashes.
    # --no-compile: .pyc files from this machine's interpreter would be useless to the runtime's (compile_for_runtime
    # writes the runtime's).
    return [
        python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile", "--no-deps",
        "--platform", PLATFORM, "--only-binary=:all:", "--python-version", PYTHON_VERSION, "--implementation", "cp",
        "--require-hashes", "-r", str(LOCK_FILE), "--target", str(target),
    ]  # fmt: skip


def compile_for_runtime(directory: Path) -> bytecode.Compiled:
    """Compile every .py under directory for the runtime's Python; refuse if any other interpreter's cache is there."""
    compiled = bytecode.compile_tree(directory, PYTHON_VERSION)
    foreign = bytecode.foreign_bytecode(directory, compiled.cache_tag)
    if foreign:
        raise LayerBuildError(f"{len(foreign)} compiled file(s) for another Python under {directory}, e.g. {foreign[0]}")
    return compiled


def build_dependencies(output_dir: Path) -> bytecode.Compiled:
    """Install the locked wheels under output_dir/python, write the SDK data beside them, compile them for the runtime,
    stamp them with the lock's hash."""
    target = output_dir / "python"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    result = subprocess.run(pip_command(target), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise LayerBuildError(
            f"could not install the layer's locked dependencies ({LOCK_FILE.name}):\n{result.stderr.strip()}\n"
            f"Fix the cause (pip needs the package index), or build the layer where it can with `{BUILD_COMMAND}` "
            "and synthesize with -c layerDir=layers/core/build."
        )
    for leftover in (target / "bin",):
        shutil.rmtree(leftover, ignore_errors=True)
    # The SDK data the functions read, beside the botocore it was written from (sdk_clients.use_packaged_models).
    sdk_data.write(target / sdk_clients.PACKAGED_MODELS, target / "botocore" / "data")
    compiled = compile_for_runtime(target)
    (output_dir / STAMP).write_text(json.dumps(stamp(), indent=2) + "\n")
    return compiled


def check_prebuilt(directory: Path) -> None:
    """Refuse a dependencies directory that is not `make layer`'s output for the current lock file."""
    stamp_file = directory / STAMP
    if not (directory / "python").is_dir() or not stamp_file.is_file():
        raise LayerBuildError(
            f"{directory} holds no built layer dependencies (no python/ or no {STAMP}): the functions would ship "
            f"without pydantic or Powertools. Run `{BUILD_COMMAND}` and pass -c layerDir=layers/core/build, or "
            "omit layerDir to build the layer during synthesis."
        )
    found = json.loads(stamp_file.read_text())
    if found != stamp():
        raise LayerBuildError(
            f"{directory} was built for {found}, not for the current lock file and bytecode {stamp()}: "
            f"run `{BUILD_COMMAND}`."
        )


def choose_layer_dir(scope: Construct) -> Path | None:
    """Context `layerDir` (absolute, or relative to the project root): a prebuilt directory; None: build at synth."""
    override = scope.node.try_get_context(LAYER_DIR_CONTEXT_KEY)
    return (PROJECT_ROOT / override).resolve() if override else None


@jsii.implements(ILocalBundling)
class _PipOnThisMachine:
    def try_bundle(self, output_dir: str, *_args, **_kwargs) -> bool:
        build_dependencies(Path(output_dir))
        return True


def tree_digest(directory: Path) -> str:
    """sha256 over every file's relative path and bytes."""
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        name, data = path.relative_to(directory).as_posix().encode(), path.read_bytes()
        digest.update(b"%d:%s%d:" % (len(name), name, len(data)) + data)
    return digest.hexdigest()


# Synthesizing more than once in a process (the test suite; an app with two stacks) compiles one package tree once
# (pyodide takes seconds to start): its compiled copy is kept, by its sources' digest, in this process's own
# temporary directory.
_COMPILED_PACKAGES: dict[str, Path] = {}


def stage_package(target: Path) -> None:
    """The interlude package under target as its layer ships it, before the runtime's bytecode is compiled."""
    shutil.copytree(INTERLUDE_DIR, target / "interlude", ignore=shutil.ignore_patterns(*PACKAGE_EXCLUDE))
    templating.compile_all(target / "interlude" / templating.COMPILED_DIR.relative_to(INTERLUDE_DIR))


@jsii.implements(ILocalBundling)
class _CopyPackage:
    def try_bundle(self, output_dir: str, *_args, **_kwargs) -> bool:
        target = Path(output_dir) / "python"
        stage_package(target)
        key = tree_digest(target)
        kept = _COMPILED_PACKAGES.get(key)
        if kept is not None:
            shutil.rmtree(target)
            shutil.copytree(kept, target)
            return True
        compile_for_runtime(target)
        kept = Path(tempfile.mkdtemp(prefix="interlude-package-layer-"))
        atexit.register(shutil.rmtree, kept, ignore_errors=True)
        shutil.copytree(target, kept, dirs_exist_ok=True)
        _COMPILED_PACKAGES[key] = kept
        return True


# Local bundling always succeeds or raises; the image is never pulled.
_NO_DOCKER = DockerImage.from_registry("interlude-layers-are-built-without-docker")


class CoreLayers(Construct):
    RUNTIME = RUNTIME
    ARCHITECTURE = ARCHITECTURE

    def __init__(self, scope: Construct, construct_id: str, *, dependencies_dir: Path | None) -> None:
        super().__init__(scope, construct_id)
        if dependencies_dir is None:
            dependencies_code = lambda_.Code.from_asset(
                str(PACKAGE_DIR),
                # Keyed by the lock and the target: an unchanged lock reuses the bundle already in cdk.out.
                asset_hash_type=AssetHashType.CUSTOM,
                asset_hash=hashlib.sha256(json.dumps(stamp(), sort_keys=True).encode()).hexdigest(),
                bundling=BundlingOptions(image=_NO_DOCKER, local=_PipOnThisMachine()),
            )
        else:
            check_prebuilt(dependencies_dir)
            dependencies_code = lambda_.Code.from_asset(str(dependencies_dir), exclude=list(PREBUILT_EXCLUDE))
        self.dependencies = lambda_.LayerVersion(
            self,
            "Dependencies",
            code=dependencies_code,
            compatible_runtimes=[self.RUNTIME],
            compatible_architectures=[self.ARCHITECTURE],
            description=f"interlude runtime dependencies ({LOCK_FILE.name} sha256 {lock_sha256()[:12]})",
        )
        self.package = lambda_.LayerVersion(
            self,
            "Package",
            code=lambda_.Code.from_asset(
                str(INTERLUDE_DIR),
                exclude=[f"**/{pattern}" for pattern in PACKAGE_EXCLUDE],
                # The asset's hash covers the sources and these options: naming the bytecode and the Jinja2 that
                # compiles the templates keeps a bundle staged before (or for another Python) from being reused.
                bundling=BundlingOptions(
                    image=_NO_DOCKER,
                    local=_CopyPackage(),
                    environment={"INTERLUDE_BYTECODE": BYTECODE, "INTERLUDE_TEMPLATES": templating.jinja2_version()},
                ),
            ),
            compatible_runtimes=[self.RUNTIME],
            compatible_architectures=[self.ARCHITECTURE],
            description="interlude core package",
        )

    @property
    def layers(self) -> list[lambda_.ILayerVersion]:
        return [self.dependencies, self.package]
