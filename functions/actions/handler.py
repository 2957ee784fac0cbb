"""Lambda entry point for the actions queue (SQS): gated core.http actions, with partial-batch failure reporting."""

from __future__ import annotations

import os

# Pydantic looks for plugins by scanning every installed distribution's entry points on its first model; none is
# used here, and the scan is a noticeable part of a cold start. An environment that sets it keeps its own value.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

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
    from interlude.adapters.actions.worker import ActionWorker
    from interlude.adapters.batch import CountingBatchProcessor
    from interlude.adapters.held_work import admitted, message_body, queue_destination
    from interlude.adapters.leased_work import RetryLater
    from interlude.composition import compose, services
    from interlude.config.actions import action_settings
    from interlude.store.tenant_standing import TenantStanding, standing_of

    logger = Logger(service="interlude-actions")
    # Every failed message already had its visibility set to its backoff: a whole failed batch is no error. A
    # message that failed otherwise (not RetryLater) is logged and counted.
    processor = CountingBatchProcessor(EventType.SQS, log=logger, retried=(RetryLater,), raise_on_entire_batch_failure=False)
    sdk_clients.use_packaged_models()  # before any client is made (the layer's SDK data: interlude/adapters/sdk_data.py)
    compose()
    metrics.count_caught_errors()
    config.check()


@cache
def worker() -> ActionWorker:
    wired = services()
    return ActionWorker(
        actions=wired.actions,
        # The tenant's settings (and their model) load with the first effect recorded, not with the worker.
        retention_days=lambda tenant: wired.tenants.effect_retention_days(tenant),
        effects=wired.effect_records,
        sqs=sdk_clients.client("sqs"),
        secrets=sdk_clients.client("secretsmanager"),
        settings=action_settings(),
    )


@cache
def standing() -> TenantStanding:
    return standing_of(services().store, services().clock)


def record_handler(record: SQSRecord) -> str:
    ids = message_body(record.body)
    logger.set_correlation_id(ids.get("effectId"))
    logger.append_keys(runId=ids.get("runId"), nodeId=ids.get("nodeId"), effectId=ids.get("effectId"))
    if not admitted(standing(), queue_destination("actions"), ids):
        return "held"
    try:
        outcome = worker().handle(record.raw_event)
    except RetryLater:
        metrics.count("Actions", outcome="retried")
        raise
    # completed, failed, replayed, stale or superseded
    metrics.count("Actions", outcome=outcome)
    return outcome


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
