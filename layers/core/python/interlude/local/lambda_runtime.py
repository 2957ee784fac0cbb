"""Invoke the real Lambda handlers (functions/<name>/handler.py) in-process, as Lambda would."""

from __future__ import annotations

import importlib
import importlib.util
import multiprocessing
import signal
import sys
import threading
import uuid
from concurrent.futures import Future
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
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
    from aws_lambda_powertools.utilities.parameters.base import DEFAULT_PROVIDERS

    # The values a provider holds are forgotten; the provider is kept: Powertools builds each one on a boto3
    # Session of its own (≈ 0.1 s of CPU loading botocore's models), which the suite would otherwise pay in
    # every test that reads a secret.
    for provider in DEFAULT_PROVIDERS.values():
        provider.clear_cache()
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


def instance_context() -> multiprocessing.context.BaseContext:
    """Instances start from a fork server that has INSTANCE_IMPORTS (and the process hook's module) imported: a
    fresh process forked from a clean one (the stack's own threads are never forked), its state its own from then."""
    if "forkserver" not in multiprocessing.get_all_start_methods():  # Windows
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    hook = local_stack_settings().process_hook
    context.set_forkserver_preload([__name__, *INSTANCE_IMPORTS, *([hook.partition(":")[0]] if hook else [])])
    return context


def _start_instance() -> None:
    # Ctrl-C reaches the whole process group; the stack stops its instances itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    run_process_hook()


class InstancePool:
    """Concurrent invocations of one function, each in its own process, as Lambda runs separate instances.

    Powertools keeps the current event on class attributes, so two requests served by threads of one process
    could read each other's headers and body; separate processes cannot. Start it after the environment is set:
    the instances inherit it.
    """

    def __init__(self, name: str, size: int | None = None) -> None:
        self.name = name
        size = size or local_stack_settings().instances
        self._pool = instance_context().Pool(processes=size, initializer=_start_instance)
        self._lock = threading.Lock()
        self._waiting: set[Future[Any]] = set()

    def invoke(self, event: dict[str, Any]) -> Any:
        answer: Future[Any] = Future()
        with self._lock:
            self._waiting.add(answer)
        try:
            self._pool.apply_async(invoke, (self.name, event), callback=answer.set_result, error_callback=answer.set_exception)
            return answer.result()
        finally:
            with self._lock:
                self._waiting.discard(answer)

    @property
    def waiting(self) -> int:
        """Invocations sent and not yet answered."""
        return len(self._waiting)

    def stop(self) -> None:
        self._pool.terminate()
        self._pool.join()
        # A terminated pool never answers what it was running: the callers still waiting (a queue pump's thread,
        # which the interpreter joins at exit) are told, or a stack stopped mid-batch would never exit.
        with self._lock:
            for answer in self._waiting:
                if not answer.done():
                    answer.set_exception(RuntimeError(f"the {self.name} instances stopped"))
