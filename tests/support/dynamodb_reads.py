"""DynamoDB requests a client sends and the items they return, counted with botocore's event hooks (the run search's
scale test and bench/run_search_page_calls.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Reads:
    """Requests by operation name, in order, and the items they returned (Query Items, BatchGetItem Responses)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.items = 0

    def after(self, model: Any, parsed: dict[str, Any], **_: Any) -> None:
        self.calls.append(model.name)
        if model.name == "Query":
            self.items += len(parsed.get("Items") or [])
        elif model.name == "BatchGetItem":
            self.items += sum(len(v) for v in (parsed.get("Responses") or {}).values())


@contextmanager
def counting(client: Any) -> Iterator[Reads]:
    reads = Reads()
    client.meta.events.register("after-call.dynamodb", reads.after)
    try:
        yield reads
    finally:
        client.meta.events.unregister("after-call.dynamodb", reads.after)
