"""Lambda entry point for the table stream (the outbox), with partial-batch failure reporting."""

from __future__ import annotations

import os

# Pydantic looks for plugins by scanning every installed distribution's entry points on its first model; none is
# used here, and the scan is a noticeable part of a cold start. An environment that sets it keeps its own value.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from interlude.coldstart import DATA_CLASSES, collector_paused, lazy_package

with collector_paused():
    from typing import Any

    from aws_lambda_powertools import Logger

    # Before the batch utility: of Powertools' event data classes only its records' modules load (coldstart.py).
    lazy_package(DATA_CLASSES)
    from aws_lambda_powertools.utilities.batch import EventType, process_partial_response
    from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

    from interlude.adapters import metrics
    from interlude.adapters.batch import CountingBatchProcessor
    from interlude.app.service import default_service
    from interlude.composition import compose, handle_stream_record
    from interlude.store.stream import record_run_id

    logger = Logger(service="interlude-dispatch")
    # A record that fails is logged (with its traceback and its run's correlation id) and counted before the mapping
    # retries it.
    processor = CountingBatchProcessor(EventType.DynamoDBStreams, log=logger)
    compose()
    metrics.count_caught_errors()


def record_handler(record: DynamoDBRecord) -> None:
    # One batch mixes runs: every line about this record carries its run id, also as the correlation id.
    run_id = record_run_id(record.raw_event)
    logger.set_correlation_id(run_id)
    logger.append_keys(runId=run_id)
    handle_stream_record(default_service(), record.raw_event)


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
