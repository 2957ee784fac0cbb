"""Lambda entry point for EventBridge Scheduler's deadline schedules (one-time): a bucket schedule's input names a
partition of the due index, whose deadlines it fires side by side (ADR 0132); a schedule of one deadline (made by a
release before that, or a reminder's, a task check's, a deferred deadline handed back) has the deadline as its input."""

from __future__ import annotations

import os

# Pydantic looks for plugins by scanning every installed distribution's entry points on its first model; none is
# used here, and the scan is a noticeable part of a cold start. An environment that sets it keeps its own value.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from interlude.coldstart import collector_paused

with collector_paused():
    from functools import cache
    from typing import Any

    from aws_lambda_powertools import Logger

    from interlude import config, wiring
    from interlude.adapters import metrics
    from interlude.adapters.held_work import deadline_admitted
    from interlude.adapters.scheduler.buckets import DUE_SECOND, SHARD
    from interlude.app.audit import AuditTrail
    from interlude.composition import Services, audit_trail, services
    from interlude.config import settings
    from interlude.domain import clock, formats
    from interlude.sdk_clients import use_packaged_models
    from interlude.store.due_index import DueIndex
    from interlude.store.tenant_standing import TenantStanding, standing_of
    from interlude.store.transactions import TransactionalTable

    logger = Logger(service="interlude-timeouts")
    metrics.count_caught_errors()
    config.check()


@cache
def audit() -> AuditTrail:
    # The audit sweep, the one invocation every deployment gets every minute, reads no run: the trail over the
    # table's transactions alone.
    return audit_trail(sweep_store())


@cache
def sweep_store() -> TransactionalTable:
    return TransactionalTable(settings().table_name)


@cache
def run_services() -> Services:
    # Loaded by the first invocation about a run (a deadline, a reminder, a task check): the run services, the engine
    # and the run model. The engine's run rules by name: a deadline applied moves its run.
    import interlude.app.runs  # noqa: F401
    import interlude.engine.run  # noqa: F401
    from interlude.composition import compose

    use_packaged_models()  # before any client is made (the layer's SDK data: interlude/adapters/sdk_data.py)
    compose()
    return services()


@cache
def standing() -> TenantStanding:
    return standing_of(sweep_store(), clock.now)


@logger.inject_lambda_context(clear_state=True, correlation_id_path="runId")
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if event.get("sweep") == "audit-checkpoints":  # wiring.AUDIT_CHECKPOINT_SWEEP, every minute
        made = audit().checkpoint_pending(early_s=wiring.AUDIT_CHECKPOINT_SWEEP.every_s)
        logger.info("audit checkpoints swept", extra={"checkpoints": made})
        return {"checkpoints": made}
    if event.get("sweep") == "retention":  # wiring.RETENTION_SWEEP, daily: the sweep's turns run in migrate
        from interlude.adapters.migration_turns import queue_retention_sweep

        queue_retention_sweep(start=True)
        return {"queued": True}
    # A schedule's input in a format this release does not read (a later release's) fails: Scheduler retries it, and
    # after its retries it waits in the dead-letter queue, where it is not lost as a misread one would be.
    formats.check("deadline schedule input", event.get(formats.FORMAT_FIELD))
    if DUE_SECOND in event:
        return fire_bucket(int(event[DUE_SECOND]), int(event[SHARD]))
    return fired(event)


@cache
def due_index() -> DueIndex:
    store = run_services().store
    return DueIndex(store.table, store.client)


def fire_bucket(second: int, shard: int) -> dict[str, Any]:
    """Fire every deadline listed in one bucket of the due index, side by side. Each fires as a schedule of its own
    would (`fired`); if any fails, the others still fire and then the invocation fails, so Scheduler invokes the
    bucket again and the deadlines applied already are no-ops (Runs.fire_deadline)."""
    from interlude.adapters.batch import side_by_side  # the thread pool, with the first bucket

    listed = due_index().due(second, shard)
    outcomes = side_by_side(fired_or_failure, listed, wiring.DUE_BUCKET_WORKERS)
    failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    logger.info(
        "deadline bucket fired",
        extra={"dueSecond": second, "shard": shard, "deadlines": len(listed), "failed": len(failures)},
    )
    if failures:
        raise failures[0]
    return {"deadlines": len(listed), "events": sum(int(outcome.get("events", 0)) for outcome in outcomes)}


def fired_or_failure(body: dict[str, Any]) -> dict[str, Any] | BaseException:
    # Every line about a deadline carries its run id, also as the correlation id (this thread's keys alone).
    run_id = body.get("runId")
    logger.thread_safe_append_keys(runId=run_id, correlation_id=run_id)
    try:
        return fired(body)
    except Exception as exc:
        logger.exception("a deadline of the bucket failed; the bucket is invoked again")
        return exc
    finally:
        logger.thread_safe_remove_keys(["runId", "correlation_id"])


def fired(event: dict[str, Any]) -> dict[str, Any]:
    """One deadline's input: a deadline, a reminder or a task check."""
    if not deadline_admitted(standing(), event):
        # Deferred for the tenant's resume (handed back to the scheduler then), or dropped: the tenant is going.
        return {"events": 0, "deferred": True}
    if event.get("purpose") == "reminder":
        # A gate's reminder (issue 14): no state changes; its non-voters are queued for the notify function.
        queued = run_services().notification_outbox.enqueue_reminders(event)
        logger.info("reminder fired", extra={"runId": event.get("runId"), "queued": queued})
        metrics.count("DeadlinesFired", purpose="reminder")
        return {"events": 0, "queued": queued}
    if event.get("purpose") == "task":
        # A task claim's check (issue 15 item 2): its lease or deadline lapsed, or its outcome is yet to land.
        written = run_services().tasks.check(event)
        logger.info("task check fired", extra={"runId": event.get("runId"), "events": written})
        metrics.count("DeadlinesFired", purpose="task")
        return {"events": written}
    written = run_services().runs.fire_deadline(event)
    logger.info(
        "deadline fired", extra={"runId": event.get("runId"), "purpose": event.get("purpose"), "events": written}
    )
    metrics.count("DeadlinesFired", purpose=event.get("purpose", "unknown"))
    return {"events": written}
