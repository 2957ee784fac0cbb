"""Alarms that reach someone, and one dashboard (cdk-monitoring-constructs).

Every alarm notifies the alarm topic, and every alarm but two pages on one evaluation period: errors and throttles
of every function, the outbox's iterator age, every dead-letter queue from its first message, the tables' throttled
requests, and per function the failures a Lambda error never shows: records a worker failed (RecordFailures),
errors the code caught and carried on from (CaughtErrors; both emitted by the functions, interlude.adapters.metrics),
for dispatch the new runs' event batches it dropped as orphans (OrphanBatches, docs/adr/0165), and ERROR log lines (a
metric filter on its log group). The two sustained alarms (SUSTAINED) are statistical: the API's 5xx rate and the p99
latency of its non-held routes. docs/operations.md says what each one means.
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
from interlude.adapters import metrics
from interlude_cdk.api import HttpFront
from interlude_cdk.functions import pascal_case

CRITICAL = "Critical"
# The outbox is behind when its oldest unprocessed record is older than this.
ITERATOR_AGE_ALARM = Duration.minutes(5)
# Share of API requests answered 5xx (over 5 minutes) that pages someone.
API_5XX_RATE = 0.05
# p99 of the routes that answer at once (not the long-poll and SSE routes, which hold requests by design).
API_P99_LATENCY = Duration.seconds(3)
LATENCY_METRIC_NAMESPACE = "Interlude"
LATENCY_METRIC_NAME = "ImmediateRouteLatency"
# A paging alarm fires on the first period that breaches; a statistical one (a rate, a percentile) on three in a row,
# so one bad window among few requests pages no one (a 500 is a CaughtErrors page of its own).
PAGING = {"evaluation_periods": 1, "datapoints_to_alarm": 1}
SUSTAINED = {"evaluation_periods": 3, "datapoints_to_alarm": 3}
FAILURE_PERIOD = Duration.minutes(5)
# ERROR log lines, counted by a metric filter per function: a filter's dimensions can only be fields of the log line,
# so the deployment and the function are in the metric's name (`<deployment>/<function>`).
ERROR_LINES_NAMESPACE = "Interlude/ErrorLogLines"
# Powertools' and the Lambda runtime's JSON lines say `level`; Lambda's own vocabulary has FATAL.
ERROR_LEVELS = ("ERROR", "CRITICAL", "FATAL")


class Observability(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        deployment: str,
        topic: sns.ITopic,
        functions: Mapping[str, lambda_.Function],
        api: HttpFront,
        tables: tuple[dynamodb.ITable, ...],
        dead_letter_queues: Mapping[str, sqs.IQueue],
        dashboard: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        self._deployment = deployment
        self.facade = MonitoringFacade(
            self,
            "Monitoring",
            alarm_factory_defaults=AlarmFactoryDefaults(
                **PAGING,
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
        for table in tables:
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

    def _watch_function(self, spec: wiring.Function, function: lambda_.Function) -> None:
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
        failures = [
            ("caught-errors", "errors caught and carried on from", self._function_metric(metrics.CAUGHT_ERRORS, function)),
            ("error-log-lines", "ERROR log lines", self._error_lines(spec, function)),
        ]
        if spec.reads_stream or spec.consumes:
            failures.insert(
                0, ("record-failures", "records failed", self._function_metric(metrics.RECORD_FAILURES, function))
            )
        if spec.consumes == wiring.OUTBOX_QUEUE:
            # A create that crashed between its batch and its transaction, or clocks apart: no Lambda error shows it.
            orphans = self._function_metric(metrics.ORPHAN_BATCHES, function)
            failures.append(("orphan-batches", "orphan event batches dropped", orphans))
        self.facade.monitor_custom(
            alarm_friendly_name=f"fn-{spec.name}",
            human_readable_name=f"function {spec.name}: failures a Lambda error does not show",
            metric_groups=[
                CustomMetricGroup(
                    title="failures (count)",
                    metrics=[
                        CustomMetricWithAlarm(
                            metric=metric.with_(label=label),
                            alarm_friendly_name=name,
                            add_alarm={
                                CRITICAL: CustomThreshold(
                                    threshold=0,
                                    comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                                    treat_missing_data_override=cloudwatch.TreatMissingData.NOT_BREACHING,
                                )
                            },
                        )
                        for name, label, metric in failures
                    ],
                )
            ],
        )

    def _function_metric(self, name: str, function: lambda_.IFunction) -> cloudwatch.Metric:
        """A failure metric the function writes itself (EMF), by its deployment and its physical name."""
        return cloudwatch.Metric(
            namespace=metrics.NAMESPACE,
            metric_name=name,
            dimensions_map={"deployment": self._deployment, "FunctionName": function.function_name},
            statistic="Sum",
            period=FAILURE_PERIOD,
        )

    def _error_lines(self, spec: wiring.Function, function: lambda_.Function) -> cloudwatch.Metric:
        metric_filter = logs.MetricFilter(
            self,
            f"{pascal_case(spec.name)}ErrorLines",
            log_group=function.log_group,
            metric_namespace=ERROR_LINES_NAMESPACE,
            metric_name=f"{self._deployment}/{spec.name}",
            filter_pattern=logs.FilterPattern.any(
                *(logs.FilterPattern.string_value("$.level", "=", level) for level in ERROR_LEVELS)
            ),
            metric_value="1",
        )
        return metric_filter.metric(statistic="Sum", period=FAILURE_PERIOD)

    def _watch_api(self, api: HttpFront) -> None:
        self.facade.monitor_api_gateway_v2_http_api(
            api=api.http_api,
            alarm_friendly_name="api",
            human_readable_name="HTTP API",
            add5xx_rate_alarm={CRITICAL: ErrorRateThreshold(max_error_rate=API_5XX_RATE, **SUSTAINED)},
        )
        # API Gateway's own Latency mixes in the held routes (up to ~25 s each by design); the access log knows
        # the route, so a metric filter keeps only the routes that answer at once (one custom metric).
        held = [r.gateway_key for r in wiring.gateway_routes() if wiring.route_class(r) == "held"]
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
                                    **SUSTAINED,
                                )
                            },
                        )
                    ],
                )
            ],
        )
