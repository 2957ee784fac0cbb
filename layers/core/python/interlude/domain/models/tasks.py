"""Request and answer bodies of the task workers' routes (issue 15 item 2; README "Task workers")."""


from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from interlude.domain.models import Closed
from interlude.domain.models.responses import Answer

# A claim names at most this many queues; long-polls at most MAX_WAIT_S; a worker's error message is at most
# MAX_ERROR_MESSAGE characters (its code MAX_ERROR_CODE); an output at most domain.budgets.MAX_VALUE_BYTES.
MAX_CLAIM_QUEUES = 10
MAX_WAIT_S = 20
MAX_ERROR_MESSAGE = 4096
MAX_ERROR_CODE = 128
QueueName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")]


class ClaimTaskRequest(Closed):
    queues: list[QueueName] = Field(min_length=1, max_length=MAX_CLAIM_QUEUES)
    waitSeconds: int = Field(default=0, ge=0, le=MAX_WAIT_S)


class CompleteTaskRequest(Closed):
    # Required, and any JSON value (null included): what the node's output becomes.
    output: Any = Field(...)


class WorkerError(Closed):
    message: str = Field(min_length=1, max_length=MAX_ERROR_MESSAGE)
    code: str | None = Field(default=None, min_length=1, max_length=MAX_ERROR_CODE)
    details: dict[str, Any] | None = None


class FailTaskRequest(Closed):
    # An object, or just its message.
    error: WorkerError | Annotated[str, StringConstraints(min_length=1, max_length=MAX_ERROR_MESSAGE)]
    retryable: bool = False


class HeartbeatRequest(Closed):
    """The heartbeat's body: nothing (or `{}`)."""


class ClaimedTask(Answer):
    taskToken: str
    runId: str
    nodeId: str
    nodeType: str
    queue: str
    config: Any
    input: Any
    attempt: int
    heartbeatTimeoutSeconds: int
    timeoutSeconds: int


class TaskSettled(Answer):
    runId: str
    nodeId: str
    status: Literal["completed", "failed", "retrying"]
    # Retrying: the attempt that comes next, and how long until it may be claimed.
    attempt: int | None = None
    retryInSeconds: float | None = None


class TaskHeld(Answer):
    runId: str
    nodeId: str
    heartbeatTimeoutSeconds: int
    leaseExpiresAt: str
