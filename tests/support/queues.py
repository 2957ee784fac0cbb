"""The SQS helpers the queue workers' integration tests share."""

from __future__ import annotations

import boto3

from interlude.local.sqs_pump import QueuePump


def drain(urls: dict[str, str], queue: str = "callbacks", rounds: int = 50) -> None:
    """Play the queue's SQS mapping until it has nothing visible (backoff is 0 s in these tests)."""
    pump = QueuePump(queue, urls[queue])
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
