"""A customer's own CDK app with Interlude inside: a stack of theirs, their key, their pager, their domain.

    README.md beside this file: every build-time dependency, then `npx cdk deploy ApprovalsProd`.

Every Interlude prop used here is documented in infra/interlude_cdk/props.py; tests/infra/test_customer_app.py
synthesizes this app and checks that each one reaches the template.
"""

from __future__ import annotations

import json
from pathlib import Path

from aws_cdk import App, Environment, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_sns as sns
from constructs import Construct

from interlude_cdk import CustomDomain, Interlude, RouteThrottle, Throttles, apply_checks

DOMAIN = "approvals.example.com"
TAGS = {"cost-center": "platform-42", "owner": "approvals-team"}
# Tags of the stack itself (CloudFormation puts them on what it creates; Interlude on the secrets it creates).
STACK_TAGS = {"environment": "production"}
THROTTLES = Throttles(
    writes=RouteThrottle(rate_limit=20, burst_limit=40),
    reads=RouteThrottle(rate_limit=200, burst_limit=400),
    held=RouteThrottle(rate_limit=2, burst_limit=4),
)
# A grown account: its quota is stated, so wiring's reservations are made; these replace three of them, and
# `actions` keeps its default (interlude.wiring).
ACCOUNT_CONCURRENCY_QUOTA = 1000
RESERVED_CONCURRENCY = {"dispatch": 20, "timeouts": 10, "callbacks": 5}


class ApprovalsStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.key = kms.Key(self, "DataKey", enable_key_rotation=True, description="approvals data")
        self.pager = sns.Topic(self, "Pager", master_key=self.key, enforce_ssl=True)
        zone = route53.HostedZone.from_hosted_zone_attributes(
            self, "Zone", hosted_zone_id="Z0123456789EXAMPLE", zone_name="example.com"
        )
        self.interlude = Interlude(
            self,
            "Approvals",
            # `make layer` output, or None: the layer is built while synthesizing.
            layer_dir=self.node.try_get_context("layerDir"),
            deployment_name="approvals-prod",
            domain=CustomDomain(domain_name=DOMAIN, hosted_zone=zone),
            encryption_key=self.key,
            alarm_topic=self.pager,
            log_retention=logs.RetentionDays.THREE_MONTHS,
            throttles=THROTTLES,
            account_concurrency_quota=ACCOUNT_CONCURRENCY_QUOTA,
            reserved_concurrency=RESERVED_CONCURRENCY,
            tags=TAGS,
            # Approvers are mailed their decision links from this SES identity, with this configuration set.
            notification_from_address=f"approvals@{DOMAIN}",
            ses_configuration_set="approvals-prod",
            # Run lineage stays private: GET /runs/{id}/ancestry answers 404 and discovery omits multiAgent.
            ancestry_endpoint=False,
        )


def build_app(context: dict | None = None, outdir: str | None = None) -> tuple[App, ApprovalsStack]:
    # The CDK CLI passes cdk.json's context (feature flags) itself; a bare `python app.py` reads it here.
    flags = json.loads((Path(__file__).parent / "cdk.json").read_text())["context"]
    app = App(context={**flags, **(context or {})}, outdir=outdir)
    stack = ApprovalsStack(
        app, "ApprovalsProd", env=Environment(account="111111111111", region="eu-west-1"), tags=STACK_TAGS
    )
    apply_checks(app)
    return app, stack


if __name__ == "__main__":
    build_app()[0].synth()
