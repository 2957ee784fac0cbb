"""Lambda entry point of the table's migrations (interlude.migrations). Three callers: the deploy's custom resource
(interlude_cdk), answered once a first turn is queued; the migrations queue, one turn per message, which runs pages
until two minutes are left, reports its progress as metrics and queues the next turn while migrations remain; and
the local stack as it starts (a plain invocation: a turn is queued). Its queue also carries the turns of finished runs'
retention (issue 30 item 4: interlude.app.retention) and of tenants' search-keys jobs (issue 29 item 1:
interlude.app.search_keys), the table's other background jobs."""

from __future__ import annotations

import os

# Pydantic looks for plugins by scanning every installed distribution's entry points on its first model; none is
# used here, and the scan is a noticeable part of a cold start. An environment that sets it keeps its own value.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from interlude.coldstart import DATA_CLASSES, defer_unused_modules, importing, lazy_package

with importing():
    defer_unused_modules()  # before the first import that would load one (interlude/coldstart.py)
    from collections.abc import Callable
    from functools import cache
    from typing import TYPE_CHECKING, Any

    from aws_lambda_powertools import Logger

    lazy_package(DATA_CLASSES)
    from aws_lambda_powertools.utilities.batch import EventType, process_partial_response

    from interlude import config, migrations
    from interlude.adapters import metrics
    from interlude.adapters.batch import CountingBatchProcessor
    from interlude.adapters.cloudformation import answer
    from interlude.adapters.held_work import read_message, upkeep_time
    from interlude.adapters.migration_turns import (
        RETENTION_RESTAMP,
        RETENTION_SWEEP,
        RUN_RETENTION,
        SEARCH_KEYS,
        TURN,
        queue_retention_restamp,
        queue_retention_sweep,
        queue_run_retention,
        queue_search_keys,
        queue_turn,
    )
    from interlude.config import settings
    from interlude.domain import clock
    from interlude.domain.ids import tenant_of
    from interlude.sdk_clients import use_packaged_models
    from interlude.store.migrations import LEASE_S

    logger = Logger(service="interlude-migrate")
    processor = CountingBatchProcessor(EventType.SQS, log=logger)
    metrics.count_caught_errors()
    config.check()
    use_packaged_models()  # before any client is made (the layer's SDK data: interlude/adapters/sdk_data.py)

if TYPE_CHECKING:
    from interlude.composition import Services
    from interlude.store.facade import Store
    from interlude.store.tenant_standing import TenantStanding

# A turn stops taking pages with this much of its time left (a page takes seconds; the checkpoint and the next
# turn's message, less).
MARGIN_MS = 120_000
RESOURCE_ID = "interlude-migrations"


@cache
def store() -> Store:
    # Every aggregate's store (the run models, pydantic) loads with the first turn that reads the table, as the import
    # loads what it does: the collector paused (it would walk them as they are made) and what they made frozen.
    with importing():
        from interlude.store.facade import Store

    cfg = settings()
    return Store(cfg.table_name, cfg.entries_table_name)


@cache
def _services() -> Callable[[], Services]:
    with importing():  # as store()
        from interlude.composition import services

    return services


def services() -> Services:
    """The application services, loaded with the first retention, search-keys or re-stamp turn (a migrations turn
    and the deploy's answer use none)."""
    return _services()()


def report(progress: migrations.Progress) -> None:
    title = progress.migration.title
    metrics.count("MigrationItems", progress.scanned, migration=title, measure="scanned")
    metrics.count("MigrationItems", progress.written, migration=title, measure="written")
    if progress.finished:
        logger.info("migration finished", extra={"migration": title})


def take_turn(context: Any) -> dict[str, Any]:
    margin = min(MARGIN_MS, context.get_remaining_time_in_millis() // 4)
    outcome = migrations.run_pending(
        store(), context.aws_request_id, lambda: context.get_remaining_time_in_millis() > margin, report
    )
    metrics.put("MigrationsPending", len(outcome.pending), "Count")
    if not outcome.complete:
        # Out of time: the next turn at once. Held by another runner: a look again once its lease could lapse.
        queue_turn(0 if outcome.busy is None else LEASE_S)
    summary = {"finished": outcome.finished, "pending": outcome.pending, "busy": outcome.busy}
    logger.info("migrations turn", extra=summary)
    return summary


@cache
def standing() -> TenantStanding:
    from interlude.store.tenant_standing import standing_of

    return standing_of(store(), clock.now)


def take_retention_turn(message: dict[str, Any], context: Any) -> None:
    """A turn of a finished run's retention (interlude.app.retention): its items stamped until a minute is left,
    the rest queued as the next turn. A run that moved meanwhile raises, and the message is taken again."""
    has_time = upkeep_time(standing(), tenant_of(message["runId"]), context.get_remaining_time_in_millis)
    if has_time is None:
        return
    after = services().retention.turn(message["runId"], message.get("after"), has_time)
    if after is not None:
        queue_run_retention(message["runId"], after)


def take_search_keys_turn(message: dict[str, Any], context: Any) -> None:
    """A turn of a tenant's search-keys job (interlude.app.search_keys): older runs indexed under keys declared
    searchable, until a minute is left; the next turn queued while runs remain, or once the declaration has settled."""
    from interlude.app.search_keys import NotYet

    has_time = upkeep_time(standing(), message["tenant"], context.get_remaining_time_in_millis)
    if has_time is None:
        return
    try:
        done = services().search_keys.turn(message["tenant"], has_time)
    except NotYet as wait:
        queue_search_keys(message["tenant"], wait.seconds)
        return
    if not done:
        queue_search_keys(message["tenant"])


def take_sweep_turn(message: dict[str, Any], context: Any) -> None:
    """A turn of the retention sweep (interlude.migrations.sweeps): pages until two minutes are left, then the next
    turn queued; nothing when another runner holds it."""
    from interlude.migrations import sweeps

    margin = min(MARGIN_MS, context.get_remaining_time_in_millis() // 4)
    whole = sweeps.sweep(
        store(),
        context.aws_request_id,
        bool(message.get("start")),
        lambda: context.get_remaining_time_in_millis() > margin,
        report,
    )
    if whole is False:
        queue_retention_sweep()


def take_restamp_turn(message: dict[str, Any], context: Any) -> None:
    """A turn of a tenant's re-stamp job (interlude.app.retention.Restamp): pages until a minute is left, then the
    next turn queued."""
    has_time = upkeep_time(standing(), message["tenant"], context.get_remaining_time_in_millis)
    if has_time is None:
        return
    done = services().restamp.turn(message["tenant"], message["generation"], has_time)
    if not done:
        queue_retention_restamp(message["tenant"], message["generation"])


TAKERS: dict[str, Callable[[dict[str, Any], Any], Any]] = {
    TURN["kind"]: lambda _, context: take_turn(context),
    RUN_RETENTION: take_retention_turn,
    SEARCH_KEYS: take_search_keys_turn,
    RETENTION_SWEEP: take_sweep_turn,
    RETENTION_RESTAMP: take_restamp_turn,
}


def take(record: Any, context: Any) -> Any:
    # A message of a kind this release does not know (a later release's job) fails, and after the queue's receives
    # waits in its dead letters: taken for a migrations turn, it would be acknowledged and its job lost.
    message = read_message(record.body, "migrations")
    taker = TAKERS.get(str(message.get("kind")))
    if taker is None:
        raise ValueError(f"a migrations message of a kind this release does not take: {message.get('kind')!r}")
    return taker(message, context)


def deployed(event: dict[str, Any]) -> dict[str, Any]:
    """The deploy's custom resource: a turn queued on create and update (nothing to undo on delete), answered either
    way, so CloudFormation never waits on it."""
    try:
        if event["RequestType"] != "Delete":
            queue_turn()
    except Exception as error:  # noqa: BLE001 - the deploy fails, saying why, rather than waiting an hour
        logger.exception("the migrations' first turn could not be queued")
        answer(event, "FAILED", f"the migrations' first turn could not be queued: {error}", RESOURCE_ID)
    else:
        answer(event, "SUCCESS", "the migrations' first turn is queued", RESOURCE_ID)
    return {}


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if "RequestType" in event:
        return deployed(event)
    if "Records" in event:
        return process_partial_response(
            event=event, record_handler=lambda record: take(record, context), processor=processor, context=context
        )
    queue_turn()
    return {"queued": True}
