"""Lambda entry point for the callback queue (SQS), with partial-batch failure reporting."""

from __future__ import annotations

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

    from interlude import config, sdk_clients
    from interlude.adapters import metrics
    from interlude.adapters.batch import CountingBatchProcessor, side_by_side
    from interlude.adapters.delivery.retry import message_ids
    from interlude.adapters.delivery.signing import SecretCache
    from interlude.adapters.delivery.worker import HELD, Worker
    from interlude.adapters.leased_work import RetryLater
    from interlude.config import settings
    from interlude.config.delivery import delivery_settings
    from interlude.config.secrets import created_secrets
    from interlude.domain import clock
    from interlude.store.deliveries import DeliveryStore
    from interlude.store.table import Table
    from interlude.store.tenant_standing import standing_of
    from interlude.wiring import CALLBACK_BATCH_SIZE

    logger = Logger(service="interlude-callbacks")
    # Every failed message already had its visibility set to its backoff: a whole failed batch is no error. A
    # message that failed otherwise (not RetryLater) is logged and counted.
    processor = CountingBatchProcessor(EventType.SQS, log=logger, retried=(RetryLater,), raise_on_entire_batch_failure=False)
    metrics.count_caught_errors()
    config.check()
    sdk_clients.use_packaged_models()  # before any client is made (the layer's SDK data: interlude/adapters/sdk_data.py)


@cache
def tables() -> Table:
    cfg = settings()
    return Table(cfg.table_name, cfg.entries_table_name)


@cache
def worker() -> Worker:
    cfg, created = delivery_settings(), created_secrets()
    return Worker(
        deliveries=DeliveryStore(tables()),
        sqs=sdk_clients.client("sqs"),
        secrets=SecretCache(
            sdk_clients.client("secretsmanager"), cfg.secret_prefix, kms_key_id=created.kms_key_id, tags=created.tags
        ),
        settings=cfg,
        standing=standing_of(tables(), clock.now),
    )


def deliver(record: dict[str, Any]) -> str:
    """One message's notice through the worker: delivered, dead (a dead letter was sent), duplicate or held."""
    body = record["body"]
    # One batch mixes notices of many runs: every line about this message (the worker's included) carries its
    # notice id as the correlation id, and its run id (this thread's keys alone: runs are delivered side by side).
    ids = message_ids(body)
    logger.thread_safe_append_keys(runId=ids.get("runId"), noticeId=ids.get("noticeId"), correlation_id=ids.get("noticeId"))
    try:
        try:
            outcome = worker().handle(record)
        except RetryLater:
            metrics.count("CallbackNotices", outcome="failed")
            raise
        if outcome != HELD:  # counted as TenantWork (interlude.adapters.held_work)
            metrics.count("CallbackNotices", outcome=outcome)
        return outcome
    finally:
        logger.thread_safe_remove_keys(["runId", "noticeId", "correlation_id"])


def delivered(records: list[dict[str, Any]]) -> dict[str, str | BaseException]:
    """Each message's outcome, or the exception it raised (issue 31): the batch's notices are delivered side by side
    by run, each run's in the order they came, so an invocation is held about as long as its slowest run's notices,
    not the sum of every notice's round trip to its receiver (bench/ceiling.py)."""
    by_run: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_run.setdefault(str(message_ids(record["body"]).get("runId", "")), []).append(record)

    def run_notices(run_id: str) -> dict[str, str | BaseException]:
        outcomes: dict[str, str | BaseException] = {}
        for record in by_run[run_id]:
            try:
                outcomes[record["messageId"]] = deliver(record)
            except Exception as exc:  # this message alone fails: SQS hands it out again
                outcomes[record["messageId"]] = exc
        return outcomes

    found: dict[str, str | BaseException] = {}
    for outcomes in side_by_side(run_notices, list(by_run), CALLBACK_BATCH_SIZE):
        found.update(outcomes)
    return found


def record_handler(outcome: dict[str, str | BaseException], record: SQSRecord) -> str:
    """Reports one message's outcome, decided for the whole batch (`delivered`) before Powertools asks."""
    found = outcome[record.message_id]
    if isinstance(found, BaseException):
        raise found
    return found


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    worker().time_left_s = lambda: context.get_remaining_time_in_millis() / 1000
    outcome = delivered(event.get("Records") or [])
    return process_partial_response(
        event=event, record_handler=partial(record_handler, outcome), processor=processor, context=context
    )
