"""Lambda entry point for the table stream (the outbox), with partial-batch failure reporting."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

from interlude.app.service import default_service
from interlude.composition import compose, handle_stream_record

logger = Logger(service="interlude-dispatch")
processor = BatchProcessor(event_type=EventType.DynamoDBStreams)
compose()


def record_handler(record: DynamoDBRecord) -> None:
    handle_stream_record(default_service(), record.raw_event)


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
