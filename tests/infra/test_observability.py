"""Alarms that reach someone: what each one watches, and that every alarm in the template has an action."""

from __future__ import annotations

import pytest

from interlude import wiring
from interlude_cdk.observability import API_P99_LATENCY, ITERATOR_AGE_ALARM, LATENCY_METRIC_NAME
from tests.infra.conftest import alarm_metrics, dimension


def topic_ref(synth) -> dict:
    return {"Ref": synth.logical_id(synth.interlude.alarm_topic)}


def alarms_on(synth, namespace: str, metric_name: str, dimension_name: str, value) -> list[dict]:
    return [
        props
        for _, props, metric in alarm_metrics(synth)
        if metric.get("Namespace") == namespace
        and metric["MetricName"] == metric_name
        and dimension(metric, dimension_name) == value
    ]


def test_every_alarm_notifies_the_alarm_topic(synth):
    # Given every alarm in the template / Then each is enabled and notifies the topic (nothing alarms into the void)
    alarms = synth.of_type("AWS::CloudWatch::Alarm")
    assert len(alarms) >= 2 * len(wiring.FUNCTIONS) + 4
    for alarm_id, alarm in alarms.items():
        props = alarm["Properties"]
        assert props.get("ActionsEnabled", True) is True, alarm_id
        assert topic_ref(synth) in props.get("AlarmActions", []), alarm_id
    # And the created topic is an output, for the operator to subscribe to
    assert synth.template_json["Outputs"]["AlarmTopic"]["Value"] == topic_ref(synth)


@pytest.mark.parametrize("spec", wiring.FUNCTIONS, ids=lambda spec: spec.name)
def test_every_function_alarms_on_its_first_error_and_first_throttle(synth, spec):
    function = {"Ref": synth.function_id(spec.name)}
    for metric_name in ("Errors", "Throttles"):
        (props,) = alarms_on(synth, "AWS/Lambda", metric_name, "FunctionName", function)
        assert props["Threshold"] == 0
        assert props["ComparisonOperator"] == "GreaterThanThreshold"


def test_the_outbox_alarms_when_it_falls_behind(synth):
    (reader,) = [spec for spec in wiring.FUNCTIONS if spec.reads_stream]
    function = {"Ref": synth.function_id(reader.name)}
    (props,) = alarms_on(synth, "AWS/Lambda", "IteratorAge", "FunctionName", function)
    assert props["Threshold"] == ITERATOR_AGE_ALARM.to_milliseconds()


def test_the_api_alarms_on_its_5xx_rate_and_on_the_p99_of_routes_that_answer_at_once(synth):
    api = {"Ref": synth.logical_id(synth.interlude.api.http_api)}
    (rate,) = alarms_on(synth, "AWS/ApiGateway", "5xx", "ApiId", api)
    assert 0 < rate["Threshold"] < 1
    (latency,) = alarms_on(synth, "Interlude", LATENCY_METRIC_NAME, "ApiId", api)
    assert latency["Threshold"] == API_P99_LATENCY.to_milliseconds()
    assert [q["MetricStat"]["Stat"] for q in latency["Metrics"] if "MetricStat" in q] == ["p99"]
    # The latency metric comes from the access log, without the held (long-poll, SSE) routes
    (metric_filter,) = synth.of_type("AWS::Logs::MetricFilter").values()
    pattern = metric_filter["Properties"]["FilterPattern"]
    for route in wiring.ROUTES:
        assert (f'"{route.method} {route.path}"' in pattern) == (wiring.route_class(route) == "held")
    assert metric_filter["Properties"]["MetricTransformations"][0]["MetricValue"] == "$.responseLatency"


def test_the_table_alarms_on_throttled_reads_and_writes(synth):
    table = {"Ref": synth.table_id()}
    names = {
        metric["MetricName"]
        for _, _, metric in alarm_metrics(synth)
        if metric.get("Namespace") == "AWS/DynamoDB" and dimension(metric, "TableName") == table
    }
    assert {"ReadThrottleEvents", "WriteThrottleEvents"} <= names


def test_every_dead_letter_queue_alarms_on_its_first_message(synth):
    # Given every queue another resource names as its dead-letter target or failure destination
    dlq_ids = set()
    for resource in synth.resources.values():
        props = resource.get("Properties", {})
        redrive = props.get("RedrivePolicy", {}).get("deadLetterTargetArn")
        failure = props.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
        for ref in [redrive, failure]:
            if isinstance(ref, dict) and "Fn::GetAtt" in ref:
                dlq_ids.add(ref["Fn::GetAtt"][0])
    # The schedules' dead-letter queue is named at run time (each schedule's DeadLetterConfig), not in the template
    dlq_ids.add(synth.logical_id(synth.interlude.deadlines.dead_letters))
    # stream, callbacks, actions, notifications (issue 14), schedules
    assert len(dlq_ids) == 6
    # Then each has an alarm that fires when one message is visible
    for dlq_id in dlq_ids:
        queue = {"Fn::GetAtt": [dlq_id, "QueueName"]}
        (props,) = alarms_on(synth, "AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", queue)
        assert props["Threshold"] == 0
        assert props["ComparisonOperator"] == "GreaterThanThreshold"


def test_one_dashboard_per_deployment(synth):
    (dashboard,) = synth.of_type("AWS::CloudWatch::Dashboard").values()
    assert dashboard["Properties"]["DashboardName"].startswith(synth.stack.stack_name)
