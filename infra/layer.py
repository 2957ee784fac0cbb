"""The core Lambda layer: the interlude package plus its runtime dependencies, under python/."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Validations
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# Written by scripts/build_layer.sh: linux/arm64 CPython 3.12 wheels for pyproject's dependencies + interlude.
BUILT_LAYER_DIR = PROJECT_ROOT / "layers" / "core" / "build"
# The package sources alone (layers/core/python/interlude); enough to synthesize, not enough to run.
SOURCE_LAYER_DIR = PROJECT_ROOT / "layers" / "core"
LAYER_DIR_CONTEXT_KEY = "layerDir"


def choose_layer_dir(scope: Construct) -> Path:
    """Context `layerDir` (absolute, or relative to the project root) wins; then the built layer; then the sources."""
    override = scope.node.try_get_context(LAYER_DIR_CONTEXT_KEY)
    if override:
        return (PROJECT_ROOT / override).resolve()
    return BUILT_LAYER_DIR if (BUILT_LAYER_DIR / "python").is_dir() else SOURCE_LAYER_DIR


class CoreLayer(Construct):
    RUNTIME = lambda_.Runtime.PYTHON_3_12
    ARCHITECTURE = lambda_.Architecture.ARM_64
    # Dev leftovers that must never ship (and would make the asset hash depend on local state).
    # Anchored patterns: a bare name would also drop same-named folders inside dependencies.
    EXCLUDE = ("build/**", "**/__pycache__", "**/*.pyc", "python/*.egg-info")

    def __init__(self, scope: Construct, construct_id: str, *, directory: Path) -> None:
        super().__init__(scope, construct_id)
        if not (directory / "python").is_dir():
            # Lambda puts /opt/python on sys.path, so the asset's top level must be python/.
            raise ValueError(f"layer directory {directory} has no python/ folder (see scripts/build_layer.sh)")
        self.directory = directory
        self.layer = lambda_.LayerVersion(
            self,
            "Layer",
            code=lambda_.Code.from_asset(str(directory), exclude=list(self.EXCLUDE)),
            compatible_runtimes=[self.RUNTIME],
            compatible_architectures=[self.ARCHITECTURE],
            description="interlude core package and its runtime dependencies",
        )
        if directory.resolve() == SOURCE_LAYER_DIR.resolve():
            Validations.of(self).add_warning(
                "LayerWithoutDependencies",
                "The core layer holds only the interlude sources; run scripts/build_layer.sh before deploying.",
            )
