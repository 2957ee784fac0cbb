"""Lambda entry point for the outbox queue (SQS): each message names a new event-log item, which the outbox handles;
partial-batch failure reporting (a failed message reappears after its visibility timeout)."""

from __future__ import annotations

import os

# Pydantic looks for plugins by scanning every installed distribution's entry points on its first model; none is
# used here, and the scan is a noticeable part of a cold start. An environment that sets it keeps its own value.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from interlude.coldstart import DATA_CLASSES, collector_paused, lazy_package

with collector_paused():
    import json
    from functools import cache
    from typing import Any

    from aws_lambda_powertools import Logger

    # Before the batch utility: of Powertools' event data classes only its records' modules load (coldstart.py).
    lazy_package(DATA_CLASSES)
    from aws_lambda_powertools.utilities.batch import EventType, process_partial_response
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

    from interlude import config
    from interlude.adapters import metrics
    from interlude.adapters.batch import CountingBatchProcessor
    from interlude.adapters.held_work import admitted, queue_destination
    from interlude.composition import compose, services
    from interlude.store.layout import run_id_of
    from interlude.store.stream import OutboxRecords
    from interlude.store.tenant_standing import TenantStanding, standing_of
    from interlude.wiring import OUTBOX_QUEUE

    logger = Logger(service="interlude-dispatch")
    # An item that fails is logged (with its traceback and its run's correlation id) and counted before SQS hands
    # its message out again.
    processor = CountingBatchProcessor(EventType.SQS, log=logger, raise_on_entire_batch_failure=False)
    compose()
    metrics.count_caught_errors()
    config.check()


@cache
def standing() -> TenantStanding:
    return standing_of(services().store, services().clock)


@cache
def outbox_records() -> OutboxRecords:
    store = services().store
    return OutboxRecords(store.client, store.table)


def record_handler(record: SQSRecord) -> None:
    message = json.loads(record.body)
    # One batch mixes runs: every line about this item carries its run id, also as the correlation id.
    run_id = run_id_of(message["pk"])
    logger.set_correlation_id(run_id)
    logger.append_keys(runId=run_id)
    if not admitted(standing(), queue_destination(OUTBOX_QUEUE), message):
        return  # held for the tenant's resume, or dropped: the tenant is being deleted
    stream_record = outbox_records().record_of(message)
    if stream_record is None:
        logger.info("the item is gone (its run was deleted); nothing to do")
        return
    services().handle_stream_record(stream_record)


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
