"""Keys made before keys were listed (GET /keys, `interlude keys list`) carry no listing attributes: each gets them,
as a key made now has them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlude import wiring
from interlude.store import attributes as a
from interlude.store.layout import API_KEY_SK
from interlude.store.migrations import Scan

if TYPE_CHECKING:
    from interlude.store.facade import Store

DESCRIPTION = "lists every API key: a key made before the key listing existed gets its place in it"
SCAN = Scan(
    "sk = :key AND attribute_not_exists(#listed)",
    {":key": API_KEY_SK},
    {"#listed": wiring.INBOX_INDEX.partition_key, "#record": "record"},
    "pk, #record",
)


def apply(store: Store, keys: list[a.Item]) -> int:
    listed = 0
    for item in keys:
        key_id = item["pk"]["S"].removeprefix("K#")
        listed += store.list_api_key(key_id, a.unpacked(item["record"]))
    return listed
