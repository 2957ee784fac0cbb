"""Alarms that reach someone: what each one watches, and that every alarm in the template has an action."""

from __future__ import annotations

import json
import re

import pytest

from app import DEFAULT_STACK_NAME, build_app
from interlude import wiring
from interlude.adapters import metrics
from interlude_cdk.observability import (
    API_P99_LATENCY,
    ERROR_LINES_NAMESPACE,
    ITERATOR_AGE_ALARM,
    LATENCY_METRIC_NAME,
)
from interlude_cdk.props import TraceSampling
from tests.infra.conftest import OFFLINE_AWS, Synth, alarm_metrics, dimension
from tests.support.aws_limits import Deployment, Renderer


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
    access_logs = {"Ref": synth.logical_id(synth.interlude.api.access_logs)}
    (metric_filter,) = [
        f for f in synth.of_type("AWS::Logs::MetricFilter").values() if f["Properties"]["LogGroupName"] == access_logs
    ]
    pattern = metric_filter["Properties"]["FilterPattern"]
    for route in wiring.ROUTES:
        assert (f'"{route.method} {route.path}"' in pattern) == (wiring.route_class(route) == "held")
    assert metric_filter["Properties"]["MetricTransformations"][0]["MetricValue"] == "$.responseLatency"


def test_both_tables_alarm_on_throttled_reads_and_writes(synth):
    for table in ({"Ref": synth.table_id()}, {"Ref": synth.entries_table_id()}):
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
    # stream, callbacks, actions, notifications (issue 14), schedules, the outbox (issue 26), migrations (issue 30)
    assert len(dlq_ids) == 8
    # Then each has an alarm that fires when one message is visible
    for dlq_id in dlq_ids:
        queue = {"Fn::GetAtt": [dlq_id, "QueueName"]}
        (props,) = alarms_on(synth, "AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", queue)
        assert props["Threshold"] == 0
        assert props["ComparisonOperator"] == "GreaterThanThreshold"


def test_one_dashboard_per_deployment(synth):
    (dashboard,) = synth.of_type("AWS::CloudWatch::Dashboard").values()
    assert dashboard["Properties"]["DashboardName"].startswith(synth.stack.stack_name)


# -- pages that wake someone (issue 25, finding 8) ---------------------------------------------------------------

WORKERS = [spec for spec in wiring.FUNCTIONS if spec.reads_stream or spec.consumes]


def test_every_paging_alarm_fires_on_its_first_breaching_period(synth):
    """Three consecutive 5-minute periods meant a failure paged after 15 minutes, or never if it came and went."""
    sustained = []
    for alarm in synth.of_type("AWS::CloudWatch::Alarm").values():
        props = alarm["Properties"]
        if (props["EvaluationPeriods"], props.get("DatapointsToAlarm")) == (1, 1):
            continue
        sustained.append(props["AlarmName"])
    # Only the two statistical alarms wait for three periods: the API's 5xx rate and its p99 latency
    assert sorted(sustained) == sorted(
        f"{synth.stack.stack_name}-{name}-Critical" for name in ("api-Fault-Rate", "api-latency-p99")
    )


def failure_alarm(synth, namespace: str, metric_name: str, dimensions: dict) -> dict:
    (props,) = [
        props
        for _, props, metric in alarm_metrics(synth)
        if metric.get("Namespace") == namespace
        and metric["MetricName"] == metric_name
        and {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])} == dimensions
    ]
    return props


def assert_pages_on_the_first(props: dict, synth) -> None:
    assert props["Threshold"] == 0
    assert props["ComparisonOperator"] == "GreaterThanThreshold"
    assert (props["EvaluationPeriods"], props["DatapointsToAlarm"]) == (1, 1)
    assert props["TreatMissingData"] == "notBreaching"
    assert props["AlarmActions"] == [topic_ref(synth)]


@pytest.mark.parametrize("spec", WORKERS, ids=lambda spec: spec.name)
def test_every_worker_pages_on_its_first_failed_record(synth, spec):
    """A record a worker fails is reported in batchItemFailures: the invocation succeeds, Errors stays at 0."""
    dimensions = {"deployment": synth.stack.stack_name, "FunctionName": {"Ref": synth.function_id(spec.name)}}
    assert_pages_on_the_first(failure_alarm(synth, metrics.NAMESPACE, metrics.RECORD_FAILURES, dimensions), synth)


@pytest.mark.parametrize("spec", wiring.FUNCTIONS, ids=lambda spec: spec.name)
def test_every_function_pages_on_its_first_caught_error(synth, spec):
    dimensions = {"deployment": synth.stack.stack_name, "FunctionName": {"Ref": synth.function_id(spec.name)}}
    assert_pages_on_the_first(failure_alarm(synth, metrics.NAMESPACE, metrics.CAUGHT_ERRORS, dimensions), synth)


def test_dispatch_pages_on_the_first_orphan_event_batch_it_drops_and_no_other_function_counts_them(synth):
    """A new run's batch dropped because its run never came (docs/adr/0165) is no failed record: only its metric shows
    it."""
    (dispatch,) = [spec for spec in wiring.FUNCTIONS if spec.consumes == wiring.OUTBOX_QUEUE]
    dimensions = {"deployment": synth.stack.stack_name, "FunctionName": {"Ref": synth.function_id(dispatch.name)}}
    props = failure_alarm(synth, metrics.NAMESPACE, metrics.ORPHAN_BATCHES, dimensions)
    assert_pages_on_the_first(props, synth)
    assert props["AlarmName"] == f"{synth.stack.stack_name}-fn-{dispatch.name}-orphan-batches-Critical"
    assert len([m for _, _, m in alarm_metrics(synth) if m["MetricName"] == metrics.ORPHAN_BATCHES]) == 1


@pytest.mark.parametrize("spec", wiring.FUNCTIONS, ids=lambda spec: spec.name)
def test_every_function_pages_on_its_first_error_log_line(synth, spec):
    # Given the metric filter on the function's own log group
    log_group = synth.resources[synth.function_id(spec.name)]["Properties"]["LoggingConfig"]["LogGroup"]
    (metric_filter,) = [
        f["Properties"]
        for f in synth.of_type("AWS::Logs::MetricFilter").values()
        if f["Properties"]["LogGroupName"] == log_group
    ]
    # It counts the JSON lines Powertools and the Lambda runtime write at ERROR and above
    for level in ("ERROR", "CRITICAL", "FATAL"):
        assert f'($.level = "{level}")' in metric_filter["FilterPattern"]
    (transformation,) = metric_filter["MetricTransformations"]
    assert transformation["MetricNamespace"] == ERROR_LINES_NAMESPACE
    assert transformation["MetricValue"] == "1"
    # And the first such line pages
    alarm = failure_alarm(synth, ERROR_LINES_NAMESPACE, transformation["MetricName"], {})
    assert_pages_on_the_first(alarm, synth)
    # Each deployment and function counts under a name of its own (a filter's dimensions can only be log fields)
    assert transformation["MetricName"] == f"{synth.stack.stack_name}/{spec.name}"


def test_the_dashboard_shows_every_failure_metric(synth):
    (dashboard,) = synth.of_type("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    failures = (metrics.RECORD_FAILURES, metrics.CAUGHT_ERRORS, metrics.ORPHAN_BATCHES)
    for name in (*failures, "IteratorAge", "ApproximateNumberOfMessagesVisible"):
        assert name in body, name
    for spec in wiring.FUNCTIONS:
        assert f"{synth.stack.stack_name}/{spec.name}" in body, spec.name


def test_the_functions_are_sampled_at_a_low_fixed_rate_by_a_rule_of_the_deployments_own(synth):
    # One rule, at the construct's default rate and with no reservoir: a quiet deployment is not traced whole
    (rule,) = [r["Properties"]["SamplingRule"] for r in synth.of_type("AWS::XRay::SamplingRule").values()]
    default = TraceSampling()
    assert (rule["FixedRate"], rule["ReservoirSize"]) == (default.fixed_rate, default.reservoir_per_s) == (0.01, 0)
    assert len(rule["RuleName"]) <= 32
    # Matching the deployment's functions by the names CloudFormation gives them, as none names itself
    assert rule["ServiceName"].startswith(f"{synth.stack.stack_name}-")
    for spec in wiring.FUNCTIONS:
        assert "FunctionName" not in synth.resources[synth.function_id(spec.name)]["Properties"], spec.name


@pytest.fixture(scope="module")
def sibling(tmp_path_factory, prebuilt_layer) -> Synth:
    """Another deployment in the same account, its stack named after the suite's and more: Interlude-staging."""
    with pytest.MonkeyPatch.context() as env:
        for key, value in OFFLINE_AWS.items():
            env.setenv(key, value)
        env.delenv("CDK_OUTDIR", raising=False)
        context = {"layerDir": str(prebuilt_layer), "stackName": f"{DEFAULT_STACK_NAME}-staging"}
        outdir = tmp_path_factory.mktemp("sibling.out")
        app, stack = build_app(context=context, outdir=str(outdir))
        return Synth(app, stack, outdir)


def x_ray_matches(pattern: str, value: str) -> bool:
    """X-Ray's match of a sampling rule's field: `*` any characters, `?` one, case aside."""
    expression = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(expression, value, re.IGNORECASE) is not None


def rendered(deployment: Synth) -> Renderer:
    """The deployment's template as CloudFormation resolves it, in one account and region."""
    return Renderer(deployment.template_json, Deployment(stack_name=deployment.stack.stack_name))


def sampled_functions(sampler: Synth, deployments: list[Synth]) -> set[tuple[str, str]]:
    """(stack, wiring's name) of each Interlude function, of every deployment, that `sampler`'s rule samples: by the
    name CloudFormation gives it (tests/support/aws_limits.Renderer), the ARN it runs as, and how it is traced."""
    (rule,) = [r["Properties"]["SamplingRule"] for r in sampler.of_type("AWS::XRay::SamplingRule").values()]
    rule = rendered(sampler)(rule)
    sampled = set()
    for deployment in deployments:
        render = rendered(deployment)
        for spec in wiring.FUNCTIONS:
            name = render.physical_name(deployment.function_id(spec.name))
            arn = f"arn:aws:lambda:{render.region}:{render.account}:function:{name}"
            seen = {"ServiceName": name, "ResourceARN": arn, "ServiceType": "AWS::Lambda::Function"}
            if all(x_ray_matches(rule[field], value) for field, value in seen.items()):
                sampled.add((deployment.stack.stack_name, spec.name))
    return sampled


def test_a_deployments_sampling_rule_samples_its_own_functions_and_not_a_sibling_stacks(synth, sibling):
    # Given two deployments in one account, one stack named after the other (Interlude, Interlude-staging)
    deployments = [synth, sibling]
    for sampler in deployments:
        # Then each one's rule samples its own nine functions, and none of the other's
        own = sampler.stack.stack_name
        assert sampled_functions(sampler, deployments) == {(own, spec.name) for spec in wiring.FUNCTIONS}, own
