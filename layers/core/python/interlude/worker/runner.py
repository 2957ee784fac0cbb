"""The worker loop: long-poll a claim, run the function registered for the task's node type with (config, input,
context), heartbeat in the background while it runs, then complete with its result or fail (retryable unless it
raised a non-retryable error). Pauses with backoff when the queues are empty or the server cannot be reached, and
stops between tasks on `stop()` or SIGINT/SIGTERM, finishing the task it holds."""

from __future__ import annotations

import contextlib
import json
import logging
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any, TypeVar

from interlude.worker.client import TASK_GONE, Refused, Task, TaskClient, TransportError

log = logging.getLogger("interlude.worker")

Handler = Callable[[dict[str, Any], Any, "TaskContext"], Any]
F = TypeVar("F", bound=Handler)

# A heartbeat goes out this often within the task's heartbeat timeout, so one lost beat does not time it out.
BEATS_PER_TIMEOUT = 3
MIN_BEAT_INTERVAL_S = 0.05
# How often a completion or failure is sent again while the server cannot be reached before the worker gives the
# task up (the server's task timeout then hands it to another claim).
SETTLE_ATTEMPTS = 6
# An empty claim the server held for at least this share of the wait asked is a pause already.
HELD_FRACTION = 0.5
# A failure's message is cut to this many UTF-8 bytes: the server takes 4,096 characters and 8 KiB in all.
MAX_MESSAGE_BYTES = 4000


class NonRetryableError(Exception):
    """Raised by a handler: the task fails with `retryable: false`, so the node fails without another attempt."""


class WorkerRefused(Exception):
    """The server refuses this worker's claims (a bad key, a missing scope, an unknown queue): no pause mends it."""


@dataclass
class Backoff:
    """Exponential pauses with jitter (half to the full delay), from `initial_s` up to `maximum_s`."""

    initial_s: float
    maximum_s: float
    factor: float = 2.0
    failures: int = 0

    def next(self) -> float:
        delay = min(self.maximum_s, self.initial_s * self.factor**self.failures)
        self.failures += 1
        return random.uniform(delay / 2, delay)

    def reset(self) -> None:
        self.failures = 0


@dataclass(frozen=True)
class TaskContext:
    """What a handler may want beside its config and input. `lost` is set when a heartbeat learns the task is no
    longer this worker's (completed elsewhere, timed out, run cancelled): a long handler may check it and give up.
    `stopping` is set once the worker was asked to stop."""

    task: Task
    lost: threading.Event
    stopping: threading.Event

    @property
    def run_id(self) -> str:
        return self.task.run_id

    @property
    def node_id(self) -> str:
        return self.task.node_id

    @property
    def attempt(self) -> int:
        return self.task.attempt


@dataclass(frozen=True)
class Registration:
    function: Handler
    non_retryable: tuple[type[BaseException], ...] = ()


class Worker:
    """`Worker(base_url, api_key, queues)`; `@worker.handler("llm")` per node type; `worker.run()` until stopped.

    `queues` defaults to the registered node types (a node's queue is its type unless its config names another);
    a handler may also be registered under a queue's name. `wait_seconds` is the claim's long poll."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        queues: Sequence[str] | None = None,
        *,
        wait_seconds: int = 20,
        client: TaskClient | None = None,
        error_backoff: Backoff | None = None,
        idle_backoff: Backoff | None = None,
    ) -> None:
        self.queues = list(queues) if queues is not None else None
        self.wait_seconds = wait_seconds
        self.tasks = client or TaskClient(base_url, api_key)
        self.error_backoff = error_backoff or Backoff(0.5, 30.0)
        self.idle_backoff = idle_backoff or Backoff(0.1, 2.0)
        self.handlers: dict[str, Registration] = {}
        self.stopping = threading.Event()

    def handler(self, name: str, *, non_retryable: Sequence[type[BaseException]] = ()) -> Callable[[F], F]:
        """Register the decorated function for node type (or queue) `name`; exceptions of `non_retryable` fail the
        task without another attempt, as `NonRetryableError` does."""

        def register(function: F) -> F:
            self.handlers[name] = Registration(function, tuple(non_retryable))
            return function

        return register

    def stop(self) -> None:
        """Claim nothing more; the task in hand is finished and settled first. A claim already waiting ends
        with its long poll (at most `wait_seconds`)."""
        self.stopping.set()

    def run(self, *, handle_signals: bool = True) -> None:
        """Work until `stop()` (or, in the main thread, SIGINT or SIGTERM: the first stops gracefully, a second
        SIGINT interrupts as usual)."""
        with self.signals() if handle_signals else contextlib.nullcontext():
            try:
                while not self.stopping.is_set():
                    self.run_once()
            finally:
                self.tasks.close()

    def run_once(self) -> bool:
        """Claim one task and handle it; False when there was none (after the pause that follows)."""
        queues = self.queues if self.queues is not None else list(self.handlers)
        asked = time.monotonic()
        try:
            task = self.tasks.claim(queues, self.wait_seconds)
        except TransportError as exc:
            log.warning("claim failed, pausing: %s", exc)
            self.stopping.wait(self.error_backoff.next())
            return False
        except Refused as exc:
            raise WorkerRefused(f"the server refuses this worker's claims on {queues}: {exc}") from exc
        self.error_backoff.reset()
        if task is None:
            held_s = time.monotonic() - asked
            if self.wait_seconds == 0 or held_s < self.wait_seconds * HELD_FRACTION:
                # The server did not hold the claim (a short wait, or one it cut short): pause before the next.
                self.stopping.wait(self.idle_backoff.next())
            else:
                self.idle_backoff.reset()  # the long poll itself was the pause
            return False
        self.idle_backoff.reset()
        self.handle(task)
        return True

    def handle(self, task: Task) -> None:
        registration = self.handlers.get(task.node_type) or self.handlers.get(task.queue or "")
        if registration is None:
            message = f"this worker has no handler for node type {task.node_type!r}"
            self.fail(task, {"code": "no_handler", "message": message}, retryable=False)
            return
        context = TaskContext(task, threading.Event(), self.stopping)
        log.info("task %s/%s attempt %s: running %s", task.run_id, task.node_id, task.attempt, task.node_type)
        with self.heartbeats(context):
            try:
                output = registration.function(task.config, task.input, context)
            except Exception as exc:
                retryable = not isinstance(exc, (NonRetryableError, *registration.non_retryable))
                self.fail(task, {"code": type(exc).__name__, "message": clip(str(exc))}, retryable)
                return
        try:
            json.dumps(output, allow_nan=False)
        except (TypeError, ValueError) as exc:
            self.fail(task, {"code": "output_not_json", "message": f"the handler's result is not JSON: {exc}"}, False)
            return
        self.complete(task, output)

    def complete(self, task: Task, output: Any) -> None:
        try:
            self.settle(task, "complete", lambda: self.tasks.complete(task.token, output))
        except Refused as exc:
            # The output itself was refused (too large, not acceptable): the node fails with the server's reason.
            self.fail(task, {"code": "output_refused", "message": clip(str(exc))}, retryable=False)

    def fail(self, task: Task, error: dict[str, Any], retryable: bool) -> None:
        log.info("task %s/%s failed (retryable=%s): %s", task.run_id, task.node_id, retryable, error["message"])
        try:
            self.settle(task, "fail", lambda: self.tasks.fail(task.token, error, retryable))
        except Refused as exc:
            log.error("task %s/%s: the failure was refused: %s", task.run_id, task.node_id, exc)

    def settle(self, task: Task, what: str, call: Callable[[], None]) -> None:
        """Send a completion or failure, again after a pause while the server cannot be reached. A refusal saying
        the task is gone ends it quietly (another worker or the server's timeout settled it); others raise."""
        backoff = Backoff(self.error_backoff.initial_s, self.error_backoff.maximum_s)
        for attempt in range(1, SETTLE_ATTEMPTS + 1):
            try:
                call()
                return
            except Refused as exc:
                if exc.status in TASK_GONE:
                    log.info("task %s/%s is no longer this worker's (%s): %s", task.run_id, task.node_id, what, exc)
                    return
                raise
            except TransportError as exc:
                log.warning("%s of task %s/%s failed (attempt %s): %s", what, task.run_id, task.node_id, attempt, exc)
                if attempt < SETTLE_ATTEMPTS:
                    time.sleep(backoff.next())
        log.error("gave up the %s of task %s/%s; its timeout will hand it on", what, task.run_id, task.node_id)

    @contextlib.contextmanager
    def heartbeats(self, context: TaskContext) -> Iterator[None]:
        """Heartbeat `context.task` in a background thread for the duration of the block."""
        timeout_s = context.task.heartbeat_timeout_s
        if timeout_s <= 0:
            yield
            return
        done = threading.Event()
        interval = max(MIN_BEAT_INTERVAL_S, timeout_s / BEATS_PER_TIMEOUT)
        beater = threading.Thread(target=self.beat, args=(context, done, interval), daemon=True, name="heartbeat")
        beater.start()
        try:
            yield
        finally:
            done.set()
            beater.join()

    def beat(self, context: TaskContext, done: threading.Event, interval_s: float) -> None:
        while not done.wait(interval_s):
            try:
                self.tasks.heartbeat(context.task.token)
            except Refused as exc:
                if exc.status in TASK_GONE:
                    log.warning("task %s/%s was lost: %s", context.run_id, context.node_id, exc)
                    context.lost.set()
                    return
                log.warning("heartbeat refused: %s", exc)
            except TransportError as exc:
                log.warning("heartbeat failed: %s", exc)

    @contextlib.contextmanager
    def signals(self) -> Iterator[None]:
        """SIGINT and SIGTERM stop the worker gracefully while it runs in the main thread."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

        def on_signal(signum: int, frame: FrameType | None) -> None:
            log.info("signal %s: stopping after the task in hand", signum)
            self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        for sig in previous:
            signal.signal(sig, on_signal)
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def clip(message: str) -> str:
    return message.encode()[:MAX_MESSAGE_BYTES].decode(errors="ignore")
