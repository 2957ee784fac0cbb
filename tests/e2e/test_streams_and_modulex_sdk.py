"""The live streams and the ModuleX face on the real local stack, driven by the real clients:
`modulex-python` (the seed's worked example, both paths) and `openwop-client` (following a run across
reconnects while another thread answers its gates), plus raw SSE over HTTP."""

from __future__ import annotations

import asyncio
import threading
import uuid

import openwop_client.sse as openwop_sse
import pytest
import requests
from modulex import Modulex
from modulex._exceptions import NotFoundError, PermissionError, ValidationError
from openwop_client import OpenwopClient

from tests.support.local_stack import Api, running_stack, wire
from tests.support.modulex_example import APPROVAL_MESSAGE, DRAFT, worked_example
from tests.support.modulex_sdk import SHORT_STREAM_BOUNDS

TWO_GATES = {
    "nodes": [
        {"id": "first", "typeId": "core.approvalGate", "config": {"title": "First?"}},
        {"id": "second", "typeId": "core.approvalGate", "config": {"title": "Second?"}},
        {"id": "end", "typeId": "core.noop"},
    ],
    "edges": [
        {"sourceNodeId": "first", "targetNodeId": "second"},
        {"sourceNodeId": "second", "targetNodeId": "end"},
    ],
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("stream-stack"), SHORT_STREAM_BOUNDS) as info:
        yield info


@pytest.fixture(scope="module")
def api(stack) -> Api:
    return Api.of(stack)


def sdk(stack, key: str | None = None, org: str | None = None) -> Modulex:
    return Modulex(
        api_key=key or stack["apiKey"],
        organization_id=org or stack["tenant"],
        base_url=stack["baseUrl"],
        max_retries=0,
    )


async def listen_until(client: Modulex, run_id: str, wanted: str, attempts: int = 20, match=None) -> list:
    """Listen (reconnecting: each buffered response ends) until a frame of type `wanted` (that `match`
    accepts); all frames of that connection (history replays from the start)."""
    for _ in range(attempts):
        seen = []
        async with client.executions.listen(run_id) as stream:
            async for event in stream:
                seen.append(event)
                if event.event == wanted and (match is None or match(event)):
                    return seen
    raise AssertionError(f"no {wanted!r} frame on {run_id}")


async def drain(stream) -> list:
    async with stream:
        return [event async for event in stream]


@pytest.mark.parametrize(
    ("answer", "branch", "skipped"),
    [
        ({"approved": True}, "node_send", "node_end_rejected"),
        ({"approved": False, "notes": "Tone"}, "node_end_rejected", "node_send"),
    ],
)
def test_worked_example_with_the_modulex_sdk(stack, answer, branch, skipped):
    async def scenario():
        async with sdk(stack) as client:
            workflow = worked_example()
            started = await client.executions.run(workflow=workflow, input={"request": "the refund"})
            assert started.run_id == started.thread_id
            assert started.workflow_source == "request"

            before = await listen_until(client, started.run_id, "interrupt")
            assert [e.event for e in before][:3] == ["metadata", "node_started", "node_update"]
            interrupt = before[-1].data["data"]
            assert interrupt["thread_id"] == started.thread_id
            assert interrupt["message"] == APPROVAL_MESSAGE.replace(
                "{{node_draft}}", DRAFT.format(request="the refund")
            )
            config = workflow["nodes"][1]["interrupt_config"]
            assert interrupt["resume_schema"] == config["resume_schema"]
            assert interrupt["examples"] == config["examples"]
            assert interrupt["data"] == {}

            # A listen that ends while the run waits: every frame the SDK yields is one the server sent, the last the
            # `interrupted` the SDK stops on (the reconnect hint rides on it, not in a block the SDK reads as a
            # `message`).
            waiting = await drain(client.executions.listen(started.run_id))
            kinds = [e.event for e in waiting]
            assert kinds == ["metadata", "node_started", "node_update", "node_started", "interrupt", "interrupted"]
            assert waiting[-1].is_terminal
            assert waiting[-1].data["data"]["node_ids"] == ["node_approval"]

            state = await client.executions.get_state(started.thread_id)
            assert state.next == ["node_approval"]
            assert state.metadata["status"] == "interrupted"

            resumed = await client.executions.resume(started.thread_id, started.run_id, answer, workflow=workflow)
            assert (resumed.status, resumed.run_id) == ("resumed", started.run_id)  # the same run continues

            frames = await listen_until(client, started.run_id, "done")
            kinds = [e.event for e in frames]
            after = kinds[kinds.index("resumed") :]
            assert after[:2] == ["resumed", "node_update"]
            assert after[-1] == "done"
            resumed_frame = frames[kinds.index("resumed")].data["data"]
            assert resumed_frame["resume_value"] == answer
            assert resumed_frame["run_id"] == started.run_id
            updated = [e.data["node"] for e in frames if e.event == "node_update"]
            assert updated[-1] == branch
            assert skipped not in updated
            assert frames[-1].data["data"]["final_state"]["node_approval"] == answer

            final = await client.executions.get_state(started.thread_id)
            assert final.metadata["status"] == "completed"
            assert branch in final.state
            assert skipped not in final.state

    asyncio.run(scenario())


def test_modulex_sdk_sees_typed_errors(stack, api):
    reviewer = api.new_key(["approvals:respond", "runs:read", "runs:create"], subject="reviewer")

    async def scenario():
        async with sdk(stack) as client:
            started = await client.executions.run(workflow=worked_example(), input={"request": "r"})
            with pytest.raises(NotFoundError):
                await drain(client.executions.listen(started.run_id, organization_id="another-org"))
            with pytest.raises(NotFoundError):
                await client.executions.get_state(f"{stack['tenant']}~2F{'A' * 24}")
            broken = worked_example()
            broken["nodes"][0]["type"] = "agent"
            with pytest.raises(ValidationError, match="needs a system_prompt"):
                await client.executions.run(workflow=broken)
        async with sdk(stack, key=reviewer) as client:
            with pytest.raises(PermissionError, match="owner or admin"):
                await client.executions.resume(started.thread_id, started.run_id, {"approved": True})

    asyncio.run(scenario())


def test_a_run_started_on_openwop_is_followed_and_resumed_with_the_modulex_sdk(stack, api):
    workflow_id = f"two-gates-{uuid.uuid4().hex[:6]}"
    assert api.put_workflow(workflow_id, TWO_GATES).status_code == 201
    run_id = api.start(workflow_id)["runId"]

    async def scenario():
        async with sdk(stack) as client:
            for gate in ("First?", "Second?"):
                frames = await listen_until(
                    client,
                    wire(run_id),
                    "interrupt",
                    attempts=5,
                    match=lambda e, g=gate: e.data["data"]["message"] == g,
                )
                assert frames[-1].data["data"]["kind"] == "approval"
                await client.executions.resume(wire(run_id), wire(run_id), {"action": "accept"})
            assert (await listen_until(client, wire(run_id), "done"))[-1].event == "done"

    asyncio.run(scenario())
    assert api.run(run_id)["status"] == "completed"


def test_openwop_client_follows_a_run_across_reconnects_while_another_thread_answers(stack, api, monkeypatch):
    workflow_id = f"two-gates-{uuid.uuid4().hex[:6]}"
    assert api.put_workflow(workflow_id, TWO_GATES).status_code == 201
    run_id = api.start(workflow_id)["runId"]
    connections = []
    real_urlopen = openwop_sse.urlopen

    def counting_urlopen(request, *args, **kwargs):
        connections.append(request.headers.get("Last-event-id"))
        return real_urlopen(request, *args, **kwargs)

    monkeypatch.setattr(openwop_sse, "urlopen", counting_urlopen)
    answerers: list[threading.Thread] = []
    results: list[int] = []

    def answer(node: str) -> None:
        results.append(api.resolve(run_id, node, {"action": "accept"}).status_code)

    client = OpenwopClient(stack["baseUrl"], stack["apiKey"])
    seen = []
    for event in client.runs_events(run_id, reconnect=True):
        seen.append(event)
        if event.type == "node.suspended":
            # Answered by someone else while this client keeps following the run.
            answerers.append(threading.Thread(target=answer, args=(event.nodeId,)))
            answerers[-1].start()
    for thread in answerers:
        thread.join()

    assert results == [200, 200]
    assert seen[-1].type == "run.completed"
    assert [e.sequence for e in seen] == sorted({e.sequence for e in seen})  # in order, none twice
    assert [e.type for e in seen].count("interrupt.resolved") == 2
    # Each buffered response ended before the run did: the client came back with its cursor.
    assert len(connections) >= 3
    assert connections[0] is None
    assert all(c is not None for c in connections[1:])
    polled = api.events(run_id)
    updates = [e for e in polled if e["type"] != "node.started"]
    assert [e.sequence for e in seen] == [e["sequence"] for e in updates]  # nothing lost


def test_raw_sse_framing_cursor_refusal_and_terminal_close(stack, api):
    workflow_id = f"two-gates-{uuid.uuid4().hex[:6]}"
    api.put_workflow(workflow_id, TWO_GATES)
    run_id = api.start(workflow_id)["runId"]
    url = f"{stack['baseUrl']}/runs/{wire(run_id)}/events"
    headers = {"Authorization": f"Bearer {stack['apiKey']}", "Accept": "text/event-stream"}

    live = requests.get(url, headers=headers, timeout=30)
    assert live.headers["Content-Type"].startswith("text/event-stream")
    blocks = [b for b in live.text.split("\n\n") if b]
    assert blocks[0].startswith(": ")  # a comment first
    assert blocks[1].splitlines()[:2] == ["id: 0", "event: run.started"]
    assert blocks[1].splitlines()[2].startswith("data: {")
    assert blocks[-1] == "retry: 100"  # the bounded close of a live run asks the client to come back

    refused = requests.get(url + "?streamMode=messages", headers=headers, timeout=30)
    assert refused.status_code == 400
    assert refused.json()["details"]["supported"] == ["updates", "debug", "values"]

    for node in ("first", "second"):
        assert api.resolve(run_id, node, {"action": "accept"}).status_code == 200
    rest = requests.get(url, headers={**headers, "Last-Event-ID": "3"}, timeout=30)
    ids = [int(line[4:]) for line in rest.text.splitlines() if line.startswith("id: ")]
    assert ids[0] == 4
    assert rest.text.rstrip().splitlines()[-1].startswith("data: ")
    assert '"type":"run.completed"' in rest.text.rstrip().splitlines()[-1]
    assert "retry:" not in rest.text
