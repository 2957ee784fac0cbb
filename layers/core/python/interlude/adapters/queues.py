"""Queueing messages on SQS, shared by the outbox feed and the callbacks, actions and notifications outboxes.

Every message is sent with `MessageGroupId` = the tenant it is for: on a standard queue that makes it an SQS fair
queue, which serves a tenant whose messages take a small share of the consumers before a busy tenant's backlog
(docs/scale.md, "Fairness across tenants"). The local stack's queue pump receives the same way.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from interlude import sdk_clients

SQS_BATCH = 10  # SendMessageBatch's most entries per call


@cache
def _sqs() -> Any:
    return sdk_clients.client("sqs")


def send_messages(queue_url: str, messages: list[dict[str, Any]], what: str, tenant: str) -> None:
    """Queue `messages`, all of `tenant`, ten per batch; raise if any was refused, so the caller's stream record
    (or schedule) is retried: messages already queued then go again under the same ids, which each worker absorbs."""
    send_grouped(queue_url, [(tenant, m) for m in messages], what)


def send_grouped(queue_url: str, messages: list[tuple[str, dict[str, Any]]], what: str) -> None:
    """Queue (tenant, message) pairs ten per batch, each under its tenant's MessageGroupId; raise if any was refused."""
    for start in range(0, len(messages), SQS_BATCH):
        chunk = messages[start : start + SQS_BATCH]
        result = _sqs().send_message_batch(
            QueueUrl=queue_url,
            Entries=[
                {
                    "Id": str(i),
                    "MessageBody": json.dumps(m, separators=(",", ":"), allow_nan=False),
                    "MessageGroupId": tenant,
                }
                for i, (tenant, m) in enumerate(chunk)
            ],
        )
        if result.get("Failed"):
            raise RuntimeError(f"{len(result['Failed'])} {what}(s) could not be queued")


def hide(queue_url: str, hidden: list[tuple[str, int]]) -> None:
    """Hide received messages ((receipt handle, seconds): their visibility timeout from now), ten per call: a consumer
    that reports them failed has them handed out again then, not after the queue's own timeout. A message not hidden
    (a refused entry) reappears after the queue's timeout, later but still."""
    for start in range(0, len(hidden), SQS_BATCH):
        chunk = hidden[start : start + SQS_BATCH]
        _sqs().change_message_visibility_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": s} for i, (h, s) in enumerate(chunk)],
        )
