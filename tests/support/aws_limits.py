"""AWS's documented limits and required forms, checked on a synthesized CloudFormation template.

moto enforces none of these and cfn-lint only a few: a template can pass both and still fail to deploy, or deploy
and then be refused at run time (issue 25). Each check takes a template (the dict CDK writes) and returns findings,
one sentence each; an empty list passes. Each names the AWS page whose number or form it encodes. Pure: no CDK,
no AWS, so a test can feed it a fragment built the wrong way and see it fail.

Sizes are measured on the documents as the service stores them. A name CloudFormation only makes at deploy time (a
function's name, the API's id, a queue's URL) is rendered as CloudFormation generates it ("<stack>-<logical id>-"
and 13 random characters), cut to the longest the service allows; pseudo parameters as `Deployment` says. A
measured size is then at least the deployed one, give or take the stack name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tests.support.cfn_intrinsics import Intrinsics, Unresolvable

Template = Mapping[str, Any]

# https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html: "Function resource-based policy: 20 KB".
# Over it, AddPermission (and CloudFormation with it) fails with PolicyLengthExceededException.
LAMBDA_RESOURCE_POLICY_BYTES = 20 * 1024
# Same page: "Function environment variables: 4 KB, for all environment variables associated with the function,
# combined".
LAMBDA_ENVIRONMENT_BYTES = 4 * 1024
# https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html, "IAM and AWS STS character limits":
# the inline policies of one role together at most 10,240 characters, a managed policy 6,144, a role trust policy
# 2,048 (the default of "Role trust policy length"); IAM does not count white space.
IAM_ROLE_INLINE_CHARS = 10_240
IAM_MANAGED_POLICY_CHARS = 6_144
IAM_TRUST_POLICY_CHARS = 2_048
# https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html: "set the source queue's visibility
# timeout to at least six times the configuration timeout on your function".
SQS_VISIBILITY_TIMEOUT_FACTOR = 6
SQS_DEFAULT_VISIBILITY_TIMEOUT_S = 30
# https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html: "You can reserve up to the Unreserved
# account concurrency value that is shown, minus 100 for functions that don't have reserved concurrency."
LAMBDA_UNRESERVED_MINIMUM = 100
# https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html: "Concurrent executions: 1,000" (default).
LAMBDA_DEFAULT_CONCURRENCY_QUOTA = 1_000
# https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/cloudformation-limits.html: resources, outputs,
# parameters and mappings per template; the template body at most 1 MB from S3 (read as 10^6 bytes, as cfn-lint
# does) and 51,200 bytes when passed inline in the CreateStack request.
CFN_RESOURCES = 500
CFN_OUTPUTS = 200
CFN_PARAMETERS = 200
CFN_MAPPINGS = 200
CFN_TEMPLATE_BYTES_FROM_S3 = 1_000_000
CFN_TEMPLATE_BYTES_INLINE = 51_200


@dataclass(frozen=True, kw_only=True)
class Deployment:
    """What rendering assumes of the account a template deploys into, where the template leaves it open."""

    stack_name: str
    partition: str = "aws"
    # As long as a commercial region's code gets (ap-southeast-5, ap-northeast-3).
    region: str = "ap-southeast-5"
    account: str = "123456789012"


# Longest name each service allows for what CloudFormation names (the API reference of each create call).
_NAME_LENGTH = {
    "AWS::Lambda::Function": 64,
    "AWS::IAM::Role": 64,
    "AWS::SQS::Queue": 80,
    "AWS::DynamoDB::Table": 255,
    "AWS::Logs::LogGroup": 512,
    "AWS::Scheduler::ScheduleGroup": 64,
    "AWS::SNS::Topic": 256,
    "AWS::SecretsManager::Secret": 512,
    "AWS::Lambda::LayerVersion": 140,
    "AWS::S3::Bucket": 63,
}
_RANDOM_SUFFIX = "A1B2C3D4E5F6G"


class Renderer(Intrinsics):
    """Template values rendered to the strings CloudFormation would deliver, names as CloudFormation generates them."""

    def __init__(self, template: Template, deployment: Deployment) -> None:
        super().__init__(
            template,
            region=deployment.region,
            account=deployment.account,
            partition=deployment.partition,
            stack_name=deployment.stack_name,
        )

    def physical_name(self, logical_id: str) -> str:
        kind = self.type_of(logical_id)
        if kind not in _NAME_LENGTH:
            raise Unresolvable(f"rendering knows no name of {kind} ({logical_id})")
        name = f"{self.stack_name}-{logical_id}-{_RANDOM_SUFFIX}"[: _NAME_LENGTH[kind]]
        # CloudFormation names a bucket in lower case (S3 takes no capitals).
        return name.lower() if kind == "AWS::S3::Bucket" else name

    def key_id(self, logical_id: str) -> str:
        # A key id as KMS makes one: longer than any logical id, so a size measured with it is not short.
        return "1234abcd-12ab-34cd-56ef-1234567890ab"

    def ref(self, name: str) -> Any:
        if self.resources.get(name, {}).get("Type") in {"AWS::Lambda::Alias", "AWS::Lambda::Version"}:
            function, qualifier = invoked_function(self.template, {"Ref": name})
            return f"{self.get_att(function, 'Arn')}:{qualifier}"
        return super().ref(name)


def of_type(template: Template, resource_type: str) -> dict[str, Mapping[str, Any]]:
    return {key: res for key, res in template.get("Resources", {}).items() if res["Type"] == resource_type}


def _props(resource: Mapping[str, Any]) -> Mapping[str, Any]:
    return resource.get("Properties", {})


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _compact(document: Any) -> str:
    return json.dumps(document, separators=(",", ":"))


def _iam_chars(document: Any) -> int:
    """A policy's length as IAM counts it against its quotas: its JSON without white space."""
    return len(re.sub(r"\s", "", _compact(document)))


# --- Lambda: resource-based policy (issue 25, finding 1) ------------------------------------------------------------


_INVOKABLE = ("AWS::Lambda::Function", "AWS::Lambda::Alias", "AWS::Lambda::Version")


def _referenced(value: Any) -> Iterator[str]:
    """Logical ids a template value refers to (Ref and Fn::GetAtt), however deeply wrapped."""
    if isinstance(value, dict):
        for key, argument in value.items():
            if key == "Ref" and isinstance(argument, str):
                yield argument
            elif key == "Fn::GetAtt":
                yield argument[0] if isinstance(argument, list) else argument.split(".", 1)[0]
            else:
                yield from _referenced(argument)
    elif isinstance(value, list):
        for item in value:
            yield from _referenced(item)


def invoked_function(template: Template, function_name: Any) -> tuple[str, str | None]:
    """(function logical id, qualifier or None) that a FunctionName value points at: a function, an alias or a version
    of this template, by Ref, Arn or a name CDK builds from them (an alias's `<name>:live` from its ARN's parts)."""
    resources = template.get("Resources", {})
    targets = {ref for ref in _referenced(function_name) if resources.get(ref, {}).get("Type") in _INVOKABLE}
    if len(targets) != 1:
        raise ValueError(f"FunctionName {function_name!r} names no one function, alias or version of this template")
    (logical_id,) = targets
    if resources[logical_id]["Type"] == "AWS::Lambda::Function":
        return logical_id, None
    function, _ = invoked_function(template, _props(resources[logical_id])["FunctionName"])
    # An alias by its name; a version (numbered at deploy time) by its logical id.
    return function, str(_props(resources[logical_id]).get("Name", logical_id))


# What AddPermission stores for each property of AWS::Lambda::Permission besides Action, FunctionName and Principal
# (the condition operator and key Lambda writes into the statement).
_PERMISSION_CONDITIONS = {
    "SourceArn": ("ArnLike", "AWS:SourceArn"),
    "SourceAccount": ("StringEquals", "AWS:SourceAccount"),
    "PrincipalOrgID": ("StringEquals", "aws:PrincipalOrgID"),
    "EventSourceToken": ("StringEquals", "lambda:EventSourceToken"),
    "FunctionUrlAuthType": ("StringEquals", "lambda:FunctionUrlAuthType"),
}


def _stored_principal(principal: str) -> Any:
    if principal == "*":
        return "*"
    if re.fullmatch(r"\d{12}", principal):
        return {"AWS": f"arn:aws:iam::{principal}:root"}
    if principal.startswith("arn:"):
        return {"AWS": principal}
    return {"Service": principal}


def lambda_resource_policies(template: Template, deployment: Deployment) -> dict[tuple[str, str | None], str]:
    """(function logical id, qualifier) -> the resource-based policy Lambda stores for it (GetPolicy's JSON), rebuilt
    from the template's AWS::Lambda::Permission resources, one statement each (its Sid as CloudFormation names it)."""
    render = Renderer(template, deployment)
    statements: dict[tuple[str, str | None], list[dict]] = {}
    for logical_id, resource in of_type(template, "AWS::Lambda::Permission").items():
        props = _props(resource)
        unknown = set(props) - {"Action", "FunctionName", "Principal", *_PERMISSION_CONDITIONS}
        if unknown:
            raise ValueError(f"{logical_id}: no rule here for how Lambda stores {sorted(unknown)}")
        target = invoked_function(template, props["FunctionName"])
        function_arn = render.get_att(target[0], "Arn")
        condition: dict[str, dict[str, str]] = {}
        for prop, (operator, key) in _PERMISSION_CONDITIONS.items():
            if prop in props:
                condition.setdefault(operator, {})[key] = render(props[prop])
        statement = {
            "Sid": f"{deployment.stack_name}-{logical_id}-{_RANDOM_SUFFIX}"[:100],
            "Effect": "Allow",
            "Principal": _stored_principal(render(props["Principal"])),
            "Action": render(props["Action"]),
            "Resource": f"{function_arn}:{target[1]}" if target[1] else function_arn,
            **({"Condition": condition} if condition else {}),
        }
        statements.setdefault(target, []).append(statement)
    return {
        target: _compact({"Version": "2012-10-17", "Id": "default", "Statement": found})
        for target, found in statements.items()
    }


def lambda_resource_policy_findings(template: Template, deployment: Deployment) -> list[str]:
    findings = []
    for (function, qualifier), policy in lambda_resource_policies(template, deployment).items():
        size = len(policy.encode())
        if size > LAMBDA_RESOURCE_POLICY_BYTES:
            statements = len(json.loads(policy)["Statement"])
            findings.append(
                f"{function}{':' + qualifier if qualifier else ''}: resource-based policy of {size} bytes "
                f"({statements} statements) exceeds Lambda's {LAMBDA_RESOURCE_POLICY_BYTES}"
            )
    return findings


def lambda_environment_findings(template: Template, deployment: Deployment) -> list[str]:
    render = Renderer(template, deployment)
    findings = []
    for logical_id, resource in of_type(template, "AWS::Lambda::Function").items():
        variables = render(_props(resource).get("Environment", {}).get("Variables", {}))
        size = len(_compact(variables).encode())
        if size > LAMBDA_ENVIRONMENT_BYTES:
            findings.append(f"{logical_id}: environment of {size} bytes exceeds Lambda's {LAMBDA_ENVIRONMENT_BYTES}")
    return findings


# --- IAM: identity and trust policies (issue 25, finding 2) ---------------------------------------------------------


def role_inline_policies(template: Template, role_id: str) -> list[Any]:
    """Every inline policy document of a role: its own Policies and each AWS::IAM::Policy attached to it (CloudFormation
    makes those with PutRolePolicy, so they count toward the same quota)."""
    documents = [policy["PolicyDocument"] for policy in _props(template["Resources"][role_id]).get("Policies", [])]
    for policy in of_type(template, "AWS::IAM::Policy").values():
        if {"Ref": role_id} in _props(policy).get("Roles", []):
            documents.append(_props(policy)["PolicyDocument"])
    return documents


def identity_policy_findings(template: Template, deployment: Deployment) -> list[str]:
    render = Renderer(template, deployment)
    findings = []
    for role_id, role in of_type(template, "AWS::IAM::Role").items():
        inline = sum(_iam_chars(render(document)) for document in role_inline_policies(template, role_id))
        if inline > IAM_ROLE_INLINE_CHARS:
            findings.append(f"{role_id}: inline policies of {inline} characters exceed IAM's {IAM_ROLE_INLINE_CHARS}")
        trust = _iam_chars(render(_props(role)["AssumeRolePolicyDocument"]))
        if trust > IAM_TRUST_POLICY_CHARS:
            findings.append(f"{role_id}: trust policy of {trust} characters exceeds IAM's {IAM_TRUST_POLICY_CHARS}")
    for policy_id, policy in of_type(template, "AWS::IAM::ManagedPolicy").items():
        size = _iam_chars(render(_props(policy)["PolicyDocument"]))
        if size > IAM_MANAGED_POLICY_CHARS:
            findings.append(
                f"{policy_id}: managed policy of {size} characters exceeds IAM's {IAM_MANAGED_POLICY_CHARS}"
            )
    return findings


def _condition_values(condition: Mapping[str, Any], key: str) -> dict[str, list]:
    """operator -> values of one condition key (keys compare case-insensitively in IAM)."""
    return {
        operator: _as_list(value)
        for operator, block in condition.items()
        for name, value in block.items()
        if name.lower() == key.lower()
    }


def _scheduler_trust_findings(statement: Mapping[str, Any]) -> list[str]:
    """https://docs.aws.amazon.com/scheduler/latest/UserGuide/cross-service-confused-deputy-prevention.html: condition on
    aws:SourceAccount and aws:SourceArn; "The value of aws:SourceArn must be your EventBridge Scheduler schedule group
    ARN ... Do not scope the aws:SourceArn statement to a specific schedule or a schedule name prefix." (Scheduler
    sets SourceArn to the schedule's group; any other form matches nothing and CreateSchedule refuses the role.)"""
    condition = statement.get("Condition", {})
    findings = []
    accounts = _condition_values(condition, "aws:SourceAccount")
    if set(accounts) != {"StringEquals"} or len(accounts["StringEquals"]) != 1:
        findings.append("has no aws:SourceAccount StringEquals condition naming one account")
    arns = _condition_values(condition, "aws:SourceArn")
    group_arn = re.compile(r"arn:[\w-]+:scheduler:[\w*-]*:(?P<account>\d{12}|\*):schedule-group/[^/:]+")
    if not arns or set(arns) - {"ArnEquals", "ArnLike"}:
        findings.append("has no aws:SourceArn ArnEquals/ArnLike condition")
    for value in (value for values in arns.values() for value in values):
        match = group_arn.fullmatch(value)
        if match is None:
            findings.append(f"conditions aws:SourceArn on {value!r}, not a schedule group's ARN")
        elif accounts.get("StringEquals") and match["account"] not in {"*", *accounts["StringEquals"]}:
            findings.append(f"conditions aws:SourceArn on another account's schedule group: {value!r}")
    return findings


# Service principal -> what its documentation requires of a role's trust statement for it. A service not named here
# fails the check until its documented form is added.
SERVICE_TRUST_RULES: dict[str, Callable[[Mapping[str, Any]], list[str]]] = {
    # https://docs.aws.amazon.com/lambda/latest/dg/lambda-intro-execution-role.html: the execution role trusts
    # lambda.amazonaws.com; Lambda documents no source condition for it.
    "lambda.amazonaws.com": lambda statement: [],
    "scheduler.amazonaws.com": _scheduler_trust_findings,
}


def trust_policy_findings(template: Template, deployment: Deployment) -> list[str]:
    render = Renderer(template, deployment)
    findings = []
    for role_id, role in of_type(template, "AWS::IAM::Role").items():
        for statement in render(_props(role)["AssumeRolePolicyDocument"])["Statement"]:
            principal = statement.get("Principal")
            for service in _as_list(principal.get("Service", [])) if isinstance(principal, dict) else []:
                rule = SERVICE_TRUST_RULES.get(service)
                if rule is None:
                    findings.append(f"{role_id}: trusts {service}, whose documented trust form is not encoded here")
                    continue
                findings += [f"{role_id}: trust of {service} {problem}" for problem in rule(statement)]
    return findings


# --- Lambda: event sources and concurrency (issue 25, finding 9) ----------------------------------------------------


@dataclass(frozen=True)
class SqsSource:
    mapping: str
    function: str
    queue: str | None  # logical id; None: a queue from outside the template


def sqs_sources(template: Template) -> Iterator[SqsSource]:
    resources = template.get("Resources", {})
    for mapping_id, mapping in of_type(template, "AWS::Lambda::EventSourceMapping").items():
        props = _props(mapping)
        source = props.get("EventSourceArn")
        function, _ = invoked_function(template, props["FunctionName"])
        if isinstance(source, dict) and "Fn::GetAtt" in source:
            queue = source["Fn::GetAtt"][0]
            if resources[queue]["Type"] == "AWS::SQS::Queue":
                yield SqsSource(mapping_id, function, queue)
        elif isinstance(source, str) and source.split(":")[2:3] == ["sqs"]:
            yield SqsSource(mapping_id, function, None)


def sqs_visibility_findings(template: Template) -> list[str]:
    resources = template["Resources"]
    findings = []
    for source in sqs_sources(template):
        if source.queue is None:
            findings.append(f"{source.mapping}: reads a queue from outside the template: its visibility is unchecked")
            continue
        timeout = _props(resources[source.function]).get("Timeout", 3)
        visibility = _props(resources[source.queue]).get("VisibilityTimeout", SQS_DEFAULT_VISIBILITY_TIMEOUT_S)
        if visibility < SQS_VISIBILITY_TIMEOUT_FACTOR * timeout:
            findings.append(
                f"{source.queue}: visibility timeout {visibility} s is under {SQS_VISIBILITY_TIMEOUT_FACTOR} x the "
                f"{timeout} s timeout of {source.function}, which it feeds"
            )
    return findings


def reserved_concurrency(template: Template) -> dict[str, int]:
    """Function logical id -> ReservedConcurrentExecutions, for each function that reserves."""
    return {
        function_id: _props(function)["ReservedConcurrentExecutions"]
        for function_id, function in of_type(template, "AWS::Lambda::Function").items()
        if "ReservedConcurrentExecutions" in _props(function)
    }


def sqs_concurrency_findings(template: Template) -> list[str]:
    """https://repost.aws/knowledge-center/lambda-sqs-scaling: "Event source mappings don't account for reserved
    concurrency and can process more messages off your queue than can be sent to your function"; use the event
    source's maximum concurrency, and don't set it above the function's reserved concurrency. A throttled batch
    returns to the queue with its receive count raised, so it dead-letters early."""
    reserved = reserved_concurrency(template)
    findings = []
    per_function: dict[str, int] = {}
    for source in sqs_sources(template):
        maximum = _props(template["Resources"][source.mapping]).get("ScalingConfig", {}).get("MaximumConcurrency")
        if source.function not in reserved:
            continue
        if maximum is None:
            findings.append(
                f"{source.mapping}: no MaximumConcurrency while {source.function} reserves "
                f"{reserved[source.function]}: its pollers outrun the reservation and are throttled"
            )
            continue
        per_function[source.function] = per_function.get(source.function, 0) + maximum
    for function, total in per_function.items():
        if total > reserved[function]:
            findings.append(
                f"{function}: its SQS sources' MaximumConcurrency ({total}) exceeds its reserved concurrency "
                f"({reserved[function]})"
            )
    return findings


def provisioned_concurrency(template: Template) -> dict[str, int]:
    """Function logical id -> provisioned concurrency over its aliases and versions."""
    found: dict[str, int] = {}
    for kind in ("AWS::Lambda::Alias", "AWS::Lambda::Version"):
        for resource in of_type(template, kind).values():
            config = _props(resource).get("ProvisionedConcurrencyConfig")
            if config:
                function, _ = invoked_function(template, _props(resource)["FunctionName"])
                found[function] = found.get(function, 0) + config["ProvisionedConcurrentExecutions"]
    return found


def concurrency_quota_findings(template: Template, account_quota: int) -> list[str]:
    """Reservations, and provisioned concurrency of functions that reserve nothing (which Lambda takes from the
    unreserved pool), must leave LAMBDA_UNRESERVED_MINIMUM of the account's quota unreserved."""
    reserved = reserved_concurrency(template)
    held = sum(reserved.values()) + sum(
        count for function, count in provisioned_concurrency(template).items() if function not in reserved
    )
    room = max(account_quota - LAMBDA_UNRESERVED_MINIMUM, 0)
    if held > room:
        return [
            f"{held} concurrent executions reserved or provisioned ({reserved}) do not fit an account quota of "
            f"{account_quota}, which leaves {room} after the {LAMBDA_UNRESERVED_MINIMUM} Lambda keeps unreserved"
        ]
    return []


# --- CloudWatch: paging alarms (issue 25, finding 8) ----------------------------------------------------------------


def alarm_metrics(alarm: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(namespace, metric name) of every metric an AWS::CloudWatch::Alarm reads."""
    props = _props(alarm)
    if "MetricName" in props:
        return [(props.get("Namespace", ""), props["MetricName"])]
    return [
        (query["MetricStat"]["Metric"].get("Namespace", ""), query["MetricStat"]["Metric"]["MetricName"])
        for query in props.get("Metrics", [])
        if "MetricStat" in query
    ]


def paging_alarm_findings(template: Template, pages: Callable[[Mapping[str, Any]], bool]) -> list[str]:
    """https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarm-evaluation.html: an alarm goes to ALARM when
    DatapointsToAlarm (default: EvaluationPeriods) of its last EvaluationPeriods periods breach. An alarm that
    `pages` must do so on the first breaching period, and have an action to page with."""
    findings = []
    for alarm_id, alarm in of_type(template, "AWS::CloudWatch::Alarm").items():
        if not pages(alarm):
            continue
        props = _props(alarm)
        needed = props.get("DatapointsToAlarm", props["EvaluationPeriods"])
        if needed != 1:
            findings.append(f"{alarm_id}: pages only after {needed} breaching periods of {props['EvaluationPeriods']}")
        if not props.get("AlarmActions") or props.get("ActionsEnabled") is False:
            findings.append(f"{alarm_id}: has no enabled alarm action: it pages nobody")
    return findings


# --- CloudWatch Logs: retention ----------------------------------------------------------------------------------


def log_retention_findings(template: Template) -> list[str]:
    """https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/Working-with-log-groups-and-streams.html: "By default,
    log data is stored in CloudWatch Logs indefinitely". Every log group of the template sets RetentionInDays, and
    every function logs to one of them (else Lambda creates /aws/lambda/<name>, kept forever:
    https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-loggroups.html)."""
    groups = of_type(template, "AWS::Logs::LogGroup")
    findings = [
        f"{group_id}: no RetentionInDays"
        for group_id, group in groups.items()
        if "RetentionInDays" not in _props(group)
    ]
    for function_id, function in of_type(template, "AWS::Lambda::Function").items():
        target = _props(function).get("LoggingConfig", {}).get("LogGroup")
        if not (isinstance(target, dict) and target.get("Ref") in groups):
            findings.append(
                f"{function_id}: logs to no log group of the template (Lambda's default keeps logs forever)"
            )
    return findings


# --- CloudFormation: per-template limits ----------------------------------------------------------------------------


def template_findings(template: Template, body: bytes) -> list[str]:
    """`body`: the template as the CDK CLI uploads it (its file in the cloud assembly)."""
    counts = [
        ("resources", len(template.get("Resources", {})), CFN_RESOURCES),
        ("outputs", len(template.get("Outputs", {})), CFN_OUTPUTS),
        ("parameters", len(template.get("Parameters", {})), CFN_PARAMETERS),
        ("mappings", len(template.get("Mappings", {})), CFN_MAPPINGS),
        ("template bytes", len(body), CFN_TEMPLATE_BYTES_FROM_S3),
    ]
    return [f"{count} {what} exceed CloudFormation's {limit}" for what, count, limit in counts if count > limit]
