"""DynamoDB requests a client sends, the items they return and the read units they bill, counted with botocore's event
hooks (the run search's scale test, bench/run_search_page_calls.py, bench/audit_listing.py); and every DynamoDB request
any client sends, recorded (the outbox consumer's reads: tests/integration/test_dispatch_reads.py, test_dispatch_batch.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from botocore.client import BaseClient

from interlude.store.attributes import billed_size

Request = tuple[str, dict[str, Any]]


class Reads:
    """Requests by operation name, in order, the items they returned (Query Items, BatchGetItem Responses: in all, and
    by operation) and the 4 KB blocks they bill (`blocks`: a Query's items together, each item a BatchGetItem answers
    on its own; a read unit each strongly consistent, half one eventually)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.returned: Counter[str] = Counter()
        self.blocks = 0

    def after(self, model: Any, parsed: dict[str, Any], **_: Any) -> None:
        self.calls.append(model.name)
        if model.name == "Query":
            got = parsed.get("Items") or []
            self.blocks += _blocks(sum(billed_size(item) for item in got))
        elif model.name == "BatchGetItem":
            got = [item for answered in (parsed.get("Responses") or {}).values() for item in answered]
            self.blocks += sum(_blocks(billed_size(item)) for item in got)
        else:
            return
        self.returned[model.name] += len(got)

    @property
    def items(self) -> int:
        return self.returned.total()


def _blocks(size: int) -> int:
    return max(1, -(-size // 4096))


@contextmanager
def counting(client: Any) -> Iterator[Reads]:
    reads = Reads()
    client.meta.events.register("after-call.dynamodb", reads.after)
    try:
        yield reads
    finally:
        client.meta.events.unregister("after-call.dynamodb", reads.after)


def recorded(monkeypatch: pytest.MonkeyPatch) -> list[Request]:
    """Every DynamoDB request any client sends from now on (the functions' own clients included): (operation,
    parameters), in order."""
    sent: list[Request] = []
    original = BaseClient._make_api_call

    def recording(client: Any, operation: str, params: dict[str, Any]) -> Any:
        if client.meta.service_model.service_name == "dynamodb":
            sent.append((operation, params))
        return original(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", recording)
    return sent


def keys_read(requests: list[Request]) -> list[tuple[str, str, str]]:
    """(operation, pk, sk) of every item a GetItem or BatchGetItem asked for."""
    read = []
    for operation, params in requests:
        if operation == "GetItem":
            read.append((operation, params["Key"]["pk"]["S"], params["Key"]["sk"]["S"]))
        elif operation == "BatchGetItem":
            read += [
                (operation, k["pk"]["S"], k["sk"]["S"])
                for body in params["RequestItems"].values()
                for k in body["Keys"]
            ]
    return read
