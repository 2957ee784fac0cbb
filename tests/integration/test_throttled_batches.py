"""A request DynamoDB throttles is retried by the SDK, then refused as `Unavailable`; a batch call DynamoDB throttles (it answers with the keys or items it did not process) is sent again for them, a
bounded number of times with backoff, then refused as `Unavailable` (a 503 with Retry-After at the API): never a loop
without end, never a fault of this host (ADR 0168)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from interlude.domain.errors import Unavailable
from interlude.store import attributes as a
from interlude.store import table as table_module
from interlude.store.facade import Store
from interlude.store.table import UNPROCESSED_ATTEMPTS, batch_get, batch_write_all
from tests.support.moto_world import ENTRIES_TABLE, TABLE


@pytest.fixture
def client(world):
    return Store(TABLE, ENTRIES_TABLE).client


@pytest.fixture
def slept(monkeypatch) -> list[float]:
    waits: list[float] = []
    monkeypatch.setattr(table_module.time, "sleep", waits.append)
    return waits


def left_unprocessed(client: Any, operation: str, times: int | None) -> list[int]:
    """Make DynamoDB leave the whole of each `operation` unprocessed, `times` times (None: always), as it answers a
    throttled batch: with an HTTP 200 naming what it did not do."""
    calls: list[int] = []
    left = {"BatchGetItem": "UnprocessedKeys", "BatchWriteItem": "UnprocessedItems"}[operation]

    def throttle(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        calls.append(1)
        if times is not None and len(calls) > times:
            return None
        asked = json.loads(params["body"])["RequestItems"]  # the request as sent (DynamoDB's JSON)
        return AWSResponse("https://dynamodb.us-east-1.amazonaws.com/", 200, {}, None), {left: asked}

    client.meta.events.register_first(f"before-call.dynamodb.{operation}", throttle)
    return calls


def put(client: Any, tenant: str, n: int) -> list[dict[str, Any]]:
    keys = [a.key(f"T#{tenant}#THROTTLED", f"K#{i:03}") for i in range(n)]
    for key in keys:
        client.put_item(TableName=TABLE, Item={**key, "n": {"N": "1"}})
    return keys


def test_keys_left_unprocessed_are_read_again_until_read(client, tenant, slept):
    keys = put(client, tenant, 3)
    calls = left_unprocessed(client, "BatchGetItem", times=2)
    assert len(list(batch_get(client, TABLE, keys))) == 3
    assert len(calls) == 3
    assert slept == [0.01, 0.02]


def test_keys_left_unprocessed_every_time_are_refused_as_busy_not_read_for_ever(client, tenant, slept):
    keys = put(client, tenant, 3)
    calls = left_unprocessed(client, "BatchGetItem", times=None)
    with pytest.raises(Unavailable) as refused:
        list(batch_get(client, TABLE, keys))
    assert refused.value.retry_after_s == 1
    assert len(calls) == UNPROCESSED_ATTEMPTS
    assert sum(slept) < 2


def test_items_left_unprocessed_are_written_again_then_refused_as_busy(client, tenant, slept):
    request = {TABLE: [{"PutRequest": {"Item": {**a.key(f"T#{tenant}#THROTTLED", "W"), "n": {"N": "1"}}}}]}
    calls = left_unprocessed(client, "BatchWriteItem", times=1)
    batch_write_all(client, request)
    assert len(calls) == 2
    assert client.get_item(TableName=TABLE, Key=a.key(f"T#{tenant}#THROTTLED", "W")).get("Item")
    left_unprocessed(client, "BatchWriteItem", times=None)
    with pytest.raises(Unavailable):
        batch_write_all(client, request)


def test_a_request_still_throttled_after_the_sdks_retries_is_refused_as_busy(client, tenant, monkeypatch):
    # DynamoDB's answer on the wire (moto never throttles; the answer is taken instead of moto's), retried by botocore
    # as a real one is, its backoff's sleeps recorded instead of slept
    attempts: list[int] = []

    def throttled(request: Any, **_: Any) -> AWSResponse:
        attempts.append(1)
        body = {"__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException", "message": "m"}
        return AWSResponse(request.url, 400, {"content-type": "application/x-amz-json-1.0"}, RawBody(json.dumps(body).encode()))

    monkeypatch.setattr("botocore.endpoint.time.sleep", lambda _: None)
    client.meta.events.register_first("before-send.dynamodb.GetItem", throttled)
    with pytest.raises(Unavailable):
        client.get_item(TableName=TABLE, Key=a.key(f"T#{tenant}#THROTTLED", "R"))
    # botocore 1.44's standard retry mode, the functions' client's: 3 retries (ADR 0168)
    assert len(attempts) == 4


class RawBody(io.BytesIO):
    """An HTTP body as botocore reads an answer's (urllib3's `stream`)."""

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.getvalue()
