"""What each recorded AWS call is authorized as (tests/support/aws_calls.py): the actions AWS documents for it, the
resource by the environment variable the function found it through, and the condition keys' values."""

from __future__ import annotations

import pytest

from interlude import wiring
from tests.support.aws_calls import requests_of, shape

TABLE = "interlude-unit"
ENTRIES_TABLE = "interlude-unit-entries"
QUEUE_URL = "http://127.0.0.1:5000/123456789012/interlude-unit-notifications"


@pytest.fixture(autouse=True)
def environment(monkeypatch):
    monkeypatch.setenv("TABLE_NAME", TABLE)
    monkeypatch.setenv("ENTRIES_TABLE_NAME", ENTRIES_TABLE)
    monkeypatch.setenv(wiring.queue("notifications").url_env, QUEUE_URL)
    monkeypatch.setenv(wiring.SCHEDULES.environment[0], "local-deadlines")
    monkeypatch.setenv(wiring.SCHEDULES.environment[2], "arn:aws:iam::123456789012:role/local-scheduler")
    for var in (wiring.KEY_RING_SECRET.env, "WEBHOOK_SECRET_PREFIX", wiring.CREATED_SECRETS_KMS_KEY_ENV):
        monkeypatch.delenv(var, raising=False)


def key(pk: str) -> dict:
    return {"pk": {"S": pk}, "sk": {"S": "x"}}


def test_a_transaction_is_authorized_item_by_item_each_with_its_partition():
    items = [
        {"Put": {"TableName": TABLE, "Item": key("T#t1#R#r1")}},
        {"Update": {"TableName": TABLE, "Key": key("T#t1")}},
        {"Delete": {"TableName": TABLE, "Key": key("T#t1#AUDITHEAD#007")}},
        {"ConditionCheck": {"TableName": TABLE, "Key": key("T#t1#K#k")}},
    ]
    got = requests_of("dynamodb", "TransactWriteItems", {"TransactItems": items})
    table = {"kind": "table", "env": "TABLE_NAME"}
    assert got == [
        {"action": "dynamodb:PutItem", "resource": table, "keys": ["T#t1#R#r1"]},
        {"action": "dynamodb:UpdateItem", "resource": table, "keys": ["T#t1"]},
        {"action": "dynamodb:DeleteItem", "resource": table, "keys": ["T#t1#AUDITHEAD#007"]},
        {"action": "dynamodb:ConditionCheckItem", "resource": table, "keys": ["T#t1#K#k"]},
    ]
    reads = requests_of(
        "dynamodb", "TransactGetItems", {"TransactItems": [{"Get": {"TableName": TABLE, "Key": key("a")}}]}
    )
    assert [r["action"] for r in reads] == ["dynamodb:GetItem"]


def test_a_batch_is_its_own_action_with_every_partition_it_touches():
    writes = [{"PutRequest": {"Item": key("T#t1#INBOX#ANY#03")}}, {"DeleteRequest": {"Key": key("T#t1#RUNS#07")}}]
    (got,) = requests_of("dynamodb", "BatchWriteItem", {"RequestItems": {TABLE: writes}})
    assert got["action"] == "dynamodb:BatchWriteItem"
    assert got["keys"] == ["T#t1#INBOX#ANY#03", "T#t1#RUNS#07"]
    (read,) = requests_of("dynamodb", "BatchGetItem", {"RequestItems": {TABLE: {"Keys": [key("D#1"), key("D#2")]}}})
    assert (read["action"], read["keys"]) == ("dynamodb:BatchGetItem", ["D#1", "D#2"])


def test_a_query_names_its_index_and_the_partition_it_reads():
    params = {
        "TableName": TABLE,
        "IndexName": "inbox",
        "KeyConditionExpression": "#p = :v AND begins_with(gsi1sk, :s)",
        "ExpressionAttributeNames": {"#p": "gsi1pk"},
        "ExpressionAttributeValues": {":v": {"S": "T#t1#KEYS"}, ":s": {"S": "2026"}},
    }
    (got,) = requests_of("dynamodb", "Query", params)
    assert got == {
        "action": "dynamodb:Query",
        "resource": {"kind": "table", "env": "TABLE_NAME", "rest": "/index/inbox"},
        "keys": ["T#t1#KEYS"],
    }


def test_a_call_on_the_second_table_is_recorded_as_found_through_its_variable():
    (got,) = requests_of("dynamodb", "GetItem", {"TableName": ENTRIES_TABLE, "Key": key("T#t1#R#r1")})
    assert got["resource"] == {"kind": "table", "env": wiring.ENTRIES_TABLE_NAME_ENV}
    writes = {TABLE: [{"PutRequest": {"Item": key("a")}}], ENTRIES_TABLE: [{"PutRequest": {"Item": key("b")}}]}
    got_both = requests_of("dynamodb", "BatchWriteItem", {"RequestItems": writes})
    assert [g["resource"] for g in got_both] == [
        {"kind": "table", "env": wiring.TABLE_NAME_ENV},
        {"kind": "table", "env": wiring.ENTRIES_TABLE_NAME_ENV},
    ]


def test_a_table_no_variable_names_is_recorded_by_its_name():
    (got,) = requests_of("dynamodb", "GetItem", {"TableName": "somewhere-else", "Key": key("a")})
    assert got["resource"] == {"kind": "table", "name": "somewhere-else"}


def test_sqs_batches_are_authorized_as_their_single_actions():
    (sent,) = requests_of("sqs", "SendMessageBatch", {"QueueUrl": QUEUE_URL, "Entries": []})
    assert sent == {"action": "sqs:SendMessage", "resource": {"kind": "queue", "env": "NOTIFICATION_QUEUE_URL"}}
    (deleted,) = requests_of("sqs", "DeleteMessageBatch", {"QueueUrl": QUEUE_URL, "Entries": []})
    assert deleted["action"] == "sqs:DeleteMessage"


def test_a_schedule_also_passes_its_role_to_scheduler():
    params = {
        "Name": "r1-deadline",
        "GroupName": "local-deadlines",
        "Target": {
            "Arn": "arn:aws:lambda:us-east-1:123456789012:function:x",
            "RoleArn": "arn:aws:iam::123456789012:role/local-scheduler",
        },
    }
    made, passed = requests_of("scheduler", "CreateSchedule", params)
    assert made == {
        "action": "scheduler:CreateSchedule",
        "resource": {"kind": "schedule", "env": "SCHEDULE_GROUP", "rest": "r1-deadline"},
    }
    assert passed == {
        "action": "iam:PassRole",
        "resource": {"kind": "role", "env": "SCHEDULER_ROLE_ARN"},
        "context": {"iam:PassedToService": "scheduler.amazonaws.com"},
    }


def test_secrets_by_their_variable_or_the_prefix_they_are_under_and_what_creating_one_implies(monkeypatch):
    monkeypatch.setenv(wiring.CREATED_SECRETS_KMS_KEY_ENV, "arn:aws:kms:us-east-1:123456789012:key/k")
    (ring,) = requests_of("secretsmanager", "GetSecretValue", {"SecretId": "interlude/token-keys"})
    assert ring["resource"] == {"kind": "secret", "env": "KEY_RING_SECRET"}  # the code's default name
    params = {"Name": "interlude/webhooks/t1", "SecretString": "s", "Tags": [{"Key": "a", "Value": "b"}]}
    params["KmsKeyId"] = "arn:aws:kms:us-east-1:123456789012:key/k"
    got = requests_of("secretsmanager", "CreateSecret", params)
    secret = {"kind": "secret", "env": "WEBHOOK_SECRET_PREFIX", "rest": "t1"}
    key_ = {"kind": "key", "env": wiring.CREATED_SECRETS_KMS_KEY_ENV}
    via = {"kms:ViaService": "secretsmanager.{region}.amazonaws.com"}
    assert got == [
        {"action": "secretsmanager:CreateSecret", "resource": secret},
        {"action": "secretsmanager:TagResource", "resource": secret},
        {"action": "kms:GenerateDataKey", "resource": key_, "context": via},
        {"action": "kms:Decrypt", "resource": key_, "context": via},
    ]


def test_mail_is_authorized_on_its_from_identity_and_configuration_set(monkeypatch):
    monkeypatch.setenv("SES_FROM_ADDRESS", "approvals@example.com")
    got = requests_of(
        "ses", "SendEmail", {"FromEmailAddress": "Approvals <approvals@example.com>", "ConfigurationSetName": "c"}
    )
    assert got == [
        {"action": "ses:SendEmail", "resource": {"kind": "ses-identity", "env": "SES_FROM_ADDRESS"}},
        {"action": "ses:SendEmail", "resource": {"kind": "ses-configuration-set", "name": "c"}},
    ]


def test_a_keys_shape_keeps_its_words_and_hides_its_ids():
    assert shape("T#t1#AUDIT#007") == "T#*#AUDIT#*"
    assert shape("T#t1#R#t1/AAAAAAAAAAAAAAAAAAAA") == "T#*#R#*"


def test_an_object_is_authorized_on_its_key_in_the_bucket_its_variable_names(monkeypatch):
    bucket = wiring.AUDIT_ANCHOR_BUCKET
    monkeypatch.setenv(bucket.env, "local-anchors")
    (put,) = requests_of("s3", "PutObject", {"Bucket": "local-anchors", "Key": "audit-anchors/t1.json", "Body": b""})
    assert put == {
        "action": "s3:PutObject",
        "resource": {"kind": "bucket", "env": bucket.env, "rest": "/audit-anchors/t1.json"},
    }
    (head,) = requests_of("s3", "HeadObject", {"Bucket": "local-anchors", "Key": "audit-anchors/t1.json"})
    assert head["action"] == "s3:GetObject"
    (version,) = requests_of("s3", "GetObject", {"Bucket": "local-anchors", "Key": "k", "VersionId": "v"})
    assert version["action"] == "s3:GetObjectVersion"
    (listing,) = requests_of("s3", "ListObjectsV2", {"Bucket": "local-anchors", "Prefix": "audit-anchors/"})
    assert listing == {
        "action": "s3:ListBucket",
        "resource": {"kind": "bucket", "env": bucket.env},
        "context": {"s3:prefix": "audit-anchors/"},
    }
