"""`python -m tests.support.iam_templates DIR [NAME ...]`: synthesize the apps the IAM check evaluates against
(offline, with the infra tests' stand-in layer) and write each as DIR/NAME.json (tests/support/iam_check.py).

The infra tests write the same files from the syntheses they make anyway; this runs only for a session without them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.support.iam_check import REPO, deployment_export

OFFLINE_AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
APPS = {"app": REPO / "app.py", "customer-app": REPO / "examples" / "customer-app" / "app.py"}


def write(directory: Path, exported: dict[str, Any]) -> None:
    """Written whole, then renamed into place: a reader never sees half of it."""
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f"{exported['name']}.json.partial-{os.getpid()}"
    partial.write_text(json.dumps(exported))
    partial.replace(directory / f"{exported['name']}.json")


def synthesize(name: str, layer_dir: Path, outdir: Path) -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location(f"iam_check_{name.replace('-', '_')}", APPS[name])
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    app, stack = module.build_app(context={"layerDir": str(layer_dir)}, outdir=str(outdir))
    return deployment_export(name, stack, app.synth().get_stack_by_name(stack.stack_name).template)


def main(directory: Path, names: list[str]) -> None:
    from tests.infra.conftest import stand_in_layer

    os.environ.update(OFFLINE_AWS)
    os.environ.pop("CDK_OUTDIR", None)
    with tempfile.TemporaryDirectory() as scratch:
        layer = stand_in_layer(Path(scratch) / "layer")
        for name in names or list(APPS):
            write(directory, synthesize(name, layer, Path(scratch) / f"{name}.out"))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
