"""The local stack's function instances (interlude.local.lambda_runtime.InstancePool)."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import pytest

from interlude import wiring
from interlude.config.local import PROCESS_HOOK_ENV
from interlude.local.lambda_runtime import InstancePool
from tests.support.local_stack import until


def test_a_caller_waiting_on_a_stopped_pool_is_told_so_and_a_stopped_stack_can_exit(monkeypatch) -> None:
    # Each instance runs the process hook before it takes any invocation: signal.pause never returns, so the
    # invocation is still unanswered when the pool stops (as a queue batch in flight when `interlude dev` stops).
    monkeypatch.setenv(PROCESS_HOOK_ENV, "signal:pause")
    pool = InstancePool(wiring.ROUTES_FUNCTION, size=1)
    answered: Future[Any] = Future()

    def call() -> None:
        try:
            answered.set_result(pool.invoke({}))
        except Exception as problem:
            answered.set_exception(problem)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    assert until(lambda: pool.waiting, 30)
    pool.stop()

    # Without the answer, the caller's thread waited forever, and the interpreter joins such threads at exit.
    with pytest.raises(RuntimeError, match="instances stopped"):
        answered.result(timeout=30)
    caller.join(timeout=30)
    assert not caller.is_alive()
