"""Lambda entry point for the callback queue (SQS), with partial-batch failure reporting."""

from __future__ import annotations

from interlude.coldstart import DATA_CLASSES, collector_paused, lazy_package

with collector_paused():
    from functools import cache
    from typing import Any

    import boto3
    from aws_lambda_powertools import Logger

    # Before the batch utility: of Powertools' event data classes only its records' modules load (coldstart.py).
    lazy_package(DATA_CLASSES)
    from aws_lambda_powertools.utilities.batch import EventType, process_partial_response
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

    from interlude import config
    from interlude.adapters import metrics
    from interlude.adapters.batch import CountingBatchProcessor
    from interlude.adapters.delivery.retry import message_ids
    from interlude.adapters.delivery.signing import SecretCache
    from interlude.adapters.delivery.worker import Worker
    from interlude.adapters.held_work import admitted, message_body, queue_destination
    from interlude.adapters.leased_work import RetryLater
    from interlude.adapters.sdk_clients import use_packaged_models
    from interlude.config import settings
    from interlude.config.delivery import delivery_settings
    from interlude.config.secrets import created_secrets
    from interlude.domain import clock
    from interlude.store.deliveries import DeliveryStore
    from interlude.store.table import Table
    from interlude.store.tenant_standing import TenantStanding, standing_of

    logger = Logger(service="interlude-callbacks")
    # Every failed message already had its visibility set to its backoff: a whole failed batch is no error. A
    # message that failed otherwise (not RetryLater) is logged and counted.
    processor = CountingBatchProcessor(EventType.SQS, log=logger, retried=(RetryLater,), raise_on_entire_batch_failure=False)
    metrics.count_caught_errors()
    config.check()
    use_packaged_models()  # before any client is made (the layer's SDK data: interlude/adapters/sdk_data.py)


@cache
def worker() -> Worker:
    cfg, created = delivery_settings(), created_secrets()
    return Worker(
        deliveries=DeliveryStore(Table(settings().table_name)),
        sqs=boto3.client("sqs"),
        secrets=SecretCache(
            boto3.client("secretsmanager"), cfg.secret_prefix, kms_key_id=created.kms_key_id, tags=created.tags
        ),
        settings=cfg,
    )


@cache
def standing() -> TenantStanding:
    return standing_of(Table(settings().table_name), clock.now)


def record_handler(record: SQSRecord) -> str:
    # One batch mixes notices of many runs: every line about this message (the worker's included) carries its
    # notice id as the correlation id, and its run id.
    ids = message_ids(record.body)
    logger.set_correlation_id(ids.get("noticeId"))
    logger.append_keys(runId=ids.get("runId"), noticeId=ids.get("noticeId"))
    if not admitted(standing(), queue_destination("callbacks"), message_body(record.body)):
        return "held"
    try:
        outcome = worker().handle(record.raw_event)
    except RetryLater:
        metrics.count("CallbackNotices", outcome="failed")
        raise
    # delivered, dead (a dead letter was sent) or duplicate
    metrics.count("CallbackNotices", outcome=outcome)
    return outcome


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
