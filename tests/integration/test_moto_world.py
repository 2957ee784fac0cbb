"""The integration tests' shared moto world (tests/support/moto_world.py) keeps its promises: a test sees nothing an
earlier one left in flight, a `mock_aws()` opened inside it is a world of its own, and a test that removes part of
it is named. moto's models, which it reaches into, change between releases: this is where that shows."""

from __future__ import annotations

import json

import boto3
import pytest
from moto import mock_aws

from interlude.composition import Services
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.store.facade import Store
from interlude.store.provisioning import create_table
from tests.integration.conftest import signed_in
from tests.support import moto_world
from tests.support.stream import stream_records

GATE = {"nodes": [{"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship?"}}], "edges": []}


def test_a_test_sees_no_stream_record_or_message_an_earlier_one_left(world) -> None:
    services = Services(Store(world.table, world.entries_table))
    admin = signed_in(services)
    services.workflows.put_workflow(admin, "ship", WorkflowDefinition.model_validate(GATE))
    services.lifecycle.create_run(admin, CreateRunRequest(workflowId="ship"))
    sqs = boto3.client("sqs")
    sqs.send_message(QueueUrl=world.queues["callbacks"], MessageBody=json.dumps({"left": "behind"}))
    assert stream_records(world.table)

    later = moto_world.shared_world()  # what the next test is handed

    assert stream_records(later.table) == []
    assert sqs.receive_message(QueueUrl=later.queues["callbacks"]).get("Messages", []) == []
    assert later.tenant not in (world.tenant, world.other_tenant)
    # The items stay: isolation between tests is the tenants'.
    assert services.store.get_run(services.lifecycle.create_run(admin, CreateRunRequest(workflowId="ship")).runId) is not None


def test_a_mock_opened_inside_the_shared_world_starts_empty_and_leaves_nothing(world) -> None:
    dynamodb = boto3.client("dynamodb")
    with mock_aws():
        assert boto3.client("dynamodb").list_tables()["TableNames"] == []
        create_table(boto3.client("dynamodb"), "its-own")
    tables = dynamodb.list_tables()["TableNames"]
    assert {world.table, world.entries_table} <= set(tables)
    assert "its-own" not in tables


def test_a_test_that_removes_part_of_the_shared_world_is_named_and_the_next_gets_a_whole_one(world) -> None:
    boto3.client("sqs").delete_queue(QueueUrl=world.queues["notifications"])
    with pytest.raises(AssertionError, match="interlude-test-notifications from the shared moto world"):
        moto_world.check_left_intact(world)
    again = moto_world.shared_world()
    assert again.queues == world.queues
    assert boto3.client("sqs").get_queue_url(QueueName="interlude-test-notifications")["QueueUrl"]


@pytest.mark.private_world
def test_a_private_world_is_made_as_the_shared_one_in_an_account_of_its_own(world) -> None:
    assert moto_world.current_account() != moto_world.DEFAULT_ACCOUNT_ID
    assert boto3.client("dynamodb").list_tables()["TableNames"] == sorted([world.table, world.entries_table])
    assert stream_records(world.table) == []
