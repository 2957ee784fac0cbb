"""CDK app entry: `python app.py` synthesizes one Interlude stack into cdk.out (offline, no AWS calls).

Context: stackName (default Interlude; one per developer/branch), layerDir (a prebuilt layer from `make layer`;
without it the layer is built during synthesis), logLevel (default INFO). Everything else is a prop of the
Interlude construct: a deployment that needs more builds its own app (examples/customer-app).
"""

from __future__ import annotations

import json
import os

# Node 20 is what this machine has; jsii's end-of-life banner would otherwise precede every synth.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from aws_cdk import App  # noqa: E402

from interlude_cdk import InterludeStack, apply_checks  # noqa: E402
from interlude_cdk.layer import PROJECT_ROOT, choose_layer_dir  # noqa: E402

DEFAULT_STACK_NAME = "Interlude"


def build_app(context: dict | None = None, outdir: str | None = None) -> tuple[App, InterludeStack]:
    # The CDK CLI hands cdk.json's context (the feature flags) to the app itself; `python app.py` and the tests
    # read it here, so every synthesis of this app uses the same flags.
    flags = json.loads((PROJECT_ROOT / "cdk.json").read_text())["context"]
    app = App(context={**flags, **(context or {})}, outdir=outdir, analytics_reporting=False)
    stack = InterludeStack(
        app,
        app.node.try_get_context("stackName") or DEFAULT_STACK_NAME,
        interlude={"layer_dir": choose_layer_dir(app), "log_level": app.node.try_get_context("logLevel") or "INFO"},
    )
    apply_checks(app)
    return app, stack


if __name__ == "__main__":
    # The CDK CLI passes CDK_OUTDIR; a bare `python app.py` would otherwise synthesize into a temp dir.
    build_app(outdir=None if "CDK_OUTDIR" in os.environ else str(PROJECT_ROOT / "cdk.out"))[0].synth()
