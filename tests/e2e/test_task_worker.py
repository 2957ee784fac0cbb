"""The seed page's worked example, its published nodes unchanged (`node_draft` an `llm` node), end to end: the
local stack, `examples/worker/worker.py` running as a process of its own (the echo for `llm`, the recording
`send_email` tool), and `modulex-python` creating the run, reading the interrupt with the draft inlined and
resuming it — the approval path sends the draft, the rejection path ends at `node_end_rejected`."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from modulex import Modulex

from tests.support.local_stack import REPO, tenant_admin_key, until, wire
from tests.support.modulex_sdk import listen_until

WORKFLOW: dict[str, Any] = json.loads((REPO / "examples/worker/approve-before-sending.json").read_text())
REQUEST = {"request": "the late refund", "customer_email": "ana@example.com"}
DRAFT = "Echo draft: Write a reply to: the late refund"
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def tenant(stack_info) -> dict[str, str]:
    """A tenant of its own, so the worker's queues hold only this module's tasks."""
    name = f"worker-{uuid.uuid4().hex[:8]}"
    return {"name": name, "key": tenant_admin_key(stack_info, name)}


@pytest.fixture(scope="module")
def worker(stack_info, tenant, tmp_path_factory) -> Iterator[dict[str, Any]]:
    """examples/worker/worker.py as a developer runs it, aimed at the stack with the tenant's key."""
    tmp = tmp_path_factory.mktemp("worker")
    outbox = tmp / "outbox.jsonl"
    log = (tmp / "worker.log").open("w")
    env = {
        **{k: v for k, v in os.environ.items() if k != "INTERLUDE_WORKER_BEDROCK_MODEL"},
        "INTERLUDE_URL": stack_info["baseUrl"],
        "INTERLUDE_API_KEY": tenant["key"],
        "PYTHONPATH": os.pathsep.join([str(REPO / "layers/core/python"), str(REPO)]),
    }
    process = subprocess.Popen(
        [sys.executable, "examples/worker/worker.py", "--outbox", str(outbox), "--wait-seconds", "2"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield {"process": process, "outbox": outbox, "log": Path(log.name)}
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        log.close()


def sdk(stack_info, tenant) -> Modulex:
    return Modulex(api_key=tenant["key"], organization_id=tenant["name"], base_url=stack_info["baseUrl"], max_retries=0)


def sent_for(outbox: Path, run_id: str) -> list[dict[str, Any]]:
    lines = outbox.read_text().splitlines() if outbox.exists() else []
    # The worker sees the run id in its OpenWOP form (tenant/run); ModuleX's run_id is its one-segment wire form.
    return [message for message in map(json.loads, lines) if wire(message["runId"]) == run_id]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("answer", "branch"),
    [({"approved": True}, "node_send"), ({"approved": False, "notes": "Tone too casual"}, "node_end_rejected")],
    ids=["approved", "rejected"],
)
def test_the_worked_example_drafts_pauses_with_the_draft_and_routes_the_answer(
    stack_info, tenant, worker, answer, branch
):
    async def scenario() -> tuple[Any, Any, list]:
        async with sdk(stack_info, tenant) as client:
            started = await client.executions.run(workflow=WORKFLOW, input=REQUEST)

            # The worker drafted with the llm node's prompt, and the interrupt inlines that draft
            before = await listen_until(client, started.run_id, "interrupt", DEADLINE_S)
            interrupt = before[-1].data["data"]
            assert interrupt["message"] == f"Approve sending this draft?\n\n{DRAFT}"
            assert interrupt["resume_schema"] == WORKFLOW["nodes"][1]["interrupt_config"]["resume_schema"]
            drafted = [e.data["output"] for e in before if e.event == "node_update" and e.data["node"] == "node_draft"]
            assert drafted == [{"node_draft": DRAFT}]

            await client.executions.resume(started.thread_id, started.run_id, answer, workflow=WORKFLOW)
            after = await listen_until(client, started.run_id, "done", DEADLINE_S)
            final = await client.executions.get_state(started.thread_id)
            return started, final, after

    started, final, frames = asyncio.run(scenario())

    assert final.metadata["status"] == "completed"
    updated = [e.data["node"] for e in frames if e.event == "node_update"]
    assert branch in updated
    assert final.state["node_approval"] == answer
    sent = sent_for(worker["outbox"], started.run_id)
    if answer["approved"]:
        # The send_email tool ran once, with the draft the reviewer approved, and its answer is node_send's output
        assert [(m["to"], m["subject"], m["body"]) for m in sent] == [("ana@example.com", "About your request", DRAFT)]
        assert final.state["node_send"]["sent"] is True
        assert final.state["node_send"]["body"] == DRAFT
        assert "node_end_rejected" not in updated
    else:
        assert sent == []
        assert final.state["node_end_rejected"] == answer
        assert "node_send" not in updated


def test_the_worker_stops_on_sigterm(worker):
    process = worker["process"]
    assert process.poll() is None, worker["log"].read_text()
    process.send_signal(signal.SIGTERM)
    assert until(lambda: process.poll() is not None, DEADLINE_S), "the worker did not stop"
    assert process.returncode == 0, worker["log"].read_text()
