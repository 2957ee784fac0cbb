"""The dispatch outbox handler that queues requested actions (core.http) on the actions queue.

Runs for every event-log item of the table stream (at least once, in any order). A record delivered twice queues
the same message twice; the effect record (store.effects) turns the copy into a no-op.
"""

from __future__ import annotations

from typing import Any

from interlude.adapters.queues import send_messages
from interlude.config.actions import action_settings
from interlude.domain.ids import tenant_of
from interlude.engine.effect_names import ACTION_REQUESTED, TASK


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


def queue_actions(run_id: str, events: list[dict[str, Any]]) -> None:
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
    send_messages(queue_url, messages, "action message", tenant_of(run_id))
