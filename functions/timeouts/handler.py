"""Lambda entry point for EventBridge Scheduler's deadline schedules (one-time, input = the deadline)."""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools import Logger

from interlude.config import settings
from interlude.service import Service
from interlude.store import Store

logger = Logger(service="interlude-timeouts")


@cache
def service() -> Service:
    cfg = settings()
    return Service(Store(cfg.table_name), step_budget=cfg.step_budget)


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    written = service().fire_deadline(event)
    logger.info(
        "deadline fired", extra={"runId": event.get("runId"), "purpose": event.get("purpose"), "events": written}
    )
    return {"events": written}
