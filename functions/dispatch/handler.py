"""Lambda entry point for the outbox queue (SQS): each message names a new event-log item, which the outbox handles a
batch at a time (interlude.app.dispatch: the items and their runs' heads read in one call, runs side by side, each
run's items in order); partial-batch failure reporting, per message (a failed message reappears after its visibility
timeout, and the messages of its run after it in the batch with it; a new run's batch that waits for its run's head
sooner: interlude.app.dispatch.head_wait_retry_s)."""

from __future__ import annotations

import os

# Pydantic looks for plugins by scanning every installed distribution's entry points on its first model; none is
# used here, and the scan is a noticeable part of a cold start. An environment that sets it keeps its own value.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from interlude.coldstart import DATA_CLASSES, defer_unused_modules, importing, lazy_package

with importing():
    defer_unused_modules()  # before the first import that would load one (interlude/coldstart.py)
    from functools import cache, partial
    from typing import Any

    from aws_lambda_powertools import Logger

    # Before the batch utility: of Powertools' event data classes only its records' modules load (coldstart.py).
    lazy_package(DATA_CLASSES)
    from aws_lambda_powertools.utilities.batch import EventType, process_partial_response
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

    # Every record's run heads are read as RunState (store/stream.py OutboxRecords): the run model and pydantic load
    # here, with the collector paused, not with the first batch, where they would cost as much and more (docs/adr/0163).
    import interlude.domain.models.run  # noqa: F401
    from interlude import config
    from interlude.adapters import metrics
    from interlude.adapters.batch import CountingBatchProcessor, side_by_side
    from interlude.adapters.held_work import admitted, message_body, queue_destination
    from interlude.adapters.outbox_feed import outbox_message
    from interlude.adapters.queues import hide
    from interlude.app.caught import caught
    from interlude.app.dispatch import HeadNotYetCommitted, HeldBack, head_wait_retry_s
    from interlude.composition import compose, services
    from interlude.config.queues import queue_settings
    from interlude.sdk_clients import use_packaged_models
    from interlude.store.layout import run_id_of
    from interlude.store.stream import OutboxRecords
    from interlude.store.tenant_standing import TenantStanding, standing_of
    from interlude.wiring import OUTBOX_BATCH_SIZE, OUTBOX_QUEUE

    logger = Logger(service="interlude-dispatch")
    # An item that fails is logged (with its traceback and its run's correlation id) and counted before SQS hands
    # its message out again; one held back behind it (HeldBack), or waiting for its run's head (HeadNotYetCommitted),
    # goes again, uncounted.
    processor = CountingBatchProcessor(
        EventType.SQS, log=logger, retried=(HeldBack, HeadNotYetCommitted), raise_on_entire_batch_failure=False
    )
    use_packaged_models()  # before any client is made (the layer's SDK data: interlude/adapters/sdk_data.py)
    compose()
    metrics.count_caught_errors()
    config.check()


@cache
def standing() -> TenantStanding:
    return standing_of(services().store, services().clock)


@cache
def outbox_records() -> OutboxRecords:
    store = services().store
    # With a WebSocket API (wiring.LIVE_API), each run's live followers are read with its head, for app/live.py.
    return OutboxRecords(store.client, store.table, followers=bool(config.settings().live_endpoint))


def dispatched(records: list[dict[str, Any]]) -> dict[str, BaseException]:
    """Dispatch the batch's messages; answers those that failed (by message id) with their exceptions."""
    failed: dict[str, BaseException] = {}
    named: list[tuple[str, dict[str, Any]]] = []
    for record in records:
        try:
            message = outbox_message(record["body"])
            if admitted(standing(), queue_destination(OUTBOX_QUEUE), message):
                named.append((record["messageId"], message))
            # else held for the tenant's resume, or dropped: the tenant is being deleted
        except Exception as exc:  # this message alone fails
            failed[record["messageId"]] = exc
    if not named:
        return failed
    try:
        items, heads = outbox_records().records_of([message for _, message in named])
    except Exception as exc:  # nothing of the batch could be read: all of it goes again
        return {**failed, **dict.fromkeys((message_id for message_id, _ in named), exc)}
    batch = []
    for (message_id, message), item in zip(named, items, strict=True):
        if item is None:
            logger.info(
                "the item is gone (its run was deleted); nothing to do", extra={"runId": run_id_of(message["pk"])}
            )
        else:
            batch.append((message_id, item))
    return {**failed, **services().handle_outbox_batch(batch, heads, runs_side_by_side)}


def hide_waiting(records: list[dict[str, Any]], outcome: dict[str, BaseException]) -> None:
    """Hand out again soon the messages of new runs' batches that wait for their runs' heads (their head commits within
    its create's request); on a failure to hide them, they wait for the queue's visibility timeout instead."""
    waiting = [
        (r["receiptHandle"], head_wait_retry_s(int((r.get("attributes") or {}).get("ApproximateReceiveCount", 1))))
        for r in records
        if isinstance(outcome.get(r["messageId"]), HeadNotYetCommitted)
    ]
    if not waiting:
        return
    try:
        hide(queue_settings().outbox_url, waiting)
    except Exception:  # noqa: BLE001 - later is still retried
        caught(logger, "outbox-hide", "messages waiting for their runs' heads could not be hidden briefly")


def runs_side_by_side(job: Any, run_ids: list[str]) -> list[Any]:
    def tagged(run_id: str) -> Any:
        # Every line about a run carries its run id, also as the correlation id (this thread's keys alone).
        logger.thread_safe_append_keys(runId=run_id, correlation_id=run_id)
        try:
            return job(run_id)
        finally:
            logger.thread_safe_remove_keys(["runId", "correlation_id"])

    return side_by_side(tagged, run_ids, OUTBOX_BATCH_SIZE)


def record_handler(outcome: dict[str, BaseException], record: SQSRecord) -> None:
    """Reports one message's outcome, decided for the whole batch (`dispatched`) before Powertools asks."""
    failure = outcome.get(record.message_id)
    if failure is None:
        return
    # The failure's line carries its run id, as the correlation id too.
    run_id = run_id_of(str(message_body(record.body).get("pk", "")))
    logger.set_correlation_id(run_id)
    logger.append_keys(runId=run_id)
    raise failure


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    outcome = dispatched(event.get("Records") or [])
    hide_waiting(event.get("Records") or [], outcome)
    return process_partial_response(
        event=event, record_handler=partial(record_handler, outcome), processor=processor, context=context
    )
