"""A moto world with the table, every wired queue and the token key ring, and the SQS helpers the queue workers'
integration tests share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import boto3
import pytest
from moto import mock_aws

from interlude import wiring
from interlude.adapters.keyring_store import ensure_key_ring
from interlude.local.schedules import create_local_deadline_resources
from interlude.local.sqs_pump import QueuePump, create_queues, export_queue_urls
from interlude.store import create_table

KEY_RING_SECRET = "interlude-test/token-keys"


@contextmanager
def queue_world(
    monkeypatch: pytest.MonkeyPatch, table: str, env: dict[str, str], deadlines: bool = False
) -> Iterator[dict[str, str]]:
    """`env` set, then inside moto: the table, every queue of wiring.QUEUES (their URLs exported), a key ring and, with
    `deadlines`, the local Scheduler group and role deadlines are made with. Yields the queue URLs by name."""
    for key, value in {"TABLE_NAME": table, "KEY_RING_SECRET": KEY_RING_SECRET, **env}.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        create_table(boto3.client("dynamodb"), table)
        urls = create_queues(boto3.client("sqs"), table)
        for queue in wiring.QUEUES:
            monkeypatch.setenv(queue.url_env, urls[queue.name])
        export_queue_urls(urls)
        if deadlines:
            for key, value in create_local_deadline_resources().items():
                monkeypatch.setenv(key, value)
        ensure_key_ring(KEY_RING_SECRET)
        yield urls


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
