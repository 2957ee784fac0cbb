"""What a deployment may choose about Interlude, with the defaults it gets when it chooses nothing.

Everything else (table layout, functions, grants, queues, routes) is decided by interlude.wiring and is not a
prop: a deployment that could change it would no longer be the shape the tests check.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from aws_cdk import RemovalPolicy, Token
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_sns as sns

from interlude import wiring
from interlude.config import DEFAULT_KEY_CACHE_SECONDS, key_cache_seconds

# The tag every resource of a deployment carries: its name.
DEPLOYMENT_TAG = "interlude:deployment"
# Lambda keeps this much of an account's concurrency quota unreserved (all of it when the quota is smaller):
# reservations and provisioned concurrency together fit in `quota - 100` ("Configuring reserved concurrency").
UNRESERVED_MINIMUM = 100
# An SQS event source's ScalingConfig.MaximumConcurrency, as Lambda accepts it.
SQS_MAX_CONCURRENCY_RANGE = (2, 1000)
# An SQS consumer without reserved concurrency gets this many concurrent invocations from its queue at most.
DEFAULT_SQS_MAX_CONCURRENCY = 5
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# Lambda's system log levels (its own records of each invocation).
SYSTEM_LOG_LEVELS = ("DEBUG", "INFO", "WARN")
MEMORY_RANGE_MB = (128, 10240)
# A provisioned table's (or index's) capacity units a second, as DynamoDB's default per-table quota allows them
# (Service Quotas: DynamoDB, "Table-level read/write throughput limit": 40,000 each, adjustable).
CAPACITY_RANGE = (1, 40_000)
# What Application Auto Scaling's target tracking accepts for DynamoDB's utilization metrics, in percent.
TARGET_UTILIZATION_RANGE = (20, 90)
# The deployment's name is part of CloudWatch dashboard names (letters, digits, - and _ only), Secrets Manager secret
# names, alarm and metric names (255 characters each) and the alarm topic's display name (100 characters, 17 of them
# ours): what all of them take.
DEPLOYMENT_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# "Tag naming limits and requirements" (AWS General Reference, "Tagging your AWS resources"): a key of 1-128 and a
# value of 0-256 letters, digits, spaces and `_ . : / = + - @`; `aws:` begins no key of yours; 50 tags a resource,
# one of them the construct's own (DEPLOYMENT_TAG).
TAG_KEY = re.compile(r"[\w\s.:/=+\-@]{1,128}")
TAG_VALUE = re.compile(r"[\w\s.:/=+\-@]{0,256}")
MAX_TAGS = 49
# SES: the sender is an address (its identity, or its domain's, verified); a configuration set's name is 1-64
# letters, digits, _ and -.
EMAIL_ADDRESS = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
CONFIGURATION_SET_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# A DNS name API Gateway takes as a custom domain; no wildcard, since every link Interlude hands out is made under it.
DOMAIN_NAME = re.compile(r"(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}")
# DynamoDB CreateTable's TableName, and a table's stream ARN (DescribeTable's LatestStreamArn).
TABLE_NAME = re.compile(r"[A-Za-z0-9_.-]{3,255}")
STREAM_ARN = re.compile(r"arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:\d{12}:table/(?P<table>[A-Za-z0-9_.-]{3,255})/stream/\S+")
# What the stack's removal policy may be: RETAIN also turns the tables' deletion protection on (SNAPSHOT is refused by
# the log groups and secrets; RETAIN_ON_UPDATE_OR_DELETE would keep the data with deletion protection off).
REMOVAL_POLICIES = (RemovalPolicy.RETAIN, RemovalPolicy.DESTROY)


def require_whole(prop: str, value: object, low: int, high: int | None = None, *, why: str = "") -> None:
    """ValueError naming `prop` unless `value` is a whole number (not a bool) from `low` to `high` (None: no top)."""
    if not isinstance(value, int):
        raise ValueError(f"{prop} must be a whole number, not {value!r}")
    require_number(prop, value, low, high, why=why)


def require_number(prop: str, value: object, low: float, high: float | None = None, *, why: str = "") -> None:
    """ValueError naming `prop` unless `value` is a number (not a bool, not NaN) from `low` to `high` (None: no top)."""
    top = math.inf if high is None else high
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= top:
        allowed = f"{low:g} or more" if high is None else f"{low:g}-{high:g}"
        raise ValueError(f"{prop} must be {allowed}, not {value!r}{why}")


def require_match(prop: str, value: object, pattern: re.Pattern, allowed: str) -> None:
    """ValueError naming `prop` unless `value` is text `pattern` matches whole (a token is left to CloudFormation)."""
    if isinstance(value, str) and Token.is_unresolved(value):
        return
    if not isinstance(value, str) or pattern.fullmatch(value) is None:
        raise ValueError(f"{prop} must be {allowed}, not {value!r}")


def deployment_name_problem(name: str) -> str | None:
    """Why `name` cannot name a deployment (None: it can)."""
    if DEPLOYMENT_NAME.fullmatch(name):
        return None
    return f"must be 1-64 letters, digits, - or _ (it names dashboards, alarms and secrets), not {name!r}"


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
        require_match("CustomDomain.domain_name", self.domain_name, DOMAIN_NAME, "a DNS name such as api.example.com")
        if self.certificate is None and self.hosted_zone is None:
            raise ValueError(f"CustomDomain({self.domain_name!r}) needs a certificate or a hosted_zone")


@dataclass(frozen=True, kw_only=True)
class ExistingTable:
    """Tables that already hold Interlude's data (a point-in-time restore, tables kept from a torn-down stack).

    The stack then creates no table. The tables must have wiring's key schema, the first its inbox index (a restore
    keeps them); the first's stream (NEW_IMAGE) and both tables' TTL (attribute `ttl`) must be switched on before
    deploy (a restore drops both: docs/operations.md, "Restore").
    """

    table_name: str
    # The table's latest stream ARN (`aws dynamodb describe-table ... --query Table.LatestStreamArn`).
    stream_arn: str
    # The second table (wiring.ENTRIES_TABLE), restored to the same instant as the first (docs/operations.md,
    # "Restore"); None only for a table of a release that had no second table: the stack then makes its own (or keeps
    # the one it has, under the same id, so an upgrade never replaces it: docs/operations.md §9 says when to name an
    # empty one here instead).
    entries_table_name: str | None = None

    def __post_init__(self) -> None:
        allowed = "a DynamoDB table name (3-255 letters, digits, _ . -)"
        require_match("ExistingTable.table_name", self.table_name, TABLE_NAME, allowed)
        if self.entries_table_name is not None:
            require_match("ExistingTable.entries_table_name", self.entries_table_name, TABLE_NAME, allowed)
        require_match(
            "ExistingTable.stream_arn", self.stream_arn, STREAM_ARN, f"the stream ARN of table {self.table_name!r}"
        )
        stream_of = STREAM_ARN.fullmatch(self.stream_arn) if isinstance(self.stream_arn, str) else None
        if stream_of is not None and not Token.is_unresolved(self.table_name) and stream_of["table"] != self.table_name:
            raise ValueError(
                f"ExistingTable.stream_arn is the stream of table {stream_of['table']!r}, not of {self.table_name!r}"
            )


@dataclass(frozen=True, kw_only=True)
class Autoscaled:
    """Capacity units a second that auto scaling keeps between `minimum` and `maximum`."""

    minimum: int
    maximum: int


@dataclass(frozen=True, kw_only=True)
class TableCapacity:
    """Provisioned capacity with auto scaling for one table and its indexes, instead of on demand (docs/adr/0168).

    At a steady pace a provisioned unit costs less than a request unit on demand as long as the table uses more than
    about 29 % of what it holds ($0.00065 a write capacity unit-hour against $0.625 per million write request units,
    us-east-1 list prices), and auto scaling keeps it near `target_utilization_percent`: a deployment with steady
    traffic pays about 40 % of on demand's rate for its reads and writes. What it gives up: a burst past what is
    provisioned (and the few minutes auto scaling takes to follow it, beyond DynamoDB's burst capacity) is
    throttled: the API answers `503 runner_unavailable` with `Retry-After`, the workers' records go again. An index
    gets its table's range and target."""

    reads: Autoscaled
    writes: Autoscaled
    target_utilization_percent: int = 70

    def __post_init__(self) -> None:
        for name, scaled in (("reads", self.reads), ("writes", self.writes)):
            low, high = CAPACITY_RANGE
            require_whole(f"TableCapacity.{name}.minimum", scaled.minimum, 0)
            require_whole(f"TableCapacity.{name}.maximum", scaled.maximum, 0)
            if not low <= scaled.minimum <= scaled.maximum <= high:
                raise ValueError(
                    f"TableCapacity.{name} must keep {low} <= minimum <= maximum <= {high:,}, not "
                    f"{scaled.minimum}-{scaled.maximum}"
                )
        target = self.target_utilization_percent
        require_number("TableCapacity.target_utilization_percent", target, *TARGET_UTILIZATION_RANGE)


@dataclass(frozen=True, kw_only=True)
class RouteThrottle:
    """Steady-state requests per second and burst, per route of the class (API Gateway route settings)."""

    rate_limit: float
    burst_limit: int

    def __post_init__(self) -> None:
        # API Gateway refuses a negative limit (the deploy rolls back); 0 is API Gateway's own "refuse them all".
        require_number("RouteThrottle.rate_limit", self.rate_limit, 0)
        require_whole("RouteThrottle.burst_limit", self.burst_limit, 0)


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
class TraceSampling:
    """X-Ray sampling of the deployment's functions: a sampling rule the construct owns (AWS::XRay::SamplingRule),
    matching its functions only. `reservoir_per_s` traces a second across the deployment, then `fixed_rate` of the
    rest. The default traces 1 in 100 invocations and keeps no reservoir, so a quiet deployment is not traced
    whole (the account's default rule: 1 a second, then 5%)."""

    fixed_rate: float = 0.01
    reservoir_per_s: int = 0
    # Lower numbers win (1-9,999); the account's default rule is always last.
    priority: int = 9000

    def __post_init__(self) -> None:
        require_number("TraceSampling.fixed_rate", self.fixed_rate, 0, 1)
        require_whole("TraceSampling.reservoir_per_s", self.reservoir_per_s, 0)
        require_whole("TraceSampling.priority", self.priority, 1, 9999)


@dataclass(frozen=True, kw_only=True)
class InterludeProps:
    """Props of the Interlude construct; every field has a default a production deployment can keep."""

    # A prebuilt layer directory (`make layer` writes layers/core/build); None: the layer is built during
    # synthesis from the lock file (needs pip and the package index, no Docker).
    layer_dir: str | Path | None = None
    # Every function's log level (Powertools' LOG_LEVEL and Lambda's application log level): DEBUG ... CRITICAL.
    log_level: str = "INFO"
    # Lambda's own records of each invocation (platform.start, platform.runtimeDone, platform.report): INFO keeps them
    # (the report holds each invocation's duration and memory used); WARN sends only Lambda's warnings, about two
    # thirds fewer log bytes per lifecycle (bench/cost_per_million.py prints both); DEBUG adds Lambda's debug records.
    system_log_level: str = "INFO"
    domain: CustomDomain | None = None
    # Applies to the table, the token key ring, the customer-managed key's grants and the log groups.
    # RETAIN (default) keeps the data when the stack goes and turns on the table's deletion protection.
    removal_policy: RemovalPolicy = RemovalPolicy.RETAIN
    # A customer-managed KMS key for the table, every queue, the key ring secret, the webhook signing secrets (made
    # at run time), the log groups and the created alarm topic. None: AWS-owned/managed encryption. A key imported from elsewhere must already allow the
    # CloudWatch Logs and CloudWatch services (docs/operations.md, "Encryption").
    encryption_key: kms.IKey | None = None
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    # Issue 31: how the functions' invocations are traced (a sampling rule of the deployment's own); None: no rule,
    # the account's rules decide (by default every invocation of a quiet deployment is traced).
    trace_sampling: TraceSampling | None = field(default_factory=TraceSampling)
    # Every alarm notifies this topic; None: a topic is created (output AlarmTopic) for you to subscribe to.
    alarm_topic: sns.ITopic | None = None
    throttles: Throttles = field(default_factory=Throttles)
    # The account's Lambda concurrency quota in this region (Service Quotas: Lambda, "Concurrent executions").
    # None (default): unknown, as in a fresh account whose quota may be 10: nothing is reserved, so the first deploy
    # succeeds. A number: wiring's reservations (wiring.Function.reserved_concurrency) merged with
    # `reserved_concurrency` are made, and must fit in the quota less the 100 Lambda keeps unreserved.
    account_concurrency_quota: int | None = None
    # Function name -> reserved concurrency (1 or more), merged over wiring's (a function not named keeps its default;
    # None removes its reservation). Needs `account_concurrency_quota`.
    reserved_concurrency: Mapping[str, int | None] = field(default_factory=dict)
    # Function name -> ScalingConfig.MaximumConcurrency (2-1,000) of the SQS event source of a function that
    # consumes a queue, merged over the default: its reserved concurrency, else DEFAULT_SQS_MAX_CONCURRENCY. Never
    # more than its reserved concurrency (a poller beyond it would be throttled and count receives toward the DLQ).
    sqs_max_concurrency: Mapping[str, int] = field(default_factory=dict)
    # Function name -> memory in MB (128-10,240), merged over wiring's size of each function (Function.memory_mb;
    # docs/adr/0171).
    memory_mb: Mapping[str, int] = field(default_factory=dict)
    # Function name -> provisioned concurrency, on an alias `live` of a published version that every invoker (the
    # HTTP API, the event source mappings) calls. Counts toward the quota like a reservation; not for the scheduler's
    # target (timeouts), nor with `api_snap_start`. Billed while provisioned (docs/operations.md, "Tuning").
    provisioned_concurrency: Mapping[str, int] = field(default_factory=dict)
    # SnapStart for the api function (published version + alias `live`, which the HTTP API invokes): restores
    # replace most of its cold start; billed per GB cached and per GB restored (docs/operations.md, "Tuning").
    api_snap_start: bool = False
    # Every function in this VPC (None: Lambda's own network). It must reach DynamoDB, SQS, Secrets Manager,
    # EventBridge Scheduler, SES, S3 (the audit anchors) and X-Ray (endpoints or NAT), and the callbacks and actions
    # functions the internet (tenants' URLs): private subnets with a NAT gateway.
    vpc: ec2.IVpc | None = None
    # Which of the VPC's subnets (None: CDK's default, the private subnets with egress).
    vpc_subnets: ec2.SubnetSelection | None = None
    # The functions' security groups (empty: one per function, all egress allowed).
    security_groups: Sequence[ec2.ISecurityGroup] = ()
    # Function name -> a callable given that function after the construct has built it: the escape hatch for what
    # no prop covers (its environment, ephemeral storage, a layer, `node.default_child` overrides), as AWS
    # Solutions Constructs' `lambdaFunctionProps`. What it changes is the deployment's own: the tests check the rest.
    function_overrides: Mapping[str, Callable[[lambda_.Function], None]] = field(default_factory=dict)
    # Tags on every resource the construct creates (and `interlude:deployment`, always), and on the webhook signing
    # secrets made at run time (with the stack's own tags too: together at most 1 KB as JSON, callbacks.py).
    tags: Mapping[str, str] = field(default_factory=dict)
    # Names the deployment in secret prefixes, alarm and dashboard names (1-64 letters, digits, - and _); None: the
    # stack's name, which must then be such a name. Changing it on a live stack leaves the secrets made at run time
    # under the old prefix.
    deployment_name: str | None = None
    existing_table: ExistingTable | None = None
    # Table logical name (wiring.TABLES: "Table", "EntriesTable") -> provisioned capacity with auto scaling, for a
    # deployment whose traffic is steady; a table not named stays on demand (docs/operations.md, "Tuning"). Not with
    # `existing_table`: the stack does not change tables it imports.
    table_capacity: Mapping[str, TableCapacity] = field(default_factory=dict)
    dashboard: bool = True
    # Issue 14: the SES identity notifications are sent from (an address whose address or domain is verified in
    # SES in this region) and, optionally, the SES configuration set they are sent with. None: no e-mail is sent
    # (each e-mail notification is logged `not_configured`); Slack still works.
    notification_from_address: str | None = None
    ses_configuration_set: str | None = None
    # Issue 15: serve GET /runs/{runId}/ancestry and advertise it (discovery multiAgent.executionModel
    # .crossHostCausation). False: the route answers 404 not_found and discovery omits multiAgent.
    ancestry_endpoint: bool = True
    # Issue 26 S6: the audit anchors' bucket (Object Lock; audit_anchor.py, always retained). How long
    # each published anchor version stays unchangeable (1-36,500 days), and the lock's mode: COMPLIANCE (no one, the
    # account's root included, can shorten or lift it) or GOVERNANCE (a principal granted
    # s3:BypassGovernanceRetention can: for a stack you tear down while testing).
    audit_anchor_retention_days: int = 365
    audit_anchor_lock_mode: Literal["COMPLIANCE", "GOVERNANCE"] = "COMPLIANCE"
    # How long an api instance trusts an API key it read as active (0-60 s): a key revoked elsewhere is refused by
    # every instance within it (at once by the one that revoked it); each instance reads each key in use once per
    # period (docs/configuration.md, "Keys: revocation and expiry").
    key_cache_seconds: float = DEFAULT_KEY_CACHE_SECONDS

    def __post_init__(self) -> None:
        names = {spec.name for spec in wiring.FUNCTIONS}
        for prop in (
            "reserved_concurrency",
            "sqs_max_concurrency",
            "memory_mb",
            "provisioned_concurrency",
            "function_overrides",
        ):
            unknown = set(getattr(self, prop)) - names
            if unknown:
                raise ValueError(f"{prop} names no function of wiring.FUNCTIONS: {sorted(unknown)}")
        self._check_values()
        self._check_names()
        if self.vpc is None and (self.vpc_subnets is not None or self.security_groups):
            raise ValueError("vpc_subnets and security_groups need a vpc")
        if self.account_concurrency_quota is None and any(v is not None for v in self.reserved_concurrency.values()):
            raise ValueError(
                "reserved_concurrency needs account_concurrency_quota (Service Quotas: Lambda, Concurrent executions): "
                "a reservation the account cannot hold fails the deploy"
            )
        self._check_provisioned()
        self._check_table_capacity()
        self._check_sqs_max_concurrency()
        self._check_quota()

    def _check_values(self) -> None:
        """Each value of the type and within the range the service that takes it accepts."""
        for prop, levels in (("log_level", LOG_LEVELS), ("system_log_level", SYSTEM_LOG_LEVELS)):
            level = getattr(self, prop)
            if not isinstance(level, str) or level.upper() not in levels:
                raise ValueError(f"{prop} must be one of {', '.join(levels)}, not {level!r}")
        for prop in ("api_snap_start", "ancestry_endpoint", "dashboard"):
            if not isinstance(getattr(self, prop), bool):
                raise ValueError(f"{prop} must be True or False, not {getattr(self, prop)!r}")
        if not isinstance(self.log_retention, logs.RetentionDays):
            raise ValueError(
                f"log_retention must be a logs.RetentionDays (what CloudWatch Logs keeps), not {self.log_retention!r}"
            )
        if self.removal_policy not in REMOVAL_POLICIES:
            raise ValueError(
                f"removal_policy must be RemovalPolicy.RETAIN or RemovalPolicy.DESTROY, not {self.removal_policy!r}"
            )
        if isinstance(self.key_cache_seconds, bool) or not isinstance(self.key_cache_seconds, int | float):
            raise ValueError(f"key_cache_seconds must be a number of seconds, not {self.key_cache_seconds!r}")
        try:
            key_cache_seconds(self.key_cache_seconds)
        except ValueError as refused:
            raise ValueError(f"key_cache_seconds {refused}") from None
        for name, memory in self.memory_mb.items():
            require_whole(f"memory_mb[{name!r}]", memory, *MEMORY_RANGE_MB)
        if self.account_concurrency_quota is not None:
            require_whole("account_concurrency_quota", self.account_concurrency_quota, 1)
        for name, reserved in self.reserved_concurrency.items():
            if reserved is not None:
                stopped = " (0 would stop it; None removes its reservation)"
                require_whole(f"reserved_concurrency[{name!r}]", reserved, 1, why=stopped)
        for name, maximum in self.sqs_max_concurrency.items():
            require_whole(f"sqs_max_concurrency[{name!r}]", maximum, *SQS_MAX_CONCURRENCY_RANGE)

    def reservations(self) -> dict[str, int]:
        """Function name -> reserved concurrency the deployment makes (none without account_concurrency_quota)."""
        if self.account_concurrency_quota is None:
            return {}
        merged: dict[str, int | None] = {spec.name: spec.reserved_concurrency for spec in wiring.FUNCTIONS}
        merged.update(self.reserved_concurrency)
        return {name: value for name, value in merged.items() if value is not None}

    def sqs_max_concurrencies(self) -> dict[str, int]:
        """Function name -> MaximumConcurrency of its SQS event source, for every function that consumes a queue."""
        reserved = self.reservations()

        def default(spec: wiring.Function) -> int:
            # Its own (wiring), within its reservation; else its reservation; else the construct's default.
            held = reserved.get(spec.name)
            own = spec.max_concurrency
            if own is None:
                return held if held is not None else DEFAULT_SQS_MAX_CONCURRENCY
            return own if held is None else min(own, held)

        return {
            spec.name: self.sqs_max_concurrency.get(spec.name, default(spec)) for spec in wiring.FUNCTIONS if spec.consumes
        }

    def with_alias(self, name: str) -> bool:
        """Whether function `name` is invoked through an alias of a published version (`live`)."""
        return name in self.provisioned_concurrency or (self.api_snap_start and name == wiring.ROUTES_FUNCTION)

    def _check_provisioned(self) -> None:
        if wiring.SCHEDULES.target in self.provisioned_concurrency:
            raise ValueError(
                f"provisioned_concurrency cannot name {wiring.SCHEDULES.target!r}: EventBridge Scheduler invokes it "
                "unqualified, never through an alias"
            )
        if self.api_snap_start and wiring.ROUTES_FUNCTION in self.provisioned_concurrency:
            raise ValueError("Lambda does not combine SnapStart with provisioned concurrency: choose one for the api")
        reserved = self.reservations()
        for name, count in self.provisioned_concurrency.items():
            require_whole(f"provisioned_concurrency[{name!r}]", count, 1)
            if name in reserved and count > reserved[name]:
                raise ValueError(
                    f"provisioned_concurrency[{name!r}] = {count} exceeds its reserved concurrency {reserved[name]}"
                )

    def _check_names(self) -> None:
        """The names and tags the construct hands to AWS as they are: each as the service that takes it allows."""
        name = self.deployment_name
        if name is not None:
            problem = deployment_name_problem(name) if isinstance(name, str) else f"must be text, not {name!r}"
            if problem is not None:
                raise ValueError(f"deployment_name {problem}")
        if len(self.tags) > MAX_TAGS:
            raise ValueError(
                f"tags: at most {MAX_TAGS} (AWS takes 50 a resource, one is {DEPLOYMENT_TAG!r}), not {len(self.tags)}"
            )
        for key, value in self.tags.items():
            require_match("a key of tags", key, TAG_KEY, "1-128 letters, digits, spaces and _ . : / = + - @")
            if key.lower().startswith("aws:") or key == DEPLOYMENT_TAG:
                raise ValueError(
                    f"tags: the key {key!r} is reserved (aws:* is AWS's, {DEPLOYMENT_TAG} the construct's)"
                )
            require_match(f"tags[{key!r}]", value, TAG_VALUE, "0-256 letters, digits, spaces and _ . : / = + - @")
        if self.notification_from_address is not None:
            sender = self.notification_from_address
            require_match("notification_from_address", sender, EMAIL_ADDRESS, "an e-mail address")
        if self.ses_configuration_set is not None:
            if self.notification_from_address is None:
                raise ValueError("ses_configuration_set needs notification_from_address: without it no e-mail is sent")
            allowed = "1-64 letters, digits, _ and -"
            require_match("ses_configuration_set", self.ses_configuration_set, CONFIGURATION_SET_NAME, allowed)

    def _check_table_capacity(self) -> None:
        unknown = set(self.table_capacity) - {spec.logical_name for spec in wiring.TABLES}
        if unknown:
            raise ValueError(f"table_capacity names no table of wiring.TABLES: {sorted(unknown)}")
        if self.table_capacity and self.existing_table is not None:
            raise ValueError("table_capacity with existing_table: the stack does not change the tables it imports")

    def _check_sqs_max_concurrency(self) -> None:
        consumers = {spec.name for spec in wiring.FUNCTIONS if spec.consumes}
        stray = set(self.sqs_max_concurrency) - consumers
        if stray:
            raise ValueError(f"sqs_max_concurrency names functions that consume no queue: {sorted(stray)}")
        reserved = self.reservations()
        low, high = SQS_MAX_CONCURRENCY_RANGE
        for name, maximum in self.sqs_max_concurrencies().items():
            if not low <= maximum <= high:
                raise ValueError(
                    f"the SQS maximum concurrency of {name!r} must be {low}-{high}, not {maximum} (a reservation "
                    f"below {low} leaves its queue no valid maximum: reserve at least {low}, or none)"
                )
            if name in reserved and maximum > reserved[name]:
                raise ValueError(
                    f"sqs_max_concurrency[{name!r}] = {maximum} exceeds its reserved concurrency {reserved[name]}"
                )

    def _check_quota(self) -> None:
        quota = self.account_concurrency_quota
        if quota is None:
            if self.provisioned_concurrency:
                raise ValueError("provisioned_concurrency needs account_concurrency_quota: it is taken from the quota")
            return
        reserved = self.reservations()
        # Provisioned concurrency of a function with a reservation is part of it; of one without, it is taken
        # from the unreserved pool, which must keep UNRESERVED_MINIMUM.
        held = sum(reserved.values()) + sum(n for name, n in self.provisioned_concurrency.items() if name not in reserved)
        room = max(quota - UNRESERVED_MINIMUM, 0)
        if held > room:
            raise ValueError(
                f"{held} reserved and provisioned concurrent executions do not fit an account quota of {quota}: Lambda "
                f"keeps {UNRESERVED_MINIMUM} unreserved, leaving {room}. Raise the quota (Service Quotas) or reserve "
                "less (reserved_concurrency={name: None, ...})"
            )
