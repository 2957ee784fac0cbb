"""The SQS helpers the queue workers' integration tests share."""

from __future__ import annotations

import boto3

from interlude import wiring
from interlude.local import lambda_runtime
from interlude.local.sqs_pump import QueuePump, to_event_record


def drain(urls: dict[str, str], queue: str = "callbacks", rounds: int = 50) -> None:
    """Play the queue's SQS mapping, into the function that consumes it, until it has nothing visible (backoff is 0 s
    in these tests)."""
    (function,) = [f.name for f in wiring.FUNCTIONS if f.consumes == queue]
    pump = QueuePump(function, urls[queue])
    for _ in range(rounds):
        if not pump.pump_once():
            return
    raise AssertionError(f"the {queue} queue did not drain")


def queued(url: str) -> list[dict]:
    """Every visible message on the queue (each now hidden for its visibility timeout)."""
    sqs = boto3.client("sqs")
    out: list[dict] = []
    while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        out += got
    return out


def mapped(queue_url: str, function: str, times: int) -> list[str]:
    """Play the queue's event source mapping one message at a time, at most `times` times or until SQS hands out
    nothing (a failed message is received again at once, as if its backoff or visibility timeout had passed; past the
    queue's receives SQS moves it to its dead letters): the bodies handed to the function."""
    sqs = boto3.client("sqs")
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    handed = []
    for _ in range(times):
        got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=1, MessageSystemAttributeNames=["All"])
        if not got.get("Messages"):
            break
        message = got["Messages"][0]
        handed.append(message["Body"])
        answer = lambda_runtime.invoke(function, {"Records": [to_event_record(message, arn)]})
        if answer["batchItemFailures"]:
            sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
        else:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    return handed


def mapped_until_gone(queue_url: str, function: str, most: int = 100) -> list[str]:
    """`mapped` until SQS hands out nothing: the bodies handed to the function."""
    handed = mapped(queue_url, function, most + 1)
    if len(handed) > most:
        raise AssertionError(f"the queue still hands out messages after {most} receives")
    return handed
