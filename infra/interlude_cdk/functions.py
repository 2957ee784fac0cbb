"""One Lambda function (with its own log group and role) per wiring.FUNCTIONS entry, plus the stream trigger."""

from __future__ import annotations

import sysconfig
from collections.abc import Mapping
from pathlib import Path

import jsii
from aws_cdk import Acknowledgment, Annotations, Duration, Stack, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct, IValidation

from interlude import config, wiring
from interlude.adapters.metrics import DEPLOYMENT_ENV
from interlude_cdk.layer import ARCHITECTURE, PROJECT_ROOT, RUNTIME
from interlude_cdk.props import InterludeProps


def _functions_dir() -> Path:
    """functions/ of a checkout; an installed project carries the same files under <prefix>/share/interlude."""
    checkout = PROJECT_ROOT / "functions"
    return checkout if checkout.is_dir() else Path(sysconfig.get_path("data")) / "share" / "interlude" / "functions"


FUNCTIONS_DIR = _functions_dir()
# What a function may do with the customer-managed key: read and write what it encrypts, nothing on the key itself.
KEY_USE_ACTIONS = ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey")
SERVICE_NAME = "interlude"
LIVE_ALIAS = "live"
# A function in a VPC: Lambda makes, reads and removes its network interfaces as the function's role.
NETWORK_INTERFACE_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
)
# Python's level names (Powertools' LOG_LEVEL) as Lambda's application log level filters them.
APPLICATION_LOG_LEVELS = {
    "DEBUG": lambda_.ApplicationLogLevel.DEBUG,
    "INFO": lambda_.ApplicationLogLevel.INFO,
    "WARNING": lambda_.ApplicationLogLevel.WARN,
    "ERROR": lambda_.ApplicationLogLevel.ERROR,
    "CRITICAL": lambda_.ApplicationLogLevel.FATAL,
}
# What a stream event source mapping reads with; scoped to this table's stream as in the DynamoDB guide's
# "IAM policy to allow a Lambda function to access DynamoDB stream records".
STREAM_READ_ACTIONS = (
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
)


class Functions(Construct):
    # The functions run where the core layer's wheels were built for.
    RUNTIME = RUNTIME
    ARCHITECTURE = ARCHITECTURE
    TRACING = lambda_.Tracing.ACTIVE
    CODE_EXCLUDE = ("**/__pycache__", "**/*.pyc")
    # Failed-batch records wait this long for an operator to replay them.
    DLQ_RETENTION = Duration.days(14)
    # The outbox must see every event item, including those written while the mapping was being created.
    STREAM_START = lambda_.StartingPosition.TRIM_HORIZON

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        table: dynamodb.ITable,
        entries_table: dynamodb.ITable,
        index_arns: list[str],
        layers: list[lambda_.ILayerVersion],
        props: InterludeProps,
        deployment: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self._deployment = deployment
        self._table = table
        self._entries_table = entries_table
        self._index_arns = index_arns
        self._layers = layers
        self._props = props
        self._key = props.encryption_key
        self._reserved = props.reservations()
        self.by_name: dict[str, lambda_.Function] = {}
        # What invokes each function (the HTTP API, its event source mappings) calls: the function, or its alias
        # `live` where provisioned concurrency or SnapStart needs a published version.
        self.invoked: dict[str, lambda_.IFunction] = {}
        self.stream_dlqs: dict[str, sqs.Queue] = {}
        readers = [spec.name for spec in wiring.FUNCTIONS if spec.reads_stream]
        if len(readers) > 1:
            # Two mappings would each see every record: the outbox would run its side effects twice.
            raise ValueError(f"only one function may read the table stream, wiring names {readers}")
        for spec in wiring.FUNCTIONS:
            function = self.by_name[spec.name] = self._build_function(spec)
            # At synthesis, once function_overrides and anything after the construct have set its environment.
            function.node.add_validation(StartsWithItsSettings(spec.name, function))
            self.invoked[spec.name] = self._alias(spec, function) if props.with_alias(spec.name) else function
            if spec.reads_stream:
                self.stream_dlqs[spec.name] = self._connect_stream(spec, function, self.invoked[spec.name])

    def _build_function(self, spec: wiring.Function) -> lambda_.Function:
        scope = Construct(self, pascal_case(spec.name))
        log_group = logs.LogGroup(
            scope,
            "Logs",
            retention=self._props.log_retention,
            encryption_key=self._key,
            removal_policy=self._props.removal_policy,
        )
        role = iam.Role(
            scope,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"interlude {spec.name}: exactly the table actions wiring.py grants it",
            inline_policies=self._inline_policies(spec, log_group),
        )
        function = lambda_.Function(
            scope,
            "Function",
            description=spec.description,
            runtime=self.RUNTIME,
            architecture=self.ARCHITECTURE,
            handler=spec.handler,
            code=lambda_.Code.from_asset(str(FUNCTIONS_DIR / spec.name), exclude=list(self.CODE_EXCLUDE)),
            layers=self._layers,
            memory_size=self._props.memory_mb.get(spec.name, spec.memory_mb),
            timeout=Duration.seconds(spec.timeout_s),
            role=role,
            log_group=log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=APPLICATION_LOG_LEVELS[self._props.log_level.upper()],
            system_log_level_v2=lambda_.SystemLogLevel[self._props.system_log_level.upper()],
            tracing=self.TRACING,
            environment=self._environment(),
            reserved_concurrent_executions=self._reserved.get(spec.name),
            vpc=self._props.vpc,
            vpc_subnets=self._props.vpc_subnets,
            security_groups=list(self._props.security_groups) or None,
            snap_start=(
                lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS
                if self._props.api_snap_start and spec.name == wiring.ROUTES_FUNCTION
                else None
            ),
        )
        if self._props.api_snap_start and spec.name == wiring.ROUTES_FUNCTION:
            Annotations.of(function).acknowledge_warning(
                "@aws-cdk/aws-lambda:snapStartRequirePublish",
                "Published: its alias `live` points at the current version, and the HTTP API invokes the alias.",
            )
        if self._props.vpc is not None:
            Validations.of(role).acknowledge(
                Acknowledgment(
                    id="Serverless-LambdaStarPermissions",
                    reason="In a VPC, Lambda manages the function's network interfaces as its role "
                    "(NETWORK_INTERFACE_ACTIONS, AWSLambdaVPCAccessExecutionRole's); they take no resource ARN.",
                )
            )
        if spec.unscoped_actions:
            Validations.of(role).acknowledge(
                Acknowledgment(
                    id="Serverless-LambdaStarPermissions",
                    reason="Listings IAM scopes to no resource (wiring.Function.unscoped_actions: ListSecrets, "
                    "ListSchedules); the secrets and schedules found are deleted under statements naming their ARNs.",
                )
            )
        if spec.name != wiring.SCHEDULES.target:
            Validations.of(function).acknowledge(
                Acknowledgment(
                    id="Serverless-LambdaDLQ",
                    reason="Never invoked asynchronously (HTTP API, table stream or SQS source): failures are kept "
                    "by the stream's on-failure queue and the callbacks queue's redrive, each alarmed.",
                )
            )
        if self._key is not None:
            for action in ("kms:ReEncrypt*", "kms:GenerateDataKey*"):
                Validations.of(role).acknowledge(
                    Acknowledgment(
                        id=f"AwsSolutions-IAM5[Action::{action}]",
                        reason="CDK's grant to send to a queue under the customer-managed key (the stream's "
                        "dead letters, the deadline failures); it names that one key and no other.",
                    )
                )
        Validations.of(role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="Active tracing adds xray:PutTraceSegments/PutTelemetryRecords, and in a VPC the network "
                "interface actions (NETWORK_INTERFACE_ACTIONS) are needed: neither supports resource-level permissions, "
                "nor do the listings wiring.Function.unscoped_actions names (the operator surface's ListSecrets and "
                "ListSchedules); every table, stream, queue, secret and schedule statement names its ARN.",
            )
        )
        return function

    def _inline_policies(self, spec: wiring.Function, log_group: logs.ILogGroup) -> Mapping[str, iam.PolicyDocument]:
        # Explicit statements rather than grant_*: the role must carry exactly what wiring.py lists, and
        # grant_stream_read() would add dynamodb:ListStreams on "*".
        policies = {
            "Logs": iam.PolicyDocument(
                statements=[
                    iam.PolicyStatement(
                        actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_group.log_group_arn]
                    )
                ]
            )
        }
        if self._props.vpc is not None:
            # What AWSLambdaVPCAccessExecutionRole grants: CDK attaches it only to a role it creates itself.
            policies["Network"] = iam.PolicyDocument(
                statements=[iam.PolicyStatement(actions=list(NETWORK_INTERFACE_ACTIONS), resources=["*"])]
            )
        if self._key is not None:
            policies["Key"] = iam.PolicyDocument(
                statements=[iam.PolicyStatement(actions=list(KEY_USE_ACTIONS), resources=[self._key.key_arn])]
            )
        if spec.table_actions:
            policies["Table"] = iam.PolicyDocument(
                statements=[
                    iam.PolicyStatement(
                        actions=list(spec.table_actions), resources=[self._table.table_arn, *self._index_arns]
                    ),
                    # The audit logs are append-only below the application too (wiring.APPEND_ONLY_PARTITIONS); the
                    # operator surface may remove a deleted tenant's, never change one (wiring.APPEND_ONLY_REMOVERS).
                    iam.PolicyStatement(
                        effect=iam.Effect.DENY,
                        actions=list(wiring.append_only_denied_actions(spec.name)),
                        resources=[self._table.table_arn],
                        conditions={
                            "ForAnyValue:StringLike": {"dynamodb:LeadingKeys": list(wiring.APPEND_ONLY_PARTITIONS)}
                        },
                    ),
                ]
            )
        if spec.entries_table_actions:
            # No audit partition lives there: nothing to deny (wiring.APPEND_ONLY_PARTITIONS).
            policies["EntriesTable"] = iam.PolicyDocument(
                statements=[
                    iam.PolicyStatement(
                        actions=list(spec.entries_table_actions), resources=[self._entries_table.table_arn]
                    )
                ]
            )
        if spec.unscoped_actions:
            # Listings IAM scopes to no resource (wiring.Function.unscoped_actions): what they find is acted on under
            # the role's scoped statements only.
            policies["Listings"] = iam.PolicyDocument(
                statements=[iam.PolicyStatement(actions=list(spec.unscoped_actions), resources=["*"])]
            )
        if spec.reads_stream:
            policies["Stream"] = iam.PolicyDocument(
                statements=[
                    iam.PolicyStatement(actions=list(STREAM_READ_ACTIONS), resources=[self._table.table_stream_arn])
                ]
            )
        return policies

    def _environment(self) -> dict[str, str]:
        return {
            wiring.TABLE_NAME_ENV: self._table.table_name,
            wiring.ENTRIES_TABLE_NAME_ENV: self._entries_table.table_name,
            "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
            "LOG_LEVEL": self._props.log_level.upper(),
            # Business metrics (interlude.adapters.metrics) are dimensioned by the deployment.
            DEPLOYMENT_ENV: self._deployment,
        }

    def _alias(self, spec: wiring.Function, function: lambda_.Function) -> lambda_.Alias:
        """Alias `live` of the function's current version (a new version whenever its configuration changes)."""
        return lambda_.Alias(
            function.node.scope,
            "Live",
            alias_name=LIVE_ALIAS,
            version=function.current_version,
            provisioned_concurrent_executions=self._props.provisioned_concurrency.get(spec.name),
        )

    def _connect_stream(
        self, spec: wiring.Function, function: lambda_.Function, invoked: lambda_.IFunction
    ) -> sqs.Queue:
        dlq = dead_letter_queue(
            self,
            f"{pascal_case(spec.name)}StreamDlq",
            retention=self.DLQ_RETENTION,
            key=self._key,
            reason="This queue is itself the dead-letter destination of the table stream mapping; "
            "it only holds failed-batch metadata for an operator to inspect.",
        )
        event_source_mapping(
            function,
            invoked,
            "TableStream",
            event_source_arn=self._table.table_stream_arn,
            starting_position=self.STREAM_START,
            batch_size=wiring.STREAM_BATCH_SIZE,
            parallelization_factor=wiring.STREAM_PARALLELIZATION,
            retry_attempts=wiring.STREAM_MAX_RETRIES,
            max_record_age=Duration.seconds(wiring.STREAM_MAX_RECORD_AGE_S),
            # A poison record is isolated by halving the batch instead of blocking its whole shard.
            bisect_batch_on_error=True,
            # dispatch answers with batchItemFailures (powertools' batch utility): retry only those.
            report_batch_item_failures=True,
            on_failure=event_sources.SqsDlq(dlq),
            filters=[stream_filter()],
        )
        return dlq


def event_source_mapping(
    function: lambda_.Function, invoked: lambda_.IFunction, construct_id: str, **options
) -> lambda_.EventSourceMapping:
    """A mapping that invokes `invoked` (the function, or its alias `live`), kept under the function itself whatever
    invokes it: its logical id then stays when a deployment adds or drops the alias (provisioned concurrency,
    SnapStart), so CloudFormation updates the mapping in place instead of creating a second one beside it (a second
    stream mapping would replay the stream from TRIM_HORIZON while the first still reads it: every side effect
    twice)."""
    return lambda_.EventSourceMapping(function, construct_id, target=invoked, **options)


def stream_filter() -> dict:
    """Only new event-log items reach the outbox (wiring.STREAM_FILTER, which the local pump applies too)."""
    return lambda_.FilterCriteria.filter(wiring.STREAM_FILTER)


def pascal_case(name: str) -> str:
    """A wiring name as a construct id: `callbacks-dlq` -> `CallbacksDlq`."""
    return "".join(part.capitalize() for part in name.replace("-", "_").split("_"))


def queue_encryption(key: kms.IKey | None) -> dict:
    """sqs.Queue kwargs: the customer-managed key when there is one, else SQS-managed encryption."""
    if key is None:
        return {"encryption": sqs.QueueEncryption.SQS_MANAGED}
    return {"encryption": sqs.QueueEncryption.KMS, "encryption_master_key": key}


@jsii.implements(IValidation)
class StartsWithItsSettings:
    """A function whose environment its own cold start would refuse (interlude.config.check) fails the synthesis,
    naming the function and each variable and what to lower: deployed, every invocation of it would fail. Its
    environment is what function_overrides (or add_environment after the construct) left it."""

    def __init__(self, name: str, function: lambda_.Function) -> None:
        self._name = name
        self._function = function

    def validate(self) -> list[str]:
        stack = Stack.of(self._function)
        # The L2 function keeps its environment to itself; its CfnFunction's properties, resolved, are what the
        # template will hold. A value given through the CfnFunction's raw overrides is not seen here.
        properties = stack.resolve(self._function.node.default_child._cfn_properties)
        rendered = properties.get("environment", {}).get("variables", {})
        # A value only the deployment knows (a reference: a queue's URL, a table's name) is not judged: None.
        environ = {name: value if isinstance(value, str) else None for name, value in rendered.items()}
        return [
            f"the {self._name} function would stop at every cold start: {problem} (docs/configuration.md)"
            for problem in config.refusals(environ)
        ]


def dead_letter_queue(
    scope: Construct, construct_id: str, *, retention: Duration, key: kms.IKey | None, reason: str
) -> sqs.Queue:
    """A queue that is itself where failures land: SSL only, encrypted, with no dead-letter queue of its own."""
    queue = sqs.Queue(scope, construct_id, retention_period=retention, enforce_ssl=True, **queue_encryption(key))
    acknowledge_dead_letter_queue(queue, reason)
    return queue


def acknowledge_dead_letter_queue(queue: sqs.Queue, reason: str) -> None:
    """A dead-letter queue has none of its own (its depth is alarmed instead)."""
    for rule in ("AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy"):
        Validations.of(queue).acknowledge(Acknowledgment(id=rule, reason=reason))


def acknowledge_run_time_resources(function: lambda_.Function, arn: str, reason: str) -> None:
    """cdk-nag's IAM5 on `function`'s role for `arn`, a grant over resources named at run time (its last part a
    wildcard): `reason` says what the wildcard spans."""
    role = function.role
    assert role is not None
    finding = f"AwsSolutions-IAM5[Resource::{nag_resource(role, arn)}]"
    Validations.of(role).acknowledge(Acknowledgment(id=finding, reason=reason))


def nag_resource(scope: Construct, arn: str) -> str:
    """An ARN as cdk-nag spells it in a finding: concrete parts as they are, each reference as <LogicalId>."""
    resolved = Stack.of(scope).resolve(arn)
    if isinstance(resolved, str):
        return resolved
    parts = resolved["Fn::Join"][1]
    return "".join(
        part if isinstance(part, str) else f"<{part.get('Ref') or '.'.join(part['Fn::GetAtt'])}>" for part in parts
    )
