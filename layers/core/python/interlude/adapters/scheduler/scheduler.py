"""The EventBridge Scheduler adapter: create and delete one-time deadline schedules. The only Scheduler client here.

Every schedule is built the same way (shared/reference/reliability-bar.md §5.2): `at(...)` in UTC, flexible
window OFF, ActionAfterCompletion DELETE, the retry policy and dead-letter queue wiring declares, targeting
the `timeouts` function through the scheduler's execution role, with the deadline (run, purpose, occurrence,
due) as its input, or a bucket's: the second and shard of the due index whose deadlines it fires (ADR 0132). Names
are derived from the deadline or the bucket, so a second create is a ConflictException (already there: fine) and a
delete of a schedule that already fired is a ResourceNotFoundException (fine).
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from interlude import sdk_clients, wiring
from interlude.adapters.scheduler.buckets import bucket_input
from interlude.adapters.scheduler.names import (
    LEGACY_PREFIXES,
    at_expression,
    bucket_schedule_name,
    legacy_schedule_name,
    schedule_name,
    tenant_prefix,
)
from interlude.config.scheduler import SchedulerSettings, scheduler_settings
from interlude.domain.ids import tenant_of
from interlude.engine.deadlines import Deadline

# The buckets a process remembers having made (ADR 0132: a bucket's create is made once per process, not once per
# deadline); a day of one-second buckets in every shard at a busy pace is far more than a process meets.
BUCKETS_REMEMBERED = 4096


class Scheduler:
    def __init__(self, settings: SchedulerSettings, client: Any = None) -> None:
        self.settings = settings
        self.client = client or sdk_clients.client("scheduler")
        # (second, shard) of the bucket schedules this process made or found made.
        self._buckets_made: set[tuple[int, int]] = set()

    def request(self, run_id: str, deadline: Deadline) -> dict[str, Any]:
        """The CreateSchedule request for a deadline (also what the infra and integration tests inspect)."""
        description = f"interlude {deadline.purpose} deadline of run {run_id}"
        return self._request(schedule_name(run_id, deadline), deadline.due, deadline.as_input(run_id), description)

    def _request(self, name: str, due: float, body: dict[str, Any], description: str) -> dict[str, Any]:
        spec = wiring.SCHEDULES
        return {
            "Name": name,
            "GroupName": self.settings.group,
            "ClientToken": name,
            "Description": description[:512],
            "ScheduleExpression": at_expression(due),
            "ScheduleExpressionTimezone": "UTC",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "ActionAfterCompletion": "DELETE",
            "State": "ENABLED",
            "Target": {
                "Arn": self.settings.target_arn,
                "RoleArn": self.settings.role_arn,
                "Input": json.dumps(body, separators=(",", ":"), sort_keys=True, allow_nan=False),
                "RetryPolicy": {
                    "MaximumRetryAttempts": spec.max_retry_attempts,
                    "MaximumEventAgeInSeconds": spec.max_event_age_s,
                },
                "DeadLetterConfig": {"Arn": self.settings.dead_letter_arn},
            },
        }

    def ensure(self, run_id: str, deadline: Deadline) -> bool:
        """Create the deadline's schedule; False when it already exists."""
        return self._create(self.request(run_id, deadline))

    def ensure_bucket(self, second: int, shard: int) -> bool:
        """Create the schedule of the deadlines due in `second` listed in `shard`, at that second; False when it
        already exists (made by another process, or by this process before: then no call is made)."""
        if (second, shard) in self._buckets_made:
            return False
        name = bucket_schedule_name(second, shard)
        body = bucket_input(second, shard)
        made = self._create(self._request(name, second, body, f"interlude deadlines due at {second}, shard {shard}"))
        if len(self._buckets_made) >= BUCKETS_REMEMBERED:
            self._buckets_made.clear()  # the buckets of seconds long past go with the rest: one call each, at worst
        self._buckets_made.add((second, shard))
        return made

    def hand_back(self, name: str, body: dict[str, Any], due: float) -> bool:
        """Schedule `body` (a deadline's input, deferred while its tenant was suspended) to reach the target at `due`
        under `name` (names.handed_back_name); False when that schedule exists already."""
        return self._create(self._request(name, due, body, f"interlude deadline of run {body.get('runId')}, deferred"))

    def _create(self, request: dict[str, Any]) -> bool:
        try:
            self.client.create_schedule(**request)
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConflictException":
                return False
            raise
        return True

    def delete(self, run_id: str, deadline: Deadline) -> bool:
        """Delete the deadline's schedule; False when it was already gone (fired, or never created). One made before
        0.2.0 is named without the tenant (names.legacy_schedule_name): not found under the name of now, it is
        deleted under that one, so a decision made after an upgrade still cancels it."""
        return self._delete(schedule_name(run_id, deadline)) or self._delete(legacy_schedule_name(run_id, deadline))

    def _delete(self, name: str) -> bool:
        try:
            self.client.delete_schedule(Name=name, GroupName=self.settings.group)
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ResourceNotFoundException":
                return False
            raise
        return True

    def tenant_schedules(self, tenant: str) -> list[str]:
        """The names of every schedule of the tenant's runs: found by the tenant's name prefix (names.tenant_prefix),
        and among the schedules made before names carried it (names.LEGACY_PREFIXES: every tenant's, fewer as they
        fire, since none is made so any more), each one's input read to be sure it names one of the tenant's runs."""
        found = [
            summary["Name"]
            for prefix in (tenant_prefix(tenant), *LEGACY_PREFIXES)
            for page in self.client.get_paginator("list_schedules").paginate(GroupName=self.settings.group, NamePrefix=prefix)
            for summary in page.get("Schedules", [])
        ]
        return [name for name in found if self._names_tenants_run(name, tenant)]

    def delete_schedules(self, names: list[str]) -> int:
        """Delete the schedules named; how many were still there."""
        return sum(self._delete(name) for name in names)

    def _names_tenants_run(self, name: str, tenant: str) -> bool:
        try:
            schedule = self.client.get_schedule(Name=name, GroupName=self.settings.group)
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ResourceNotFoundException":
                return False
            raise
        run_id = json.loads(schedule.get("Target", {}).get("Input") or "{}").get("runId")
        return isinstance(run_id, str) and "/" in run_id and tenant_of(run_id) == tenant


_cached: tuple[SchedulerSettings | None, Scheduler | None] = (None, None)


def from_env() -> Scheduler | None:
    """The process's Scheduler (None without one), rebuilt when its settings are read anew (tests switch them, and a
    fresh instance forgets the buckets it made: interlude.local.lambda_runtime.fresh_instances)."""
    global _cached
    settings = scheduler_settings()
    if settings is None:
        return None
    if _cached[0] is not settings or _cached[1] is None:
        _cached = (settings, Scheduler(settings))
    return _cached[1]
