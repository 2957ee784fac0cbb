"""The AWS calls the suite recorded (tests/support/aws_calls.py), each evaluated against its function's role in the
synthesized templates (issue 25, item 2): the calls that would be denied, and the grants no call used.

The templates are the two apps the infra tests synthesize, offline: `app.py` as `make deploy` deploys it, and
examples/customer-app (a customer-managed key, an SES identity and configuration set: the features app.py leaves
off). A recorded request names its resource by the environment variable its function found it through; the
template says what that variable holds, as intrinsics resolved here with one convention on both sides (a resource's
physical name is its logical id unless the template names it). The evaluation is @cloud-copilot/iam-simulate's
(tests/support/iam_simulate.mjs): identity policies of the role (inline and attached), the resource's own policy
where the template gives it one (queues, keys, secrets), and the context keys the template's conditions read.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.support.aws_calls import KMS_KEY_ENV, SES_CONFIGURATION_ENV, SES_IDENTITY_ENV, TABLE_ENV
from tests.support.cfn_intrinsics import SECRET_SUFFIX, STREAM_LABEL, Intrinsics

REPO = Path(__file__).resolve().parents[2]
SIMULATOR = REPO / "tests" / "support" / "iam_simulate.mjs"
SIMULATOR_PACKAGE = REPO / "node_modules" / "@cloud-copilot" / "iam-simulate"
# An env-agnostic stack's region and account (app.py's): any will do, the same on both sides.
DEFAULT_REGION, DEFAULT_ACCOUNT = "us-east-1", "123456789012"
# Features a deployment may leave off (app.py does): a call through them is evaluated where the template sets them.
OPTIONAL_ENVS = frozenset({SES_IDENTITY_ENV, SES_CONFIGURATION_ENV, KMS_KEY_ENV})
# Condition keys this check supplies. A statement that conditions on another fails the check: it could not be judged.
SUPPLIED_KEYS = frozenset(
    {
        "dynamodb:leadingkeys",
        "iam:passedtoservice",
        "kms:viaservice",
        "kms:calleraccount",
        "aws:securetransport",
        "aws:principalarn",
        "aws:principalaccount",
        "aws:requestedregion",
        "s3:prefix",
    }
)
# Grants Lambda itself uses with the function's role, never the function's code: its log delivery and traces (and,
# found from the template, its event source mappings and failure destinations).
LAMBDA_OWN_ACTION_PREFIXES = ("logs:", "xray:")


class NotConfigured(Exception):
    """The call goes through a feature this deployment leaves off: it cannot happen there."""


def deployment_export(name: str, stack: Any, template: dict[str, Any]) -> dict[str, Any]:
    """What the check needs of a synthesized stack (an InterludeStack, or a stack holding an Interlude as `.interlude`)."""
    from aws_cdk import Token

    by_name = stack.interlude.functions.by_name
    return {
        "name": name,
        "template": template,
        "functions": {fn: stack.get_logical_id(by_name[fn].node.default_child) for fn in by_name},
        "region": DEFAULT_REGION if Token.is_unresolved(stack.region) else stack.region,
        "account": DEFAULT_ACCOUNT if Token.is_unresolved(stack.account) else stack.account,
    }


class Deployment(Intrinsics):
    def __init__(self, exported: dict[str, Any]) -> None:
        super().__init__(exported["template"], region=exported["region"], account=exported["account"])
        self.name: str = exported["name"]
        self.functions: dict[str, str] = exported["functions"]

    def unplaced(self, logical_id: str, attribute: str) -> str:
        # An ARN no grant names: a statement on it can only be judged as not matching.
        return self.arn("unresolved", f"{logical_id}/{attribute}")

    # -- a function's role and environment ----------------------------------------------------------------

    def function(self, name: str) -> dict[str, Any]:
        return self.resources[self.functions[name]]["Properties"]

    def role_id(self, name: str) -> str:
        return self.function(name)["Role"]["Fn::GetAtt"][0]

    def role_arn(self, name: str) -> str:
        return self.get_att(self.role_id(name), "Arn")

    def statements(self, name: str) -> list[dict[str, Any]]:
        """Every statement of the function's role: its inline policies and the policies attached to it."""
        role_id = self.role_id(name)
        role = self.resources[role_id]["Properties"]
        found = [s for policy in role.get("Policies", []) for s in policy["PolicyDocument"]["Statement"]]
        for resource in self.resources.values():
            if resource["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in resource["Properties"].get("Roles", []):
                found += resource["Properties"]["PolicyDocument"]["Statement"]
        return [self.resolve(s) for s in found]

    def environment(self, name: str) -> dict[str, Any]:
        return self.function(name).get("Environment", {}).get("Variables", {})

    def resource_policies(self) -> dict[str, dict[str, Any]]:
        """Resource ARN -> the policy the template gives that resource (queues, keys, secrets)."""
        out: dict[str, dict[str, Any]] = {}
        for logical, resource in self.resources.items():
            properties = resource.get("Properties", {})
            if resource["Type"] == "AWS::SQS::QueuePolicy":
                for queue in properties["Queues"]:
                    out[self.get_att(queue["Ref"], "Arn")] = self.resolve(properties["PolicyDocument"])
            elif resource["Type"] == "AWS::KMS::Key" and "KeyPolicy" in properties:
                out[self.get_att(logical, "Arn")] = self.resolve(properties["KeyPolicy"])
            elif resource["Type"] == "AWS::S3::BucketPolicy":
                out[self.get_att(properties["Bucket"]["Ref"], "Arn")] = self.resolve(properties["PolicyDocument"])
            elif resource["Type"] == "AWS::SecretsManager::ResourcePolicy":
                out[self.resolve(properties["SecretId"])] = self.resolve(properties["ResourcePolicy"])
        return out

    def lambda_own(self, name: str) -> set[str]:
        """ARNs Lambda itself reads or writes with the function's role: its event sources and failure destinations."""
        own: set[str] = set()
        reference = {"Ref": self.functions[name]}
        for resource in self.resources.values():
            properties = resource.get("Properties", {})
            if properties.get("FunctionName") != reference:
                continue
            if resource["Type"] == "AWS::Lambda::EventSourceMapping":
                own.add(self.resolve(properties["EventSourceArn"]))
            if resource["Type"] in ("AWS::Lambda::EventSourceMapping", "AWS::Lambda::EventInvokeConfig"):
                for outcome in (properties.get("DestinationConfig") or {}).values():
                    own.add(self.resolve(outcome["Destination"]))
        return own

    # -- a recorded request, as it would reach this deployment ---------------------------------------------

    def _found_through(self, function: str, found: dict[str, str]) -> str:
        """The value that leads the deployed function to the resource: its variable's, or the name recorded."""
        variables = self.environment(function)
        var = found.get("env") or (TABLE_ENV if found["kind"] == "stream" else None)
        if var is None:
            return found["name"]
        if var not in variables:
            if var in OPTIONAL_ENVS:
                raise NotConfigured(var)
            raise LookupError(f"its environment in the template sets no {var}")
        return str(self.resolve(variables[var]))

    def resource_arn(self, function: str, found: dict[str, str]) -> str:
        """The ARN IAM evaluates a recorded request on, in this deployment."""
        kind, rest = found["kind"], found.get("rest", "")
        if kind == "any":
            return "*"
        value = self._found_through(function, found)
        if value.startswith("arn:") and kind in ("table", "secret", "role", "key"):
            return value + rest
        arns = {
            "table": lambda: self.arn("dynamodb", f"table/{value}{rest}"),
            "stream": lambda: self.arn("dynamodb", f"table/{value}/stream/{STREAM_LABEL}"),
            "queue": lambda: self.arn("sqs", value.rstrip("/").rsplit("/", 1)[-1]),
            # A prefix's secrets are named `{prefix}{rest}`; Secrets Manager appends six characters in the ARN.
            "secret": lambda: self.arn("secretsmanager", f"secret:{value}{rest}{SECRET_SUFFIX}"),
            "schedule": lambda: self.arn("scheduler", f"schedule/{value}/{rest}"),
            "key": lambda: self.arn("kms", f"key/{value}"),
            "ses-identity": lambda: self.arn("ses", f"identity/{value}"),
            "ses-configuration-set": lambda: self.arn("ses", f"configuration-set/{value}"),
            "bucket": lambda: f"arn:{self.partition}:s3:::{value}{rest}",
            "connection": lambda: self.arn("execute-api", _api_and_stage(value) + rest),
        }
        if kind not in arns:
            raise LookupError(f"a {kind} named {value!r}, which this check cannot place")
        return arns[kind]()


def _api_and_stage(endpoint: str) -> str:
    """`{api}/{stage}` of a WebSocket API's management endpoint, https://{api}.execute-api.{region}.{suffix}/{stage}."""
    url = urlsplit(endpoint)
    return f"{(url.hostname or '').split('.', 1)[0]}{url.path.rstrip('/')}"


# -- the evaluation ---------------------------------------------------------------------------------------


@dataclass
class Denial:
    deployment: str
    function: str
    action: str
    resource: str
    reason: str
    record: dict[str, Any]

    def describe(self) -> str:
        record = self.record
        keys = record.get("keys") or []
        where = [f"call {record['call']}"]
        if keys:
            where.append(f"key {keys[0]}" + (f" (+{len(keys) - 1})" if len(keys) > 1 else ""))
        if "entry" in record:
            where.append(f"direct call into {record['entry']}")
        if record.get("test"):
            where.append(f"first in {record['test']}")
        return (
            f"{self.function} may not {self.action} on {self.resource} ({self.deployment}: {self.reason}); "
            + "; ".join(where)
        )


@dataclass
class Report:
    requests: int = 0
    denials: list[Denial] = field(default_factory=list)
    # deployment -> function -> (resource, action) no call used
    unused: dict[str, dict[str, set[tuple[str, str]]]] = field(default_factory=dict)
    unattributed: dict[str, int] = field(default_factory=dict)
    named_by_tests: int = 0
    not_configured: int = 0


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def condition_keys(statement: dict[str, Any]) -> set[str]:
    return {key.lower() for operands in (statement.get("Condition") or {}).values() for key in operands}


def _applies_to_anyone(statement: dict[str, Any]) -> bool:
    principal = statement.get("Principal")
    return principal == "*" or (isinstance(principal, dict) and "*" in _as_list(principal.get("AWS", [])))


def read_records(directory: Path) -> tuple[list[dict[str, Any]], dict[str, set[str]]]:
    """The recorded requests (each once) and, per code path, the functions seen running it."""
    calls: dict[str, dict[str, Any]] = {}
    reach: dict[str, set[str]] = defaultdict(set)
    for path in sorted(directory.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if not line.endswith("}"):
                continue  # a process stopped mid-line
            record = json.loads(line)
            if "reach" in record:
                reach[record["path"]].add(record["reach"])
            else:
                calls.setdefault(json.dumps({k: v for k, v in record.items() if k != "test"}, sort_keys=True), record)
    return list(calls.values()), reach


def simulate(
    requests: list[dict[str, Any]], statements: dict[str, Any], policies: dict[str, Any]
) -> list[dict[str, Any]]:
    with tempfile.NamedTemporaryFile("w", suffix=".json") as handle:
        json.dump({"requests": requests, "statements": statements, "resourcePolicies": policies}, handle)
        handle.flush()
        done = subprocess.run(
            ["node", str(SIMULATOR), handle.name], cwd=REPO, capture_output=True, text=True, check=False, timeout=600
        )
    if done.returncode != 0:
        raise RuntimeError(f"the IAM simulator failed: {done.stderr[-2000:]}")
    answers: list[dict[str, Any]] = json.loads(done.stdout)
    return answers


def check(deployments: Iterable[Deployment], calls: list[dict[str, Any]], reach: dict[str, set[str]]) -> Report:
    report = Report()
    attributed: list[tuple[str, dict[str, Any]]] = []
    for record in calls:
        if "function" in record:
            attributed.append((record["function"], record))
            continue
        found = record["resource"]
        if "name" in found:
            # A test calling in directly named the resource itself (a table or secret of its own): no function's
            # environment leads there, so there is nothing deployed to compare it with.
            report.named_by_tests += 1
            continue
        functions = sorted(reach.get(record["entry"], ()))
        if not functions:
            report.unattributed[record["entry"]] = report.unattributed.get(record["entry"], 0) + 1
        attributed += [(function, record) for function in functions]
    for deployment in deployments:
        _check_deployment(deployment, attributed, report)
    return report


def _role_statements(deployment: Deployment) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Every role statement by an id of its own (`function/index`), and each function's ids."""
    statements: dict[str, Any] = {}
    by_function: dict[str, list[str]] = {}
    for function in deployment.functions:
        by_function[function] = []
        for index, statement in enumerate(deployment.statements(function)):
            by_function[function].append(f"{function}/{index}")
            statements[f"{function}/{index}"] = statement
    return statements, by_function


def _check_deployment(deployment: Deployment, attributed: list[tuple[str, dict[str, Any]]], report: Report) -> None:
    statements, by_function = _role_statements(deployment)
    policies = deployment.resource_policies()
    policy_ids = {arn: f"resource/{index}" for index, arn in enumerate(policies)}
    judged = list(statements.values()) + [s for p in policies.values() for s in p["Statement"] if _applies_to_anyone(s)]
    unknown = set().union(*(condition_keys(s) for s in judged)) - SUPPLIED_KEYS
    if unknown:
        raise RuntimeError(
            f"{deployment.name}: statements condition on {sorted(unknown)}, which the check does not supply"
        )
    requests, pending = [], []
    for function, record in attributed:
        try:
            if function not in deployment.functions:
                raise LookupError("the template has no such function")
            arn = deployment.resource_arn(function, record["resource"])
        except NotConfigured:
            report.not_configured += 1
            continue
        except LookupError as problem:
            resource = json.dumps(record["resource"], sort_keys=True)
            report.denials.append(Denial(deployment.name, function, record["action"], resource, str(problem), record))
            continue
        requests.append(
            {
                "principal": deployment.role_arn(function),
                "action": record["action"],
                "resource": arn,
                "account": deployment.account,
                "context": _context(deployment, function, record),
                "identity": by_function[function],
                # A bucket's policy governs its objects too.
                "resourcePolicy": policy_ids.get(arn)
                or policy_ids.get(arn.split("/", 1)[0] if ":s3:::" in arn else ""),
            }
        )
        pending.append((function, record, arn))
    resource_policies = {policy_ids[arn]: policy for arn, policy in policies.items()}
    answers = simulate(requests, statements, resource_policies) if requests else []
    report.requests += len(requests)
    used: set[tuple[str, str, str]] = set()
    for (function, record, arn), answer in zip(pending, answers, strict=True):
        used.update((statement, action, resource) for statement, action, resource in answer["used"])
        if answer["result"] != "Allowed":
            reason = answer.get("error") or answer["result"]
            report.denials.append(Denial(deployment.name, function, record["action"], arn, reason, record))
    report.unused[deployment.name] = _unused(deployment, statements, by_function, used)


def _context(deployment: Deployment, function: str, record: dict[str, Any]) -> dict[str, Any]:
    """The condition keys' values: the request's own (its partitions, the service a role is passed to) and the
    global ones a Lambda function's call carries."""
    context: dict[str, Any] = {
        "aws:SecureTransport": "true",
        "aws:PrincipalArn": deployment.role_arn(function),
        "aws:PrincipalAccount": deployment.account,
        "aws:RequestedRegion": deployment.region,
    }
    context.update({k: v.replace("{region}", deployment.region) for k, v in record.get("context", {}).items()})
    if record.get("keys"):
        context["dynamodb:LeadingKeys"] = record["keys"]
    return context


def _unused(
    deployment: Deployment,
    statements: dict[str, Any],
    by_function: dict[str, list[str]],
    used: set[tuple[str, str, str]],
) -> dict[str, set[tuple[str, str]]]:
    """(resource, action) of each Allow that no request used, but those Lambda itself uses."""
    unused: dict[str, set[tuple[str, str]]] = {}
    for function, ids in by_function.items():
        own = deployment.lambda_own(function)
        for statement_id in ids:
            statement = statements[statement_id]
            if statement.get("Effect") != "Allow":
                continue
            for action in _as_list(statement["Action"]):
                for resource in _as_list(statement["Resource"]):
                    if (statement_id, action, resource) in used or resource in own:
                        continue
                    if not action.startswith(LAMBDA_OWN_ACTION_PREFIXES):
                        unused.setdefault(function, set()).add((resource, action))
    return unused


def short(arn: str) -> str:
    """An ARN without its partition, region and account: `dynamodb table/Table/index/inbox`."""
    parts = arn.split(":", 5)
    return f"{parts[2]} {parts[5]}" if len(parts) == 6 else arn


def summary_lines(report: Report) -> list[str]:
    lines = [f"{report.requests} distinct requests evaluated; {len(report.denials)} would be denied."]
    if report.denials:
        lines[0] = f"FAILED: {lines[0]}"
    lines += [f"DENIED: {denial.describe()}" for denial in report.denials]
    if report.not_configured:
        lines.append(f"{report.not_configured} requests go through features a template leaves off (checked where on).")
    if report.named_by_tests:
        lines.append(f"{report.named_by_tests} direct calls reach a resource their test named (not checked).")
    if report.unattributed:
        top = sorted(report.unattributed.items(), key=lambda item: -item[1])
        lines.append(
            f"{sum(report.unattributed.values())} direct calls enter code no function ran in this session (not "
            f"checked): " + ", ".join(entry for entry, _ in top[:8]) + (" ..." if len(top) > 8 else "")
        )
    for name, functions in report.unused.items():
        lines.append(f"Grants no call used ({name}):")
        for function in sorted(functions):
            by_resource: dict[str, list[str]] = defaultdict(list)
            for resource, action in sorted(functions[function]):
                by_resource[resource].append(action)
            for resource, actions in by_resource.items():
                lines.append(f"  {function}: {', '.join(actions)} on {short(resource)}")
    return lines
