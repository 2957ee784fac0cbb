"""What a deployment may choose about Interlude, with the defaults it gets when it chooses nothing.

Everything else (table layout, functions, grants, queues, routes) is decided by interlude.wiring and is not a
prop: a deployment that could change it would no longer be the shape the tests check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import RemovalPolicy
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_sns as sns


@dataclass(frozen=True, kw_only=True)
class CustomDomain:
    """The API under a name of your own; links in notices (PUBLIC_BASE_URL) then use it too.

    Give `certificate` (an ACM certificate for `domain_name` in the stack's region), or `hosted_zone` (a Route 53
    zone holding the name: a DNS-validated certificate is created), or both. With `hosted_zone` an alias record is
    created; without it, point a CNAME at the `ApiDomainTarget` output yourself.
    """

    domain_name: str
    certificate: acm.ICertificate | None = None
    hosted_zone: route53.IHostedZone | None = None
    # With a custom domain the execute-api URL is switched off, so nothing (a WAF in front, logs) is bypassed.
    disable_default_endpoint: bool = True

    def __post_init__(self) -> None:
        if self.certificate is None and self.hosted_zone is None:
            raise ValueError(f"CustomDomain({self.domain_name!r}) needs a certificate or a hosted_zone")


@dataclass(frozen=True, kw_only=True)
class ExistingTable:
    """A table that already holds Interlude's data (a point-in-time restore, a table kept from a torn-down stack).

    The stack then creates no table. The table must have wiring's key schema and inbox index (a restore keeps
    them); its stream (NEW_IMAGE) and TTL (attribute `ttl`) must be switched on before deploy (a restore drops
    both: docs/operations.md, "Restore").
    """

    table_name: str
    # The table's latest stream ARN (`aws dynamodb describe-table ... --query Table.LatestStreamArn`).
    stream_arn: str


@dataclass(frozen=True, kw_only=True)
class RouteThrottle:
    """Steady-state requests per second and burst, per route of the class (API Gateway route settings)."""

    rate_limit: float
    burst_limit: int


@dataclass(frozen=True, kw_only=True)
class Throttles:
    """Per route class (interlude.wiring.route_class): what one route of the class accepts per second."""

    # Mutating routes: each one is a conditional write transaction or more.
    writes: RouteThrottle = field(default_factory=lambda: RouteThrottle(rate_limit=50, burst_limit=100))
    # Reads, discovery and the token pages.
    reads: RouteThrottle = field(default_factory=lambda: RouteThrottle(rate_limit=100, burst_limit=200))
    # Long-poll and SSE: each request holds an api invocation for up to ~25 s, so 5/s is ~125 concurrent.
    held: RouteThrottle = field(default_factory=lambda: RouteThrottle(rate_limit=5, burst_limit=10))

    def of(self, route_class: str) -> RouteThrottle:
        return {"writes": self.writes, "reads": self.reads, "held": self.held}[route_class]


@dataclass(frozen=True, kw_only=True)
class InterludeProps:
    """Props of the Interlude construct; every field has a default a production deployment can keep."""

    # A prebuilt layer directory (`make layer` writes layers/core/build); None: the layer is built during
    # synthesis from the lock file (needs pip and the package index, no Docker).
    layer_dir: str | Path | None = None
    log_level: str = "INFO"
    domain: CustomDomain | None = None
    # Applies to the table, the token key ring, the customer-managed key's grants and the log groups.
    # RETAIN (default) keeps the data when the stack goes and turns on the table's deletion protection.
    removal_policy: RemovalPolicy = RemovalPolicy.RETAIN
    # A customer-managed KMS key for the table, every queue, the key ring secret, the webhook signing secrets (made
    # at run time), the log groups and the created alarm topic. None: AWS-owned/managed encryption. A key imported from elsewhere must already allow the
    # CloudWatch Logs and CloudWatch services (docs/operations.md, "Encryption").
    encryption_key: kms.IKey | None = None
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    # Every alarm notifies this topic; None: a topic is created (output AlarmTopic) for you to subscribe to.
    alarm_topic: sns.ITopic | None = None
    throttles: Throttles = field(default_factory=Throttles)
    # Function name -> reserved concurrency; None: wiring's (dispatch 10, timeouts 5). {} reserves nothing.
    reserved_concurrency: Mapping[str, int] | None = None
    # Tags on every resource the construct creates (and `interlude:deployment`, always), and on the webhook signing
    # secrets made at run time (with the stack's own tags too).
    tags: Mapping[str, str] = field(default_factory=dict)
    # Names the deployment in secret prefixes, alarm and dashboard names; None: the stack's name.
    deployment_name: str | None = None
    existing_table: ExistingTable | None = None
    dashboard: bool = True
    # Issue 14: the SES identity notifications are sent from (an address whose address or domain is verified in
    # SES in this region) and, optionally, the SES configuration set they are sent with. None: no e-mail is sent
    # (each e-mail notification is logged `not_configured`); Slack still works.
    notification_from_address: str | None = None
    ses_configuration_set: str | None = None
    # Issue 15: serve GET /runs/{runId}/ancestry and advertise it (discovery multiAgent.executionModel
    # .crossHostCausation). False: the route answers 404 not_found and discovery omits multiAgent.
    ancestry_endpoint: bool = True
