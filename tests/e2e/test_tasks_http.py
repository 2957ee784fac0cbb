"""Task workers over HTTP on the local stack (its dispatch pump makes the task): a long-poll claim, a completion,
a second completion's 409, and the run going on with the worker's output."""

from __future__ import annotations

import time
import uuid

from tests.support.local_stack import Api, wire


def test_a_worker_claims_completes_once_and_the_run_goes_on(api: Api) -> None:
    workflow_id = f"task-{uuid.uuid4().hex[:8]}"
    queue = f"q-{uuid.uuid4().hex[:8]}"
    definition = {
        "id": workflow_id,
        "name": workflow_id,
        "nodes": [
            {"id": "work", "typeId": "core.task", "config": {"taskType": "echo", "queue": queue, "input": "{{inputs.x}}"}},
            {"id": "after", "typeId": "core.transform", "config": {"outputs": {"got": "{{work.echo}}"}}},
        ],
        "edges": [{"id": "e", "sourceNodeId": "work", "targetNodeId": "after"}],
        "variables": [{"name": "x", "type": "string"}],
    }
    assert api.put_workflow(workflow_id, definition).status_code == 201
    run_id = api.start(workflow_id, inputs={"x": "hello"})["runId"]
    worker = api.new_key(["tasks:work"], subject="worker")

    # The task appears once the dispatch pump has handled the run's record: the long poll waits for it.
    claimed = api.call("POST", "/tasks:claim", {"queues": [queue], "waitSeconds": 10}, key=worker)
    assert claimed.status_code == 200, claimed.text
    task = claimed.json()
    assert (task["runId"], task["nodeId"], task["nodeType"], task["input"]) == (run_id, "work", "echo", "hello")

    token = task["taskToken"]
    assert api.call("POST", f"/tasks/{token}/heartbeat", key=worker).status_code == 200
    done = api.call("POST", f"/tasks/{token}/complete", {"output": {"echo": task["input"]}}, key=worker)
    assert done.json() == {"runId": run_id, "nodeId": "work", "status": "completed"}
    again = api.call("POST", f"/tasks/{token}/complete", {"output": {"echo": "twice"}}, key=worker)
    assert (again.status_code, again.json()["error"]) == (409, "interlude.task_not_claimed")

    assert api.wait_status(run_id, {"completed"}, timeout_s=30)["status"] == "completed"
    (completed,) = [e for e in api.events(run_id) if e["type"] == "run.completed"]
    assert completed["payload"]["outputs"]["after"] == {"got": "hello"}
    assert api.call("POST", "/tasks:claim", {"queues": [queue]}, key=worker).status_code == 204
    assert api.call("GET", f"/runs/{wire(run_id)}").status_code == 200


def test_a_worker_that_stops_heartbeating_loses_its_task_to_another_claim(api: Api) -> None:
    workflow_id = f"task-{uuid.uuid4().hex[:8]}"
    queue = f"q-{uuid.uuid4().hex[:8]}"
    config = {"taskType": "echo", "queue": queue, "heartbeatTimeoutSeconds": 1, "retry_config": {"initial_interval": 0}}
    definition = {"id": workflow_id, "name": workflow_id, "nodes": [{"id": "work", "typeId": "core.task", "config": config}]}
    assert api.put_workflow(workflow_id, definition).status_code == 201
    run_id = api.start(workflow_id)["runId"]
    worker = api.new_key(["tasks:work"], subject="worker")

    first = api.call("POST", "/tasks:claim", {"queues": [queue], "waitSeconds": 10}, key=worker).json()
    # No heartbeat: the stack's schedule pump fires the claim's check, and the task is back on its queue. A worker
    # claims again while nothing is ready (a loaded machine's pumps may take longer than one claim's wait).
    deadline = time.monotonic() + 60
    while (second := api.call("POST", "/tasks:claim", {"queues": [queue], "waitSeconds": 15}, key=worker)).status_code == 204:
        assert time.monotonic() < deadline, "the task never came back to its queue"
    assert second.status_code == 200, second.text
    assert (second.json()["attempt"], second.json()["runId"]) == (2, run_id)
    stale = api.call("POST", f"/tasks/{first['taskToken']}/complete", {"output": 1}, key=worker)
    assert (stale.status_code, stale.json()["error"]) == (409, "interlude.task_not_claimed")
    done = api.call("POST", f"/tasks/{second.json()['taskToken']}/complete", {"output": 2}, key=worker)
    assert done.status_code == 200
    assert api.wait_status(run_id, {"completed"}, timeout_s=30)["status"] == "completed"
    assert [e["payload"]["attempt"] for e in api.events(run_id) if e["type"] == "node.retried"] == [2]
