"""Lambda entry point of the operator surface (issue 30 item 6). Invoked by the operator's IAM principal with
lambda:InvokeFunction (`interlude tenants --stack NAME`; locally, the local stack's Lambda endpoint), never by a route,
queue or schedule, so no tenant key reaches it. The event is one operation (interlude.domain.models.operator); the
answer is its result, or a refusal `{error, message, details?}` named by its code. A call stops taking steps with a
minute of its time left; a resume or a deletion goes on from its checkpoint at the next call."""

from __future__ import annotations

import os

# Pydantic looks for plugins by scanning every installed distribution's entry points on its first model; none is
# used here, and the scan is a noticeable part of a cold start. An environment that sets it keeps its own value.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from interlude.coldstart import defer_unused_modules, importing

with importing():
    defer_unused_modules()  # before the first import that would load one (interlude/coldstart.py)
    from collections.abc import Callable
    from functools import cache
    from typing import Any

    from aws_lambda_powertools import Logger

    from interlude import config, sdk_clients
    from interlude.adapters.live_connections import ApiGatewayConnections
    from interlude.adapters.scheduler import scheduler
    from interlude.adapters.tenant_outside import TenantOutside
    from interlude.app.tenant_lifecycle import TenantLifecycle
    from interlude.config import settings
    from interlude.domain import clock
    from interlude.domain.errors import DomainError, Invalid
    from interlude.domain.models import operator
    from interlude.domain.validation import parse
    from interlude.store.facade import Store
    from interlude.store.tenants import TenantRecords

    logger = Logger(service="interlude-admin")
    config.check()
    sdk_clients.use_packaged_models()  # before any client is made (the layer's SDK data: interlude/adapters/sdk_data.py)

MARGIN_MS = 60_000


@cache
def lifecycle() -> TenantLifecycle:
    cfg = settings()
    store = Store(cfg.table_name, cfg.entries_table_name)
    connections = ApiGatewayConnections(cfg.live_endpoint) if cfg.live_endpoint else None
    outside = TenantOutside(store, scheduler.from_env(), sdk_clients.client("secretsmanager"), clock.now, connections)
    return TenantLifecycle(store, TenantRecords(store), outside, clock.now, cfg.tenant_deletion_grace_seconds)


def perform(event: Any, more_time: Callable[[], bool]) -> dict[str, Any]:
    name = event.get("operation") if isinstance(event, dict) else None
    model = operator.OPERATIONS.get(name) if isinstance(name, str) else None
    if model is None:
        raise Invalid(f"operation is one of {sorted(operator.OPERATIONS)}", {"field": "operation"})
    request = parse(model, event, "the request")
    tenants = lifecycle()
    if isinstance(request, operator.CreateTenant):
        return tenants.create(request.tenant, request.subjectId, list(request.scopes))
    if isinstance(request, operator.ListTenants):
        return tenants.list(request.limit, request.after)
    if isinstance(request, operator.SuspendTenant):
        return tenants.suspend(request.tenant, request.reason)
    if isinstance(request, operator.ResumeTenant):
        return tenants.resume(request.tenant, more_time, request.handBackOnly)
    if isinstance(request, operator.DeleteTenant):
        return tenants.delete(request.tenant, more_time)
    assert isinstance(request, operator.TenantUsage)
    return tenants.usage(request.tenant, request.month)


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    margin = min(MARGIN_MS, context.get_remaining_time_in_millis() // 4)
    asked = {"operation": event.get("operation"), "tenant": event.get("tenant")} if isinstance(event, dict) else {}
    try:
        answer = perform(event, lambda: context.get_remaining_time_in_millis() > margin)
    except DomainError as refused:
        logger.info("operator request refused", extra={**asked, "code": refused.code})
        return {"error": refused.code, "message": refused.message, **({"details": refused.details} if refused.details else {})}
    logger.info("operator request done", extra=asked)
    return answer
