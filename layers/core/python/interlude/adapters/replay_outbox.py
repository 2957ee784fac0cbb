"""How a replay (app.replay) makes its messages again and queues them: the messages the dispatch outbox queued the
first time (a webhook delivery, a callback notice, a notification), made by the same code, so the worker that takes
one finds the same unit (the same delivery id, notice id, notification id) and claims its next attempt."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from interlude.adapters.delivery import notices as callback_notices
from interlude.adapters.delivery.outbox import link_minter
from interlude.adapters.delivery.subscriptions import webhook_message
from interlude.adapters.notify.messages import queue_message as notification_message
from interlude.adapters.queues import send_messages
from interlude.config.delivery import delivery_settings
from interlude.config.notify import notify_settings

if TYPE_CHECKING:
    from interlude.app.ports import KeyLookup
    from interlude.app.replay import Queue
    from interlude.domain.clock import Clock
    from interlude.domain.models.run import RunState


@dataclass
class ReplayOutbox:
    # The keys a decision link is minted for, and the clock that tells whether the run's creating key still stands.
    keys: KeyLookup
    clock: Clock

    def webhook_delivery(self, webhook_id: str, run_id: str, event: dict[str, Any]) -> dict[str, Any]:
        return webhook_message(webhook_id, run_id, event)

    def notice_id(self, run_id: str, sequence: int) -> str:
        return callback_notices.notice_id(run_id, sequence)

    def notices(self, state: RunState, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The callback notices of `events` as queued for the run's callbackUrl (a decision link minted as the
        first time: its life starts when its gate was raised)."""
        if not state.callbackUrl:
            return []
        minter = link_minter(self.keys, self.clock, state) if any(e.get("type") == "interrupt.requested" for e in events) else None
        built = callback_notices.build_notices(state, events, minter, delivery_settings().public_base_url)
        return [callback_notices.queue_message(state.tenant, state.callbackUrl, n) for n in built]

    def bundled(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        return callback_notices.bundle_message(messages)

    def notification(self, tenant: str, run_id: str, record: dict[str, Any]) -> dict[str, Any]:
        """A notification's message made from its record (an item written before messages were kept with it)."""
        return notification_message(
            tenant, run_id, record["nodeId"], record["interruptId"], record["principalId"], record["purpose"]
        )

    def send(self, queue: Queue, tenant: str, messages: list[dict[str, Any]]) -> None:
        url = (notify_settings() if queue == "notifications" else delivery_settings()).queue_url
        if not url:
            raise RuntimeError(f"the {queue} queue's URL is not set: a replayed unit cannot be queued")
        send_messages(url, messages, f"replayed {queue} message", tenant)
