"""Every item the table answers is checked for its format (interlude.domain.formats) as botocore parses the answer.

One handler on the client's `after-call` event sees every read of every store that shares the client (GetItem, Query,
Scan, BatchGetItem, each page of a paginator, the return values of a write, the old images of a cancelled
transaction), so no reader misreads an item a later release wrote in a format this one does not read: the call
raises `interlude.item_too_new` instead. The stream's images reach `dispatch` without a call; interlude.store.stream
checks those.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from interlude.domain import formats

HANDLER_ID = "interlude-item-formats"


def watch(client: Any) -> None:
    """Check every answer `client` parses from now on (registering twice changes nothing)."""
    events = getattr(getattr(client, "meta", None), "events", None)
    if events is not None:
        events.register("after-call.dynamodb", _check_answer, unique_id=HANDLER_ID)


def check_item(item: Mapping[str, Any]) -> None:
    """Refuse a low-level item whose format attribute is newer than this release reads."""
    written = item.get(formats.FORMAT_FIELD)
    if written is not None:
        value = written.get("N") if isinstance(written, Mapping) else written
        formats.check("table", int(value) if isinstance(value, str) and value.isdigit() else value)


def _check_answer(parsed: Mapping[str, Any], **_: Any) -> None:
    for item in _items(parsed):
        check_item(item)


def _items(parsed: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    if isinstance(parsed.get("Item"), Mapping):
        yield parsed["Item"]
    if isinstance(parsed.get("Attributes"), Mapping):
        yield parsed["Attributes"]
    yield from parsed.get("Items") or ()
    responses = parsed.get("Responses")
    if isinstance(responses, Mapping):  # BatchGetItem: items by table
        for items in responses.values():
            yield from items
    elif isinstance(responses, list):  # TransactGetItems: {Item} per key
        yield from (r["Item"] for r in responses if isinstance(r.get("Item"), Mapping))
    for reason in parsed.get("CancellationReasons") or ():
        if isinstance(reason.get("Item"), Mapping):
            yield reason["Item"]

