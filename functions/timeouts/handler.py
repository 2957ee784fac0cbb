"""Lambda entry point for EventBridge Scheduler: the audit sweep (every minute, which also hands back the work a
tenant's resume left held: interlude.app.tenant_lifecycle), the retention sweep (daily), and the one-time schedules
of deadlines, reminders and task checks, which interlude.adapters.deadline_firing fires."""

from __future__ import annotations

import os

# Pydantic looks for plugins by scanning every installed distribution's entry points on its first model; none is
# used here, and the scan is a noticeable part of a cold start. An environment that sets it keeps its own value.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from interlude.coldstart import defer_unused_modules, importing

with importing():
    defer_unused_modules()  # before the first import that would load one (interlude/coldstart.py)
    from functools import cache
    from typing import TYPE_CHECKING, Any

    from aws_lambda_powertools import Logger

    from interlude import config, wiring
    from interlude.adapters import metrics
    from interlude.adapters.deadline_firing import DeadlineFiring
    from interlude.app.audit import AuditTrail
    from interlude.composition import Services, audit_trail, services
    from interlude.config import settings
    from interlude.domain import clock
    from interlude.sdk_clients import use_packaged_models
    from interlude.store.due_index import DueIndex
    from interlude.store.tenant_standing import TenantStanding, standing_of
    from interlude.store.tenants import TenantRecords
    from interlude.store.transactions import TransactionalTable

    logger = Logger(service="interlude-timeouts")
    metrics.count_caught_errors()
    config.check()

if TYPE_CHECKING:
    from interlude.app.tenant_lifecycle import TenantLifecycle

# The audit sweep hands held work back until this much of its time is left.
HAND_BACK_MARGIN_MS = 5_000


@cache
def audit() -> AuditTrail:
    # The audit sweep, the one invocation every deployment gets every minute, reads no run: the trail over the
    # table's transactions alone.
    return audit_trail(sweep_store())


@cache
def sweep_store() -> TransactionalTable:
    cfg = settings()
    return TransactionalTable(cfg.table_name, cfg.entries_table_name)


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
        # One Query of the records listed (none, nearly always): the tenants' lifecycle loads only when one is.
        left = TenantRecords(sweep_store()).handing_back()
        if not left:
            return {"checkpoints": made}
        handed = tenants().hand_back_left(left, lambda: context.get_remaining_time_in_millis() > HAND_BACK_MARGIN_MS)
        logger.info("held work a resume left handed back", extra={"handedBack": handed})
        return {"checkpoints": made, "handedBack": handed}
    if event.get("sweep") == "retention":  # wiring.RETENTION_SWEEP, daily: the sweep's turns run in migrate
        from interlude.adapters.migration_turns import queue_retention_sweep

        queue_retention_sweep(start=True)
        return {"queued": True}
    return firing().invoked(event)


@cache
def tenants() -> TenantLifecycle:
    # The tenants' lifecycle as far as the sweep needs it: the held work a resume left goes back to its queue, or, a
    # deadline, is fired here (this function is the schedules' target).
    from interlude.adapters.tenant_outside import TenantOutside
    from interlude.app.tenant_lifecycle import TenantLifecycle
    from interlude.store.facade import Store

    cfg = settings()
    # The store's facade: a held callbacks message goes back with its links minted anew, from its run (ADR 0190).
    store = Store(cfg.table_name, cfg.entries_table_name)
    outside = TenantOutside(store, None, None, clock.now, None, fire=lambda body: firing().invoked(body))
    return TenantLifecycle(store, TenantRecords(store), outside, clock.now, cfg.tenant_deletion_grace_seconds)


@cache
def due_index() -> DueIndex:
    store = run_services().store
    return DueIndex(store.table, store.client)


@cache
def firing() -> DeadlineFiring:
    return DeadlineFiring(services=run_services, due_index=due_index, standing=standing, logger=logger)
