"""What an SQS-driven worker of this shape shares: a message it cannot finish now is hidden for a while (its
visibility timeout changed) and reported as a batch item failure, so SQS hands it out again later.

A worker about to do something slow hides its message for the length of its claim first: if it dies mid-call,
the message reappears when the claim's lease has run out, and the next receiver takes the work over.
"""

from __future__ import annotations

from typing import Any

# SQS caps a message's visibility timeout at 12 hours.
MAX_VISIBILITY_S = 12 * 3600


class RetryLater(Exception):
    """The message stays on the queue (its visibility was set to the wait); report it as a failed item."""


def hide(sqs: Any, queue_url: str, record: dict[str, Any], seconds: float) -> None:
    sqs.change_message_visibility(
        QueueUrl=queue_url,
        ReceiptHandle=record["receiptHandle"],
        VisibilityTimeout=max(0, min(int(seconds + 0.999), MAX_VISIBILITY_S)),
    )
