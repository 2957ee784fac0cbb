"""The deployment's X-Ray sampling (issue 31, item 4): one sampling rule matching its functions alone.

Every function traces actively (functions.Functions.TRACING). Without a rule of its own a deployment is sampled by
the account's default rule (the first request each second, then 5%), which traces nearly every invocation of a
quiet deployment. The rule matches the functions by the name each is traced under, which CloudFormation makes
`<stack name>-<logical id>-<random suffix>` (none names itself: naming the functions explicitly would replace each
of them on upgrade, stranding the deadline schedules that invoke them by ARN). A stack's name is unique in the
account and region, and a logical id holds no hyphen: `<stack name>-<the logical ids' common start>*` matches this
stack's functions and not those of a sibling stack named after it (`Interlude-staging` beside `Interlude`, whose
functions are `Interlude-staging-…`), which `<stack name>-*` matched too (ADR 0203).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from typing import cast

from aws_cdk import CfnElement, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_xray as xray
from constructs import Construct

from interlude_cdk.props import TraceSampling

# X-Ray rule names: 1-32 characters, unique in the account and region.
RULE_NAME_PREFIX = "interlude-"
# A rule's ServiceName: at most 64 characters.
SERVICE_NAME_MAX = 64


class Tracing(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, sampling: TraceSampling, functions: Iterable[lambda_.Function]
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        digest = hashlib.sha256(f"{stack.stack_name}/{self.node.path}".encode()).hexdigest()
        self.rule = xray.CfnSamplingRule(
            self,
            "SamplingRule",
            sampling_rule=xray.CfnSamplingRule.SamplingRuleProperty(
                rule_name=RULE_NAME_PREFIX + digest[: 32 - len(RULE_NAME_PREFIX)],
                priority=sampling.priority,
                fixed_rate=sampling.fixed_rate,
                reservoir_size=sampling.reservoir_per_s,
                resource_arn="*",
                service_name=function_names(stack, functions),
                service_type="*",
                host="*",
                http_method="*",
                url_path="*",
                version=1,
            ),
        )


def function_names(stack: Stack, functions: Iterable[lambda_.Function]) -> str:
    """The pattern the names CloudFormation gives `functions` match, and no other stack's functions: the stack's
    name, a hyphen and the start their logical ids share (cut to ServiceName's length, which only widens it)."""
    logical_ids = [stack.get_logical_id(cast(CfnElement, f.node.default_child)) for f in functions]
    shared = os.path.commonprefix(logical_ids)
    return f"{stack.stack_name}-{shared}"[: SERVICE_NAME_MAX - 1] + "*"
