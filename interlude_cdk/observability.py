"""Alarms that reach someone, and one dashboard (cdk-monitoring-constructs).

Every alarm notifies the alarm topic. What is watched: errors and throttles of every function, the outbox's
iterator age, the API's 5xx rate and the p99 latency of its non-held routes, the table's throttled requests,
and every dead-letter queue from its first message. docs/operations.md says what each one means.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from cdk_monitoring_constructs import (
    AlarmFactoryDefaults,
    CustomMetricGroup,
    CustomMetricWithAlarm,
    CustomThreshold,
    DefaultDashboardFactory,
    ErrorCountThreshold,
    ErrorRateThreshold,
    MaxAgeThreshold,
    MaxMessageCountThreshold,
    MetricFactoryDefaults,
    MonitoringFacade,
    SnsAlarmActionStrategy,
    ThrottledEventsThreshold,
)
from constructs import Construct

from interlude import wiring
from interlude_cdk.api import HttpFront

CRITICAL = "Critical"
# The outbox is behind when its oldest unprocessed record is older than this.
ITERATOR_AGE_ALARM = Duration.minutes(5)
# Share of API requests answered 5xx (over 5 minutes) that pages someone.
API_5XX_RATE = 0.05
# p99 of the routes that answer at once (not the long-poll and SSE routes, which hold requests by design).
API_P99_LATENCY = Duration.seconds(3)
LATENCY_METRIC_NAMESPACE = "Interlude"
LATENCY_METRIC_NAME = "ImmediateRouteLatency"


class Observability(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        deployment: str,
        topic: sns.ITopic,
        functions: Mapping[str, lambda_.IFunction],
        api: HttpFront,
        table: dynamodb.ITable,
        dead_letter_queues: Mapping[str, sqs.IQueue],
        dashboard: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        self.facade = MonitoringFacade(
            self,
            "Monitoring",
            alarm_factory_defaults=AlarmFactoryDefaults(
                actions_enabled=True,
                alarm_name_prefix=deployment,
                action=SnsAlarmActionStrategy(on_alarm_topic=topic),
                runbook_link="docs/operations.md#what-to-watch",
            ),
            metric_factory_defaults=MetricFactoryDefaults(),
            dashboard_factory=DefaultDashboardFactory(
                self,
                "Dashboards",
                dashboard_name_prefix=deployment,
                create_dashboard=dashboard,
                create_summary_dashboard=False,
                create_alarm_dashboard=False,
            ),
        )
        for spec in wiring.FUNCTIONS:
            self._watch_function(spec, functions[spec.name])
        self._watch_api(api)
        never = {CRITICAL: ThrottledEventsThreshold(max_throttled_events_threshold=0)}
        self.facade.monitor_dynamo_table(
            table=table,
            add_read_throttled_events_count_alarm=never,
            add_write_throttled_events_count_alarm=never,
        )
        for name, queue in dead_letter_queues.items():
            self.facade.monitor_sqs_queue(
                queue=queue,
                alarm_friendly_name=f"dlq-{name}",
                human_readable_name=f"dead letters: {name}",
                add_queue_max_size_alarm={CRITICAL: MaxMessageCountThreshold(max_message_count=0)},
            )

    @property
    def alarms(self) -> list[cloudwatch.AlarmBase]:
        return [created.alarm for created in self.facade.created_alarms()]

    def _watch_function(self, spec: wiring.Function, function: lambda_.IFunction) -> None:
        never = {CRITICAL: ErrorCountThreshold(max_error_count=0)}
        extra = {}
        if spec.reads_stream:
            extra["add_max_iterator_age_alarm"] = {
                CRITICAL: MaxAgeThreshold(max_age_in_millis=int(ITERATOR_AGE_ALARM.to_milliseconds()))
            }
        self.facade.monitor_lambda_function(
            lambda_function=function,
            alarm_friendly_name=f"fn-{spec.name}",
            human_readable_name=f"function {spec.name}",
            add_fault_count_alarm=never,
            add_throttles_count_alarm=never,
            **extra,
        )

    def _watch_api(self, api: HttpFront) -> None:
        self.facade.monitor_api_gateway_v2_http_api(
            api=api.http_api,
            alarm_friendly_name="api",
            human_readable_name="HTTP API",
            add5xx_rate_alarm={CRITICAL: ErrorRateThreshold(max_error_rate=API_5XX_RATE)},
        )
        # API Gateway's own Latency mixes in the held routes (up to ~25 s each by design); the access log knows
        # the route, so a metric filter keeps only the routes that answer at once (one custom metric).
        held = [f"{r.method} {r.path}" for r in wiring.ROUTES if wiring.route_class(r) == "held"]
        logs.MetricFilter(
            self,
            "ImmediateLatency",
            log_group=api.access_logs,
            metric_namespace=LATENCY_METRIC_NAMESPACE,
            metric_name=LATENCY_METRIC_NAME,
            filter_pattern=logs.FilterPattern.all(
                *(logs.FilterPattern.string_value("$.routeKey", "!=", key) for key in held)
            ),
            metric_value="$.responseLatency",
            dimensions={"ApiId": "$.apiId"},
            unit=cloudwatch.Unit.MILLISECONDS,
        )
        latency = cloudwatch.Metric(
            namespace=LATENCY_METRIC_NAMESPACE,
            metric_name=LATENCY_METRIC_NAME,
            dimensions_map={"ApiId": api.http_api.api_id},
            statistic="p99",
            period=Duration.minutes(5),
            label="p99 latency, immediate routes",
        )
        self.facade.monitor_custom(
            alarm_friendly_name="api-latency",
            human_readable_name="API latency (routes that answer at once)",
            metric_groups=[
                CustomMetricGroup(
                    title="p99 latency (ms)",
                    metrics=[
                        CustomMetricWithAlarm(
                            metric=latency,
                            alarm_friendly_name="p99",
                            add_alarm={
                                CRITICAL: CustomThreshold(
                                    threshold=API_P99_LATENCY.to_milliseconds(),
                                    comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                                    treat_missing_data_override=cloudwatch.TreatMissingData.NOT_BREACHING,
                                )
                            },
                        )
                    ],
                )
            ],
        )
