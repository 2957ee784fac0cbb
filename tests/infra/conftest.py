"""One synthesis of the CDK app per test process, shared by every infra test module.

Synthesis uses a stand-in for the dependencies layer (stamped like `make layer`'s output, holding no wheels):
the tests check the template, and must neither download wheels nor depend on a build having run.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType

# jsii runs on the project's Node.js 22 (make node-deps) when the suite is started outside make too.
_PROJECT_NODE = Path(__file__).resolve().parents[2] / "node_modules" / ".bin"
if (_PROJECT_NODE / "node").exists() and not os.environ.get("PATH", "").startswith(str(_PROJECT_NODE)):
    os.environ["PATH"] = f"{_PROJECT_NODE}{os.pathsep}{os.environ.get('PATH', '')}"

import pytest  # noqa: E402
from aws_cdk import App  # noqa: E402
from aws_cdk.assertions import Template  # noqa: E402

from app import build_app  # noqa: E402
from interlude_cdk import layer as layer_module  # noqa: E402
from interlude_cdk.stack import InterludeStack  # noqa: E402
from tests.support.iam_plugin import keep_template  # noqa: E402

# Synthesis makes no AWS calls; fake credentials make sure nothing could reach a real account.
OFFLINE_AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
CUSTOMER_APP_DIR = Path(__file__).resolve().parents[2] / "examples" / "customer-app"


class Synth:
    def __init__(self, app: App, stack: InterludeStack, outdir: Path) -> None:
        self.app = app
        self.stack = stack
        self.interlude = stack.interlude
        self.outdir = outdir
        self.artifact = app.synth().get_stack_by_name(stack.stack_name)
        self.template_json = self.artifact.template
        self.template = Template.from_json(self.template_json)
        self.resources = self.template_json["Resources"]

    def logical_id(self, construct) -> str:
        return self.stack.get_logical_id(construct.node.default_child)

    def of_type(self, resource_type: str) -> dict[str, dict]:
        return {key: res for key, res in self.resources.items() if res["Type"] == resource_type}

    def table_id(self) -> str:
        return self.logical_id(self.interlude.data.table)

    def entries_table_id(self) -> str:
        return self.logical_id(self.interlude.data.entries_table)

    def table(self, logical_id: str) -> dict:
        return self.resources[logical_id]

    def function_id(self, name: str) -> str:
        return self.logical_id(self.interlude.functions.by_name[name])

    def role_id(self, name: str) -> str:
        """The logical id of function `name`'s execution role."""
        return self.resources[self.function_id(name)]["Properties"]["Role"]["Fn::GetAtt"][0]

    def statements_of_role(self, role_id: str) -> list[dict]:
        """Every IAM statement granted to the role: its inline policies and the policies attached to it."""
        role = self.resources[role_id]["Properties"]
        statements = [s for policy in role.get("Policies", []) for s in policy["PolicyDocument"]["Statement"]]
        for policy in self.of_type("AWS::IAM::Policy").values():
            if {"Ref": role_id} in policy["Properties"]["Roles"]:
                statements += policy["Properties"]["PolicyDocument"]["Statement"]
        return statements

    def statements(self, name: str) -> list[dict]:
        """Every IAM statement function `name`'s role holds."""
        return self.statements_of_role(self.role_id(name))

    def env(self, name: str) -> dict:
        """Function `name`'s environment variables."""
        return self.resources[self.function_id(name)]["Properties"]["Environment"]["Variables"]


def as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def execute_api_arn(api, path: str) -> dict:
    """An execute-api ARN of the API `api` (its reference in the template) as the synthesized template joins it."""
    parts = ["arn:", {"Ref": "AWS::Partition"}, ":execute-api:", {"Ref": "AWS::Region"}, ":", {"Ref": "AWS::AccountId"}]
    return {"Fn::Join": ["", [*parts, ":", api, path]]}


def actions_on(statements: list[dict], resource) -> set[str]:
    """The actions the statements allow on exactly `resource` (as the template names it)."""
    return {
        action
        for statement in statements
        if resource in as_list(statement["Resource"]) and statement.get("Effect", "Allow") == "Allow"
        for action in as_list(statement["Action"])
    }


def stand_in_layer(directory: Path) -> Path:
    """A directory that passes for `make layer`'s output of the current lock file (without its wheels).

    It holds one module with its runtime bytecode (placeholder bytes: synthesis only copies it) and a stray cache of
    another Python, which synthesis must leave out.
    """
    caches = directory / "python" / "__pycache__"
    caches.mkdir(parents=True, exist_ok=True)
    (directory / "python" / "stand_in.py").write_text("VALUE = 1\n")
    tag = "cpython-" + layer_module.PYTHON_VERSION.replace(".", "")
    (caches / f"stand_in.{tag}.pyc").write_bytes(b"runtime bytecode placeholder")
    (caches / "stand_in.cpython-311.pyc").write_bytes(b"this machine's cache")
    (directory / layer_module.STAMP).write_text(json.dumps(layer_module.stamp()))
    return directory


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """A synthesis's environment: offline AWS settings, no CDK_OUTDIR; a fresh tmp_path to write into."""
    for key, value in OFFLINE_AWS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CDK_OUTDIR", raising=False)
    return tmp_path


@pytest.fixture(scope="session")
def prebuilt_layer(tmp_path_factory) -> Path:
    return stand_in_layer(tmp_path_factory.mktemp("layer"))


@pytest.fixture(scope="session")
def synth(tmp_path_factory, prebuilt_layer) -> Synth:
    outdir = tmp_path_factory.mktemp("cdk.out")
    with pytest.MonkeyPatch.context() as env:
        for key, value in OFFLINE_AWS.items():
            env.setenv(key, value)
        env.delenv("CDK_OUTDIR", raising=False)
        app, stack = build_app(
            # Asset metadata (what the CLI turns on) lets the tests see which directory each asset came from.
            context={"layerDir": str(prebuilt_layer), "aws:cdk:enable-asset-metadata": True},
            outdir=str(outdir),
        )
        synthesized = Synth(app, stack, outdir)
    # The session's IAM check evaluates the suite's AWS calls against this template too (tests/support/iam_plugin.py).
    keep_template("app", stack, synthesized.template_json)
    return synthesized


def load_customer_app() -> ModuleType:
    spec = importlib.util.spec_from_file_location("customer_app", CUSTOMER_APP_DIR / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def customer_synth(tmp_path_factory, prebuilt_layer) -> Synth:
    """examples/customer-app synthesized as its owner would (its own app.py, its stack with a concrete account and
    region); the synthesis itself runs both cdk-nag packs, so an unacknowledged finding fails it."""
    outdir = tmp_path_factory.mktemp("customer.out")
    with pytest.MonkeyPatch.context() as env:
        for key, value in OFFLINE_AWS.items():
            env.setenv(key, value)
        env.delenv("CDK_OUTDIR", raising=False)
        app, stack = load_customer_app().build_app(context={"layerDir": str(prebuilt_layer)}, outdir=str(outdir))
        synthesized = Synth(app, stack, outdir)
    keep_template("customer-app", stack, synthesized.template_json)
    return synthesized


def alarm_metrics(synth: Synth) -> list[tuple[str, dict, dict]]:
    """(alarm logical id, alarm properties, one metric it reads) for every metric of every alarm."""
    found = []
    for alarm_id, alarm in synth.of_type("AWS::CloudWatch::Alarm").items():
        props = alarm["Properties"]
        for query in props.get("Metrics", []):
            if "MetricStat" in query:
                found.append((alarm_id, props, query["MetricStat"]["Metric"]))
        if "MetricName" in props:
            found.append((alarm_id, props, props))
    return found


def dimension(metric: dict, name: str):
    return next((d["Value"] for d in metric.get("Dimensions", []) if d["Name"] == name), None)
