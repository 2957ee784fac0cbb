"""createRun reads a small pointer to the latest workflow version, and each immutable version once per process."""

from __future__ import annotations

import json

import boto3
import pytest

from interlude.composition import Services
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.store.facade import Store
from interlude.store.layout import workflow_pk, workflow_version_sk
from tests.support.local_stack import FIXTURES
from tests.support.moto_world import ENTRIES_TABLE, TABLE


@pytest.fixture
def client(world):
    return boto3.client("dynamodb")


@pytest.fixture
def services(client) -> Services:
    return Services(Store(TABLE, ENTRIES_TABLE, client))


def raw_definition(title: str) -> dict:
    body = json.loads((FIXTURES / "conformance-approval.json").read_text())
    body["name"] = title
    return body


def definition(title: str) -> WorkflowDefinition:
    return WorkflowDefinition.model_validate(raw_definition(title))


def reads_of(client) -> list[tuple[str, int]]:
    """(operation, bytes of the items it answered with) for each DynamoDB read made through `client`."""
    seen: list[tuple[str, int]] = []

    def count(model, parsed, **_):
        if model.name in ("GetItem", "Query", "BatchGetItem"):
            items = parsed.get("Items") or ([parsed["Item"]] if "Item" in parsed else [])
            seen.append((model.name, sum(len(json.dumps(i, default=len)) for i in items)))

    client.meta.events.register("after-call.dynamodb", count)
    return seen


def test_a_warm_create_run_reads_only_the_latest_version_pointer(services, admin, client):
    services.workflows.put_workflow(admin, "conformance-approval", definition("v1"))
    services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "conformance-approval"}))  # the first in this process reads the version
    reads = reads_of(client)
    services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "conformance-approval"}))
    assert [op for op, _ in reads] == ["GetItem"]
    assert reads[0][1] < 100  # the pointer, not the definition (which grows with the workflow)


def test_create_run_starts_the_latest_version_registered_even_by_another_process(services, admin, client):
    services.workflows.put_workflow(admin, "conformance-approval", definition("v1"))
    assert services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "conformance-approval"})).workflowVersion == 1
    other = Services(Store(TABLE, ENTRIES_TABLE, client))  # another function instance registers v2
    other.workflows.put_workflow(admin, "conformance-approval", definition("v2"))
    assert services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "conformance-approval"})).workflowVersion == 2
    assert services.workflows.get_workflow(admin, "conformance-approval")["version"] == 2


def test_the_pointer_never_moves_back_to_an_older_version(services, admin, client):
    services.workflows.put_workflow(admin, "conformance-approval", definition("v1"))
    stored = raw_definition("later")
    assert services.store.put_workflow_version(admin.tenant, "conformance-approval", 5, stored, "t", "s", 100)
    # A slower writer with a lower, untaken number: refused whole (its version is not written either).
    assert not services.store.put_workflow_version(admin.tenant, "conformance-approval", 4, stored, "t", "s", 100)
    assert services.store.latest_workflow_version(admin.tenant, "conformance-approval") == 5
    assert services.store.get_workflow(admin.tenant, "conformance-approval", 4) is None
    assert services.workflows.put_workflow(admin, "conformance-approval", definition("next"))["version"] == 6


def test_a_workflow_stored_before_the_pointer_existed_still_starts_its_newest_version(services, admin, client):
    services.workflows.put_workflow(admin, "conformance-approval", definition("v1"))
    pk = workflow_pk(admin.tenant, "conformance-approval")
    client.delete_item(TableName=TABLE, Key={"pk": {"S": pk}, "sk": {"S": "LATEST"}})
    assert client.get_item(TableName=TABLE, Key={"pk": {"S": pk}, "sk": {"S": workflow_version_sk(1)}})["Item"]
    assert services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "conformance-approval"})).workflowVersion == 1
