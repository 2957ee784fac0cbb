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
from tests.support.local_stack import FIXTURES
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

    # The head as the store wrote it before: json.dumps(model_dump(mode="json"), sort_keys=True), deflated, every
    # field at its default written out.
    current = services.store.get_run(run_id)[0].model_dump(mode="json")
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
    assert written.startswith(b'{"runId":')
    assert written.isascii()
    # Less the fields at their defaults (docs/adr/0153), which read back as they were.
    assert json.loads(written) == state.model_dump(mode="json", exclude_defaults=True)
    assert len(written) == len(json.dumps(state.model_dump(mode="json", exclude_defaults=True), separators=(",", ":")))


def stored_size(item: dict) -> int:
    """An item's size as DynamoDB bills its writes: each attribute's name and value (strings and binaries by their
    bytes, numbers ≈ one byte per two digits + 1)."""

    def value_size(typed: dict) -> int:
        ((kind, value),) = typed.items()
        if kind == "N":
            return (len(value.lstrip("-").replace(".", "").lstrip("0")) + 1) // 2 + 1
        return len(value if isinstance(value, bytes) else value.encode())

    return sum(len(name.encode()) + value_size(typed) for name, typed in item.items())


def test_a_timed_gates_head_with_a_callback_url_is_written_under_one_kilobyte(services, monkeypatch):
    # Given the conformance timed gate (its answer schema and text held by the head) and a run of it with a callback URL
    monkeypatch.setenv("INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS", "1")
    monkeypatch.setenv("PUBLIC_BASE_URL", "https://interlude.example.com")
    admin = signed_in(services, "admin")
    definition = json.loads((FIXTURES / "conformance-approval-timeout.json").read_text())
    definition["nodes"][0]["config"]["timeoutMs"] = 600_000
    services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
    request = {"workflowId": definition["id"], "callbackUrl": "http://127.0.0.1:38097/interlude/hook"}
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate(request)).runId
    # Then its waiting head leaves its fields at their defaults out and is one write unit (two in its transactions),
    # where the whole document made it 1,046 B (ADR 0153)
    stored = head(run_id)
    document = json.loads(zlib.decompress(stored["state"]["B"]))
    assert not {"completedAt", "error", "parentRunId", "deadline", "delays"} & set(document)
    assert stored_size(stored) < 1024 - 64
    # And it reads back whole: each left-out field at its default, the gate open until its deadline
    state = services.store.get_run(run_id)[0]
    assert (state.completedAt, state.error, state.parentRunId, state.delays) == (None, None, None, {})
    assert state.interrupts["gate"].deadline is not None
