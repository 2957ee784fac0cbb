"""CloudFormation's intrinsic functions resolved offline, to the values a deployment of a synthesized template holds.

Two checks read templates this way (issue 25) and differ only in how a resource CloudFormation names is named:
the AWS limits (tests/support/aws_limits.py) size documents as the services store them, so they render the long
names CloudFormation generates; the IAM check (tests/support/iam_check.py) matches recorded requests to resources,
so it names a resource as the template does, or by its logical id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# What Secrets Manager appends to a secret's name in its ARN, a table stream's label, and the API id API Gateway
# makes: placeholders, the same on every side.
SECRET_SUFFIX = "-AbCdEf"
STREAM_LABEL = "2026-01-01T00:00:00.000"
API_ID = "a1b2c3d4e5"
# The template's own name for a resource, where it gives one.
NAME_PROPERTIES = ("TableName", "QueueName", "Name", "RoleName", "FunctionName", "LogGroupName", "TopicName")


class Unresolvable(ValueError):
    pass


class Intrinsics:
    """Ref (pseudo parameters, parameters' defaults, resources), Fn::GetAtt, Fn::Join, Fn::Sub, Fn::Select, Fn::Split."""

    def __init__(
        self, template: Mapping[str, Any], *, region: str, account: str, partition: str = "aws", stack_name: str = ""
    ) -> None:
        self.template = template
        self.resources: Mapping[str, Any] = template.get("Resources", {})
        self.region, self.account, self.partition, self.stack_name = region, account, partition, stack_name

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((fn, argument),) = value.items()
            if fn == "Ref":
                return self.ref(argument)
            if fn == "Fn::GetAtt":
                logical_id, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
                return self.get_att(logical_id, attribute)
            if fn == "Fn::Join":
                separator, parts = argument
                return separator.join(str(part) for part in self.resolve(parts))
            if fn == "Fn::Sub":
                return self._sub(argument)
            if fn == "Fn::Select":
                index, items = argument
                return self.resolve(items)[int(self.resolve(index))]
            if fn == "Fn::Split":
                separator, text = argument
                return str(self.resolve(text)).split(separator)
            if fn.startswith("Fn::"):
                raise Unresolvable(f"{fn} is not resolved offline: teach tests/support/cfn_intrinsics.py first")
        return {key: self.resolve(item) for key, item in value.items()}

    __call__ = resolve

    def physical_name(self, logical_id: str) -> str:
        properties = self.resources[logical_id].get("Properties", {})
        named = next((properties[p] for p in NAME_PROPERTIES if isinstance(properties.get(p), str | dict)), None)
        return str(self.resolve(named)) if named is not None else logical_id

    def key_id(self, logical_id: str) -> str:
        return logical_id

    def unplaced(self, logical_id: str, attribute: str) -> str:
        """An attribute these rules cannot place."""
        raise Unresolvable(f"no Fn::GetAtt {self.type_of(logical_id)}.{attribute} offline ({logical_id})")

    def arn(self, service: str, resource: str, *, region: bool = True, account: bool = True) -> str:
        return (
            f"arn:{self.partition}:{service}:{self.region if region else ''}:{self.account if account else ''}:"
            f"{resource}"
        )

    def ref(self, name: str) -> Any:
        pseudo = {
            "AWS::Partition": self.partition,
            "AWS::Region": self.region,
            "AWS::AccountId": self.account,
            "AWS::StackName": self.stack_name,
            "AWS::URLSuffix": "amazonaws.com",
        }
        if name in pseudo:
            return pseudo[name]
        parameter = self.template.get("Parameters", {}).get(name)
        if parameter is not None and "Default" in parameter:
            return parameter["Default"]
        kind = self.type_of(name)
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{self.region}.amazonaws.com/{self.account}/{self.physical_name(name)}"
        if kind == "AWS::ApiGatewayV2::Api":
            return API_ID
        if kind in {"AWS::SNS::Topic", "AWS::SecretsManager::Secret", "AWS::Lambda::LayerVersion"}:
            return self.get_att(name, "Arn")
        return self.physical_name(name)

    def get_att(self, logical_id: str, attribute: str) -> str:
        kind = self.type_of(logical_id)
        arns = {
            ("AWS::Lambda::Function", "Arn"): lambda name: self.arn("lambda", f"function:{name}"),
            ("AWS::IAM::Role", "Arn"): lambda name: self.arn("iam", f"role/{name}", region=False),
            ("AWS::SQS::Queue", "Arn"): lambda name: self.arn("sqs", name),
            ("AWS::SQS::Queue", "QueueName"): lambda name: name,
            ("AWS::DynamoDB::Table", "Arn"): lambda name: self.arn("dynamodb", f"table/{name}"),
            ("AWS::DynamoDB::Table", "StreamArn"): lambda name: self.arn(
                "dynamodb", f"table/{name}/stream/{STREAM_LABEL}"
            ),
            ("AWS::KMS::Key", "Arn"): lambda _: self.arn("kms", f"key/{self.key_id(logical_id)}"),
            ("AWS::Logs::LogGroup", "Arn"): lambda name: self.arn("logs", f"log-group:{name}:*"),
            ("AWS::Scheduler::ScheduleGroup", "Arn"): lambda name: self.arn("scheduler", f"schedule-group/{name}"),
            ("AWS::SNS::Topic", "Arn"): lambda name: self.arn("sns", name),
            ("AWS::SNS::Topic", "TopicArn"): lambda name: self.arn("sns", name),
            ("AWS::SecretsManager::Secret", "Arn"): lambda name: self.arn(
                "secretsmanager", f"secret:{name}{SECRET_SUFFIX}"
            ),
            ("AWS::Lambda::LayerVersion", "Arn"): lambda name: self.arn("lambda", f"layer:{name}:1"),
            ("AWS::S3::Bucket", "Arn"): lambda name: self.arn("s3", name, region=False, account=False),
        }
        if (kind, attribute) not in arns:
            return self.unplaced(logical_id, attribute)
        return arns[(kind, attribute)](self.physical_name(logical_id) if kind != "AWS::KMS::Key" else "")

    def type_of(self, logical_id: str) -> str:
        if logical_id not in self.resources:
            raise Unresolvable(f"{logical_id} is no resource of the template (a parameter without a default?)")
        return self.resources[logical_id]["Type"]

    def _sub(self, argument: Any) -> str:
        text, variables = (argument, {}) if isinstance(argument, str) else argument
        variables = {key: self.resolve(value) for key, value in variables.items()}

        def replace(match: re.Match) -> str:
            name = match.group(1)
            if name in variables:
                return str(variables[name])
            if "." in name:
                return self.get_att(*name.split(".", 1))
            return str(self.ref(name))

        # `${!Literal}` stays as written.
        return re.sub(r"\$\{([^!}][^}]*)\}", replace, text)
