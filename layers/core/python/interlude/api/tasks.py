"""The task workers' routes (issue 15 item 2): POST /tasks:claim, /tasks/{taskToken}/complete, /fail, /heartbeat."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.adapters.scheduler import scheduler as scheduler_
from interlude.api.http import OPENWOP_VERSION, json_response, parsed, principal_for, raw_body
from interlude.api.routes import route
from interlude.composition import services
from interlude.config import settings
from interlude.domain.models.tasks import (
    ClaimedTask,
    ClaimTaskRequest,
    CompleteTaskRequest,
    FailTaskRequest,
    HeartbeatRequest,
    TaskHeld,
    TaskSettled,
)
from interlude.domain.written_numbers import spellings
from interlude.engine.deadlines import Deadline


def schedule(run_id: str, deadline: Deadline) -> Any:
    """A task check's one-time schedule; none without a scheduler (a bare handler: claims then never lapse)."""
    scheduler = scheduler_.from_env()
    return scheduler.ensure(run_id, deadline) if scheduler is not None else None


def unschedule(run_id: str, deadline: Deadline) -> Any:
    """A task check's schedule deleted once its attempt has ended (gone already: fired, or never made, is fine)."""
    scheduler = scheduler_.from_env()
    return scheduler.delete(run_id, deadline) if scheduler is not None else None


@route("claimTask")
def claim_task() -> Response:
    principal = principal_for("claimTask")
    request = parsed(ClaimTaskRequest)
    # A deployment may hold its long polls shorter (INTERLUDE_MAX_POLL_SECONDS), as pollRunEvents does.
    wait = min(float(request.waitSeconds), settings().max_poll_seconds)
    got = services().tasks.claim(principal, list(request.queues), wait, schedule)
    if got is None:
        return Response(status_code=204, headers={"OpenWOP-Version": OPENWOP_VERSION})
    return json_response(200, ClaimedTask.model_validate(got))


@route("completeTask")
def complete_task(taskToken: str) -> Response:
    principal = principal_for("completeTask")
    request = parsed(CompleteTaskRequest)
    written = spellings(raw_body())
    return settled(services().tasks.complete(principal, taskToken, request.output, unschedule, written))


@route("failTask")
def fail_task(taskToken: str) -> Response:
    principal = principal_for("failTask")
    request = parsed(FailTaskRequest)
    return settled(services().tasks.fail(principal, taskToken, request.error, request.retryable, unschedule))


def settled(outcome: dict[str, Any]) -> Response:
    # `attempt` and `retryInSeconds` only when the task goes back to its queue.
    return json_response(200, TaskSettled.model_validate(outcome).model_dump(mode="json", exclude_none=True))


@route("heartbeatTask")
def heartbeat_task(taskToken: str) -> Response:
    principal = principal_for("heartbeatTask")
    parsed(HeartbeatRequest, optional=True)
    return json_response(200, TaskHeld.model_validate(services().tasks.heartbeat(principal, taskToken, schedule)))
