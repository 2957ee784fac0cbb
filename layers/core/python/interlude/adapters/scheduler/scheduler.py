"""The EventBridge Scheduler adapter: create and delete one-time deadline schedules. The only boto3 here.

Every schedule is built the same way (shared/reference/reliability-bar.md §5.2): `at(...)` in UTC, flexible
window OFF, ActionAfterCompletion DELETE, the retry policy and dead-letter queue wiring declares, targeting
the `timeouts` function through the scheduler's execution role, with the deadline (run, purpose, occurrence,
due) as its input. Names are derived from the deadline, so a second create is a ConflictException (already
there: fine) and a delete of a schedule that already fired is a ResourceNotFoundException (fine).
"""

from __future__ import annotations

import json
from typing import Any

import boto3
from botocore.exceptions import ClientError

from interlude import wiring
from interlude.adapters.scheduler.names import at_expression, schedule_name
from interlude.config.scheduler import SchedulerSettings, scheduler_settings
from interlude.engine.deadlines import Deadline


class Scheduler:
    def __init__(self, settings: SchedulerSettings, client: Any = None) -> None:
        self.settings = settings
        self.client = client or boto3.client("scheduler")

    def request(self, run_id: str, deadline: Deadline) -> dict[str, Any]:
        """The CreateSchedule request for a deadline (also what the infra and integration tests inspect)."""
        name = schedule_name(run_id, deadline)
        spec = wiring.SCHEDULES
        return {
            "Name": name,
            "GroupName": self.settings.group,
            "ClientToken": name,
            "Description": f"interlude {deadline.purpose} deadline of run {run_id}"[:512],
            "ScheduleExpression": at_expression(deadline.due),
            "ScheduleExpressionTimezone": "UTC",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "ActionAfterCompletion": "DELETE",
            "State": "ENABLED",
            "Target": {
                "Arn": self.settings.target_arn,
                "RoleArn": self.settings.role_arn,
                "Input": json.dumps(deadline.as_input(run_id), separators=(",", ":"), sort_keys=True, allow_nan=False),
                "RetryPolicy": {
                    "MaximumRetryAttempts": spec.max_retry_attempts,
                    "MaximumEventAgeInSeconds": spec.max_event_age_s,
                },
                "DeadLetterConfig": {"Arn": self.settings.dead_letter_arn},
            },
        }

    def ensure(self, run_id: str, deadline: Deadline) -> bool:
        """Create the deadline's schedule; False when it already exists."""
        try:
            self.client.create_schedule(**self.request(run_id, deadline))
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConflictException":
                return False
            raise
        return True

    def delete(self, run_id: str, deadline: Deadline) -> bool:
        """Delete the deadline's schedule; False when it was already gone (fired, or never created)."""
        try:
            self.client.delete_schedule(Name=schedule_name(run_id, deadline), GroupName=self.settings.group)
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ResourceNotFoundException":
                return False
            raise
        return True


_cached: tuple[SchedulerSettings | None, Scheduler | None] = (None, None)


def from_env() -> Scheduler | None:
    """The process's Scheduler (None without one), rebuilt when its settings are read anew (tests switch them)."""
    global _cached
    settings = scheduler_settings()
    if settings is None:
        return None
    if _cached[0] != settings or _cached[1] is None:
        _cached = (settings, Scheduler(settings))
    return _cached[1]
