"""The local stack's Scheduler (interlude.local.schedules): what one poll costs moto, whatever the group holds.

The pump polled ListSchedules and then GetSchedule for every schedule, on each poll (every write the stack served
wakes it): a group of thousands of deadline buckets and task checks cost thousands of calls a poll. It reads a
schedule again only when its modification date moved.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import boto3
from moto import mock_aws

from interlude.local.lambda_runtime import local_function_arn
from interlude.local.schedules import SchedulePump

GROUP = "pump-costs"
LATER = "at(2099-01-01T00:00:00)"


def schedule(client: Any, name: str, expression: str = LATER, update: bool = False) -> None:
    call = client.update_schedule if update else client.create_schedule
    call(
        Name=name,
        GroupName=GROUP,
        ScheduleExpression=expression,
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={"Arn": local_function_arn("timeouts"), "RoleArn": "arn:aws:iam::123456789012:role/r", "Input": "{}"},
    )


def polls(count: int) -> list[Counter[str]]:
    """The calls of each of three polls over `count` schedules not due: a first, a second, and one after one of them
    was changed."""
    with mock_aws():
        client = boto3.client("scheduler", region_name="us-east-1")
        client.create_schedule_group(Name=GROUP)
        for n in range(count):
            schedule(client, f"s{n}")
        pump = SchedulePump(GROUP)
        calls: Counter[str] = Counter()
        pump.client.meta.events.register("before-call.scheduler.*", lambda model, **_: calls.update([model.name]))
        seen = []
        for step in range(3):
            if step == 2:
                schedule(client, "s0", "at(2098-01-01T00:00:00)", update=True)
            calls.clear()
            assert pump.pump_once() == 0
            seen.append(Counter(calls))
        return seen


def test_a_poll_reads_only_the_schedules_new_or_changed_since_the_last():
    small, large = polls(5), polls(60)
    assert small[0] == Counter({"ListSchedules": 1, "GetSchedule": 5})
    assert large[0]["GetSchedule"] == 60
    # then none but the one changed, beside 5 schedules or 60 (two list pages): the list's pages only
    pages = large[0]["ListSchedules"]
    assert small[1] == Counter({"ListSchedules": 1})
    assert large[1] == Counter({"ListSchedules": pages})
    assert small[2] == Counter({"ListSchedules": 1, "GetSchedule": 1})
    assert large[2] == Counter({"ListSchedules": pages, "GetSchedule": 1})
