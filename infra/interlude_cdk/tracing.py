"""The deployment's X-Ray sampling (issue 31, item 4): one sampling rule matching its functions alone.

Every function traces actively (functions.Functions.TRACING). Without a rule of its own a deployment is sampled by
the account's default rule (the first request each second, then 5%), which traces nearly every invocation of a
quiet deployment. The rule matches the functions by their ARNs: CloudFormation names each one after its stack, so
`function:<stack name>-*` is the deployment's functions. It is also any stack's whose name begins with this one's and a
hyphen (`Interlude-Staging` beside `Interlude`): such a stack's functions are sampled at this rate too. No one pattern
does better: a generated name's parts are cut to fit 64 characters, and naming the functions explicitly would replace
each of them on upgrade, stranding the deadline schedules that invoke them by ARN.
"""

from __future__ import annotations

import hashlib

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_xray as xray
from constructs import Construct

from interlude_cdk.props import TraceSampling

# X-Ray rule names: 1-32 characters, unique in the account and region.
RULE_NAME_PREFIX = "interlude-"


class Tracing(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, sampling: TraceSampling) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        functions = stack.format_arn(
            service="lambda",
            resource="function",
            resource_name=f"{stack.stack_name}-*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        digest = hashlib.sha256(f"{stack.stack_name}/{self.node.path}".encode()).hexdigest()
        self.rule = xray.CfnSamplingRule(
            self,
            "SamplingRule",
            sampling_rule=xray.CfnSamplingRule.SamplingRuleProperty(
                rule_name=RULE_NAME_PREFIX + digest[: 32 - len(RULE_NAME_PREFIX)],
                priority=sampling.priority,
                fixed_rate=sampling.fixed_rate,
                reservoir_size=sampling.reservoir_per_s,
                resource_arn=functions,
                service_name="*",
                service_type="*",
                host="*",
                http_method="*",
                url_path="*",
                version=1,
            ),
        )
