"""What `modulex-python` 1.0 meets on the local stack (issue 26, rows 3-9): a guardrails node's failure_route, a
definition typed by the SDK's own models, workflows of both faces read back through the SDK, the run rows' fields
and filters, `X-Organization-ID` on every ModuleX path, and `iter_runs` past 1,000 runs."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from modulex import Modulex
from modulex.types.workflows import (
    EdgeDefinition,
    GuardrailsNodeConfig,
    LLMConfig,
    LLMNodeConfig,
    NodeDefinition,
    RetryConfig,
    TransformerNodeConfig,
    TransformerOperation,
    WorkflowConfig,
    WorkflowDefinition,
    WorkflowMetadata,
)

from tests.support.local_stack import Api, tenant_admin_key
from tests.support.modulex_sdk import listen_until

DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def tenant(stack_info) -> Api:
    """A tenant of its own: its task queues, workflows and runs are this module's alone."""
    name = f"mxfid-{uuid.uuid4().hex[:8]}"
    return Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name), name)


def sdk(api: Api, org: str | None = None) -> Modulex:
    return Modulex(api_key=api.api_key, organization_id=org or api.tenant, base_url=api.base_url, max_retries=0)


def transformer(node_id: str, x: int, template: str) -> NodeDefinition:
    operation = TransformerOperation(type="template", params={"template": template})
    return NodeDefinition(
        id=node_id,
        type="transformer",
        name=node_id,
        x=x,
        y=0,
        transformer_config=TransformerNodeConfig(operations=[operation]),
    )


def schema(nodes: list[NodeDefinition], edges: list[tuple[str, str]], name: str) -> dict[str, Any]:
    """A ModuleX definition as the SDK's own models type and serialise it (their defaults included)."""
    definition = WorkflowDefinition(
        metadata=WorkflowMetadata(name=name, version="1.0.0"),
        config=WorkflowConfig(recursion_limit=50),
        nodes=nodes,
        edges=[EdgeDefinition(source=s, target=t) for s, t in edges],
    )
    return definition.model_dump(mode="json", exclude_none=True)


def guarded(queue: str) -> dict[str, Any]:
    check = NodeDefinition(
        id="node_check",
        type="guardrails",
        name="Check",
        x=200,
        y=0,
        guardrails_config=GuardrailsNodeConfig(
            source="{{node_draft}}", pii_detection={"enabled": True}, on_failure="route", failure_route="node_fail"
        ),
    )
    check_config = check.guardrails_config
    assert check_config is not None
    nodes = [
        transformer("node_draft", 0, "Dear {{input.name}}"),
        check,
        transformer("node_send", 400, "sent: {{node_draft}}"),
        transformer("node_fail", 400, "held back"),
        transformer("node_notify", 600, "told the author"),
    ]
    raw = schema(
        nodes,
        [
            ("__start__", "node_draft"),
            ("node_draft", "node_check"),
            ("node_check", "node_send"),
            ("node_fail", "node_notify"),
        ],
        "Guarded draft",
    )
    raw["nodes"][1]["guardrails_config"]["queue"] = queue  # Interlude's own field: where the worker takes it
    return raw


def take_task(api: Api, queue: str) -> dict[str, Any]:
    claimed = api.call("POST", "/tasks:claim", {"queues": [queue], "waitSeconds": 15})
    assert claimed.status_code == 200, claimed.text
    return claimed.json()


def started(frames: list) -> list[str]:
    return [e.data["node"] for e in frames if e.event == "node_started"]


# -- row 3: a guardrails node's failure_route -----------------------------------------------------------------


@pytest.mark.parametrize("passes", [False, True])
def test_a_failing_guardrail_routes_to_its_failure_route_and_nothing_there_runs_before_it(tenant: Api, passes: bool):
    queue = f"guard-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        async with sdk(tenant) as client:
            run = await client.executions.run(workflow=guarded(queue), input={"name": "Ana"})
            task = await asyncio.to_thread(take_task, tenant, queue)
            assert (task["nodeId"], task["nodeType"]) == ("node_check", "guardrails")
            assert task["config"]["failure_route"] == "node_fail"
            # While the guardrail's worker holds it, nothing of the failure route has run.
            async with client.executions.listen(run.run_id) as stream:
                before = [event async for event in stream]
            assert started(before) == ["node_draft", "node_check"]
            token = task["taskToken"]
            if passes:
                settled = tenant.call("POST", f"/tasks/{token}/complete", {"output": {"passed": True}})
            else:
                settled = tenant.call(
                    "POST", f"/tasks/{token}/fail", {"error": {"code": "pii", "message": "PII found"}}
                )
            assert settled.status_code == 200, settled.text

            frames = await listen_until(client, run.run_id, "done", DEADLINE_S)
            ran = started(frames)
            assert ran[:2] == ["node_draft", "node_check"]
            if passes:
                assert ran[2:] == ["node_send"]
            else:
                assert ran[2:] == ["node_fail", "node_notify"]
                (error,) = [e.data for e in frames if e.event == "node_error"]
                assert error["node"] == "node_check"
                assert error["message"].endswith("PII found")
            assert not any("on-failure" in str(e.data) for e in frames)  # the translation's own node stays hidden

    asyncio.run(scenario())


# -- row 4: numbers as the SDK types them ----------------------------------------------------------------------


def test_a_definition_typed_by_the_sdk_with_float_retry_intervals_is_deployed_and_its_retry_runs(tenant: Api):
    queue = f"draft-{uuid.uuid4().hex[:8]}"
    draft = NodeDefinition(
        id="node_draft",
        type="llm",
        name="Draft",
        x=0,
        y=0,
        retry_config=RetryConfig(max_attempts=2, initial_interval=0.5, backoff_factor=1.5),
        llm_config=LLMNodeConfig(llm=LLMConfig(model_id="any-model", temperature=0.2), user_prompt="{{input.name}}"),
    )
    raw = schema(
        [draft, transformer("node_send", 200, "sent: {{node_draft}}")], [("node_draft", "node_send")], "Retried"
    )
    raw["nodes"][0]["llm_config"]["queue"] = queue
    assert raw["nodes"][0]["retry_config"]["initial_interval"] == 0.5

    async def scenario() -> None:
        async with sdk(tenant) as client:
            deployed = await client.workflows.create(raw, name="Retried draft")
            assert deployed.workflow_schema is not None
            assert deployed.workflow_schema.nodes[0].retry_config == draft.retry_config
            run = await client.executions.run(workflow_id=deployed.id, input={"name": "Ana"})
            first = await asyncio.to_thread(take_task, tenant, queue)
            failed = tenant.call("POST", f"/tasks/{first['taskToken']}/fail", {"error": "busy", "retryable": True})
            assert failed.status_code == 200, failed.text
            second = await asyncio.to_thread(take_task, tenant, queue)
            assert second["attempt"] == 2
            done = tenant.call("POST", f"/tasks/{second['taskToken']}/complete", {"output": "Hello Ana"})
            assert done.status_code == 200, done.text
            frames = await listen_until(client, run.run_id, "done", DEADLINE_S)
            (retry,) = [e.data for e in frames if e.event == "node_retry"]
            assert (retry["node"], retry["attempt"], retry["delay_ms"]) == ("node_draft", 2, 0)  # 0.5 ms

    asyncio.run(scenario())
