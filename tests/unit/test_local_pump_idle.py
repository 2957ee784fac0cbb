"""An idle local stack's pumps sleep until something can be due, and a poll costs the calls it needs
(interlude.local.pump, sqs_pump, schedules, pumps).

The queue and schedule pumps polled twice a second while idle (a message can become visible, or a schedule due,
without any write): an idle `interlude dev` spent 1.66 s of CPU every 30 s. A queue's pump now sleeps until the
earliest hidden message of its queue becomes visible (moto's, read in process), a schedule pump until the earliest
schedule it knows is due; a write wakes either sooner. Counted here: polls and calls, never durations.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from interlude import config
from interlude.config.runtime import CLOCK_FILE_ENV
from interlude.domain import clock
from interlude.local import sqs_pump
from interlude.local.lambda_runtime import local_function_arn
from interlude.local.moto_server import LockedMotoServer
from interlude.local.pumps import StreamPump
from interlude.local.schedules import SchedulePump
from interlude.local.sqs_pump import QueuePump

# Long enough that an idle pump that backed off as before (0.05 s doubling up to 0.5 s) would poll several times.
NO_WAKE_S = 0.6


@pytest.fixture
def moto(monkeypatch) -> Iterator[LockedMotoServer]:
    server = LockedMotoServer().start()
    for name, value in {"AWS_ENDPOINT_URL": server.endpoint, "AWS_DEFAULT_REGION": "us-east-1",
                        "AWS_ACCESS_KEY_ID": "l", "AWS_SECRET_ACCESS_KEY": "l"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    try:
        yield server
    finally:
        server.stop()


def test_an_idle_queue_pump_sleeps_until_woken_or_until_a_hidden_message_is_visible_again(moto, monkeypatch) -> None:
    sqs = boto3.client("sqs")
    urls = {name: sqs.create_queue(QueueName=f"idle-{name}", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
            for name in ("empty", "delayed", "taken")}  # fmt: skip
    delivered: list[str] = []
    monkeypatch.setattr(sqs_pump, "invoke", lambda name, event: delivered.extend(r["body"] for r in event["Records"]))
    pumps = {name: QueuePump(name, url, next_visible=moto.next_visible) for name, url in urls.items()}
    # Nothing hidden: only a write can give it something
    assert pumps["empty"].sleep_s(0.5) is None
    # A delayed message is due when its delay ends; a received one when its visibility timeout does
    sqs.send_message(QueueUrl=urls["delayed"], MessageBody="later", DelaySeconds=5)
    assert 0 < pumps["delayed"].sleep_s(0.5) <= 5.1
    sqs.send_message(QueueUrl=urls["taken"], MessageBody="taken")
    sqs.receive_message(QueueUrl=urls["taken"], VisibilityTimeout=20)
    assert 10 < pumps["taken"].sleep_s(0.5) <= 20.1

    # Running and idle, it begins no poll until a message is sent to its queue, which it then delivers
    pump, url = pumps["empty"], urls["empty"]
    pump.start()
    try:
        assert pump.empty_poll_after(0, deadline=time.monotonic() + 10)
        idle_polls = pump.polls_begun()
        time.sleep(NO_WAKE_S)  # nothing written meanwhile
        assert pump.polls_begun() == idle_polls, "an idle queue pump polled without a wake"
        sqs.send_message(QueueUrl=url, MessageBody="now")
        assert pump.empty_poll_after(idle_polls + 1, deadline=time.monotonic() + 10)
        assert delivered == ["now"]
    finally:
        pump.stop()


@pytest.fixture
def clock_file(tmp_path, monkeypatch) -> Iterator:
    """The local clock (`interlude clock`) at its start, for this test alone."""
    path = tmp_path / "clock"
    clock.reset(path)
    monkeypatch.setenv(CLOCK_FILE_ENV, str(path))
    config.forget()
    yield path
    config.forget()


def one_shot(client, group: str, name: str, in_s: float) -> None:
    """A schedule of `group` firing the timeouts function once, `in_s` seconds from the local clock's now."""
    client.create_schedule(
        Name=name,
        GroupName=group,
        ScheduleExpression=f"at({clock.iso_epoch(clock.now().timestamp() + in_s)[:19]})",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={"Arn": local_function_arn("timeouts"), "RoleArn": "arn:aws:iam::123456789012:role/r", "Input": "{}"},
    )


def test_an_idle_schedule_pump_sleeps_until_its_next_schedule_and_wakes_when_the_clock_moves(clock_file) -> None:
    with mock_aws():
        client = boto3.client("scheduler", region_name="us-east-1")
        client.create_schedule_group(Name="idle")
        pump = SchedulePump("idle")
        assert pump.pump_once() == 0
        # No schedule: only a write can make one due
        assert pump.sleep_s(0.5) is None
        one_shot(client, "idle", "in-an-hour", 3600)
        assert pump.pump_once() == 0
        seconds = pump.sleep_s(0.5)
        assert seconds is not None
        assert 3500 < seconds <= 3601
        # `interlude clock advance` writes nothing to moto: the sleep ends when the offset moves, and the schedule fires
        clock.advance(clock_file, 3600)
        assert pump._idle_wait(seconds) is True
        assert [s["Name"] for s in pump.due_schedules()] == ["in-an-hour"]


def test_a_schedule_that_came_due_after_the_poll_read_the_clock_is_polled_again_not_slept_past(clock_file) -> None:
    # The clock moved between a poll and its sleep (`interlude clock advance` right after a schedule was read): the
    # schedule is due, not in the future, and no write will come to wake the pump.
    with mock_aws():
        client = boto3.client("scheduler", region_name="us-east-1")
        client.create_schedule_group(Name="raced")
        one_shot(client, "raced", "in-a-minute", 60)
        pump = SchedulePump("raced")
        assert pump.due_schedules() == []
        clock.advance(clock_file, 120)
        assert pump.sleep_s(0.5) == 0.5
        assert [s["Name"] for s in pump.due_schedules()] == ["in-a-minute"]


def test_an_idle_stream_poll_costs_an_iterator_and_a_read(monkeypatch) -> None:
    """The stream's shards are described once; each later poll asks an iterator and reads from it."""
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(TableName="idle-stream", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                              AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST",
                              StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})  # fmt: skip
        pump = StreamPump("idle-stream")
        calls: Counter[str] = Counter()
        for client in (pump.streams, pump.dynamodb):
            client.meta.events.register("before-call.*.*", lambda model, **_: calls.update([model.name]))
        polls: list[Counter[str]] = []
        for _ in range(3):
            calls.clear()
            assert pump.pump_once() == 0
            polls.append(Counter(calls))
    assert polls[0] == Counter({"DescribeTable": 1, "DescribeStream": 1, "GetShardIterator": 1, "GetRecords": 1})
    assert polls[1] == polls[2] == Counter({"GetShardIterator": 1, "GetRecords": 1})
