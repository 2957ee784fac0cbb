"""What a ModuleX client meets around a resume, on the real local stack (the real handlers behind the local HTTP
gateway on 127.0.0.1, over moto), driven by modulex-python where the SDK can send the request:

* listen, resume, listen again: the second listen (no Last-Event-ID, as the SDKs send) shows the run as it is now (the
  next gate, its end, or still running), never the gate already answered as if it waited; a client that sends
  Last-Event-ID still reads every frame, in order;
* the recursion limit a run gets: the request's `config.recursion_limit`, else the deployed (or inline) workflow's own
  `config.recursion_limit`, else 1,000 steps, on either face (an OpenWOP `POST /runs` of a deployed workflow too); a
  request's above 10,000 is taken as 10,000, a definition's is refused when it is deployed or run;
* a resume body holding a field the contract does not give it (`comand`, `reume`) is `422` naming the field, and the
  gate stays open, where the answer was lost or the gate answered with the field left out.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
import requests
from httpx_sse import connect_sse
from modulex import Modulex
from modulex._exceptions import ValidationError

from tests.support.local_stack import Api, running_stack, until, wire
from tests.support.modulex_example import node
from tests.support.modulex_sdk import SHORT_STREAM_BOUNDS, sdk

DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("modulex-after-resume"), SHORT_STREAM_BOUNDS) as info:
        yield info


@pytest.fixture(scope="module")
def api(stack) -> Api:
    return Api.of(stack)


def chain(*nodes: dict[str, Any], **extra: Any) -> dict[str, Any]:
    ids = [n["id"] for n in nodes]
    return {
        "metadata": {"name": f"after resume {uuid.uuid4().hex[:6]}", "version": "1.0.0"},
        "nodes": list(nodes),
        "edges": [{"source": a, "target": b} for a, b in zip(ids, ids[1:], strict=False)],
        **extra,
    }


def question(node_id: str, x: int, message: str) -> dict[str, Any]:
    return node(node_id, "interrupt", x, message=message)


def step(node_id: str, x: int) -> dict[str, Any]:
    return node(node_id, "transformer", x, operations=[])


TWO_GATES = chain(question("first", 0, "First?"), question("second", 300, "Second?"), step("after", 600))
# After its gate, a model call: a task that waits for the tenant's worker, so the answered run is still running.
GATE_THEN_TASK = chain(
    question("ask", 0, "Go on?"), node("think", "llm", 300, user_prompt="{{ask}}"), step("after", 600)
)


# -- listen, resume, listen --------------------------------------------------------------------------------------------


async def first_listen(client: Modulex, run_id: str) -> list[Any]:
    """What a client that acts on the first question it sees reads of one `listen()`: the frames up to the first
    `interrupt`, or all of them up to where the SDK stops (`done`, `error`, `cancelled`, `interrupted`, the end)."""
    seen = []
    async with client.executions.listen(run_id) as stream:
        async for event in stream:
            seen.append(event)
            if event.event == "interrupt":
                break
    return seen


async def question_seen(client: Modulex, run_id: str) -> str:
    """The message of the first question a listen shows, once the run has reached one."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while loop.time() < deadline:
        seen = await first_listen(client, run_id)
        if seen and seen[-1].event == "interrupt":
            return str(seen[-1].data["data"]["message"])
    raise AssertionError(f"no interrupt frame on {run_id}")


async def settled(client: Modulex, run_id: str, status: str, node: str | None = None) -> None:
    """Wait until the run's state is `status` (at `node`, when given): the state route reads the head, not the log."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while loop.time() < deadline:
        state = await client.executions.get_state(run_id)
        if state.metadata["status"] == status and (node is None or state.next == [node]):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{run_id} never {status} at {node}")


async def past_the_first_gate(client: Modulex) -> Any:
    """A TWO_GATES run whose first question was seen and answered `{"ok": 1}`, waiting at the second; its start."""
    started = await client.executions.run(workflow=TWO_GATES)
    assert await question_seen(client, started.run_id) == "First?"
    await client.executions.resume(started.thread_id, started.run_id, {"ok": 1})
    await settled(client, started.run_id, "interrupted", "second")
    return started


def test_a_listen_after_a_resume_shows_the_next_gate_not_the_one_answered(api):
    async def scenario() -> None:
        async with sdk(api) as client:
            started = await past_the_first_gate(client)

            seen = await first_listen(client, started.run_id)
            asked = [e.data["data"]["message"] for e in seen if e.event == "interrupt"]
            assert asked == ["Second?"], [e.event for e in seen]
            # What was answered is still told, as the answer it was.
            [resumed] = [e for e in seen if e.event == "resumed"]
            assert (resumed.data["data"]["node_id"], resumed.data["data"]["resume_value"]) == ("first", {"ok": 1})
            # A client that reads on to where the SDK stops stops on the gate the run waits at.
            async with client.executions.listen(started.run_id) as stream:
                whole = [event async for event in stream]
            assert [e.data["data"]["message"] for e in whole if e.event == "interrupt"] == ["Second?"]
            assert (whole[-1].event, whole[-1].data["data"]["node_ids"]) == ("interrupted", ["second"])

            await client.executions.resume(started.thread_id, started.run_id, {"ok": 2})
            await settled(client, started.run_id, "completed")
            seen = await first_listen(client, started.run_id)
            assert "interrupt" not in [e.event for e in seen]
            assert seen[-1].event == "done"

    asyncio.run(scenario())


def test_a_listen_after_a_resume_of_a_run_still_running_shows_no_gate(api):
    async def scenario() -> None:
        async with sdk(api) as client:
            started = await client.executions.run(workflow=GATE_THEN_TASK)
            assert await question_seen(client, started.run_id) == "Go on?"
            await client.executions.resume(started.thread_id, started.run_id, {"ok": True})
            await settled(client, started.run_id, "running")  # the model call waits for the tenant's worker

            seen = await first_listen(client, started.run_id)
            assert "interrupt" not in [e.event for e in seen], [e.event for e in seen]
            # The SDK's listen ends with no terminal frame (the response's heartbeat is skipped): the run goes on.
            assert seen[-1].event not in {"interrupted", "done", "error", "cancelled"}
            assert [e.data["node"] for e in seen if e.event == "node_started"][-1] == "think"

    asyncio.run(scenario())


def listened(api: Api, run_id: str, last: int | None) -> list[dict[str, Any]]:
    """The frames of one listen read by httpx-sse (the SDK's parser), sending Last-Event-ID when `last` is given."""
    headers = {"Authorization": f"Bearer {api.api_key}"}
    if last is not None:
        headers["Last-Event-ID"] = str(last)
    url = f"{api.base_url}/workflows/listen/{run_id}"
    with httpx.Client(timeout=30) as client, connect_sse(client, "GET", url, headers=headers) as source:
        assert source.response.status_code == 200, source.response.read()
        return [{**json.loads(e.data), "id": e.id} for e in source.iter_sse()]


def test_a_client_that_sends_last_event_id_still_reads_every_frame_in_order(api):
    async def scenario() -> str:
        async with sdk(api) as client:
            return str((await past_the_first_gate(client)).run_id)

    run_id = asyncio.run(scenario())
    opening = listened(api, run_id, None)[0]
    assert opening["type"] == "metadata"
    frames = listened(api, run_id, int(opening["id"]))
    told = [
        (f["type"], f["data"].get("node_id")) for f in frames if f["type"] in {"interrupt", "resumed", "interrupted"}
    ]
    assert told == [("interrupt", "first"), ("resumed", "first"), ("interrupt", "second"), ("interrupted", None)]
    ids = [int(f["id"]) for f in frames if f["type"] != "interrupted"]
    assert ids == sorted(set(ids))  # in order, none twice


# -- the recursion limit a run gets -----------------------------------------------------------------------------------


def steps(count: int, **extra: Any) -> dict[str, Any]:
    """`count` transformer steps in a chain, then a question: `count` + 1 node executions reach the question."""
    return chain(*(step(f"step_{i}", i * 100) for i in range(count)), question("ask", count * 100, "Go on?"), **extra)


def own_limit(limit: int | None) -> dict[str, Any]:
    return steps(3, config={} if limit is None else {"recursion_limit": limit})


def outcome(api: Api, run_id: str) -> str:
    """Where the run stops: `interrupted` at its question, or `failed` when its recursion limit stops it first."""
    status = until(
        lambda: (s := api.call("GET", f"/workflows/state/{run_id}").json()["metadata"]["status"]) != "running" and s,
        DEADLINE_S,
    )
    if status == "failed":
        assert "recursion" in api.call("GET", f"/workflow-runs/{run_id}").json()["error_message"].lower()
    return str(status)


@pytest.mark.parametrize(
    ("requested", "own", "expected"),
    [
        (None, 2, "failed"),  # the workflow's own limit applies when the request gives none
        (50, 2, "interrupted"),  # the request's wins over the workflow's own, upwards
        (2, 50, "failed"),  # and downwards
        (None, None, "interrupted"),  # neither: 1,000 steps
        (10**6, 2, "interrupted"),  # a request's above the ceiling is taken as 10,000, still the request's
    ],
)
@pytest.mark.parametrize("source", ["database", "request"])
def test_a_run_s_recursion_limit_is_the_request_s_else_the_workflow_s_own(api, source, requested, own, expected):
    async def scenario() -> str:
        async with sdk(api) as client:
            config = None if requested is None else {"recursion_limit": requested}
            if source == "database":
                deployed = await client.workflows.create(own_limit(own), name="limits")
                started = await client.executions.run(workflow_id=deployed.id, config=config)
            else:
                started = await client.executions.run(workflow=own_limit(own), config=config)
            assert started.workflow_source == source
            return started.run_id

    assert outcome(api, asyncio.run(scenario())) == expected


@pytest.mark.parametrize(
    ("configurable", "expected"),
    [
        (None, "failed"),  # the workflow's own limit (2) applies when the request gives none
        ({"version": 1, "run": {"recursionLimit": 50}}, "interrupted"),  # the request's wins
        ({"version": 1, "run": {"runTimeoutMs": 600_000}}, "failed"),  # run options that give no limit: still its own
    ],
)
def test_an_openwop_start_of_a_deployed_workflow_takes_the_request_s_limit_else_the_workflow_s_own(
    api, configurable, expected
):
    # One rule whichever face starts the run: OpenWOP's POST /runs took its request's configurable alone, so a
    # deployed workflow saying 2 ran to its question (1,000 steps).
    created = api.call("POST", "/workflows", {"workflow_schema": own_limit(2), "name": "limits"})
    assert created.status_code == 201, created.text
    body = {"workflowId": created.json()["id"], **({} if configurable is None else {"configurable": configurable})}
    started = api.call("POST", "/runs", body)
    assert started.status_code == 201, started.text
    assert outcome(api, wire(started.json()["runId"])) == expected


def test_a_child_run_of_a_deployed_workflow_takes_the_workflow_s_own_limit(api):
    # A core.subWorkflow child is made by the parent's run, not by a request: it ran to its question (1,000 steps)
    # where its workflow says 2.
    created = api.call("POST", "/workflows", {"workflow_schema": own_limit(2), "name": "limits"})
    assert created.status_code == 201, created.text
    parent_id = f"parent-{uuid.uuid4().hex[:8]}"
    spawn = {"id": "spawn", "typeId": "core.subWorkflow", "config": {"workflowId": created.json()["id"]}}
    assert api.put_workflow(parent_id, {"id": parent_id, "nodes": [spawn]}).status_code == 201
    parent = api.wait_status(api.start(parent_id)["runId"], {"failed"}, timeout_s=DEADLINE_S)
    child = parent["error"]["details"]["childRunId"]
    assert outcome(api, wire(child)) == "failed"


def test_a_run_takes_the_limit_of_the_workflow_s_version_it_runs(api):
    async def scenario() -> tuple[str, str]:
        async with sdk(api) as client:
            deployed = await client.workflows.create(own_limit(50), name="limits")
            before = await client.executions.run(workflow_id=deployed.id)
            await client.workflows.update(deployed.id, workflow_schema=own_limit(2))
            after = await client.executions.run(workflow_id=deployed.id)
            return before.run_id, after.run_id

    before, after = asyncio.run(scenario())
    assert (outcome(api, before), outcome(api, after)) == ("interrupted", "failed")


def test_a_definition_whose_limit_is_over_the_ceiling_is_refused_where_it_is_given(api):
    over = own_limit(10_001)
    # Each refusal names the body field the caller sent the definition in, in its place and in its message.
    for path, body, field in (
        ("/workflows", {"workflow_schema": over, "name": "over"}, "workflow_schema"),
        ("/workflows/run", {"workflow": over}, "workflow"),
    ):
        reply = api.call("POST", path, body)
        assert reply.status_code == 422, reply.text
        assert reply.headers["X-Interlude-Error"] == "interlude.workflow_unprocessable"
        [problem] = reply.json()["detail"]
        assert problem["loc"] == ["body", field, "config", "recursion_limit"]
        assert problem["msg"].startswith(f"{field}.config.recursion_limit: ")
        assert "10000" in problem["msg"]
    created = api.call("POST", "/workflows", {"workflow_schema": own_limit(5), "name": "under"})
    assert created.status_code == 201, created.text
    workflow_id = created.json()["id"]
    reply = api.call("PUT", f"/workflows/{workflow_id}", {"workflow_schema": over}, **{"X-Organization-ID": api.tenant})
    assert reply.status_code == 422, reply.text
    assert reply.json()["detail"][0]["loc"] == ["body", "workflow_schema", "config", "recursion_limit"]


# -- a resume body's fields --------------------------------------------------------------------------------------------


def waiting_run(api: Api) -> str:
    run_id = str(api.call("POST", "/workflows/run", {"workflow": steps(0)}).json()["run_id"])
    until(lambda: api.call("GET", f"/workflows/state/{run_id}").json()["next"] == ["ask"], DEADLINE_S)
    return run_id


def resume(api: Api, run_id: str, body: dict[str, Any]) -> requests.Response:
    return api.call("POST", f"/workflows/resume/{run_id}", body)


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"resume_value": {"ok": True}, "comand": "approve"}, ["comand"]),
        ({"reume": {"ok": True}}, ["reume"]),  # resume_value misspelt: a 400 saying it was missing before
        ({"resume_value": {"ok": True}, "resumeValue": {"ok": False}}, ["resumeValue"]),
        ({"command": {"resume": {"ok": True}}}, ["command"]),  # LangGraph's spelling
        ({"resume_value": 1, "thread_id": "t", "strem": False}, ["strem", "thread_id"]),
    ],
)
def test_a_resume_field_the_contract_does_not_give_is_422_naming_it_and_the_gate_stays_open(api, extra, named):
    run_id = waiting_run(api)
    reply = resume(api, run_id, {"run_id": run_id, **extra})
    assert reply.status_code == 422, reply.text
    assert reply.headers["X-Interlude-Error"] == "interlude.field_unprocessable"
    detail = reply.json()["detail"]
    assert [(p["loc"], p["type"]) for p in detail] == [(["body", name], "extra_forbidden") for name in named]
    for problem, name in zip(detail, named, strict=True):
        # modulex-python shows the messages alone: each names the field, and where the answer goes.
        assert problem["msg"].startswith(name)
        assert "resume_value" in problem["msg"]
    state = api.call("GET", f"/workflows/state/{run_id}").json()
    assert (state["metadata"]["status"], state["next"]) == ("interrupted", ["ask"])
    answered = resume(api, run_id, {"run_id": run_id, "resume_value": {"ok": True}})
    assert answered.status_code == 200, answered.text


def test_a_run_or_workflow_field_the_body_does_not_hold_is_422_naming_it_and_nothing_happens(api):
    # One rule on the face: a misspelt field is told as the resume body's are, before anything is started or stored.
    def newest_runs() -> list[str]:
        return [row["id"] for row in api.call("GET", "/workflow-runs?limit=5").json()["runs"]]

    runs_before = newest_runs()
    for method, path, body, named, what in (
        ("POST", "/workflows/run", {"workflow": steps(0), "inptu": {"a": 1}}, "inptu", "a run body"),
        ("POST", "/workflows", {"workflow_schema": steps(0), "naem": "Refunds"}, "naem", "a workflow body"),
    ):
        reply = api.call(method, path, body)
        assert reply.status_code == 422, reply.text
        assert reply.headers["X-Interlude-Error"] == "interlude.field_unprocessable"
        [problem] = reply.json()["detail"]
        assert (problem["loc"], problem["type"]) == (["body", named], "extra_forbidden")
        assert problem["msg"].startswith(f"{named}: not a field of {what}, which holds ")
    assert newest_runs() == runs_before


def test_the_sdk_s_resume_sends_only_the_contract_s_fields_and_is_answered(api):
    async def scenario() -> None:
        async with sdk(api) as client:
            workflow = steps(0)
            started = await client.executions.run(workflow=workflow)
            await settled(client, started.run_id, "interrupted", "ask")
            resumed = await client.executions.resume(
                started.thread_id, started.run_id, {"ok": True}, workflow=workflow, stream=False
            )
            assert (resumed.status, resumed.stream) == ("resumed", False)
            again = await client.executions.run(workflow=workflow)
            await settled(client, again.run_id, "interrupted", "ask")
            # The SDK's resume sends no other field; a body posted through its own request path shows how it tells
            # the refusal: ValidationError, the message naming the field.
            body = {"run_id": again.run_id, "reume": 1}
            with pytest.raises(ValidationError, match="reume: not a field of a resume body"):
                await client.executions._post(f"/workflows/resume/{again.thread_id}", json=body)

    asyncio.run(scenario())
