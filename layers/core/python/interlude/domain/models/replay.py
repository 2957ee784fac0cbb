"""Replays of what failed (issue 30 item 5): request bodies and answers."""


from typing import Literal

from pydantic import AwareDatetime, Field

from interlude.domain.models import Answer, Closed


class RecoverRequest(Closed):
    # The dead letters of a subscription dead-lettered at or after `since` (and at or before `until`, default now).
    since: AwareDatetime
    until: AwareDatetime | None = None


class Replayed(Answer):
    """One dead letter sent again: queued as the next attempt of the same unit (the same delivery id)."""

    status: Literal["queued"]
    # The attempt its worker makes next, and how many times the unit has been replayed (this one included).
    attempt: int = Field(ge=1)
    replay: int = Field(ge=1)
    runId: str
    deliveryId: str | None = Field(default=None, exclude_if=lambda value: value is None)
    webhookId: str | None = Field(default=None, exclude_if=lambda value: value is None)
    notificationId: str | None = Field(default=None, exclude_if=lambda value: value is None)


class Recovery(Answer):
    """A recovery: every dead letter of its scope sent again (queued), each once."""

    kind: Literal["webhook-deliveries", "callback-deliveries", "notifications"]
    status: Literal["running", "completed"]
    # Dead letters found when it started, those queued again, and those left (settled meanwhile, or unrebuildable).
    matched: int = Field(ge=0)
    queued: int = Field(ge=0)
    skipped: int = Field(ge=0)
    webhookId: str | None = Field(default=None, exclude_if=lambda value: value is None)
    runId: str | None = Field(default=None, exclude_if=lambda value: value is None)
    since: str | None = Field(default=None, exclude_if=lambda value: value is None)
    until: str | None = Field(default=None, exclude_if=lambda value: value is None)
    startedAt: str
    finishedAt: str | None = Field(default=None, exclude_if=lambda value: value is None)


class ActionRetried(Answer):
    """A run failed at its core.http action running again from there; the effect record decides the call."""

    runId: str
    nodeId: str
    effectId: str
    status: str
    attempt: int = Field(ge=1)
