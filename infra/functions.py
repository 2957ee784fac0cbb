"""One Lambda function (with its own log group and role) per wiring.FUNCTIONS entry, plus the stream trigger."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Acknowledgment, Duration, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.layer import PROJECT_ROOT, CoreLayer
from interlude import wiring

FUNCTIONS_DIR = PROJECT_ROOT / "functions"
SERVICE_NAME = "interlude"
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
    RUNTIME = CoreLayer.RUNTIME
    ARCHITECTURE = CoreLayer.ARCHITECTURE
    TRACING = lambda_.Tracing.ACTIVE
    LOG_RETENTION = logs.RetentionDays.ONE_MONTH
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
        index_arns: list[str],
        layer: lambda_.ILayerVersion,
        log_level: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self._table = table
        self._index_arns = index_arns
        self._layer = layer
        self._log_level = log_level
        self.by_name: dict[str, lambda_.Function] = {}
        self.stream_dlqs: dict[str, sqs.Queue] = {}
        readers = [spec.name for spec in wiring.FUNCTIONS if spec.reads_stream]
        if len(readers) > 1:
            # Two mappings would each see every record: the outbox would run its side effects twice.
            raise ValueError(f"only one function may read the table stream, wiring names {readers}")
        for spec in wiring.FUNCTIONS:
            self.by_name[spec.name] = self._build_function(spec)
            if spec.reads_stream:
                self.stream_dlqs[spec.name] = self._connect_stream(spec, self.by_name[spec.name])

    def _build_function(self, spec: wiring.Function) -> lambda_.Function:
        scope = Construct(self, pascal_case(spec.name))
        log_group = logs.LogGroup(scope, "Logs", retention=self.LOG_RETENTION)
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
            layers=[self._layer],
            memory_size=spec.memory_mb,
            timeout=Duration.seconds(spec.timeout_s),
            role=role,
            log_group=log_group,
            tracing=self.TRACING,
            environment=self._environment(),
        )
        Validations.of(function).acknowledge(
            Acknowledgment(
                id="AwsSolutions-L1",
                reason="Pinned to Python 3.12 on purpose: the core layer is built for cp312 (scripts/build_layer.sh) "
                "and the runtime moves only together with the layer.",
            )
        )
        Validations.of(role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="Active tracing adds xray:PutTraceSegments/PutTelemetryRecords, which support no "
                "resource-level permissions; every table, stream and queue statement names its ARN.",
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
        if spec.table_actions:
            policies["Table"] = iam.PolicyDocument(
                statements=[
                    iam.PolicyStatement(
                        actions=list(spec.table_actions), resources=[self._table.table_arn, *self._index_arns]
                    )
                ]
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
            "TABLE_NAME": self._table.table_name,
            "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
            "LOG_LEVEL": self._log_level,
        }

    def _connect_stream(self, spec: wiring.Function, function: lambda_.Function) -> sqs.Queue:
        dlq = sqs.Queue(
            self,
            f"{pascal_case(spec.name)}StreamDlq",
            retention_period=self.DLQ_RETENTION,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        Validations.of(dlq).acknowledge(
            Acknowledgment(
                id="AwsSolutions-SQS3",
                reason="This queue is itself the dead-letter destination of the table stream mapping; "
                "it only holds failed-batch metadata for an operator to inspect.",
            )
        )
        function.add_event_source_mapping(
            "TableStream",
            event_source_arn=self._table.table_stream_arn,
            starting_position=self.STREAM_START,
            batch_size=wiring.STREAM_BATCH_SIZE,
            retry_attempts=wiring.STREAM_MAX_RETRIES,
            # A poison record is isolated by halving the batch instead of blocking its whole shard.
            bisect_batch_on_error=True,
            # dispatch answers with batchItemFailures (powertools' batch utility): retry only those.
            report_batch_item_failures=True,
            on_failure=event_sources.SqsDlq(dlq),
            filters=[stream_filter()],
        )
        return dlq


def stream_filter() -> dict:
    """Only new event-log items reach the outbox; run heads, interrupts and idempotency rows do not."""
    return lambda_.FilterCriteria.filter(
        {
            "eventName": lambda_.FilterRule.is_equal("INSERT"),
            "dynamodb": {
                "NewImage": {wiring.SORT_KEY: {"S": lambda_.FilterRule.begins_with(wiring.EVENT_ITEM_PREFIX)}}
            },
        }
    )


def pascal_case(name: str) -> str:
    """A wiring name as a construct id: `callbacks-dlq` -> `CallbacksDlq`."""
    return "".join(part.capitalize() for part in name.replace("-", "_").split("_"))
