"""What the notification routes answer: a run's notifications and the tenant's Slack settings.

Apart from interlude.domain.models.responses (which says why), so only the requests that answer them build them.
"""


from typing import Literal

from interlude.domain.models.responses import Answer, Omitted


class NotificationEntry(Answer):
    """One notification over one channel (issue 14): who, what, when, how, and what came of it."""

    notificationId: str
    principalId: str
    purpose: str
    nodeId: str
    interruptId: str
    queuedAt: str = Omitted()
    status: Literal["queued", "sending", "pending", "sent", "skipped", "dead"]
    attempts: int
    channel: Literal["email", "slack"] | None
    outcome: str
    at: str = Omitted()
    errorClass: str = Omitted()
    reason: str = Omitted()
    # The gate named more recipients than one visit notifies (docs/limits.md): some were not told.
    recipientsCut: bool = Omitted()


class RunNotifications(Answer):
    runId: str
    notifications: list[NotificationEntry]


class SlackConfigured(Answer):
    tenant: str
    configured: Literal["webhook", "bot-token", "signing-secret"]
    webhookHost: str = Omitted()
