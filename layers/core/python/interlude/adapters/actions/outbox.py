"""The dispatch outbox handler that queues requested actions (core.http) on the actions queue.

Runs for every event-log item of the table stream (at least once, in any order). A record delivered twice queues
the same message twice; the effect record (store.effects) turns the copy into a no-op.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import boto3

from interlude.config.actions import action_settings
from interlude.engine.actions import ACTION_REQUESTED
from interlude.engine.tasks import TASK

SQS_BATCH = 10


@cache
def _sqs() -> Any:
    return boto3.client("sqs")


def action_message(run_id: str, event: dict[str, Any]) -> dict[str, Any]:
    """What the worker is told: which visit of which node, and its effect; the request stays in the run state."""
    payload = event.get("payload") or {}
    return {
        "v": 1,
        "runId": run_id,
        "nodeId": payload.get("nodeId"),
        "visit": payload.get("visit"),
        "effectId": payload.get("effectId"),
    }


def queue_actions(service: Any, run_id: str, events: list[dict[str, Any]]) -> None:
    # A task (engine/tasks.py) waits on its queue for the tenant's workers (interlude.app.tasks), not here.
    messages = [
        action_message(run_id, e)
        for e in events
        if e.get("type") == ACTION_REQUESTED and (e.get("payload") or {}).get("kind") != TASK
    ]
    if not messages:
        return
    queue_url = action_settings().queue_url
    if not queue_url:
        raise RuntimeError("ACTION_QUEUE_URL is not set: actions cannot be queued")
    for start in range(0, len(messages), SQS_BATCH):
        chunk = messages[start : start + SQS_BATCH]
        result = _sqs().send_message_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(i), "MessageBody": json.dumps(m, separators=(",", ":"), allow_nan=False)}
                for i, m in enumerate(chunk)
            ],
        )
        if result.get("Failed"):
            # The stream record is retried; messages already queued go again (the effect record absorbs them).
            raise RuntimeError(f"{len(result['Failed'])} action message(s) could not be queued")
