"""Lambda entry point for the table stream: forwards each new event-log item to the outbox queue (issue 26, S5)."""

from __future__ import annotations

import os

os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from interlude.coldstart import defer_unused_modules, importing

with importing():
    defer_unused_modules()  # before the first import that would load one (interlude/coldstart.py)
    from typing import Any

    from aws_lambda_powertools import Logger

    from interlude import config
    from interlude.adapters.outbox_feed import forward
    from interlude.config.queues import queue_settings

    logger = Logger(service="interlude-stream")
    config.check()


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # All or nothing: a batch that could not be queued whole raises, and the mapping delivers it again (bisecting
    # on repeated failure); what was queued before goes again, which the outbox absorbs.
    forward(queue_settings().outbox_url, event.get("Records") or [])
    return {"batchItemFailures": []}
