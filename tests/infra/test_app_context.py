"""app.py's context switches: a restored table, a custom domain with your certificate, your alarm topic, the account's
concurrency quota."""

from __future__ import annotations

import pytest
from aws_cdk import App, RemovalPolicy, Stack
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from app import build_app
from interlude import wiring
from interlude_cdk import ExistingTable
from interlude_cdk.table import DataTable
from tests.infra.conftest import OFFLINE_AWS, Synth, actions_on, alarm_metrics, as_list, dimension

TABLE = "interlude-restored-20261201"
ENTRIES_TABLE = "interlude-restored-entries-20261201"
STREAM = f"arn:aws:dynamodb:us-east-1:111111111111:table/{TABLE}/stream/2026-12-01T10:00:00.000"
CERTIFICATE = "arn:aws:acm:us-east-1:111111111111:certificate/00000000-0000-0000-0000-000000000000"
TOPIC = "arn:aws:sns:us-east-1:111111111111:pager"


@pytest.fixture(scope="module")
def restored(tmp_path_factory, prebuilt_layer):
    context = {
        "layerDir": str(prebuilt_layer),
        "stackName": "InterludeRestored",
        "existingTableName": TABLE,
        "existingTableStreamArn": STREAM,
        "existingEntriesTableName": ENTRIES_TABLE,
        "domainName": "hitl.example.org",
        "certificateArn": CERTIFICATE,
        "alarmTopicArn": TOPIC,
        # As the CLI passes it (`-c accountConcurrencyQuota=1000`): text
        "accountConcurrencyQuota": "1000",
    }
    with pytest.MonkeyPatch.context() as env:
        for key, value in OFFLINE_AWS.items():
            env.setenv(key, value)
        env.delenv("CDK_OUTDIR", raising=False)
        app, stack = build_app(context=context, outdir=str(tmp_path_factory.mktemp("restored.out")))
        return stack, app.synth().get_stack_by_name(stack.stack_name).template


def test_restored_tables_are_used_in_place_and_never_created(restored):
    stack, template = restored
    resources = template["Resources"]
    # Then the stack owns no table: the restored ones outlive any change to the stack
    assert not [r for r in resources.values() if r["Type"] == "AWS::DynamoDB::Table"]
    # And every function works on both, and dispatch reads the first's stream
    for spec in wiring.FUNCTIONS:
        function = resources[stack.get_logical_id(stack.interlude.functions.by_name[spec.name].node.default_child)]
        variables = function["Properties"]["Environment"]["Variables"]
        assert (variables["TABLE_NAME"], variables[wiring.ENTRIES_TABLE_NAME_ENV]) == (TABLE, ENTRIES_TABLE)
    (mapping,) = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::EventSourceMapping" and r["Properties"]["EventSourceArn"] == STREAM
    ]
    assert mapping["MaximumRecordAgeInSeconds"] == wiring.STREAM_MAX_RECORD_AGE_S
    documents = [p["PolicyDocument"] for r in resources.values() for p in r["Properties"].get("Policies", [])]
    documents += [r["Properties"]["PolicyDocument"] for r in resources.values() if r["Type"] == "AWS::IAM::Policy"]
    stream_actions = {
        action
        for d in documents
        for s in d["Statement"]
        if STREAM in as_list(s["Resource"])
        for action in as_list(s["Action"])
    }
    assert "dynamodb:GetRecords" in stream_actions


def test_your_domain_certificate_and_topic_are_used(restored):
    _, template = restored
    (domain,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::ApiGatewayV2::DomainName"]
    assert domain["Properties"]["DomainName"] == "hitl.example.org"
    assert domain["Properties"]["DomainNameConfigurations"][0]["CertificateArn"] == CERTIFICATE
    assert template["Outputs"]["ApiUrl"]["Value"] == "https://hitl.example.org/"
    assert "ApiDomainTarget" in template["Outputs"]
    assert not [r for r in template["Resources"].values() if r["Type"] == "AWS::SNS::Topic"]
    alarms = [r for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert alarms  # an empty list would pass the loop below
    for alarm in alarms:
        assert alarm["Properties"]["AlarmActions"] == [TOPIC]


def test_a_stated_concurrency_quota_brings_wirings_reservations(restored):
    stack, template = restored
    for spec in wiring.FUNCTIONS:
        function = template["Resources"][stack.get_logical_id(stack.interlude.functions.by_name[spec.name].node.default_child)]
        assert function["Properties"].get("ReservedConcurrentExecutions") == spec.reserved_concurrency, spec.name


@pytest.fixture(scope="module")
def restored_one_table(tmp_path_factory, prebuilt_layer) -> Synth:
    """The stack deployed on a restored table of a release with one table: `existingTableName` (and its stream) only."""
    context = {"layerDir": str(prebuilt_layer), "existingTableName": TABLE, "existingTableStreamArn": STREAM}
    with pytest.MonkeyPatch.context() as env:
        for key, value in OFFLINE_AWS.items():
            env.setenv(key, value)
        env.delenv("CDK_OUTDIR", raising=False)
        app, stack = build_app(context=context, outdir=str(tmp_path_factory.mktemp("restored-one-table.out")))
        return Synth(app, stack, tmp_path_factory.getbasetemp())


def test_a_restored_one_table_release_gets_a_second_table_as_the_normal_one(restored_one_table, synth):
    restored = restored_one_table
    (entries_id,) = restored.of_type("AWS::DynamoDB::Table")
    assert entries_id == restored.entries_table_id()
    # Under the normal one's id: a deployment that runs on a restored table (its switches kept on every deploy) keeps
    # its second table through every upgrade, never replaced by CloudFormation (docs/operations.md §9)
    assert entries_id == synth.entries_table_id()
    normal = synth.table(synth.entries_table_id())
    created = restored.table(entries_id)
    # Every property the normal second table has: TTL, PITR, deletion protection, retention (the key: below)
    assert created["Properties"] == normal["Properties"]
    assert created["Properties"]["DeletionProtectionEnabled"] is True
    assert (created["DeletionPolicy"], created["UpdateReplacePolicy"]) == ("Retain", "Retain")
    assert restored.template_json["Outputs"][wiring.OUTPUT_ENTRIES_TABLE_NAME]["Value"] == {"Ref": entries_id}


@pytest.mark.parametrize("spec", wiring.FUNCTIONS, ids=lambda spec: spec.name)
def test_every_function_of_a_restored_one_table_release_works_on_the_restored_and_the_new_table(restored_one_table, spec):
    restored = restored_one_table
    entries_id = restored.entries_table_id()
    variables = restored.env(spec.name)
    assert (variables["TABLE_NAME"], variables[wiring.ENTRIES_TABLE_NAME_ENV]) == (TABLE, {"Ref": entries_id})
    assert actions_on(restored.statements(spec.name), {"Fn::GetAtt": [entries_id, "Arn"]}) == set(spec.entries_table_actions)


def test_the_new_second_table_alarms_on_throttled_reads_and_writes(restored_one_table):
    names = {
        metric["MetricName"]
        for _, _, metric in alarm_metrics(restored_one_table)
        if metric.get("Namespace") == "AWS/DynamoDB" and dimension(metric, "TableName") == {"Ref": restored_one_table.entries_table_id()}
    }
    assert {"ReadThrottleEvents", "WriteThrottleEvents"} <= names


def test_the_new_second_table_is_encrypted_with_the_deployments_key_as_the_normal_one():
    def entries_table(existing: ExistingTable | None) -> tuple[dict, str]:
        """The second table's properties, and the key's logical id, of tables made with a key of the deployment."""
        stack = Stack(App(), "Tables")
        key = kms.Key(stack, "DataKey")
        data = DataTable(
            stack, "Data", removal_policy=RemovalPolicy.RETAIN, encryption_key=key, existing=existing, capacity={}
        )
        resources = Template.from_stack(stack).to_json()["Resources"]
        return resources[stack.get_logical_id(data.entries_table.node.default_child)]["Properties"], stack.get_logical_id(key.node.default_child)

    created, key_id = entries_table(ExistingTable(table_name=TABLE, stream_arn=STREAM))
    assert created["SSESpecification"] == {"KMSMasterKeyId": {"Fn::GetAtt": [key_id, "Arn"]}, "SSEEnabled": True, "SSEType": "KMS"}
    assert (created, key_id) == entries_table(None)
