"""Play the SQS → Lambda event source mappings that moto does not run, from wiring's declaration.

The queues are created in moto as wiring declares them (the same redrive policy, so moto moves a message to the
dead-letter queue after maxReceiveCount receives, as SQS would). A pump per consuming function long-polls its
queue, invokes the real handler with an SQS event of the mapping's batch size, and deletes the messages the
handler did not report as failed, exactly as the mapping does; failed messages stay hidden for whatever
visibility timeout the handler set, and an invocation that raises leaves the whole batch to reappear.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import boto3

from interlude import wiring
from interlude.local import LOCAL_REGION
from interlude.local.lambda_runtime import invoke
from interlude.local.pump import Pump


def physical_name(prefix: str, queue: wiring.Queue) -> str:
    return f"{prefix}-{queue.name}"


def create_queues(client: Any, prefix: str) -> dict[str, str]:
    """Create every wiring.QUEUES queue (dead-letter targets first); returns name -> URL."""
    urls: dict[str, str] = {}
    for queue in wiring.queues_in_creation_order():
        attributes = {
            "MessageRetentionPeriod": str(queue.retention_s),
            "VisibilityTimeout": str(queue.visibility_timeout_s),
        }
        if queue.dead_letter:
            target = client.get_queue_attributes(QueueUrl=urls[queue.dead_letter], AttributeNames=["QueueArn"])
            attributes["RedrivePolicy"] = json.dumps(
                {"deadLetterTargetArn": target["Attributes"]["QueueArn"], "maxReceiveCount": queue.max_receive_count}
            )
        urls[queue.name] = client.create_queue(QueueName=physical_name(prefix, queue), Attributes=attributes)[
            "QueueUrl"
        ]
    return urls


def export_queue_urls(urls: dict[str, str]) -> None:
    """Hand each queue's URL to the handlers in this process, under the variable the stack sets."""
    for queue in wiring.QUEUES:
        os.environ[queue.url_env] = urls[queue.name]


def to_event_record(message: Mapping[str, Any], queue_arn: str) -> dict[str, Any]:
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": message.get("MessageAttributes", {}),
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": LOCAL_REGION,
    }


class QueuePump(Pump):
    def __init__(self, function_name: str, queue_url: str, interval_s: float = 0.05, batch_size: int = 1) -> None:
        super().__init__(f"sqs-pump-{function_name}", interval_s, backs_off=True)
        self.function_name = function_name
        self.queue_url = queue_url
        self.sqs = boto3.client("sqs")
        self.queue_arn = self.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        self.batch_size = batch_size

    def pump_once(self) -> int:
        got = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=self.batch_size,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        messages = got.get("Messages", [])
        if not messages:
            return 0
        records = [to_event_record(m, self.queue_arn) for m in messages]
        try:
            result = invoke(self.function_name, {"Records": records}) or {}
        except Exception:
            # Lambda leaves the whole batch on the queue; it reappears after its visibility timeout.
            return len(messages)
        failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
        done = [r for r in records if r["messageId"] not in failed]
        if done:
            self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(done)],
            )
        return len(messages)


# "off" keeps callback notices and actions in their queues (no outbound call at all), e.g. to accept public
# callbackUrls in a demo or test without ever dialling them.
DELIVERY_ENV = "INTERLUDE_LOCAL_CALLBACK_DELIVERY"


def start_queue_pumps(urls: dict[str, str]) -> list[QueuePump]:
    if os.environ.get(DELIVERY_ENV, "on") == "off":
        return []
    return [
        QueuePump(fn.name, urls[fn.consumes], batch_size=fn.batch_size).start() for fn in wiring.FUNCTIONS if fn.consumes
    ]
