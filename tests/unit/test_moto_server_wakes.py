"""The local stack's moto server wakes its pumps on every write it serves, whoever makes it, and on no read: a client
polling a run costs the stack no round of polls, and what anything writes is carried at once (interlude.local.
moto_server)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ConnectionClosedError, EndpointConnectionError

from interlude.local.moto_server import LockedMotoServer, changes_something, written_service
from interlude.local.pump import DYNAMODB, SCHEDULER, SQS, Pump

# Long enough that a poll within the test's waits comes only from a wake, never from the pump's own interval.
NEVER_S = 600.0
NO_WAKE_S = 0.3


class Counting(Pump):
    def __init__(self, carries: str | None = None) -> None:
        super().__init__(f"counting-{carries}", interval_s=NEVER_S, backs_off=True, carries=carries)
        self.polled = threading.Semaphore(0)

    def pump_once(self) -> int:
        self.polled.release()
        return 0


@pytest.fixture
def table_and_pump() -> Iterator[tuple[object, Counting]]:
    server = LockedMotoServer().start()
    client = boto3.client("dynamodb", endpoint_url=server.endpoint, region_name="us-east-1",
                          aws_access_key_id="local", aws_secret_access_key="local")  # fmt: skip
    client.create_table(TableName="t", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")  # fmt: skip
    pump = Counting().start()
    assert pump.polled.acquire(timeout=10)  # its first poll, on starting
    try:
        yield client, pump
    finally:
        pump.stop()
        server.stop()


def test_a_write_wakes_the_pumps_and_a_read_does_not(table_and_pump) -> None:
    client, pump = table_and_pump
    client.put_item(TableName="t", Item={"pk": {"S": "a"}})
    assert pump.polled.acquire(timeout=10), "a PutItem did not wake the pump"
    client.get_item(TableName="t", Key={"pk": {"S": "a"}})
    client.query(TableName="t", KeyConditionExpression="pk = :a", ExpressionAttributeValues={":a": {"S": "a"}})
    assert not pump.polled.acquire(timeout=NO_WAKE_S), "a read woke the pump"
    client.transact_write_items(TransactItems=[{"Delete": {"TableName": "t", "Key": {"pk": {"S": "a"}}}}])
    assert pump.polled.acquire(timeout=10), "a transaction did not wake the pump"


def test_a_write_wakes_only_the_pumps_that_carry_its_service() -> None:
    """While the stack is busy, every pump woken by every write polled back to back: a table's write wakes the stream's
    pump, not the queues'; a queue's write the queues' pumps."""
    server = LockedMotoServer().start()
    kwargs = {"endpoint_url": server.endpoint, "region_name": "us-east-1", "aws_access_key_id": "l", "aws_secret_access_key": "l"}
    table, sqs = boto3.client("dynamodb", **kwargs), boto3.client("sqs", **kwargs)
    # moto's backends outlive a server in this process: names of this test's own
    table.create_table(TableName="by-service", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")  # fmt: skip
    url = sqs.create_queue(QueueName="by-service")["QueueUrl"]
    stream, queue = Counting(DYNAMODB).start(), Counting(SQS).start()
    try:
        assert stream.polled.acquire(timeout=10)
        assert queue.polled.acquire(timeout=10)
        table.put_item(TableName="by-service", Item={"pk": {"S": "a"}})
        assert stream.polled.acquire(timeout=10), "a PutItem did not wake the stream's pump"
        assert not queue.polled.acquire(timeout=NO_WAKE_S), "a PutItem woke a queue's pump"
        sqs.send_message(QueueUrl=url, MessageBody="m")
        assert queue.polled.acquire(timeout=10), "a SendMessage did not wake the queue's pump"
        assert not stream.polled.acquire(timeout=NO_WAKE_S), "a SendMessage woke the stream's pump"
    finally:
        stream.stop()
        queue.stop()
        server.stop()


@pytest.mark.parametrize(
    ("environ", "service"),
    [
        ({"HTTP_X_AMZ_TARGET": "DynamoDB_20120810.TransactWriteItems"}, DYNAMODB),
        ({"HTTP_X_AMZ_TARGET": "AmazonSQS.DeleteMessageBatch"}, SQS),
        ({"REQUEST_METHOD": "PUT", "PATH_INFO": "/schedules/s"}, SCHEDULER),
        ({"HTTP_X_AMZ_TARGET": "secretsmanager.PutSecretValue"}, None),
    ],
)
def test_which_pumps_a_write_is_for(environ, service) -> None:
    assert written_service(environ) == service


@pytest.mark.parametrize(
    ("environ", "changes"),
    [
        ({"HTTP_X_AMZ_TARGET": "DynamoDB_20120810.UpdateItem", "REQUEST_METHOD": "POST"}, True),
        ({"HTTP_X_AMZ_TARGET": "DynamoDB_20120810.BatchGetItem", "REQUEST_METHOD": "POST"}, False),
        ({"HTTP_X_AMZ_TARGET": "DynamoDBStreams_20120810.GetRecords", "REQUEST_METHOD": "POST"}, False),
        ({"HTTP_X_AMZ_TARGET": "AmazonSQS.SendMessageBatch", "REQUEST_METHOD": "POST"}, True),
        ({"HTTP_X_AMZ_TARGET": "AmazonSQS.ReceiveMessage", "REQUEST_METHOD": "POST"}, False),
        ({"REQUEST_METHOD": "POST", "PATH_INFO": "/schedules/s"}, True),  # Scheduler, a REST protocol
        ({"REQUEST_METHOD": "DELETE", "PATH_INFO": "/schedules/s"}, True),
        ({"REQUEST_METHOD": "GET", "PATH_INFO": "/schedules"}, False),
    ],
)
def test_what_counts_as_a_write(environ, changes) -> None:
    assert changes_something(environ) is changes


def test_a_queue_write_wakes_only_that_queues_pump_and_a_delete_wakes_none() -> None:
    """Every queue's pump received after every write to any queue: a third of the stack's calls to moto while it
    dispatched a backlog. A send or a visibility change wakes the pump of its queue; a delete gives no consumer
    anything to receive."""
    server = LockedMotoServer().start()
    kwargs = {"endpoint_url": server.endpoint, "region_name": "us-east-1", "aws_access_key_id": "l", "aws_secret_access_key": "l"}
    sqs = boto3.client("sqs", **kwargs)
    urls = {name: sqs.create_queue(QueueName=f"by-queue-{name}")["QueueUrl"] for name in ("a", "b")}
    pumps = {name: Counting(SQS) for name in urls}
    for name, pump in pumps.items():
        pump.target = f"by-queue-{name}"
        pump.start()
        assert pump.polled.acquire(timeout=10)
    try:
        sqs.send_message_batch(QueueUrl=urls["a"], Entries=[{"Id": "1", "MessageBody": "m"}])
        assert pumps["a"].polled.acquire(timeout=10), "a SendMessageBatch did not wake its queue's pump"
        assert not pumps["b"].polled.acquire(timeout=NO_WAKE_S), "a SendMessageBatch woke another queue's pump"
        handle = sqs.receive_message(QueueUrl=urls["a"], VisibilityTimeout=30)["Messages"][0]["ReceiptHandle"]
        sqs.change_message_visibility(QueueUrl=urls["a"], ReceiptHandle=handle, VisibilityTimeout=0)
        assert pumps["a"].polled.acquire(timeout=10), "a visibility change did not wake its queue's pump"
        sqs.delete_message(QueueUrl=urls["a"], ReceiptHandle=handle)
        assert not pumps["a"].polled.acquire(timeout=NO_WAKE_S), "a DeleteMessage woke a pump"
        assert not pumps["b"].polled.acquire(timeout=0)
    finally:
        for pump in pumps.values():
            pump.stop()
        server.stop()


def test_a_client_keeps_one_connection_across_its_calls_and_stop_closes_it() -> None:
    """Each call opened a TCP connection, and the server a thread, for one request (werkzeug's server closes every
    connection): ≈ 5 % of a busy stack's CPU. The server keeps the connection open; stopping it closes it, so a client
    of a stopped stack is refused, not served by a connection's thread."""
    server = LockedMotoServer().start()
    sqs = boto3.client(
        "sqs",
        endpoint_url=server.endpoint,
        region_name="us-east-1",
        aws_access_key_id="l",
        aws_secret_access_key="l",
        config=Config(retries={"max_attempts": 1}, connect_timeout=5, read_timeout=5),
    )
    url = sqs.create_queue(QueueName="kept-alive")["QueueUrl"]
    for n in range(5):
        sqs.send_message(QueueUrl=url, MessageBody=str(n))
    assert len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]) == 5
    assert server.accepted == 1
    server.stop()
    with pytest.raises((EndpointConnectionError, ConnectionClosedError)):
        sqs.get_queue_url(QueueName="kept-alive")
