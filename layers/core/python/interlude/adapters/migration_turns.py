"""The migrate function's queue (wiring's `migrations`): each message is a turn of the table's migrations to take
(interlude.migrations), queued by a deploy or by the turn before, whose time ran out."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import boto3

from interlude.config.queues import queue_settings

TURN = {"v": 1, "kind": "migrations-turn"}


@cache
def _sqs() -> Any:
    return boto3.client("sqs")


def queue_turn(delay_s: int = 0) -> None:
    """Queue a turn, taken after `delay_s` (at most 900: SQS's longest delay)."""
    _sqs().send_message(
        QueueUrl=queue_settings().migrations_url,
        MessageBody=json.dumps(TURN, separators=(",", ":"), allow_nan=False),
        DelaySeconds=min(delay_s, 900),
    )
