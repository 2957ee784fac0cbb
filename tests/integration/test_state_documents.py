"""Run heads already in a table (written before pydantic-core wrote them: keys sorted by Python's encoder) are read,
decided on and written back in the current form, on moto through the real services and store."""

from __future__ import annotations

import json
import zlib

import boto3

from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.store.layout import RUN_SK, run_pk
from tests.integration.conftest import signed_in
from tests.support.moto_world import TABLE


def head(run_id: str) -> dict:
    key = {"pk": {"S": run_pk(run_id)}, "sk": {"S": RUN_SK}}
    return boto3.client("dynamodb").get_item(TableName=TABLE, Key=key, ConsistentRead=True)["Item"]


def test_a_head_written_in_the_old_form_is_resolved_and_rewritten(services):
    admin = signed_in(services, "admin")
    definition = {
        # Outputs and inputs whose keys sort differently from the order they were built in.
        "nodes": [
            {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Approve — ü?"}},
            {"id": "after", "typeId": "core.transform", "config": {"outputs": {"zeta": "{{inputs.b}}", "alpha": 1e-05}}},
        ],
        "edges": [{"sourceNodeId": "gate", "targetNodeId": "after"}],
        "variables": [{"name": "b", "type": "string"}, {"name": "a", "type": "number"}],
    }
    services.workflows.put_workflow(admin, "wf", WorkflowDefinition.model_validate(definition))
    inputs = {"b": "é😀", "a": 12345678901234567890}
    run = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "wf", "inputs": inputs}))
    run_id = run.runId

    # The head as the store wrote it before: json.dumps(model_dump(mode="json"), sort_keys=True), deflated.
    current = json.loads(zlib.decompress(head(run_id)["state"]["B"]))
    old = zlib.compress(json.dumps(current, separators=(",", ":"), sort_keys=True).encode(), 6)
    boto3.client("dynamodb").update_item(
        TableName=TABLE,
        Key={"pk": {"S": run_pk(run_id)}, "sk": {"S": RUN_SK}},
        UpdateExpression="SET #s = :s",
        ExpressionAttributeNames={"#s": "state"},
        ExpressionAttributeValues={":s": {"B": old}},
    )
    assert services.store.get_run(run_id)[0].model_dump(mode="json") == current

    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})

    state, version = services.store.get_run(run_id)
    assert (state.status, version) == ("completed", 2)
    assert state.inputs == inputs
    assert state.outputs["after"] == {"zeta": "é😀", "alpha": 1e-05}
    written = zlib.decompress(head(run_id)["state"]["B"])
    # Now the declared order, ASCII-escaped as before, and the same document as Python's encoder would make.
    assert written.startswith(b'{"v":1,"runId":')
    assert written.isascii()
    assert json.loads(written) == state.model_dump(mode="json")
    assert len(written) == len(json.dumps(state.model_dump(mode="json"), separators=(",", ":")))
