"""Lambda entry point for the notifications queue (SQS, issue 14), with partial-batch failure reporting."""

from __future__ import annotations

from interlude.coldstart import DATA_CLASSES, defer_unused_modules, importing, lazy_package

with importing():
    defer_unused_modules()  # before the first import that would load one (interlude/coldstart.py)
    from functools import cache
    from typing import Any

    from aws_lambda_powertools import Logger

    # Before the batch utility: of Powertools' event data classes only its records' modules load (coldstart.py).
    lazy_package(DATA_CLASSES)
    from aws_lambda_powertools.utilities.batch import EventType, process_partial_response
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

    from interlude import config, sdk_clients
    from interlude.adapters import metrics
    from interlude.adapters.batch import CountingBatchProcessor
    from interlude.adapters.held_work import admitted, message_body, queue_destination
    from interlude.adapters.keyring_store import load_key_ring
    from interlude.adapters.leased_work import RetryLater
    from interlude.adapters.notify.worker import Worker
    from interlude.adapters.tenant_usage import count_notification
    from interlude.config import settings
    from interlude.config.notify import notify_settings
    from interlude.domain import clock
    from interlude.store.runs import RunStore
    from interlude.store.tenant_standing import TenantStanding, standing_of

    logger = Logger(service="interlude-notify")
    # Every failed message already had its visibility set to its backoff: a whole failed batch is no error. A
    # message that failed otherwise (not RetryLater) is logged and counted.
    processor = CountingBatchProcessor(EventType.SQS, log=logger, retried=(RetryLater,), raise_on_entire_batch_failure=False)
    metrics.count_caught_errors()
    config.check()
    sdk_clients.use_packaged_models()  # before any client is made (the layer's SDK data: interlude/adapters/sdk_data.py)


@cache
def worker() -> Worker:
    cfg = settings()
    return Worker(
        store=RunStore(cfg.table_name, cfg.entries_table_name),
        sqs=sdk_clients.client("sqs"),
        ses=sdk_clients.client("sesv2"),
        secrets=sdk_clients.client("secretsmanager"),
        ring=lambda: load_key_ring(cfg.key_ring_secret, max_age_s=cfg.key_ring_cache_seconds),
        settings=notify_settings(),
    )


@cache
def standing() -> TenantStanding:
    return standing_of(worker().store, clock.now)


def record_handler(record: SQSRecord) -> str:
    ids = message_body(record.body)
    logger.set_correlation_id(ids.get("id"))
    logger.append_keys(runId=ids.get("runId"), notificationId=ids.get("id"), purpose=ids.get("purpose"))
    if not admitted(standing(), queue_destination("notifications"), ids):
        return "held"
    try:
        outcome = worker().handle(record.raw_event)
    except RetryLater:
        metrics.count("Notifications", outcome="failed")
        raise
    # sent, skipped, undeliverable (a channel set up failed for good), dead (a dead letter was sent) or duplicate
    metrics.count("Notifications", outcome=outcome)
    if outcome == "sent" and isinstance(ids.get("tenant"), str):
        count_notification(worker().store, clock.now, ids["tenant"], str(ids.get("id")))
    return outcome


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
