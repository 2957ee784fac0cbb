"""The local stack's EventBridge Scheduler: fires due one-time schedules that moto stores but never fires.

Reads the schedule group wiring declares from moto's scheduler, and for every `at(...)` schedule whose time
has come by the process clock (interlude.domain.clock, so an injected offset counts) invokes the real target
handler (functions/<target>/handler.py) with the schedule's Input, as Scheduler would. Then it honours the
schedule's settings: ActionAfterCompletion DELETE deletes it after the invocation; a failed invocation is
retried on later ticks up to the RetryPolicy's MaximumRetryAttempts, then the input goes to the
DeadLetterConfig queue and the schedule is deleted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import boto3
from botocore.exceptions import ClientError

from interlude import wiring
from interlude.adapters.scheduler.names import parse_at
from interlude.config.runtime import runtime_settings
from interlude.domain import clock
from interlude.local import LOCAL_ACCOUNT
from interlude.local.lambda_runtime import FUNCTION_NAME_PREFIX, invoke, local_function_arn
from interlude.local.pump import SCHEDULER, Pump

# Scheduler fires an `at(...)` schedule once its second has passed; the pump wakes this much after, not before it.
DUE_MARGIN_S = 0.01
# While a schedule waits and the process clock has an offset file, how often an idle pump re-reads the offset (a file
# read, no call to moto): `interlude clock advance` moves it without a write that would wake the pump.
CLOCK_CHECK_S = 0.5


class SchedulePump(Pump):
    """Each poll lists the group's schedules (ListSchedules: names, states and modification dates) and reads with
    GetSchedule only those it has not read at their current modification date: a poll of a group holding thousands of
    schedules (deadline buckets, task checks) costs its list pages, not a GetSchedule per schedule.

    Idle, it sleeps until the earliest `at` time among the schedules it read (none: until woken); a Scheduler write to
    moto's server wakes it sooner, and so does the process clock's offset moving."""

    def __init__(self, group: str, interval_s: float = 0.1) -> None:
        super().__init__("schedule-pump", interval_s, backs_off=True, carries=SCHEDULER)
        self.group = group
        self.client = boto3.client("scheduler")
        self.sqs = boto3.client("sqs")
        self._attempts: dict[str, int] = {}
        # name -> (LastModificationDate, the schedule as GetSchedule answered then, its `at` time or None)
        self._read: dict[str, tuple[Any, Mapping[str, Any], float | None]] = {}
        self.fired = 0
        self.dead_lettered = 0
        self._offset = 0.0

    def due_schedules(self) -> list[Mapping[str, Any]]:
        now = clock.now().timestamp()
        out: list[Mapping[str, Any]] = []
        listed: set[str] = set()
        pages = self.client.get_paginator("list_schedules").paginate(GroupName=self.group)
        for summary in (s for page in pages for s in page.get("Schedules", [])):
            name = summary["Name"]
            listed.add(name)
            if summary.get("State", "ENABLED") != "ENABLED":
                self._read.pop(name, None)  # never due while disabled; read again once enabled
                continue
            known = self._read.get(name)
            if known is None or known[0] != summary.get("LastModificationDate"):
                try:
                    got = self.client.get_schedule(Name=name, GroupName=self.group)
                except ClientError:
                    continue  # deleted meanwhile
                known = (got.get("LastModificationDate"), got, parse_at(got.get("ScheduleExpression", "")))
                self._read[name] = known
            _, schedule, at = known
            if at is not None and at <= now:
                out.append(schedule)
        for gone in self._read.keys() - listed:
            del self._read[gone]
        return out

    def sleep_s(self, backoff_s: float) -> float | None:
        self._offset = clock.offset_seconds()  # what the sleep's length assumed
        now = clock.now().timestamp()
        due = min((at for _, _, at in self._read.values() if at is not None), default=None)
        if due is not None and due <= now:
            # Due since the poll read the clock (the clock moved, or time passed, between the two): poll again after
            # the back-off, as before a sleep until a wake would miss it.
            return backoff_s
        return None if due is None else due - now + DUE_MARGIN_S

    def _idle_wait(self, seconds: float | None) -> bool:
        if seconds is None or not runtime_settings().clock_file:
            return super()._idle_wait(seconds)
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if super()._idle_wait(min(left, CLOCK_CHECK_S)):
                return True
            if clock.offset_seconds() != self._offset:
                return True  # what is due moved with the clock
        return False

    def pump_once(self) -> int:
        fired = 0
        for schedule in self.due_schedules():
            self.fire(schedule)
            fired += 1
        return fired

    def fire(self, schedule: Mapping[str, Any]) -> None:
        name = schedule["Name"]
        target = schedule["Target"]
        function = _function_of(target["Arn"])
        try:
            invoke(function, json.loads(target.get("Input") or "{}"))
        except Exception:
            self._attempts[name] = self._attempts.get(name, 0) + 1
            retries = (target.get("RetryPolicy") or {}).get("MaximumRetryAttempts", 185)
            if self._attempts[name] <= retries:
                return  # due still: the next tick tries again
            dead_letter = (target.get("DeadLetterConfig") or {}).get("Arn")
            if dead_letter:
                self.sqs.send_message(QueueUrl=self._queue_url(dead_letter), MessageBody=target.get("Input") or "{}")
                self.dead_lettered += 1
        else:
            self.fired += 1
        self._attempts.pop(name, None)
        if schedule.get("ActionAfterCompletion") == "DELETE":
            try:
                self.client.delete_schedule(Name=name, GroupName=self.group)
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "ResourceNotFoundException":
                    raise

    def _queue_url(self, arn: str) -> str:
        return self.sqs.get_queue_url(QueueName=arn.rsplit(":", 1)[1])["QueueUrl"]


def _function_of(arn: str) -> str:
    """`arn:aws:lambda:…:function:interlude-timeouts` → `timeouts` (the wiring name)."""
    name = arn.rsplit(":", 1)[1]
    return name.removeprefix(FUNCTION_NAME_PREFIX) if name.startswith(FUNCTION_NAME_PREFIX) else wiring.SCHEDULES.target


def create_local_deadline_resources() -> dict[str, str]:
    """The schedule group and dead-letter queue in moto; returns the managers' environment (wiring's names)."""
    client = boto3.client("scheduler")
    client.create_schedule_group(Name=wiring.LOCAL_SCHEDULE_GROUP)
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName=f"{wiring.LOCAL_SCHEDULE_GROUP}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    values = (
        wiring.LOCAL_SCHEDULE_GROUP,
        local_function_arn(wiring.SCHEDULES.target),
        f"arn:aws:iam::{LOCAL_ACCOUNT}:role/interlude-local-scheduler",
        dlq_arn,
    )
    return dict(zip(wiring.SCHEDULES.environment, values, strict=True))
