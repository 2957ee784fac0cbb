"""Task nodes in the engine (engine/tasks.py): a visit waits on its task, the worker's outcome lands once, a retry is
a node.retried event, retry_config's backoff, an llm node's text, and the task token's shape (app/tasks.py)."""

from __future__ import annotations

import base64
import json

import pytest

from interlude.app.tasks import claim_digest, issue_token, read_token
from interlude.domain.errors import Invalid
from interlude.engine import run as engine
from interlude.engine.actions import ACTION_REQUESTED
from interlude.engine.tasks import NODE_RETRIED, TASK, RetryConfig, task_id, text_output
from interlude.faces.modulex.frames import RunView, project
from interlude.store.tasks import Task
from tests.support.engine import NOW, RUN_ID, edge, new_state, wf_of


def workflow(**config: object):
    task = {"id": "t", "typeId": "core.task", "config": {"taskType": "summarise", "input": "{{inputs.x}}", **config}}
    after = {"id": "after", "typeId": "core.transform", "config": {"outputs": {"got": "{{t}}"}}}
    return wf_of([task, after], [edge("t", "after")], [{"name": "x", "type": "string"}])


def started(**config: object):
    wf = workflow(**config)
    return wf, engine.start(new_state(wf, inputs={"x": "hello"}), wf, NOW)


def test_a_visit_waits_on_its_task_with_everything_the_worker_gets():
    _, t = started(queue="gpu", timeoutSeconds=30, retry_config={"max_retries": 4})
    assert t.state.status == "running"
    pending = t.state.actions["t"]
    assert (pending.kind, pending.effectId) == (TASK, task_id(RUN_ID, "t", 1))
    assert pending.request["queue"] == "gpu"
    assert pending.request["input"] == "hello"
    assert pending.request["timeoutSeconds"] == 30
    assert pending.request["retry"]["max_attempts"] == 5  # max_retries 4 = five attempts
    (requested,) = [e for e in t.events if e.type == ACTION_REQUESTED]
    assert requested.payload["kind"] == TASK


def test_the_queue_defaults_to_the_task_type():
    _, t = started()
    assert t.state.actions["t"].request["queue"] == "summarise"


def test_the_outcome_lands_once_and_a_retry_is_an_event_only():
    wf, t = started()
    retried = engine.retry_task(t.state, "t", 1, {"attempt": 2, "delayMs": 0}, NOW)
    assert [e.type for e in retried.events] == [NODE_RETRIED]
    assert retried.state.actions == t.state.actions
    done = engine.finish_action(t.state, wf, "t", 1, {"output": "short"}, NOW)
    assert done.state.status == "completed"
    assert done.state.outputs["after"] == {"got": "short"}
    assert engine.finish_action(done.state, wf, "t", 1, {"output": "again"}, NOW).events == []
    assert engine.retry_task(done.state, "t", 1, {"attempt": 2}, NOW).events == []


def test_bad_task_configs_are_refused_at_registration():
    problems = engine.check_config(workflow(queue="no spaces", heartbeatTimeoutSeconds=0))
    assert {p["path"] for p in problems} >= {"nodes/0/config/queue", "nodes/0/config/heartbeatTimeoutSeconds"}
    assert engine.check_config(workflow(retry_config={"max_attempts": 11}))


def test_the_backoff_grows_by_its_factor_up_to_its_ceiling():
    retry = RetryConfig(initial_interval=1000, backoff_factor=3, max_interval=5000)
    assert [retry.delay_ms(a) for a in (1, 2, 3)] == [1000, 3000, 5000]


@pytest.mark.parametrize(
    ("output", "kept"),
    [("text", "text"), ({"text": "t", "usage": 1}, "t"), ({"content": "c"}, {"content": "c"}), (3, 3)],
)
def test_an_llm_nodes_output_is_its_text(output, kept):
    assert text_output(output) == kept


def test_a_token_names_run_node_visit_and_attempt_and_reads_back():
    task = Task(task_id(RUN_ID, "t", 2), RUN_ID, "t", 2, "q", "claimed", 3, {})
    tid, presented = read_token(issue_token(task, "secret"))
    assert (tid, presented.attempt, presented.secret) == (task.task_id, 3, "secret")
    # Its last part is the secret's digest, which a claim keeps: what the table keeps is not the secret
    assert presented.last == claim_digest("secret") != "secret"
    # A secret no claim issues (a lone surrogate, which JSON can spell and no digest can be made of)
    unissued = json.dumps({"r": RUN_ID, "n": "t", "v": 2, "a": 3, "s": "\ud800"}).encode()
    lone = f"tt1.{base64.urlsafe_b64encode(unissued).decode().rstrip('=')}.{claim_digest('x')}"
    for bad in ("", "tt1", "tt1.!!.n", "tt1.e30.n", "xx1.e30.n", issue_token(task, "n").replace("tt1", "tt2"), lone):
        with pytest.raises(Invalid) as refused:
            read_token(bad)
        assert refused.value.code == "interlude.task_token_invalid"


def test_a_retry_of_a_modulex_node_is_a_node_retry_frame():
    view = RunView(RUN_ID, "wf", "1", {"node~5Fdraft": {"id": "node_draft", "type": "llm", "name": "Draft"}})
    doc = {
        "type": NODE_RETRIED,
        "nodeId": "node~5Fdraft",
        "timestamp": "2026-12-01T12:00:00.000Z",
        "payload": {"nodeId": "node~5Fdraft", "attempt": 2, "delayMs": 1000, "error": {"code": "interlude.task_failed"}},
    }
    frame = project(doc, view)
    assert frame is not None
    assert (frame["type"], frame["node"], frame["node_type"], frame["attempt"]) == ("node_retry", "node_draft", "llm", 2)
    assert (frame["delay_ms"], frame["reason"]) == (1000, "interlude.task_failed")
