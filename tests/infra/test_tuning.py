"""A construct a platform team can tune (issue 25, findings 9-10, item 6): each prop reaches the template, and the
defaults deploy into a fresh account.

One stack is synthesized with every tuning prop set (the `tuned` fixture, both cdk-nag packs run); the refusals are
checked on the props alone, before anything is synthesized.
"""

from __future__ import annotations

import json
import re

import pytest
from aws_cdk import App
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_lambda as lambda_

from interlude import wiring
from interlude_cdk import (
    Autoscaled,
    ExistingTable,
    InterludeProps,
    InterludeStack,
    TableCapacity,
    TraceSampling,
    apply_checks,
)
from interlude_cdk.layer import PROJECT_ROOT
from interlude_cdk.props import DEFAULT_SQS_MAX_CONCURRENCY, UNRESERVED_MINIMUM
from tests.infra.conftest import OFFLINE_AWS, Synth, as_list

STEADY = TableCapacity(reads=Autoscaled(minimum=5, maximum=900), writes=Autoscaled(minimum=10, maximum=1200))
PROJECT_CONTEXT = json.loads((PROJECT_ROOT / "cdk.json").read_text())["context"]
CONSUMERS = [spec.name for spec in wiring.FUNCTIONS if spec.consumes]
STREAM = "arn:aws:dynamodb:us-east-1:111111111111:table/restored/stream/2026-12-01T10:00:00.000"
STREAM_READER = next(spec.name for spec in wiring.FUNCTIONS if spec.reads_stream)


def mappings_of(synth: Synth, invoked) -> list[dict]:
    """The event source mappings that invoke `invoked`: a function (its Ref), or an alias (`<name>:live`, built from
    the alias's Ref)."""
    target = {"Ref": synth.stack.get_logical_id(invoked.node.default_child)}
    return [
        m["Properties"]
        for m in synth.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == target or json.dumps(target) in json.dumps(m["Properties"]["FunctionName"])
    ]


# -- the defaults: a fresh account ----------------------------------------------------------------------------


def test_the_default_deployment_reserves_nothing_so_a_fresh_account_can_hold_it(synth):
    """Finding 10: a new account's quota may be 10; Lambda keeps 100 unreserved, so any reservation fails there."""
    for name, function in synth.of_type("AWS::Lambda::Function").items():
        assert "ReservedConcurrentExecutions" not in function["Properties"], name
    assert synth.of_type("AWS::Lambda::ProvisionedConcurrencyConfig") == {}


@pytest.mark.parametrize("name", CONSUMERS)
def test_the_default_queue_mappings_have_a_maximum_concurrency(synth, name):
    # wiring's own where it names one (dispatch: from the per-deployment goal), else the construct's default
    (mapping,) = mappings_of(synth, synth.interlude.functions.by_name[name])
    own = wiring.function(name).max_concurrency
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": own or DEFAULT_SQS_MAX_CONCURRENCY}


def test_dispatch_is_polled_at_the_concurrency_its_goal_needs_not_the_default():
    assert InterludeProps().sqs_max_concurrencies()["dispatch"] == wiring.OUTBOX_CONCURRENCY > DEFAULT_SQS_MAX_CONCURRENCY


def test_the_concurrency_wiring_derives_from_the_goal_covers_what_the_last_bench_says_it_needs():
    """bench/ceiling.py's verdicts as `make bench` last printed them into docs/scale.md: at the per-deployment goal,
    each function whose concurrency wiring derives from it needs at most what wiring gives it."""
    printed = (PROJECT_ROOT / "docs" / "scale.md").read_text()
    needs = re.findall(r"(\w+) needs (\d+) concurrent invocations .*? \(`wiring\.(\w+)`\)", printed)
    assert {function for function, _, _ in needs} == {"dispatch", "callbacks", "timeouts"}
    for function, needed, name in needs:
        assert getattr(wiring, name) >= int(needed), (function, needed, name)


def test_a_stated_quota_brings_wirings_reservations_and_the_queue_maximum_follows_them():
    props = InterludeProps(account_concurrency_quota=1000)
    defaults = {spec.name: spec.reserved_concurrency for spec in wiring.FUNCTIONS if spec.reserved_concurrency}
    assert props.reservations() == defaults
    # actions is reserved 10: its queue is polled by 10 at most; dispatch at its own maximum within its reservation;
    # callbacks at its own, unreserved; the other unreserved consumers get the default
    assert props.sqs_max_concurrencies() == {
        **{name: defaults.get(name, DEFAULT_SQS_MAX_CONCURRENCY) for name in CONSUMERS},
        "dispatch": wiring.OUTBOX_CONCURRENCY,
        "callbacks": wiring.CALLBACK_CONCURRENCY,
    }


def test_a_reservation_is_merged_over_the_defaults_and_none_removes_one():
    props = InterludeProps(account_concurrency_quota=1000, reserved_concurrency={"dispatch": 3, "timeouts": None})
    reserved = props.reservations()
    assert reserved["dispatch"] == 3
    assert "timeouts" not in reserved
    assert reserved["actions"] == wiring.function("actions").reserved_concurrency


# What wiring reserves when a deployment states its quota.
RESERVED = sum(spec.reserved_concurrency or 0 for spec in wiring.FUNCTIONS)


# -- refusals, before synthesis --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("props", "says"),
    [
        ({"reserved_concurrency": {"dispatch": 5}}, "needs account_concurrency_quota"),
        # wiring reserves more than 10 by default: a quota of 110 leaves 10
        ({"account_concurrency_quota": 110}, "do not fit an account quota of 110"),
        ({"account_concurrency_quota": 10}, "leaving 0"),
        ({"account_concurrency_quota": 1000, "sqs_max_concurrency": {"actions": 11}}, "exceeds its reserved"),
        ({"sqs_max_concurrency": {"callbacks": 1}}, "must be 2-1000"),
        ({"sqs_max_concurrency": {"callbacks": 1001}}, "must be 2-1000"),
        ({"sqs_max_concurrency": {"timeouts": 5}}, "consume no queue"),
        ({"account_concurrency_quota": 1000, "reserved_concurrency": {"notify": 1}}, "reserve at least 2"),
        ({"provisioned_concurrency": {"api": 2}}, "needs account_concurrency_quota"),
        ({"account_concurrency_quota": 1000, "provisioned_concurrency": {"timeouts": 1}}, "never through an alias"),
        (
            {"account_concurrency_quota": 1000, "provisioned_concurrency": {"api": 1}, "api_snap_start": True},
            "SnapStart with provisioned",
        ),
        (
            {"account_concurrency_quota": 1000, "provisioned_concurrency": {"dispatch": wiring.OUTBOX_CONCURRENCY + 1}},
            "exceeds its reserved",
        ),
        ({"account_concurrency_quota": 1000, "provisioned_concurrency": {"api": 900 - RESERVED + 1}}, "do not fit"),
        ({"memory_mb": {"api": 64}}, "must be 128-10240"),
        ({"memory_mb": {"apii": 1024}}, "names no function"),
        ({"function_overrides": {"nope": print}}, "names no function"),
        ({"log_level": "VERBOSE"}, "log_level must be one of"),
        ({"system_log_level": "WARNING"}, "system_log_level must be one of DEBUG, INFO, WARN, not 'WARNING'"),
        ({"key_cache_seconds": 61}, "key_cache_seconds must be 0-60 seconds, not 61"),
        ({"key_cache_seconds": -1}, "key_cache_seconds must be 0-60 seconds, not -1"),
        ({"security_groups": [object()]}, "need a vpc"),
        ({"table_capacity": {"Tabel": STEADY}}, "names no table"),
        (
            {
                "table_capacity": {"Table": STEADY},
                "existing_table": ExistingTable(table_name="restored", stream_arn=STREAM),
            },
            "imports",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_a_deployment_that_cannot_deploy_is_refused_with_the_reason(props, says):
    with pytest.raises(ValueError, match=says):
        InterludeProps(**props)


@pytest.mark.parametrize(
    ("capacity", "says"),
    [
        ({"reads": Autoscaled(minimum=10, maximum=5), "writes": Autoscaled(minimum=1, maximum=5)}, "reads must keep"),
        ({"reads": Autoscaled(minimum=0, maximum=5), "writes": Autoscaled(minimum=1, maximum=5)}, "reads must keep"),
        (
            {"reads": Autoscaled(minimum=1, maximum=5), "writes": Autoscaled(minimum=1, maximum=40_001)},
            "writes must keep",
        ),
        ({**STEADY.__dict__, "target_utilization_percent": 95}, "must be 20-90, not 95"),
        ({**STEADY.__dict__, "target_utilization_percent": 10}, "must be 20-90, not 10"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_a_capacity_dynamodb_would_refuse_is_refused_with_the_reason(capacity, says):
    with pytest.raises(ValueError, match=says):
        TableCapacity(**capacity)


def test_the_quota_holds_reservations_and_the_provisioned_concurrency_of_unreserved_functions():
    # wiring's reservations + what is left of 900 provisioned for the unreserved api = 1000 - 100: exactly fits
    props = InterludeProps(account_concurrency_quota=1000, provisioned_concurrency={"api": 900 - RESERVED})
    assert sum(props.reservations().values()) + 900 - RESERVED == 1000 - UNRESERVED_MINIMUM


# -- every tuning prop, in one synthesized stack -----------------------------------------------------------------

# Over wiring's sizes, each function's own (docs/adr/0171): one raised, one lowered, and callbacks raised back from its
# 256 MB to 512.
MEMORY = {"api": 1024, "dispatch": 256, "callbacks": 512}
# The first table provisioned with auto scaling; the second is not named, so it stays on demand.
TABLE_CAPACITY = {wiring.TABLE.logical_name: STEADY}
PROVISIONED = {STREAM_READER: 2}
SQS_MAX = {"notify": 3}


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, prebuilt_layer) -> Synth:
    with pytest.MonkeyPatch.context() as env:
        for key, value in OFFLINE_AWS.items():
            env.setenv(key, value)
        env.delenv("CDK_OUTDIR", raising=False)
        app = App(context=PROJECT_CONTEXT, outdir=str(tmp_path_factory.mktemp("tuned.out")), analytics_reporting=False)
        stack = InterludeStack(app, "Tuned")
        vpc = ec2.Vpc.from_vpc_attributes(
            stack,
            "Vpc",
            vpc_id="vpc-0123456789abcdef0",
            availability_zones=["us-east-1a", "us-east-1b"],
            private_subnet_ids=["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"],
            private_subnet_route_table_ids=["rtb-0aaaaaaaaaaaaaaaa", "rtb-0bbbbbbbbbbbbbbbb"],
        )
        group = ec2.SecurityGroup.from_security_group_id(stack, "Egress", "sg-0123456789abcdef0")

        def more_storage(function: lambda_.Function) -> None:
            function.add_environment("TUNED_BY_OVERRIDE", "yes")
            function.node.default_child.add_property_override("EphemeralStorage.Size", 1024)

        stack.build(
            layer_dir=str(prebuilt_layer),
            log_level="DEBUG",
            system_log_level="warn",
            memory_mb=MEMORY,
            account_concurrency_quota=1000,
            provisioned_concurrency=PROVISIONED,
            sqs_max_concurrency=SQS_MAX,
            api_snap_start=True,
            vpc=vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            security_groups=[group],
            function_overrides={"notify": more_storage},
            trace_sampling=TraceSampling(fixed_rate=0.2, reservoir_per_s=2),
            key_cache_seconds=1.5,
            table_capacity=TABLE_CAPACITY,
        )
        # Both cdk-nag packs: an unacknowledged finding (a VPC role's network actions, say) fails the synthesis
        apply_checks(app)
        return Synth(app, stack, tmp_path_factory.mktemp("tuned.unused"))


def function_props(synth: Synth, name: str) -> dict:
    return synth.resources[synth.function_id(name)]["Properties"]


@pytest.mark.parametrize("spec", wiring.FUNCTIONS, ids=lambda spec: spec.name)
def test_memory_and_log_level_per_function(tuned, spec):
    props = function_props(tuned, spec.name)
    assert props["MemorySize"] == MEMORY.get(spec.name, spec.memory_mb)
    assert props["Environment"]["Variables"]["LOG_LEVEL"] == "DEBUG"
    # Lambda's own filter of application logs says the same (a stdlib logger's DEBUG line reaches the log too)
    assert props["LoggingConfig"]["ApplicationLogLevel"] == "DEBUG"
    # and Lambda's own records only where they warn (no start and report record per invocation)
    assert props["LoggingConfig"]["SystemLogLevel"] == "WARN"


@pytest.mark.parametrize("spec", wiring.FUNCTIONS, ids=lambda spec: spec.name)
def test_every_function_runs_in_the_given_subnets_with_the_given_security_group(tuned, spec):
    config = function_props(tuned, spec.name)["VpcConfig"]
    assert sorted(config["SubnetIds"]) == ["subnet-0aaaaaaaaaaaaaaaa", "subnet-0bbbbbbbbbbbbbbbb"]
    assert config["SecurityGroupIds"] == ["sg-0123456789abcdef0"]
    # And its role may manage the network interfaces Lambda makes in them (CDK adds that only to roles it creates)
    network = [s for s in tuned.statements(spec.name) if "ec2:CreateNetworkInterface" in as_list(s["Action"])]
    assert network, spec.name


def test_provisioned_concurrency_is_on_an_alias_the_stream_mapping_invokes(tuned):
    alias = tuned.interlude.functions.invoked[STREAM_READER]
    assert alias is not tuned.interlude.functions.by_name[STREAM_READER]
    props = tuned.resources[tuned.stack.get_logical_id(alias.node.default_child)]["Properties"]
    assert props["Name"] == "live"
    assert props["ProvisionedConcurrencyConfig"] == {"ProvisionedConcurrentExecutions": PROVISIONED[STREAM_READER]}
    (mapping,) = mappings_of(tuned, alias)
    assert mapping["EventSourceArn"]
    # The unqualified function is invoked by nothing: every record goes through the provisioned alias
    assert mappings_of(tuned, tuned.interlude.functions.by_name[STREAM_READER]) == []


def test_snap_start_publishes_the_api_and_the_http_api_invokes_its_alias(tuned):
    api = wiring.ROUTES_FUNCTION
    assert function_props(tuned, api)["SnapStart"] == {"ApplyOn": "PublishedVersions"}
    alias = tuned.interlude.functions.invoked[api]
    alias_id = tuned.stack.get_logical_id(alias.node.default_child)
    assert tuned.resources[alias_id]["Properties"]["Name"] == "live"
    assert "ProvisionedConcurrencyConfig" not in tuned.resources[alias_id]["Properties"]
    http_api = {"Ref": tuned.logical_id(tuned.interlude.api.http_api)}
    integrations = tuned.of_type("AWS::ApiGatewayV2::Integration").values()
    assert integrations
    for integration in integrations:
        if integration["Properties"]["ApiId"] == http_api:
            assert integration["Properties"]["IntegrationUri"] == {"Ref": alias_id}
        else:  # the WebSocket API's (wiring.LIVE_API), by the alias's invocation path
            assert {"Ref": alias_id} in integration["Properties"]["IntegrationUri"]["Fn::Join"][1]
    # API Gateway may invoke the alias it calls
    permissions = [p["Properties"] for p in tuned.of_type("AWS::Lambda::Permission").values()]
    assert any(p["FunctionName"] == {"Ref": alias_id} for p in permissions)


def test_the_queue_maximum_concurrency_is_the_deployments(tuned):
    for name in CONSUMERS:
        (mapping,) = mappings_of(tuned, tuned.interlude.functions.invoked[name])
        reserved = function_props(tuned, name).get("ReservedConcurrentExecutions")
        # Its own (wiring) within its reservation, else its reservation, else the construct's default.
        own = wiring.function(name).max_concurrency
        held = reserved or DEFAULT_SQS_MAX_CONCURRENCY if own is None else min(own, reserved or own)
        wanted = SQS_MAX.get(name, held)
        assert mapping["ScalingConfig"] == {"MaximumConcurrency": wanted}, name


def test_the_key_cache_bound_reaches_the_function_that_reads_keys(tuned, synth):
    """A revocation's bound across instances is the deployment's: the api function (every route, the console, live
    connections) is told it; a deployment that keeps the default tells no function (interlude.config's default)."""
    for spec in wiring.FUNCTIONS:
        given = function_props(tuned, spec.name)["Environment"]["Variables"].get("INTERLUDE_KEY_CACHE_SECONDS")
        assert given == ("1.5" if spec.name == wiring.ROUTES_FUNCTION else None), spec.name
        assert "INTERLUDE_KEY_CACHE_SECONDS" not in function_props(synth, spec.name)["Environment"]["Variables"]


def test_a_function_override_sees_the_built_function_and_its_changes_reach_the_template(tuned):
    props = function_props(tuned, "notify")
    assert props["Environment"]["Variables"]["TUNED_BY_OVERRIDE"] == "yes"
    assert props["EphemeralStorage"] == {"Size": 1024}
    # The construct's own environment is still there: the override added to it
    assert props["Environment"]["Variables"]["TABLE_NAME"]
    assert "TUNED_BY_OVERRIDE" not in function_props(tuned, "api")["Environment"]["Variables"]


@pytest.mark.parametrize(
    ("sampling", "says"),
    [
        ({"fixed_rate": 1.5}, "fixed_rate must be 0-1"),
        ({"reservoir_per_s": -1}, "0 or more"),
        ({"priority": 0}, "1-9999"),
    ],
)
def test_a_sampling_rule_x_ray_would_refuse_is_refused_with_the_reason(sampling, says):
    with pytest.raises(ValueError, match=says):
        TraceSampling(**sampling)


def test_the_deployments_trace_sampling_is_its_own_rule(tuned):
    (rule,) = [r["Properties"]["SamplingRule"] for r in tuned.of_type("AWS::XRay::SamplingRule").values()]
    assert (rule["FixedRate"], rule["ReservoirSize"]) == (0.2, 2)


# -- the tables' capacity -------------------------------------------------------------------------------------------


def scaling_of(synth: Synth) -> dict[str, tuple[int, int, float, str]]:
    """ScalableDimension and resource -> (min, max, target, metric) of each auto-scaled table or index."""
    policies = {
        json.dumps(p["Properties"]["ScalingTargetId"]): p["Properties"]["TargetTrackingScalingPolicyConfiguration"]
        for p in synth.of_type("AWS::ApplicationAutoScaling::ScalingPolicy").values()
    }
    found = {}
    for logical_id, target in synth.of_type("AWS::ApplicationAutoScaling::ScalableTarget").items():
        props = target["Properties"]
        assert props["ServiceNamespace"] == "dynamodb"
        tracking = policies[json.dumps({"Ref": logical_id})]
        index = "index" if "/index/" in json.dumps(props["ResourceId"]) else "table"
        found[f"{props['ScalableDimension']} {index}"] = (
            props["MinCapacity"],
            props["MaxCapacity"],
            tracking["TargetValue"],
            tracking["PredefinedMetricSpecification"]["PredefinedMetricType"],
        )
    return found


def test_the_tables_are_on_demand_unless_the_deployment_provisions_them(synth):
    for logical_id in (synth.table_id(), synth.entries_table_id()):
        props = synth.table(logical_id)["Properties"]
        assert props["BillingMode"] == "PAY_PER_REQUEST"
        assert "ProvisionedThroughput" not in props
    assert synth.of_type("AWS::ApplicationAutoScaling::ScalableTarget") == {}


def test_a_provisioned_table_and_its_index_start_at_their_minimum_and_scale_to_the_target(tuned):
    table = tuned.table(tuned.table_id())["Properties"]
    assert table.get("BillingMode", "PROVISIONED") == "PROVISIONED"  # CloudFormation's default, left out
    at_minimum = {"ReadCapacityUnits": STEADY.reads.minimum, "WriteCapacityUnits": STEADY.writes.minimum}
    assert table["ProvisionedThroughput"] == at_minimum
    (index,) = table["GlobalSecondaryIndexes"]
    assert index["IndexName"] == wiring.INBOX_INDEX.name
    assert index["ProvisionedThroughput"] == at_minimum
    reads = (STEADY.reads.minimum, STEADY.reads.maximum, STEADY.target_utilization_percent)
    writes = (STEADY.writes.minimum, STEADY.writes.maximum, STEADY.target_utilization_percent)
    assert scaling_of(tuned) == {
        "dynamodb:table:ReadCapacityUnits table": (*reads, "DynamoDBReadCapacityUtilization"),
        "dynamodb:table:WriteCapacityUnits table": (*writes, "DynamoDBWriteCapacityUtilization"),
        "dynamodb:index:ReadCapacityUnits index": (*reads, "DynamoDBReadCapacityUtilization"),
        "dynamodb:index:WriteCapacityUnits index": (*writes, "DynamoDBWriteCapacityUtilization"),
    }
    # The table the deployment did not name stays on demand.
    assert tuned.table(tuned.entries_table_id())["Properties"]["BillingMode"] == "PAY_PER_REQUEST"
