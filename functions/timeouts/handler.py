"""Lambda entry point for EventBridge Scheduler's deadline schedules (one-time, input = the deadline)."""

from __future__ import annotations

import os

# Pydantic looks for plugins by scanning every installed distribution's entry points on its first model; none is
# used here, and the scan is a noticeable part of a cold start. An environment that sets it keeps its own value.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from interlude.coldstart import collector_paused

with collector_paused():
    from functools import cache
    from typing import TYPE_CHECKING, Any

    from aws_lambda_powertools import Logger

    from interlude import config, wiring
    from interlude.adapters import metrics
    from interlude.adapters.held_work import deadline_admitted
    from interlude.app import audit
    from interlude.composition import compose_audit
    from interlude.config import settings
    from interlude.domain import clock
    from interlude.store.tenant_standing import TenantStanding, standing_of
    from interlude.store.transactions import TransactionalTable

    if TYPE_CHECKING:
        from interlude.app.service import Service

    logger = Logger(service="interlude-timeouts")
    compose_audit()
    metrics.count_caught_errors()
    config.check()


@cache
def service() -> Service:
    # Loaded by the first invocation about a run (a deadline, a reminder, a task check): the service, the engine and
    # the run model. The audit sweep, the one invocation every deployment gets every minute, reads no run.
    # The engine by name: app/service.py loads it only where a run moves, and a deadline moves one.
    import interlude.engine.run  # noqa: F401
    from interlude.app.service import default_service
    from interlude.composition import compose

    compose()
    return default_service()


@cache
def sweep_store() -> TransactionalTable:
    return TransactionalTable(settings().table_name)


@cache
def standing() -> TenantStanding:
    return standing_of(sweep_store(), clock.now)


@logger.inject_lambda_context(clear_state=True, correlation_id_path="runId")
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if event.get("sweep") == "audit-checkpoints":  # wiring.AUDIT_CHECKPOINT_SWEEP, every minute
        made = audit.checkpoint_pending(sweep_store(), early_s=wiring.AUDIT_CHECKPOINT_SWEEP.every_s)
        logger.info("audit checkpoints swept", extra={"checkpoints": made})
        return {"checkpoints": made}
    if not deadline_admitted(standing(), event):
        # Deferred for the tenant's resume (handed back to the scheduler then), or dropped: the tenant is going.
        return {"events": 0, "deferred": True}
    if event.get("purpose") == "reminder":
        # A gate's reminder (issue 14): no state changes; its non-voters are queued for the notify function.
        from interlude.adapters.notify.outbox import enqueue_reminders

        queued = enqueue_reminders(service(), event)
        logger.info("reminder fired", extra={"runId": event.get("runId"), "queued": queued})
        metrics.count("DeadlinesFired", purpose="reminder")
        return {"events": 0, "queued": queued}
    if event.get("purpose") == "task":
        # A task claim's check (issue 15 item 2): its lease or deadline lapsed, or its outcome is yet to land.
        from interlude.app.tasks import check

        written = check(service(), event)
        logger.info("task check fired", extra={"runId": event.get("runId"), "events": written})
        metrics.count("DeadlinesFired", purpose="task")
        return {"events": written}
    written = service().fire_deadline(event)
    logger.info(
        "deadline fired", extra={"runId": event.get("runId"), "purpose": event.get("purpose"), "events": written}
    )
    metrics.count("DeadlinesFired", purpose=event.get("purpose", "unknown"))
    return {"events": written}
