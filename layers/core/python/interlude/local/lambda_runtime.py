"""Invoke the real Lambda handlers (functions/<name>/handler.py) in-process, as Lambda would."""

from __future__ import annotations

import importlib
import importlib.util
import multiprocessing
import queue
import signal
import sys
import threading
import uuid
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import ModuleType
from typing import Any

from interlude import wiring
from interlude.config.local import local_stack_settings
from interlude.local import LOCAL_ACCOUNT, LOCAL_REGION

REPO_ROOT = Path(__file__).resolve().parents[5]
# Lambda knows wiring function `name` as `interlude-{name}`.
FUNCTION_NAME_PREFIX = "interlude-"
# The wiring name of the function whose invocation this thread is running (None outside any): what a deployed call
# would be signed with, its role. The test suite attributes every AWS call to a role by it (tests/support/aws_calls.py).
CURRENT_FUNCTION: ContextVar[str | None] = ContextVar("interlude_local_function", default=None)


def local_function_arn(name: str) -> str:
    """The ARN of wiring function `name` in the local account."""
    return f"arn:aws:lambda:{LOCAL_REGION}:{LOCAL_ACCOUNT}:function:{FUNCTION_NAME_PREFIX}{name}"


@dataclass
class LambdaContext:
    name: str  # the wiring name
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def function_name(self) -> str:
        return f"{FUNCTION_NAME_PREFIX}{self.name}"

    @property
    def invoked_function_arn(self) -> str:
        return local_function_arn(self.name)

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


@cache
def handler_module(name: str) -> ModuleType:
    fn = wiring.function(name)
    module_file, _, _ = fn.handler.rpartition(".")
    path = REPO_ROOT / "functions" / name / f"{module_file}.py"
    spec = importlib.util.spec_from_file_location(f"interlude_function_{name}", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fresh_instances() -> None:
    """Forget every process-level cache (services, settings, key rings), as a new Lambda instance would start.

    In-process tests run many moto worlds in one process; without this a handler would keep the previous
    world's cached workflows, settings and keys.
    """
    # The secrets a function kept (adapters/secret_values.py) are forgotten with the caches below.
    for module_name, module in list(sys.modules.items()):
        if not (module_name.startswith("interlude") and module_name != "interlude.domain.schemas"):
            continue
        for value in list(vars(module).values()):
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()


def invoke(name: str, event: dict[str, Any]) -> Any:
    fn = wiring.function(name)
    entry = getattr(handler_module(name), fn.handler.rpartition(".")[2])
    running = CURRENT_FUNCTION.set(name)
    try:
        return entry(event, LambdaContext(name=name, memory_limit_in_mb=fn.memory_mb))
    finally:
        CURRENT_FUNCTION.reset(running)


def run_process_hook() -> None:
    """Call the process hook's `module:function` (config.local), when one is set."""
    hook = local_stack_settings().process_hook
    if hook:
        module, _, function = hook.partition(":")
        getattr(importlib.import_module(module), function)()


# What every instance imports before its first invocation: the fork server an instance starts from has imported them
# once (the libraries and the package's modules, nothing run), where each spawned instance imported them again
# (≈ 1.5 s of CPU each; four api instances a stack). Each instance still runs its handler's initialisation itself.
INSTANCE_IMPORTS = ("botocore.session", "jsonschema", "interlude.composition", "interlude.api.app", "interlude.store.facade")


def instance_context() -> multiprocessing.context.ForkServerContext | multiprocessing.context.SpawnContext:
    """Instances start from a fork server that has INSTANCE_IMPORTS (and the process hook's module) imported: a
    fresh process forked from a clean one (the stack's own threads are never forked), its state its own from then."""
    if "forkserver" not in multiprocessing.get_all_start_methods():  # Windows
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    hook = local_stack_settings().process_hook
    context.set_forkserver_preload([__name__, *INSTANCE_IMPORTS, *([hook.partition(":")[0]] if hook else [])])
    return context


def _serve(name: str, connection: Connection) -> None:
    """An instance: runs the process hook, then each invocation its connection hands it, answering (ok, value)."""
    # Ctrl-C reaches the whole process group; the stack stops its instances itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    run_process_hook()
    while True:
        try:
            event = connection.recv()
        except EOFError:
            return  # the stack went away
        try:
            answer: tuple[bool, Any] = (True, invoke(name, event))
        except Exception as problem:  # noqa: BLE001 - the caller raises it, as a Lambda invocation's error
            answer = (False, problem)
        try:
            connection.send(answer)
        except Exception as problem:  # noqa: BLE001 - an answer that does not pickle is the caller's error
            connection.send((False, RuntimeError(f"the {name} instance could not answer: {problem!r}")))


class InstancePool:
    """Concurrent invocations of one function, each in its own process, as Lambda runs separate instances.

    Powertools keeps the current event on class attributes, so two requests served by threads of one process
    could read each other's headers and body; separate processes cannot. Start it after the environment is set:
    the instances inherit it. Each instance has a pipe of its own, on which it takes one invocation at a time: an
    instance that dies (killed, or a SIGTERM sent to the stack's whole process group reaching it) ends the
    invocation it held with an error at once and serves no more; a multiprocessing.Pool would have left that
    invocation unanswered for ever, and its stop waiting on a lock the dead instance held.
    """

    def __init__(self, name: str, size: int | None = None) -> None:
        self.name = name
        self._context = instance_context()
        self._idle: queue.SimpleQueue[_Instance | None] = queue.SimpleQueue()
        self._instances: list[_Instance] = []
        self._lock = threading.Lock()
        self._waiting = 0
        self._stopped = False
        try:
            for _ in range(size or local_stack_settings().instances):
                self._instances.append(self._started())
        except BaseException:
            self.stop()
            raise
        for instance in self._instances:
            self._idle.put(instance)

    def _started(self) -> _Instance:
        ours, theirs = self._context.Pipe()
        process = self._context.Process(target=_serve, args=(self.name, theirs), name=f"{self.name}-instance", daemon=True)
        process.start()
        theirs.close()  # the instance's end is its own alone: its death is our end's EOF
        return _Instance(process, ours)

    def _replace(self, dead: _Instance) -> None:
        """A new instance for one that died, as Lambda starts another; none once the pool stops, or when the fork
        server died with it (a signal to the stack's whole process group: the stack is stopping)."""
        dead.process.join()
        # Under the lock, as stop() closes its ends: two threads closing one connection at once close its descriptor
        # twice (EBADF, or another file's descriptor reused meanwhile).
        with self._lock:
            if self._stopped:
                return
            dead.connection.close()
            try:
                fresh = self._started()
            except (OSError, EOFError):  # the fork server refused, or died while it forked
                return
            self._instances[self._instances.index(dead)] = fresh
        self._idle.put(fresh)

    def invoke(self, event: dict[str, Any]) -> Any:
        with self._lock:
            self._waiting += 1
        try:
            instance = self._idle.get()
            if instance is None:
                self._idle.put(None)  # the next caller is told too
                raise RuntimeError(f"the {self.name} instances stopped")
            try:
                instance.connection.send(event)
                ok, value = instance.connection.recv()
            except (EOFError, OSError) as lost:
                # The instance died with the invocation (the pool stopped it, or it was killed): Lambda's answer too.
                self._replace(instance)
                raise RuntimeError(f"the {self.name} instances stopped") from lost
            self._idle.put(instance)
            if not ok:
                raise value
            return value
        finally:
            with self._lock:
                self._waiting -= 1

    @property
    def waiting(self) -> int:
        """Invocations sent and not yet answered."""
        return self._waiting

    def stop(self) -> None:
        # Callers waiting for an instance are told; callers an instance is serving are told by its end (EOF).
        with self._lock:
            self._stopped = True
        self._idle.put(None)
        for instance in self._instances:
            instance.process.terminate()
        for instance in self._instances:
            instance.process.join()
        with self._lock:
            for instance in self._instances:
                instance.connection.close()


@dataclass(frozen=True)
class _Instance:
    process: BaseProcess
    connection: Connection
