"""What `modulex-python` 1.0 meets on the local stack (issue 26, rows 3-9): a guardrails node's failure_route, a
definition typed by the SDK's own models, workflows of both faces read back through the SDK, the run rows' fields
and filters, `X-Organization-ID` on every ModuleX path, and `iter_runs` past 1,000 runs."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from modulex import Modulex
from modulex._exceptions import BadRequestError, NotFoundError
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

from interlude.local.stack import TABLE_NAME
from tests.support.local_stack import Api, stack_client, tenant_admin_key
from tests.support.modulex_sdk import listen_until, sdk
from tests.support.seeded_runs import seed_runs

DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def tenant(stack_info) -> Api:
    """A tenant of its own: its task queues, workflows and runs are this module's alone."""
    name = f"mxfid-{uuid.uuid4().hex[:8]}"
    return Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name), name)


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


# -- rows 5, 6 and 8: workflows of both faces through the SDK ----------------------------------------------------


def deploy(client: Modulex, name: str, **fields: Any):
    raw = schema([transformer("node_draft", 0, "Dear {{input.name}}")], [], name)
    return client.workflows.create(raw, name=name, **fields)


def test_every_listed_workflow_reads_back_through_the_sdk(tenant: Api):
    openwop_id = tenant.fixture("conformance-approval")

    async def scenario() -> None:
        async with sdk(tenant) as client:
            created = await deploy(client, "Refunds", category="ops")
            listed = [w async for w in client.workflows.list_all()]
            assert {openwop_id, created.id} <= {w.id for w in listed}
            for summary in listed:
                got = await client.workflows.get(summary.id)
                assert (got.id, got.name, got.status) == (summary.id, summary.name, summary.status)
            openwop = await client.workflows.get(openwop_id)
            assert (openwop.status, openwop.visibility, openwop.workflow_schema) == ("published", "organization", None)
            assert openwop.model_extra["face"] == "openwop"
            assert openwop.model_extra["latest_version"] == 1
            assert openwop.model_extra["definition"]["id"] == openwop_id
            # A client without an organisation is known by its User-Agent.
            async with Modulex(api_key=tenant.api_key, base_url=tenant.base_url, max_retries=0) as anonymous:
                assert (await anonymous.workflows.get(openwop_id)).id == openwop_id
            # The SDK's update is ModuleX's: an OpenWOP workflow's versions are OpenWOP definitions.
            with pytest.raises(BadRequestError):
                await client.workflows.update(openwop_id, name="Renamed")

    asyncio.run(scenario())
    # An OpenWOP client still reads the OpenWOP shape, and its version was not touched.
    got = tenant.call("GET", f"/workflows/{openwop_id}")
    assert set(got.json()) == {"workflowId", "version", "definition"}
    assert got.json()["version"] == 1


def test_workflow_listing_honours_status_category_visibility_and_search(stack_info):
    name = f"mxlist-{uuid.uuid4().hex[:8]}"
    api = Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name), name)
    openwop_id = api.fixture("conformance-noop")

    async def scenario() -> None:
        async with sdk(api) as client:
            refunds = await deploy(client, "Refund approval", category="ops", status="published", visibility="public")
            drafts = await deploy(client, "Draft review", category="ops", description="Checks refund letters")
            other = await deploy(client, "Onboarding", category="people", status="published")

            async def ids(**filters: str) -> set[str]:
                page = await client.workflows.list(page_size=100, **filters)
                assert page.total == len(page.workflows)
                everything = {w.id async for w in client.workflows.list_all(**filters)}
                assert everything == {w.id for w in page.workflows}
                return everything

            assert await ids() == {refunds.id, drafts.id, other.id, openwop_id}
            assert await ids(status="published") == {refunds.id, other.id, openwop_id}
            assert await ids(status="draft") == {drafts.id}
            assert await ids(category="ops") == {refunds.id, drafts.id}
            assert await ids(visibility="public") == {refunds.id}
            assert await ids(visibility="organization") == {drafts.id, other.id, openwop_id}
            assert await ids(search="REFUND") == {refunds.id, drafts.id}  # by name, and by description
            assert await ids(search="refund", status="draft", category="ops") == {drafts.id}
            assert await ids(category="nothing") == set()
            with pytest.raises(BadRequestError):
                await client.workflows.list(search="x" * 257)

    asyncio.run(scenario())


def test_another_organisation_is_not_found_on_every_workflow_path(tenant: Api):
    openwop_id = tenant.fixture("conformance-noop")

    async def scenario() -> None:
        async with sdk(tenant) as mine:
            created = await deploy(mine, "Mine")
        async with sdk(tenant, org="someone-else") as client:
            for workflow_id in (created.id, openwop_id, "no-such-workflow"):
                with pytest.raises(NotFoundError, match="workflow not found"):
                    await client.workflows.get(workflow_id)
                with pytest.raises(NotFoundError, match="workflow not found"):
                    await client.workflows.update(workflow_id, name="Theirs")
            with pytest.raises(NotFoundError, match="workflow not found"):
                await client.workflows.delete(created.id)
        async with sdk(tenant) as mine:
            assert (await mine.workflows.get(created.id)).name == "Mine"

    asyncio.run(scenario())


# -- row 7: what a run row says ----------------------------------------------------------------------------------


def test_run_rows_speak_the_authors_ids_and_say_how_each_run_started(tenant: Api):
    child = tenant.fixture("conformance-noop")
    parent_id = f"parent-{uuid.uuid4().hex[:8]}"
    spawn = {"id": "spawn", "typeId": "core.subWorkflow", "config": {"workflowId": child}}
    assert tenant.put_workflow(parent_id, {"id": parent_id, "name": "Parent", "nodes": [spawn]}).status_code == 201
    parent_run = tenant.start(parent_id)["runId"]
    tenant.wait_status(parent_run, {"completed"}, timeout_s=DEADLINE_S)
    # Inline definitions are stored under a reserved prefix: no author registers a workflow there.
    reserved = tenant.put_workflow("modulex-inline-mine", {"nodes": [{"id": "a", "typeId": "core.noop"}]})
    assert (reserved.status_code, reserved.json()["error"]) == (400, "validation_error")

    async def scenario() -> None:
        async with sdk(tenant) as client:
            inline = schema([transformer("node_draft", 0, "Dear {{input.name}}")], [], "Inline")
            adhoc = await client.executions.run(workflow=inline, input={"name": "Ana"})
            deployed = await client.workflows.create(inline, name="Deployed")
            saved = await client.executions.run(workflow_id=deployed.id, input={"name": "Ana"})
            for run, ad_hoc in ((adhoc, True), (saved, False)):
                detail = await until_status(client, run.run_id, "completed")
                assert (detail.is_ad_hoc, detail.trigger_type) == (ad_hoc, "api")
                assert detail.output_summary == {"node_draft": "Dear Ana"}  # the author's id, as written

            rows = {r.run_id: r async for r in client.executions.iter_runs()}
            assert rows[adhoc.run_id].is_ad_hoc
            assert not rows[saved.run_id].is_ad_hoc
            (spawned,) = [r async for r in client.executions.iter_runs(trigger_type="subworkflow")]
            assert (spawned.workflow_id, spawned.trigger_type, spawned.is_ad_hoc) == (child, "subworkflow", False)
            started = {r.run_id async for r in client.executions.iter_runs(trigger_type="api")}
            assert spawned.run_id not in started
            assert {adhoc.run_id, saved.run_id, parent_run.replace("/", "~2F")} <= started
            assert (await client.executions.list_runs(trigger_type="schedule")).runs == []
            with pytest.raises(BadRequestError, match="trigger_type"):
                await client.executions.list_runs(trigger_type="x" * 257)
            parent = await client.executions.get_run(parent_run.replace("/", "~2F"))
            assert parent.trigger_type == "api"
            assert set(parent.output_summary) == {"spawn"}  # an OpenWOP run's ids are its own

    asyncio.run(scenario())


async def until_status(client: Modulex, run_pk: str, status: str):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while loop.time() < deadline:
        detail = await client.executions.get_run(run_pk)
        if detail.status == status:
            return detail
        await asyncio.sleep(0.05)
    raise AssertionError(f"{run_pk} never reached {status}")


# -- row 9: iter_runs past 1,000 runs ----------------------------------------------------------------------------


def test_iter_runs_reads_past_a_thousand_runs_in_order(stack_info):
    name = f"mxdeep-{uuid.uuid4().hex[:8]}"
    api = Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name), name)
    workflow_id = api.fixture("conformance-noop")
    dynamodb = stack_client(stack_info, "dynamodb")
    seeded = seed_runs(dynamodb, TABLE_NAME, name, workflow_id, 1_150, datetime(2026, 11, 1, tzinfo=UTC))
    newest_first = [run_id.replace("/", "~2F") for run_id in reversed(seeded)]

    async def scenario() -> None:
        async with sdk(api) as client:
            every = [r.run_id async for r in client.executions.iter_runs(page_size=100)]
            assert every == newest_first  # each once, in order, through offset 1,100
            # A page anywhere within 1,000 runs of a page already read starts there.
            deep = await client.executions.list_runs(offset=1_120, limit=20)
            assert [r.run_id for r in deep.runs] == newest_first[1_120:1_140]
            assert deep.has_more
            # With another filter the listing is another one: its first 1,000 runs are the reach of a fresh offset.
            completed = await client.executions.list_runs(status="completed", offset=990, limit=10)
            assert [r.run_id for r in completed.runs] == newest_first[990:1_000]
            with pytest.raises(BadRequestError, match="at most 1000 runs past"):
                await client.executions.list_runs(status="completed", offset=2_100, limit=10)

    asyncio.run(scenario())


# -- a path under a ModuleX route that no route answers -----------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("POST", "/workflows/resume/demo/x", 404),  # a thread id with a raw slash
        ("GET", "/workflow-runs/a/b", 404),
        ("DELETE", "/workflows/resume/demo", 405),
    ],
)
def test_a_path_under_a_modulex_route_that_no_route_answers_is_refused_in_its_faces_shape(
    tenant: Api, method: str, path: str, status: int
):
    got = tenant.call(method, path, {"resume_value": {}})
    assert got.status_code == status
    assert set(got.json()) == {"detail"}
    assert got.headers["X-Interlude-Error"] == ("not_found" if status == 404 else "interlude.method_not_allowed")


def test_a_path_under_the_shared_workflows_prefix_is_refused_in_the_openwop_envelope(tenant: Api):
    got = tenant.call("GET", "/workflows/some-workflow/no-such-part")
    assert got.status_code == 404
    assert got.json()["error"] == "not_found"
