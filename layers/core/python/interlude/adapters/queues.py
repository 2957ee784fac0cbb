"""Queueing an outbox's messages on SQS, shared by the callbacks, actions and notifications outboxes."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import boto3

SQS_BATCH = 10  # SendMessageBatch's most entries per call


@cache
def _sqs() -> Any:
    return boto3.client("sqs")


def send_messages(queue_url: str, messages: list[dict[str, Any]], what: str) -> None:
    """Queue `messages` ten per batch; raise if any was refused, so the caller's stream record (or schedule) is
    retried: messages already queued then go again under the same ids, which each worker absorbs."""
    for start in range(0, len(messages), SQS_BATCH):
        chunk = messages[start : start + SQS_BATCH]
        result = _sqs().send_message_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(i), "MessageBody": json.dumps(m, separators=(",", ":"), allow_nan=False)}
                for i, m in enumerate(chunk)
            ],
        )
        if result.get("Failed"):
            raise RuntimeError(f"{len(result['Failed'])} {what}(s) could not be queued")
