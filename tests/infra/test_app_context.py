"""app.py's context switches: a restored table, a custom domain with your certificate, your alarm topic, the account's
concurrency quota."""

from __future__ import annotations

import pytest

from app import build_app
from interlude import wiring
from tests.infra.conftest import OFFLINE_AWS, as_list

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
