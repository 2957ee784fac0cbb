"""What GET /runs/{runId}/deliveries answers: every delivery attempt of the run's callbacks and webhooks.

Apart from interlude.domain.models.responses (which says why), so only the requests that answer them build them.
"""


from typing import Literal

from interlude.domain.models.responses import Answer, Omitted


class DeliveryAttempt(Answer):
    noticeId: str = Omitted()
    webhookId: str = Omitted()
    type: str = Omitted()
    nodeId: str = Omitted()
    attempt: int = Omitted()
    at: str = Omitted()
    status: Literal["succeeded", "failed"] = Omitted()
    httpStatus: int = Omitted()
    errorClass: str = Omitted()
    elapsedMs: float = Omitted()
    final: bool = Omitted()


class RunDeliveries(Answer):
    runId: str
    callbackUrl: str | None
    deliveries: list[DeliveryAttempt]
