"""The batch processor every stream and queue worker uses: Powertools' partial batch failures, and each record that
fails counted (RecordFailures) and logged at ERROR with its traceback; and the threads a worker runs a batch's
independent parts on (`side_by_side`: dispatch's runs; the audit listing's chains, through the composition).

A record failure is not a Lambda error: the invocation succeeds and reports the record in batchItemFailures, so
the functions' Errors alarms never see it. A message its worker hid for a designed retry (`retried`: the receiver
is down, the work is claimed elsewhere) fails on purpose and counts nothing here; its worker counts its outcome.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.batch.exceptions import ExceptionInfo

from interlude.adapters import metrics

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

T = TypeVar("T")
R = TypeVar("R")


class CountingBatchProcessor(BatchProcessor):
    def __init__(
        self,
        event_type: EventType,
        *,
        log: Any,
        retried: tuple[type[BaseException], ...] = (),
        raise_on_entire_batch_failure: bool = True,
    ) -> None:
        super().__init__(event_type=event_type, raise_on_entire_batch_failure=raise_on_entire_batch_failure)
        self._log = log
        self._retried = retried

    def failure_handler(self, record: Any, exception: ExceptionInfo) -> Any:
        if not isinstance(exception[1], self._retried):
            self._log.error("record failed; the mapping retries it", exc_info=exception)
            metrics.record_failed()
        return super().failure_handler(record, exception)


# One pool per process, made with the first batch that holds more than one job: its threads wait on AWS calls side by
# side (the calls release the GIL); the CPU they share is the function's.
_pools: dict[int, ThreadPoolExecutor] = {}


def side_by_side(job: Callable[[T], R], items: list[T], workers: int) -> list[R]:
    """`job` of each of `items`, on up to `workers` threads at once (inline for one item); the results in order. Each
    runs in a copy of the caller's context (its context variables: the local runtime's function name, for one)."""
    if len(items) <= 1:
        return [job(item) for item in items]
    pool = _pools.get(workers)
    if pool is None:
        from concurrent.futures import ThreadPoolExecutor  # with the first batch of several runs, not at a cold start

        pool = _pools.setdefault(workers, ThreadPoolExecutor(max_workers=workers, thread_name_prefix="batch"))
    futures = [pool.submit(contextvars.copy_context().run, job, item) for item in items]
    return [future.result() for future in futures]
