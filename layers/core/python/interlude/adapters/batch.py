"""The batch processor every stream and queue worker uses: Powertools' partial batch failures, and each record that
fails counted (RecordFailures) and logged at ERROR with its traceback.

A record failure is not a Lambda error: the invocation succeeds and reports the record in batchItemFailures, so
the functions' Errors alarms never see it. A message its worker hid for a designed retry (`retried`: the receiver
is down, the work is claimed elsewhere) fails on purpose and counts nothing here; its worker counts its outcome.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType
from aws_lambda_powertools.utilities.batch.exceptions import ExceptionInfo

from interlude.adapters import metrics


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
