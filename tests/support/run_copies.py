"""Many existing runs, quickly: copies of a few real runs' items under fresh run and interrupt ids.

A real run leaves items in its own partition (state, event batches, interrupt), a run-index entry, and while its
interrupt is open one inbox entry per family. Copying those items with every id renamed gives a table that holds
what the same number of real runs would (minus their audit entries, which chain and cannot be copied), at the
cost of one BatchWriteItem per 25 items instead of a create and a resolve per run. A copy's event batches leave out
the audit drafts they carried: an existing run's entries were appended when its actions happened, and thousands of
drafts dated from one burst would be appended after seeding (a write each, and for a dispatch instance that does not
know the chain yet, a read back over every entry appended since: store/audit.py, sources_since, docs/adr/0156),
which is not what a table of existing runs costs. bench/local_load.py seeds the
local stack with it; tests/integration/test_moto_patches.py measures a lifecycle beside small and large tables.
"""

from __future__ import annotations

import secrets
from typing import Any

from interlude.store.audit import DRAFT_ATTRIBUTE

BATCH_WRITE_MAX = 25


class RunCopies:
    """Templates taken from a table's real runs, written again under new ids, `count` runs at a time."""

    def __init__(self, client: Any, table: str, run_ids: list[str]) -> None:
        self.client = client
        self.table = table
        items = [i for page in client.get_paginator("scan").paginate(TableName=table) for i in page["Items"]]
        self.templates: list[tuple[list[str], list[dict[str, Any]]]] = []
        for run_id in run_ids:
            opaque = run_id.split("/", 1)[1]
            # The run's ids (its own, its interrupts') and every item whose key names one of them.
            ids = [opaque] + [
                i["interruptId"]["S"].split("/", 1)[1] for i in items if opaque in i["pk"]["S"] and "interruptId" in i
            ]
            self.templates.append((ids, [i for i in items if any(x in i["pk"]["S"] + i["sk"]["S"] for x in ids)]))
        self.written = 0

    def write(self, count: int) -> None:
        """`count` more runs, the templates taken in turn."""
        pending: list[dict[str, Any]] = []
        for n in range(count):
            ids, items = self.templates[(self.written + n) % len(self.templates)]
            fresh = {x: secrets.token_urlsafe(18) for x in ids}
            pending += [
                {k: {"S": renamed(v["S"], fresh)} if "S" in v else v for k, v in i.items() if k != DRAFT_ATTRIBUTE}
                for i in items
            ]
        for start in range(0, len(pending), BATCH_WRITE_MAX):
            batch = [{"PutRequest": {"Item": i}} for i in pending[start : start + BATCH_WRITE_MAX]]
            self.client.batch_write_item(RequestItems={self.table: batch})
        self.written += count


def renamed(text: str, fresh: dict[str, str]) -> str:
    for old, new in fresh.items():
        text = text.replace(old, new)
    return text
