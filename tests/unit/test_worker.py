"""interlude.worker's own logic against a small loopback fake of the four task routes (the real routes and the
worked example run end to end in tests/e2e/test_task_worker.py): claim, run, heartbeat, complete or fail, the
pauses on an empty queue and on an unreachable server, and the graceful stop."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from interlude.worker import Backoff, NonRetryableError, Worker, WorkerRefused

KEY = "ik_test_worker"
DEADLINE_S = 20.0


@dataclass
class FakeTasks:
    """What the fake server hands out and what it was sent. `answers` overrides, in order, the next answers to a
    route (`claim`, `complete`, `fail`, `heartbeat`): a status code, or "drop" to close the connection unanswered."""

    tasks: list[dict[str, Any]] = field(default_factory=list)
    answers: dict[str, list[int | str]] = field(default_factory=dict)
    requests: list[tuple[str, str, dict[str, Any], dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    hold_s: float = 0.0

    def seen(self, route: str) -> list[dict[str, Any]]:
        with self.lock:
            return [body for kind, _, body, _ in self.requests if kind == route]

    def kinds(self) -> list[str]:
        with self.lock:
            return [kind for kind, *_ in self.requests]


def route_of(path: str) -> tuple[str, str]:
    if path == "/tasks:claim":
        return "claim", ""
    _, _, token, action = path.split("/", 3)
    return action, token


class Handler(BaseHTTPRequestHandler):
    world: FakeTasks

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        route, token = route_of(self.path)
        world = self.server.world  # type: ignore[attr-defined]
        with world.lock:
            world.requests.append((route, token, json.loads(raw or b"{}"), dict(self.headers)))
            scripted = world.answers.get(route)
            answer = scripted.pop(0) if scripted else None
            task = world.tasks.pop(0) if route == "claim" and answer is None and world.tasks else None
        if answer == "drop":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if answer is not None:
            self.reply(int(answer), {"error": "scripted", "message": f"scripted {answer}"})
        elif route == "claim" and task:
            self.reply(200, task)
        elif route == "claim":
            time.sleep(world.hold_s)  # the long poll, as the fake holds it
            self.reply(204, None)
        else:
            self.reply(200, {"runId": "run-1", "nodeId": "n", "status": "completed"})

    def reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def fake() -> Iterator[tuple[FakeTasks, str]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.world = FakeTasks()  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server.world, f"http://127.0.0.1:{server.server_port}"  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


def task(token: str = "tt1.a.b", node_type: str = "llm", heartbeat_s: int = 60, **extra: Any) -> dict[str, Any]:
    return {
        "taskToken": token,
        "runId": "demo/run-1",
        "nodeId": "node_draft",
        "nodeType": node_type,
        "queue": node_type,
        "config": {"user_prompt": "Write a reply to: the refund"},
        "input": {"request": "the refund"},
        "attempt": 1,
        "heartbeatTimeoutSeconds": heartbeat_s,
        "timeoutSeconds": 300,
        **extra,
    }


def quick_worker(url: str, queues: list[str] | None = None) -> Worker:
    return Worker(
        url,
        KEY,
        queues,
        wait_seconds=0,
        error_backoff=Backoff(0.01, 0.05),
        idle_backoff=Backoff(0.01, 0.05),
    )


def until(predicate, timeout_s: float = DEADLINE_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return value


def test_a_claimed_task_runs_its_node_types_function_and_completes_with_the_result(fake):
    world, url = fake
    world.tasks.append(task())
    worker = quick_worker(url)
    calls = []

    @worker.handler("llm")
    def draft(config, input, context):
        calls.append((config, input, context.run_id, context.node_id, context.attempt))
        return f"Dear customer, about {input['request']}"

    @worker.handler("tool")
    def send(config, input, context):
        raise AssertionError("not this one")

    assert worker.run_once() is True

    assert calls == [
        ({"user_prompt": "Write a reply to: the refund"}, {"request": "the refund"}, "demo/run-1", "node_draft", 1)
    ]
    (route, _, claim, headers), (done, token, completion, _) = world.requests
    assert (route, claim) == ("claim", {"queues": ["llm", "tool"], "waitSeconds": 0})
    assert headers["Authorization"] == f"Bearer {KEY}"
    assert (done, token, completion) == ("complete", "tt1.a.b", {"output": "Dear customer, about the refund"})


def test_the_queues_given_are_claimed_and_a_handler_may_be_named_for_its_queue(fake):
    world, url = fake
    world.tasks.append(task(node_type="tool", queue="mail"))
    worker = quick_worker(url, queues=["mail"])
    worker.handler("mail")(lambda config, input, context: {"sent": True})

    assert worker.run_once() is True

    assert world.seen("claim") == [{"queues": ["mail"], "waitSeconds": 0}]
    assert world.seen("complete") == [{"output": {"sent": True}}]


class PolicyRefused(Exception):
    pass


@pytest.mark.parametrize(
    ("raised", "retryable"),
    [
        (RuntimeError("model overloaded"), True),
        (NonRetryableError("the prompt is empty"), False),
        (PolicyRefused("not allowed"), False),
    ],
)
def test_a_raising_function_fails_the_task_retryable_unless_its_error_is_not(fake, raised, retryable):
    world, url = fake
    world.tasks.append(task())
    worker = quick_worker(url)

    @worker.handler("llm", non_retryable=[PolicyRefused])
    def draft(config, input, context):
        raise raised

    worker.run_once()

    assert world.seen("fail") == [
        {"error": {"code": type(raised).__name__, "message": str(raised)}, "retryable": retryable}
    ]
    assert world.seen("complete") == []


def test_a_long_error_message_is_cut_to_what_the_server_takes(fake):
    world, url = fake
    world.tasks.append(task())
    worker = quick_worker(url)

    @worker.handler("llm")
    def draft(config, input, context):
        raise RuntimeError("é" * 5000)  # 10,000 bytes: over the server's 8 KiB for a whole error

    worker.run_once()

    (failed,) = world.seen("fail")
    message = failed["error"]["message"]
    assert message == "é" * 2000
    assert len(message.encode()) <= 4000


def test_a_task_of_no_registered_type_or_a_result_that_is_not_json_fails_without_retry(fake):
    world, url = fake
    world.tasks += [task(node_type="agent"), task()]
    worker = quick_worker(url, queues=["llm"])
    worker.handler("llm")(lambda config, input, context: {"not json": object()})

    worker.run_once()
    worker.run_once()

    (no_handler, not_json) = world.seen("fail")
    assert (no_handler["error"]["code"], no_handler["retryable"]) == ("no_handler", False)
    assert "'agent'" in no_handler["error"]["message"]
    assert (not_json["error"]["code"], not_json["retryable"]) == ("output_not_json", False)


def test_heartbeats_go_out_while_the_function_runs_and_stop_before_it_completes(fake):
    world, url = fake
    world.tasks.append(task(heartbeat_s=1))  # one beat every third of a second
    worker = quick_worker(url)

    @worker.handler("llm")
    def slow(config, input, context):
        assert until(lambda: len(world.seen("heartbeat")) >= 2), "no heartbeats while running"
        return "done"

    worker.run_once()

    kinds = world.kinds()
    assert kinds[-1] == "complete"
    assert kinds.count("heartbeat") >= 2
    assert "heartbeat" not in kinds[kinds.index("complete") :]


def test_a_heartbeat_that_finds_the_task_gone_tells_the_function_and_its_late_completion_is_dropped(fake):
    world, url = fake
    world.tasks.append(task(heartbeat_s=1))
    world.answers = {"heartbeat": [409], "complete": [409]}
    worker = quick_worker(url)
    lost = []

    @worker.handler("llm")
    def slow(config, input, context):
        lost.append(context.lost.wait(DEADLINE_S))
        return "too late"

    worker.run_once()

    assert lost == [True]
    assert world.kinds().count("heartbeat") == 1  # no more beats for a lost task
    assert world.seen("complete") == [{"output": "too late"}]
    assert world.seen("fail") == []  # a 409 on completion ends it: someone else settled the task


def test_a_completion_is_sent_again_while_the_server_fails_and_a_refused_output_fails_the_node(fake):
    world, url = fake
    world.tasks += [task("tt1.first"), task("tt1.second")]
    world.answers = {"complete": [503, "drop", 200, 413]}
    worker = quick_worker(url)
    worker.handler("llm")(lambda config, input, context: "text")

    worker.run_once()
    worker.run_once()

    completes = [(kind, token) for kind, token, *_ in world.requests if kind == "complete"]
    assert completes == [("complete", "tt1.first")] * 3 + [("complete", "tt1.second")]
    (refused,) = world.seen("fail")
    assert (refused["error"]["code"], refused["retryable"]) == ("output_refused", False)
    assert "413" in refused["error"]["message"]


def test_empty_claims_and_server_failures_pause_with_growing_backoff_reset_by_a_task(fake):
    world, url = fake
    world.answers = {"claim": [503, "drop", 500]}
    worker = quick_worker(url)
    worker.handler("llm")(lambda config, input, context: "text")

    assert [worker.run_once() for _ in range(3)] == [False, False, False]
    assert worker.error_backoff.failures == 3
    assert worker.run_once() is False  # now 204: the server answered, nothing was ready
    assert (worker.error_backoff.failures, worker.idle_backoff.failures) == (0, 1)
    world.tasks.append(task())
    assert worker.run_once() is True
    assert worker.idle_backoff.failures == 0
    assert world.seen("complete") == [{"output": "text"}]


def test_an_empty_claim_the_server_held_for_its_long_poll_is_followed_by_no_further_pause(fake):
    world, url = fake
    world.hold_s = 1.0
    worker = Worker(url, KEY, wait_seconds=1, idle_backoff=Backoff(60.0, 60.0))  # a pause would be a minute
    worker.handler("llm")(lambda config, input, context: "text")
    worker.idle_backoff.failures = 3

    assert worker.run_once() is False

    assert worker.idle_backoff.failures == 0
    assert world.seen("claim") == [{"queues": ["llm"], "waitSeconds": 1}]


def test_an_unreachable_server_is_a_pause_not_a_crash():
    # The port stays bound, never listening, while it is dialled: no other process can take it meanwhile.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        worker = quick_worker(f"http://127.0.0.1:{probe.getsockname()[1]}")
        worker.handler("llm")(lambda config, input, context: "text")

        assert worker.run_once() is False
        assert worker.error_backoff.failures == 1


def test_backoff_doubles_with_jitter_up_to_its_ceiling_and_resets():
    backoff = Backoff(1.0, 5.0)
    delays = [backoff.next() for _ in range(5)]
    for delay, ceiling in zip(delays, [1, 2, 4, 5, 5], strict=True):
        assert ceiling / 2 <= delay <= ceiling
    backoff.reset()
    assert backoff.next() <= 1.0


def test_a_refused_claim_stops_the_worker_saying_why(fake):
    world, url = fake
    world.answers = {"claim": [403]}
    worker = quick_worker(url)
    worker.handler("llm")(lambda config, input, context: "text")

    with pytest.raises(WorkerRefused, match=r"\['llm'\].*403 scripted"):
        worker.run(handle_signals=False)


def test_stop_during_a_task_finishes_and_completes_it_then_claims_nothing_more(fake):
    world, url = fake
    world.tasks += [task("tt1.first"), task("tt1.second")]
    worker = quick_worker(url)

    @worker.handler("llm")
    def draft(config, input, context):
        worker.stop()
        assert context.stopping.is_set()
        return "finished anyway"

    runner = threading.Thread(target=worker.run, kwargs={"handle_signals": False})
    runner.start()
    runner.join(DEADLINE_S)

    assert not runner.is_alive()
    assert world.kinds() == ["claim", "complete"]
    assert world.seen("complete") == [{"output": "finished anyway"}]


def test_sigterm_stops_the_worker_gracefully_and_restores_the_previous_handler(fake):
    world, url = fake
    world.tasks.append(task())
    worker = quick_worker(url)
    before = signal.getsignal(signal.SIGTERM)

    @worker.handler("llm")
    def draft(config, input, context):
        os.kill(os.getpid(), signal.SIGTERM)
        assert until(context.stopping.is_set)
        return "finished anyway"

    worker.run()  # returns: the signal stopped it

    assert world.kinds() == ["claim", "complete"]
    assert signal.getsignal(signal.SIGTERM) is before
