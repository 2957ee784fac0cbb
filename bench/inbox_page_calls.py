"""Print the DynamoDB calls and items read per inbox page at 10, 5,000 and 20,000 pending interrupts.

Pages: unfiltered, filtered by workflowId, by kind, for an approver eligible for only 3 of them, and for the
out-of-office delegate of a directory principal eligible for those 3 (issue 14 item 4); oldest first, due first, and
"unclaimed" and "mine" (issue 29 item 3); then the pages a kind=approval walk takes past newer gates of another kind. The real
services and store run against moto in-process; the pending interrupts are written in bulk through the store's
own open-interrupt write path (tests/support/inbox_seed.py). Goal (issue 13): the same reads at every size.

Each page is read twice: while reads look in both tables (a deployment whose migration 0011 has not moved the first
table's inbox entries yet: docs/adr/0161), and once they look in the second alone (0011 done: docs/adr/0170). The
bench marks 0011 done through its checkpoint rather than running it (it says so): every seeded gate's entries are in the
second table already, so the run would move nothing.
Usage: .venv/bin/python bench/inbox_page_calls.py
"""

from __future__ import annotations

from typing import Any

from _bench import offline_aws

offline_aws(TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries")

from interlude.composition import Services  # noqa: E402
from interlude.domain.models.principals import PrincipalEntry  # noqa: E402
from interlude.domain.models.requests import CreateKeyRequest  # noqa: E402
from interlude.domain.models.tenants import TenantSettings  # noqa: E402
from interlude.store.attributes import key  # noqa: E402
from interlude.store.checkpoints import MIGRATION_PK  # noqa: E402
from interlude.store.facade import Store  # noqa: E402
from interlude.store.layout import ENTRIES_MOVED, FIRST, SECOND  # noqa: E402
from interlude.store.migrations import MigrationStore  # noqa: E402
from tests.support.inbox_seed import gate_template, seed_like, table_of_its_own  # noqa: E402

SIZES = (10, 5_000, 20_000)
LIMIT = 25
NARROW = 3
OTHER_KINDS = 2_000


class Reads:
    def __init__(self, client: Any) -> None:
        self.calls = 0
        self.items = 0
        client.meta.events.register("after-call.dynamodb", self._after)

    def _after(self, model: Any, parsed: dict[str, Any], **_: Any) -> None:
        self.calls += 1
        if model.name == "Query":
            self.items += len(parsed.get("Items") or [])
        elif model.name == "BatchGetItem":
            self.items += sum(len(v) for v in (parsed.get("Responses") or {}).values())

    def take(self) -> tuple[int, int]:
        taken = (self.calls, self.items)
        self.calls = self.items = 0
        return taken


# The two placements a page is read in: before migration 0011 is done, and after.
PHASES = ("both tables", "second alone")


def placed(store: Store, moved: bool) -> Services:
    """Services over `store` as a process started now would be: migration 0011's checkpoint marked done (claimed and
    finished through the migrations' own store, not run) when `moved`, else removed. Its inbox asks the checkpoint
    once (layout.INBOX_ENTRIES.read), here, before any page is counted."""
    migrating = MigrationStore(store.table, store.client, store.entries_table)
    if moved:
        migrating.claim(ENTRIES_MOVED, "bench", 0.0, "bench")
        migrating.finish(ENTRIES_MOVED, "bench", "bench")
    else:
        store.client.delete_item(TableName=store.table, Key=key(MIGRATION_PK, ENTRIES_MOVED))
    fresh = Services(store)
    assert fresh.inbox_index.read_tables() == ((SECOND,) if moved else (FIRST, SECOND))
    return fresh


def signed_in(services: Services, subject: str, groups: list[str]) -> Any:
    created = services.keys.issue_key("bench", CreateKeyRequest(subjectId=subject, scopes=["approvals:respond", "workflows:write", "runs:create", "runs:read"], groups=groups))
    return services.keys.authenticate(f"Bearer {created['apiKey']}")


def main() -> None:
    with table_of_its_own("bench") as (services, client):
        admin = signed_in(services, "admin", [])
        templates = {wid: gate_template(services, admin, wid, group) for wid, group in (("bulk", "others"), ("narrow", "narrow"))}
        seed_like(services.store, templates["narrow"], 0, NARROW - 1, prefix="narrow")
        broad, narrow = signed_in(services, "broad", ["others"]), signed_in(services, "nina", ["narrow"])
        services.tenants.put_settings("bench", TenantSettings(allowDelegation=True), "admin")
        away = PrincipalEntry.model_validate({"groups": ["narrow"], "outOfOffice": {"delegate": "dele"}})
        services.directory.put_principal("bench", "olga", away, "admin")
        pages = {
            "unfiltered": (broad, {}),
            "workflowId=bulk": (broad, {"workflowId": "bulk"}),
            "kind=approval": (broad, {"kind": "approval"}),
            f"approver eligible for {NARROW}": (narrow, {}),
            f"kind=approval, eligible for {NARROW}": (narrow, {"kind": "approval"}),
            "their out-of-office delegate": (signed_in(services, "dele", []), {}),
            # Issue 29 item 3: the whole inbox's orders and claim filters.
            "sort=oldest": (broad, {"sort": "oldest"}),
            "sort=due": (broad, {"sort": "due"}),
            "claim=unclaimed": (broad, {"claim": "unclaimed"}),
            "claim=mine": (broad, {"claim": "mine"}),
        }
        reads = Reads(client)
        figures: dict[str, dict[str, list[tuple[int, int, int]]]] = {phase: {name: [] for name in pages} for phase in PHASES}
        seeded = 0
        for size in SIZES:
            seed_like(services.store, templates["bulk"], seeded, size - 1)
            seeded = size - 1
            for phase in PHASES:
                reading = placed(services.store, moved=phase == PHASES[1])
                for name, (principal, filters) in pages.items():
                    reads.take()
                    listed = reading.inbox.inbox(principal, LIMIT, filters, None)["interrupts"]
                    figures[phase][name].append((*reads.take(), len(listed)))
    walked = walk_past_other_kinds()
    print(f"Inbox page (limit {LIMIT}): DynamoDB calls / items read / interrupts listed, at {', '.join(f'{s:,}' for s in SIZES)} pending")
    print(f"Reads look in both tables until migration {ENTRIES_MOVED} is done, then in the second alone: its checkpoint marked")
    print("done here, not run (every seeded gate's entries are in the second table already: it would move nothing)")
    for phase in PHASES:
        print(f" {phase}:")
        for name, row in figures[phase].items():
            cells = "   ".join(f"{c:3d} / {i:4d} / {n:3d}" for c, i, n in row)
            flat = "flat" if row[1][:2] == row[2][:2] and row[0][0] == row[1][0] else "GROWS"
            print(f"  {name:28s} {cells}   ({flat}; goal: the same at every size)")
    print("  (at 10 pending a page reads what there is; from the page size per partition on, the reads stop growing)")
    print(f"At {SIZES[-1]:,} pending, calls / items read, both tables -> the second alone:")
    for name in pages:
        (c0, i0, n0), (c1, i1, n1) = figures[PHASES[0]][name][-1], figures[PHASES[1]][name][-1]
        print(f"  {name:28s} {c0:3d} / {i0:4d} -> {c1:3d} / {i1:4d}   (listed {n0} -> {n1})")
    pages, calls, items = walked
    print(
        f"kind=approval with {OTHER_KINDS:,} newer gates of another kind pending (second table alone): {pages} pages, {calls} calls, "
        f"{items:,} items read to list the first {LIMIT} approvals (every page before them short, with a cursor)"
    )


def walk_past_other_kinds() -> tuple[int, int, int]:
    """A tenant whose newest pending gates are of another kind, open to anyone: on ANY, which a kind=approval page
    reads (the caller's own families, docs/adr/0160), skipping them page after page until its approvals. Its own small
    table: moto's Query costs time in proportion to the table, and the walk sends hundreds. Pages, DynamoDB calls and
    items read until the first LIMIT approvals are listed."""
    with table_of_its_own("bench") as (services, client):
        state, gate = gate_template(services, signed_in(services, "admin", []), "bulk", "others")
        seed_like(services.store, (state, gate), 0, 2 * LIMIT)
        asked = gate.model_copy(update={"kind": "clarification"})
        seed_like(services.store, (state, asked), 10_000, 10_000 + OTHER_KINDS, prefix="asked")
        broad = signed_in(services, "broad", ["others"])
        reading = placed(services.store, moved=True)
        reads = Reads(client)
        pages = listed = 0
        cursor = None
        while listed < LIMIT:
            got = reading.inbox.inbox(broad, LIMIT, {"kind": "approval"}, cursor)
            pages, listed, cursor = pages + 1, listed + len(got["interrupts"]), got["nextCursor"]
            if cursor is None:
                break
        return (pages, *reads.take())


if __name__ == "__main__":
    main()
