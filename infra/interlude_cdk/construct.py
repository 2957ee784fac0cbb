"""Interlude as one construct a customer puts into a stack of their own (one per stack)."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Acknowledgment, ArnFormat, CfnOutput, CustomResource, Stack, Tags, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from interlude import __version__, migrations, wiring
from interlude.config import DEFAULT_KEY_CACHE_SECONDS, ENVIRONMENT
from interlude.config.notify import SES_CONFIGURATION_SET_ENV, SES_FROM_ADDRESS_ENV
from interlude_cdk.api import HttpFront
from interlude_cdk.audit_anchor import AuditAnchors
from interlude_cdk.callbacks import CallbackDelivery
from interlude_cdk.deadlines import Deadlines
from interlude_cdk.functions import Functions
from interlude_cdk.layer import CoreLayers
from interlude_cdk.live import LiveFront
from interlude_cdk.observability import Observability
from interlude_cdk.props import DEPLOYMENT_TAG, InterludeProps, deployment_name_problem
from interlude_cdk.secrets import Secrets
from interlude_cdk.table import DataTable
from interlude_cdk.tracing import Tracing


class Interlude(Construct):
    """Interlude's whole deployment. Keyword arguments are InterludeProps' fields (see there for defaults).

    Stack outputs (fixed logical ids, read by the `interlude` CLI): ApiUrl, TableName, EntriesTableName, KeyRingSecret,
    WebhookSecretPrefix, AlarmTopic, LiveUrl.
    """

    OUTPUT_API_URL = wiring.OUTPUT_API_URL
    OUTPUT_TABLE_NAME = wiring.OUTPUT_TABLE_NAME
    OUTPUT_ENTRIES_TABLE_NAME = wiring.OUTPUT_ENTRIES_TABLE_NAME
    OUTPUT_KEY_RING_SECRET = wiring.OUTPUT_KEY_RING_SECRET
    OUTPUT_WEBHOOK_SECRET_PREFIX = wiring.OUTPUT_WEBHOOK_SECRET_PREFIX
    OUTPUT_ALARM_TOPIC = "AlarmTopic"
    OUTPUT_DOMAIN_TARGET = "ApiDomainTarget"

    def __init__(self, scope: Construct, construct_id: str, **props) -> None:
        super().__init__(scope, construct_id)
        self.props = props = InterludeProps(**props)
        stack = Stack.of(self)
        self.deployment = props.deployment_name if props.deployment_name is not None else stack.stack_name
        if (problem := deployment_name_problem(self.deployment)) is not None:
            # The stack's name (CloudFormation takes 128 characters) names the deployment when deployment_name does not.
            raise ValueError(f"the deployment's name (deployment_name, else the stack's name) {problem}")
        key = props.encryption_key
        if isinstance(key, kms.Key):
            _allow_services_on_key(key)
        self.data = DataTable(
            self,
            "Data",
            removal_policy=props.removal_policy,
            encryption_key=key,
            existing=props.existing_table,
            capacity=props.table_capacity,
        )
        self.core_layers = CoreLayers(
            self, "CoreLayer", dependencies_dir=Path(props.layer_dir).resolve() if props.layer_dir else None
        )
        self.functions = Functions(
            self,
            "Functions",
            table=self.data.table,
            entries_table=self.data.entries_table,
            index_arns=self.data.index_arns,
            layers=self.core_layers.layers,
            props=props,
            deployment=self.deployment,
        )
        self.api = HttpFront(
            self,
            "Api",
            handler=self.functions.invoked[wiring.ROUTES_FUNCTION],
            throttles=props.throttles,
            domain=props.domain,
            log_retention=props.log_retention,
            encryption_key=key,
            removal_policy=props.removal_policy,
        )
        self.live = LiveFront(
            self,
            "Live",
            handler=self.functions.invoked[wiring.LIVE_API.function],
            managers={name: self.functions.by_name[name] for name in wiring.LIVE_API.managers},
            # A connection's messages are reads (a subscribe reads the run and its log).
            throttle=props.throttles.reads,
            log_retention=props.log_retention,
            encryption_key=key,
            removal_policy=props.removal_policy,
        )
        self.secrets = Secrets(
            self,
            "Secrets",
            functions=self.functions.by_name,
            encryption_key=key,
            removal_policy=props.removal_policy,
        )
        self.callbacks = CallbackDelivery(
            self,
            "Callbacks",
            functions=self.functions.by_name,
            invoked=self.functions.invoked,
            max_concurrency=props.sqs_max_concurrencies(),
            api_url=self.api.url,
            deployment=self.deployment,
            encryption_key=key,
            secret_tags={**props.tags, DEPLOYMENT_TAG: self.deployment},
        )
        self.deadlines = Deadlines(self, "Deadlines", functions=self.functions.by_name, encryption_key=key)
        self.audit_anchors = AuditAnchors(
            self,
            "AuditAnchors",
            functions=self.functions.by_name,
            retention_days=props.audit_anchor_retention_days,
            lock_mode=props.audit_anchor_lock_mode,
            encryption_key=key,
        )
        self.migrations = _migrations_on_deploy(self, self.functions.by_name[wiring.DEPLOY_TRIGGER], after=self.callbacks)
        self._wire_email(props.notification_from_address, props.ses_configuration_set)
        if not props.ancestry_endpoint:
            # The one switch the route and the discovery document both read (interlude.app.subworkflows).
            self.functions.by_name[wiring.ROUTES_FUNCTION].add_environment(ENVIRONMENT["ancestry_endpoint"], "off")
        if props.key_cache_seconds != DEFAULT_KEY_CACHE_SECONDS:
            # The api function reads every key: its routes, its console and its live connections (app/keys.py).
            self.functions.by_name[wiring.ROUTES_FUNCTION].add_environment(
                ENVIRONMENT["key_cache_seconds"], f"{props.key_cache_seconds:g}"
            )
        self.tracing = (
            Tracing(self, "Tracing", sampling=props.trace_sampling, functions=self.functions.by_name.values())
            if props.trace_sampling
            else None
        )
        self.alarm_topic = props.alarm_topic or self._create_topic(key)
        self.observability = Observability(
            self,
            "Observability",
            deployment=self.deployment,
            topic=self.alarm_topic,
            functions=self.functions.by_name,
            api=self.api,
            tables=(self.data.table, self.data.entries_table),
            dead_letter_queues=self.dead_letter_queues(),
            dashboard=props.dashboard,
        )

        # Last, so an override sees (and may change) everything the construct did to its function.
        for name, override in props.function_overrides.items():
            override(self.functions.by_name[name])

        Tags.of(self).add(DEPLOYMENT_TAG, self.deployment)
        for tag, value in props.tags.items():
            Tags.of(self).add(tag, value)
        self._outputs()

    def _wire_email(self, from_address: str | None, configuration_set: str | None) -> None:
        """SES for the functions wiring says send e-mail (issue 14): the from-identity (the address and its domain)
        and the configuration set, exactly, and their names in the environment."""
        if not from_address:
            return
        stack = Stack.of(self)
        domain = from_address.rsplit("@", 1)[-1]
        resources = [
            stack.format_arn(service="ses", resource="identity", resource_name=from_address),
            stack.format_arn(service="ses", resource="identity", resource_name=domain),
        ]
        if configuration_set:
            resources.append(stack.format_arn(service="ses", resource="configuration-set", resource_name=configuration_set))
        for spec in wiring.FUNCTIONS:
            if not spec.sends_email:
                continue
            function = self.functions.by_name[spec.name]
            function.add_to_role_policy(
                iam.PolicyStatement(actions=["ses:SendEmail", "ses:SendRawEmail"], resources=resources)
            )
            function.add_environment(SES_FROM_ADDRESS_ENV, from_address)
            if configuration_set:
                function.add_environment(SES_CONFIGURATION_SET_ENV, configuration_set)

    def dead_letter_queues(self) -> dict[str, sqs.IQueue]:
        queues: dict[str, sqs.IQueue] = {f"{name}-stream": q for name, q in self.functions.stream_dlqs.items()}
        queues.update({q.dead_letter: self.callbacks.queues[q.dead_letter] for q in wiring.QUEUES if q.dead_letter})
        queues["schedules"] = self.deadlines.dead_letters
        queues[f"{wiring.SCHEDULES.target}-failures"] = self.deadlines.target_failures
        return queues

    def _create_topic(self, key: kms.IKey | None) -> sns.Topic:
        topic = sns.Topic(self, "AlarmTopic", display_name=f"Interlude {self.deployment} alarms", master_key=key)
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                effect=iam.Effect.DENY,
                actions=["sns:Publish"],
                principals=[iam.AnyPrincipal()],
                resources=[topic.topic_arn],
                conditions={"Bool": {"aws:SecureTransport": "false"}},
            )
        )
        if key is None:
            Validations.of(topic).acknowledge(
                Acknowledgment(
                    id="AwsSolutions-SNS2",
                    reason="CloudWatch alarms cannot publish to a topic under the AWS-managed SNS key; alarm "
                    "notices carry no data of the tenants. Pass encryption_key to encrypt it with your key.",
                )
            )
        return topic

    def _outputs(self) -> None:
        outputs = {
            self.OUTPUT_API_URL: (self.api.url, "Base URL of the HTTP API"),
            self.OUTPUT_TABLE_NAME: (self.data.table.table_name, "The DynamoDB table"),
            self.OUTPUT_ENTRIES_TABLE_NAME: (
                self.data.entries_table.table_name,
                "The second DynamoDB table: inbox entries and delivery records",
            ),
            self.OUTPUT_KEY_RING_SECRET: (
                self.secrets.by_name[wiring.KEY_RING_SECRET.name].secret_arn,
                "Token key ring secret (interlude tokens rotate|retire)",
            ),
            self.OUTPUT_WEBHOOK_SECRET_PREFIX: (
                self.callbacks.secret_prefixes["WEBHOOK_SECRET_PREFIX"],
                "Name prefix of this deployment's per-tenant webhook signing secrets",
            ),
            self.OUTPUT_ALARM_TOPIC: (self.alarm_topic.topic_arn, "SNS topic every alarm notifies"),
            wiring.OUTPUT_LIVE_URL: (self.live.url, "WebSocket URL on which clients follow runs live (docs/api.md)"),
            wiring.OUTPUT_ADMIN_FUNCTION: (
                self.functions.by_name[wiring.OPERATOR_FUNCTION].function_name,
                "The operator surface (interlude tenants): invoke it with lambda:InvokeFunction",
            ),
            wiring.OUTPUT_WEBHOOK_SECRET_TAGS: (
                self.callbacks.created_secret_tags,
                "Tags every webhook signing secret is created with (JSON)",
            ),
        }
        if self.props.encryption_key is not None:
            outputs[wiring.OUTPUT_WEBHOOK_SECRET_KMS_KEY] = (
                self.props.encryption_key.key_arn,
                "KMS key every webhook signing secret is created under",
            )
        if self.api.domain_name is not None:
            outputs[self.OUTPUT_DOMAIN_TARGET] = (
                self.api.domain_name.regional_domain_name,
                "Point the custom domain's CNAME or alias here",
            )
        scope = Construct(self, "Outputs")
        for key, (value, description) in outputs.items():
            CfnOutput(scope, key, value=value, description=description).override_logical_id(key)


def _migrations_on_deploy(scope: Construct, function: lambda_.Function, after: Construct) -> CustomResource:
    """A custom resource the migrate function itself answers (interlude.migrations): once the function and its queue
    are in place, each deploy of a release (or of a new migration) queues the first turn of the table's migrations.
    It answers once the turn is queued, so a deploy that cannot queue it fails and rolls back."""
    resource = CustomResource(
        scope,
        "Migrations",
        service_token=function.function_arn,
        resource_type="Custom::InterludeMigrations",
        properties={"release": __version__, "migrations": migrations.module_names()},
    )
    resource.node.add_dependency(after)
    return resource


def _allow_services_on_key(key: kms.Key) -> None:
    """A key created in the same app: let CloudWatch Logs (log groups) and CloudWatch (alarm topic) use it."""
    stack = Stack.of(key)
    key.add_to_resource_policy(
        iam.PolicyStatement(
            actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
            principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
            resources=["*"],
            conditions={
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                        service="logs",
                        resource="log-group",
                        resource_name="*",
                        arn_format=ArnFormat.COLON_RESOURCE_NAME,
                    )
                }
            },
        )
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            actions=["kms:Decrypt", "kms:GenerateDataKey*"],
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            resources=["*"],
        )
    )
