"""A hostile pass over what a platform team meets deploying the construct into its own account.

Probed: every prop with values AWS would refuse only at deploy time (negative, zero, too large, the wrong type,
empty, names and tags a service refuses), each refused before anything is synthesized with a message naming the prop
and what it takes; a second deploy of a live stack with every prop a team changes after going live (no stateful
resource replaced, no second event source mapping beside the first, data kept on deletion); a second environment
in the same account and region (no physical name shared); and the combinations documented in docs/deploying.md,
each synthesized with both cdk-nag packs and checked against the AWS limits of tests/support/aws_limits.py, one of
them with the longest names the construct takes.

Syntheses: app.py's (the session's) and four of this module's, one of them refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import App, RemovalPolicy
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns

from app import build_app
from interlude import wiring
from interlude_cdk import (
    Autoscaled,
    CustomDomain,
    ExistingTable,
    InterludeProps,
    InterludeStack,
    RouteThrottle,
    TableCapacity,
    Throttles,
    TraceSampling,
    apply_checks,
)
from interlude_cdk.callbacks import CREATED_SECRET_TAGS_BYTES
from interlude_cdk.layer import PROJECT_ROOT
from tests.infra.conftest import OFFLINE_AWS, Synth
from tests.support import aws_limits as limits

PROJECT_CONTEXT = json.loads((PROJECT_ROOT / "cdk.json").read_text())["context"]
CERTIFICATE = "arn:aws:acm:us-east-1:111111111111:certificate/00000000-0000-0000-0000-000000000000"
STEADY = TableCapacity(reads=Autoscaled(minimum=5, maximum=500), writes=Autoscaled(minimum=5, maximum=500))
# What the longest-names stack is called: the longest deployment name the construct takes is its stack's name.
LONGEST_NAME = "Approvals-" + "x" * 54
# Resource type -> the properties whose change makes CloudFormation replace the resource (each type's page in the
# CloudFormation resource reference, "Update requires: Replacement"), for the resources that hold data or position.
REPLACED_BY = {
    "AWS::DynamoDB::Table": ("TableName", "KeySchema", "LocalSecondaryIndexes"),
    "AWS::SQS::Queue": ("QueueName", "FifoQueue"),
    "AWS::SecretsManager::Secret": ("Name",),
    "AWS::S3::Bucket": ("BucketName", "ObjectLockEnabled"),
    "AWS::Logs::LogGroup": ("LogGroupName",),
    "AWS::Scheduler::ScheduleGroup": ("Name",),
    # A stream mapping made anew starts again at TRIM_HORIZON beside the old one: every record read twice.
    "AWS::Lambda::EventSourceMapping": ("EventSourceArn", "StartingPosition"),
}
# What the construct keeps when its stack is deleted (RETAIN, the default; docs/deploying.md, InterludeProps).
KEPT = ("AWS::DynamoDB::Table", "AWS::SecretsManager::Secret", "AWS::S3::Bucket", "AWS::Logs::LogGroup")


def synthesized(tmp_path_factory, name: str, build) -> Synth:
    """`build(stack)` returns the construct's props for an InterludeStack `name`; synthesized with both nag packs."""
    with pytest.MonkeyPatch.context() as env:
        for key, value in OFFLINE_AWS.items():
            env.setenv(key, value)
        env.delenv("CDK_OUTDIR", raising=False)
        app = App(
            context=PROJECT_CONTEXT, outdir=str(tmp_path_factory.mktemp(f"{name}.out")), analytics_reporting=False
        )
        stack = InterludeStack(app, name)
        stack.build(**build(stack))
        apply_checks(app)
        return Synth(app, stack, Path(app.outdir))


@pytest.fixture(scope="module")
def changed(tmp_path_factory, prebuilt_layer) -> Synth:
    """app.py's stack ("Interlude") deployed again with every prop a team changes once it is live: its own key and
    topic, the domain, log retention and levels, sampling, throttles, the concurrency quota with reservations,
    provisioned concurrency on the stream reader and a queue consumer (aliases), SnapStart, memory, both tables
    provisioned, tags, e-mail, the dashboard off, the ancestry route off, the anchors' retention, the key cache."""

    def props(stack: InterludeStack) -> dict:
        key = kms.Key(stack, "DataKey", enable_key_rotation=True)
        return {
            "layer_dir": str(prebuilt_layer),
            "encryption_key": key,
            "alarm_topic": sns.Topic(stack, "Pager", master_key=key, enforce_ssl=True),
            "domain": CustomDomain(
                domain_name="approvals.example.com",
                certificate=acm.Certificate.from_certificate_arn(stack, "Certificate", CERTIFICATE),
            ),
            "log_retention": logs.RetentionDays.ONE_YEAR,
            "log_level": "WARNING",
            "system_log_level": "WARN",
            "trace_sampling": TraceSampling(fixed_rate=0.05),
            "throttles": Throttles(writes=RouteThrottle(rate_limit=20, burst_limit=40)),
            "account_concurrency_quota": 1000,
            "reserved_concurrency": {"callbacks": 5},
            "provisioned_concurrency": {"stream": 2, "dispatch": 2},
            "api_snap_start": True,
            "memory_mb": {"api": 1024},
            "table_capacity": {spec.logical_name: STEADY for spec in wiring.TABLES},
            "tags": {"owner": "platform", "cost-center": "42"},
            "notification_from_address": "approvals@example.com",
            "ses_configuration_set": "approvals",
            "dashboard": False,
            "ancestry_endpoint": False,
            "audit_anchor_retention_days": 400,
            "key_cache_seconds": 2,
        }

    return synthesized(tmp_path_factory, "Interlude", props)


@pytest.fixture(scope="module")
def second_environment(tmp_path_factory, prebuilt_layer) -> Synth:
    """app.py's stack once more in the same account and region, as a second environment (`-c stackName=...`)."""
    with pytest.MonkeyPatch.context() as env:
        for key, value in OFFLINE_AWS.items():
            env.setenv(key, value)
        env.delenv("CDK_OUTDIR", raising=False)
        context = {"layerDir": str(prebuilt_layer), "stackName": "Interlude-staging"}
        app, stack = build_app(context=context, outdir=str(tmp_path_factory.mktemp("staging.out")))
        return Synth(app, stack, Path(app.outdir))


def tags_at_the_budget(deployment: str) -> dict[str, str]:
    """As many 40-character tags as the run-time secrets' tags (with the deployment's own) can carry."""
    tags: dict[str, str] = {}
    while True:
        more = {**tags, f"team-{len(tags):02d}": "v" * 40}
        if (
            len(json.dumps({**more, "interlude:deployment": deployment}, separators=(",", ":")))
            > CREATED_SECRET_TAGS_BYTES
        ):
            return tags
        tags = more


@pytest.fixture(scope="module")
def longest(tmp_path_factory, prebuilt_layer) -> Synth:
    """The longest names the construct takes: the stack's (and so the deployment's) name, the custom domain, the
    sender and configuration set, and tags up to what the run-time secrets' tags may be."""

    def props(stack: InterludeStack) -> dict:
        long_label = "a" * 63
        return {
            "layer_dir": str(prebuilt_layer),
            "encryption_key": kms.Key(stack, "DataKey", enable_key_rotation=True),
            "domain": CustomDomain(
                domain_name=f"{long_label}.{long_label}.{long_label}.example.com",
                certificate=acm.Certificate.from_certificate_arn(stack, "Certificate", CERTIFICATE),
            ),
            "notification_from_address": f"approvals@{long_label}.example.com",
            "ses_configuration_set": "s" * 64,
            "tags": tags_at_the_budget(LONGEST_NAME),
            "key_cache_seconds": 0.25,
            "ancestry_endpoint": False,
        }

    return synthesized(tmp_path_factory, LONGEST_NAME, props)


# -- a second deploy with changed props --------------------------------------------------------------------------


def stateful(synth: Synth) -> dict[str, dict]:
    return {key: res for key, res in synth.resources.items() if res["Type"] in REPLACED_BY}


def test_a_second_deploy_with_changed_props_replaces_no_stateful_resource(synth, changed):
    live, again = stateful(synth), stateful(changed)
    # Every table, queue, secret, bucket, log group, schedule group and event source mapping keeps its logical id
    assert sorted(set(live) - set(again)) == []
    # And nothing CloudFormation replaces them for changes
    for logical_id, resource in live.items():
        before, after = resource["Properties"], again[logical_id]["Properties"]
        for prop in REPLACED_BY[resource["Type"]]:
            assert before.get(prop) == after.get(prop), (logical_id, prop)


def test_an_alias_added_later_takes_over_each_event_source_mapping_in_place(synth, changed):
    """Provisioned concurrency (or SnapStart) after going live: the stream's and the queues' mappings keep their
    logical ids and now invoke the alias, rather than a second mapping made beside the first (for the stream, one
    reading it again from TRIM_HORIZON while the old one still reads it)."""
    for name in ("stream", "dispatch"):
        function = changed.interlude.functions.by_name[name]
        alias = changed.interlude.functions.invoked[name]
        assert alias is not function
        alias_id = changed.stack.get_logical_id(alias.node.default_child)
        mappings = {
            key: res["Properties"]
            for key, res in changed.of_type("AWS::Lambda::EventSourceMapping").items()
            if json.dumps({"Ref": alias_id}) in json.dumps(res["Properties"]["FunctionName"])
        }
        assert mappings, name
        assert set(mappings) <= set(synth.of_type("AWS::Lambda::EventSourceMapping")), name
    # And the stream still has exactly one reader
    streams = [
        m for m in changed.of_type("AWS::Lambda::EventSourceMapping").values() if "StartingPosition" in m["Properties"]
    ]
    assert len(streams) == 1


@pytest.mark.parametrize("synth_name", ["synth", "changed"])
def test_what_holds_data_outlives_the_stack(request, synth_name):
    deployment = request.getfixturevalue(synth_name)
    for resource_type in KEPT:
        for logical_id, resource in deployment.of_type(resource_type).items():
            assert (resource.get("DeletionPolicy"), resource.get("UpdateReplacePolicy")) == ("Retain", "Retain"), (
                logical_id
            )
    for logical_id, table in deployment.of_type("AWS::DynamoDB::Table").items():
        assert table["Properties"]["DeletionProtectionEnabled"] is True, logical_id


# -- two environments in one account and region -----------------------------------------------------------------

# Properties that name something account-wide (per region) when the template sets them.
PHYSICAL_NAMES = (
    "AlarmName",
    "DashboardName",
    "RuleName",
    "Name",
    "TableName",
    "QueueName",
    "FunctionName",
    "LogGroupName",
    "BucketName",
    "TopicName",
    "RoleName",
    "ExportName",
)
NAMED_TYPES = {
    "AWS::CloudWatch::Alarm",
    "AWS::CloudWatch::Dashboard",
    "AWS::XRay::SamplingRule",
    "AWS::SecretsManager::Secret",
    "AWS::Scheduler::ScheduleGroup",
    "AWS::Scheduler::Schedule",
    "AWS::DynamoDB::Table",
    "AWS::SQS::Queue",
    "AWS::Lambda::Function",
    "AWS::Logs::LogGroup",
    "AWS::S3::Bucket",
    "AWS::SNS::Topic",
    "AWS::IAM::Role",
    "AWS::SSM::Parameter",
}


def account_wide_names(synth: Synth) -> set[str]:
    """Every name the stack gives something account-wide, as deployed: physical names, exports, metric names of its
    log filters, and the secret-name prefixes its functions create and delete secrets under."""
    render = limits.Renderer(synth.template_json, limits.Deployment(stack_name=synth.stack.stack_name))
    names = set()
    for resource in synth.resources.values():
        if resource["Type"] not in NAMED_TYPES:
            continue
        props = resource["Properties"]
        named = {**props, **props.get("SamplingRule", {})}
        names |= {f"{resource['Type']} {render(named[key])}" for key in PHYSICAL_NAMES if key in named}
    for output in synth.template_json.get("Outputs", {}).values():
        if "Export" in output:
            names.add(f"export {render(output['Export']['Name'])}")
    for metric_filter in synth.of_type("AWS::Logs::MetricFilter").values():
        for transformation in metric_filter["Properties"]["MetricTransformations"]:
            if "Dimensions" not in transformation:
                names.add(f"metric {transformation['MetricNamespace']}/{transformation['MetricName']}")
    for spec in wiring.FUNCTIONS:
        names |= {f"secret prefix {v}" for k, v in synth.env(spec.name).items() if k in wiring.SECRET_PREFIXES}
    return names


def test_two_environments_in_one_account_share_no_name(synth, second_environment):
    first, second = account_wide_names(synth), account_wide_names(second_environment)
    assert any(name.startswith("AWS::CloudWatch::Alarm") for name in first)
    assert any(name.startswith("secret prefix") for name in first)
    assert first & second == set()
    # Nor does one's secret prefix hold the other's secrets (a tenant's deletion removes secrets under it)
    prefixes = [name.removeprefix("secret prefix ") for name in first | second if name.startswith("secret prefix")]
    assert not [(a, b) for a in prefixes for b in prefixes if a != b and b.startswith(a)]


# -- documented combinations, within AWS's limits ------------------------------------------------------------------

COMBINATIONS = ["changed", "second_environment", "longest"]


@pytest.mark.parametrize("combination", COMBINATIONS)
def test_each_combination_fits_the_limits_the_infra_tests_check(request, combination):
    deployment = request.getfixturevalue(combination)
    stack = limits.Deployment(stack_name=deployment.stack.stack_name)
    body = Path(deployment.artifact.template_full_path).read_bytes()
    assert limits.template_findings(deployment.template_json, body) == []
    assert limits.lambda_environment_findings(deployment.template_json, stack) == []
    assert limits.lambda_resource_policy_findings(deployment.template_json, stack) == []
    assert limits.identity_policy_findings(deployment.template_json, stack) == []
    assert limits.trust_policy_findings(deployment.template_json, stack) == []
    assert limits.sqs_visibility_findings(deployment.template_json) == []
    assert limits.sqs_concurrency_findings(deployment.template_json) == []
    assert limits.concurrency_quota_findings(deployment.template_json, limits.LAMBDA_DEFAULT_CONCURRENCY_QUOTA) == []
    assert limits.log_retention_findings(deployment.template_json) == []


def test_the_longest_names_reach_the_template_unchanged(longest):
    assert longest.interlude.deployment == LONGEST_NAME
    tags = json.loads(longest.env("callbacks")[wiring.CREATED_SECRETS_TAGS_ENV])
    assert len(tags) == len(tags_at_the_budget(LONGEST_NAME)) + 1


def test_tags_over_what_the_run_time_secrets_can_carry_are_refused_at_synth(tmp_path_factory, prebuilt_layer):
    def props(stack: InterludeStack) -> dict:
        # Each tag as AWS takes it, and together more than the secrets' tags can carry
        return {"layer_dir": str(prebuilt_layer), "tags": {**tags_at_the_budget("Tagged"), "environment": "e" * 60}}

    with pytest.raises(RuntimeError, match=rf"come to \d+ bytes as JSON, over the {CREATED_SECRET_TAGS_BYTES}"):
        synthesized(tmp_path_factory, "Tagged", props)


def test_a_stack_name_too_long_to_name_the_deployment_is_refused_with_the_prop_to_set(offline, prebuilt_layer):
    stack = InterludeStack(App(context=PROJECT_CONTEXT), "Approvals-" + "x" * 55)
    with pytest.raises(ValueError, match=r"deployment_name, else the stack's name\) must be 1-64 letters"):
        stack.build(layer_dir=str(prebuilt_layer))


def test_app_py_refuses_a_domain_without_its_certificate(offline, prebuilt_layer):
    with pytest.raises(ValueError, match="domainName needs -c certificateArn"):
        build_app(context={"layerDir": str(prebuilt_layer), "domainName": "hitl.example.org"}, outdir=str(offline))


# -- props AWS would refuse at deploy time, refused first ---------------------------------------------------------

STREAM = "arn:aws:dynamodb:us-east-1:111111111111:table/{}/stream/2026-12-01T10:00:00.000"


@pytest.mark.parametrize(
    ("props", "says"),
    [
        ({"account_concurrency_quota": 0}, r"account_concurrency_quota must be 1 or more, not 0"),
        ({"account_concurrency_quota": "1000"}, r"account_concurrency_quota must be a whole number, not '1000'"),
        (
            {"account_concurrency_quota": 1000, "reserved_concurrency": {"api": 0}},
            r"\['api'\] must be 1 or more, not 0",
        ),
        ({"account_concurrency_quota": 1000, "reserved_concurrency": {"dispatch": -1}}, r"must be 1 or more, not -1"),
        ({"account_concurrency_quota": 1000, "reserved_concurrency": {"dispatch": 2.5}}, r"a whole number, not 2.5"),
        ({"account_concurrency_quota": 1000, "provisioned_concurrency": {"api": "2"}}, r"a whole number, not '2'"),
        ({"memory_mb": {"api": 1024.5}}, r"memory_mb\['api'\] must be a whole number, not 1024.5"),
        ({"memory_mb": {"api": 10241}}, r"memory_mb\['api'\] must be 128-10240, not 10241"),
        ({"memory_mb": {"api": True}}, r"must be 128-10240, not True"),
        ({"sqs_max_concurrency": {"callbacks": "5"}}, r"sqs_max_concurrency\['callbacks'\] must be a whole number"),
        ({"key_cache_seconds": "5"}, r"key_cache_seconds must be a number of seconds, not '5'"),
        ({"log_level": 10}, r"log_level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, not 10"),
        ({"system_log_level": None}, r"system_log_level must be one of DEBUG, INFO, WARN, not None"),
        ({"log_retention": 45}, r"log_retention must be a logs.RetentionDays .*, not 45"),
        (
            {"removal_policy": RemovalPolicy.SNAPSHOT},
            r"removal_policy must be RemovalPolicy.RETAIN or RemovalPolicy.DESTROY",
        ),
        ({"dashboard": "no"}, r"dashboard must be True or False, not 'no'"),
        ({"api_snap_start": 1}, r"api_snap_start must be True or False, not 1"),
        ({"deployment_name": "prod env"}, r"deployment_name must be 1-64 letters, digits, - or _ .*'prod env'"),
        ({"deployment_name": "team/prod"}, r"deployment_name must be 1-64 letters"),
        ({"deployment_name": ""}, r"deployment_name must be 1-64 letters"),
        ({"deployment_name": "p" * 65}, r"deployment_name must be 1-64 letters"),
        ({"tags": {"aws:owner": "me"}}, r"tags: the key 'aws:owner' is reserved"),
        ({"tags": {"interlude:deployment": "x"}}, r"tags: the key 'interlude:deployment' is reserved"),
        ({"tags": {"k" * 129: "v"}}, r"a key of tags must be 1-128 letters"),
        ({"tags": {"owner": "v" * 257}}, r"tags\['owner'\] must be 0-256 letters"),
        ({"tags": {"owner": "a;b"}}, r"tags\['owner'\] must be 0-256 letters"),
        ({"tags": {f"k{n}": "v" for n in range(50)}}, r"tags: at most 49 .*, not 50"),
        ({"notification_from_address": "approvals"}, r"notification_from_address must be an e-mail address"),
        ({"ses_configuration_set": "approvals"}, r"ses_configuration_set needs notification_from_address"),
        (
            {"notification_from_address": "a@example.com", "ses_configuration_set": "bad name"},
            r"ses_configuration_set must be 1-64 letters, digits, _ and -",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_a_prop_aws_would_refuse_at_deploy_is_refused_naming_it(props, says):
    with pytest.raises(ValueError, match=says):
        InterludeProps(**props)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: RouteThrottle(rate_limit=-1, burst_limit=10), r"RouteThrottle.rate_limit must be 0 or more, not -1"),
        (lambda: RouteThrottle(rate_limit=10, burst_limit=-1), r"RouteThrottle.burst_limit must be 0 or more, not -1"),
        (lambda: RouteThrottle(rate_limit=10, burst_limit=1.5), r"RouteThrottle.burst_limit must be a whole number"),
        (
            lambda: RouteThrottle(rate_limit="10", burst_limit=10),
            r"RouteThrottle.rate_limit must be 0 or more, not '10'",
        ),
        (lambda: TraceSampling(fixed_rate="0.5"), r"TraceSampling.fixed_rate must be 0-1, not '0.5'"),
        (lambda: TraceSampling(fixed_rate=float("nan")), r"TraceSampling.fixed_rate must be 0-1, not nan"),
        (lambda: TraceSampling(priority=1.5), r"TraceSampling.priority must be a whole number"),
        (
            lambda: TableCapacity(reads=Autoscaled(minimum=1.5, maximum=5), writes=Autoscaled(minimum=1, maximum=5)),
            r"TableCapacity.reads.minimum must be a whole number, not 1.5",
        ),
        (lambda: CustomDomain(domain_name="", certificate=object()), r"CustomDomain.domain_name must be a DNS name"),
        (
            lambda: CustomDomain(domain_name="*.example.com", certificate=object()),
            r"CustomDomain.domain_name must be a DNS name",
        ),
        (lambda: CustomDomain(domain_name="https://approvals.example.com", certificate=object()), r"a DNS name"),
        (lambda: ExistingTable(table_name="", stream_arn=STREAM.format("t")), r"ExistingTable.table_name must be"),
        (
            lambda: ExistingTable(table_name="restored", stream_arn=None),
            r"ExistingTable.stream_arn must be the stream ARN of table 'restored', not None",
        ),
        (
            lambda: ExistingTable(table_name="restored", stream_arn=STREAM.format("another")),
            r"ExistingTable.stream_arn is the stream of table 'another', not of 'restored'",
        ),
        (
            lambda: ExistingTable(table_name="restored", stream_arn=STREAM.format("restored"), entries_table_name="e!"),
            r"ExistingTable.entries_table_name must be a DynamoDB table name",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_a_part_aws_would_refuse_is_refused_naming_it(make, says):
    with pytest.raises(ValueError, match=says):
        make()


def test_the_audit_anchors_retention_must_be_whole_days(offline, prebuilt_layer):
    stack = InterludeStack(App(context=PROJECT_CONTEXT), "Anchored")
    with pytest.raises(ValueError, match=r"audit_anchor_retention_days must be a whole number, not '365'"):
        stack.build(layer_dir=str(prebuilt_layer), audit_anchor_retention_days="365")
