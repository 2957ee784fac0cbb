"""Print what a page of the audit listing (`GET /audit`: app/audit.AuditTrail.entries_page) costs a tenant with 1, 16
and 128 active chains: the Queries, BatchGetItem calls, the entries the Queries read and the read units they all bill
(eventually consistent, as the listing reads: half a unit per started 4 KB of a Query's items, and of each item a
BatchGetItem answers: tests/support/dynamodb_reads.py), for the first page and a later one (the second, from the
first's cursor).

Each chain holds ENTRIES entries, taken at random times over the last hour (so the chains' entries interleave). A busy
tenant's chains are three in four marked, their head left behind PAST_HEAD entries that chain from it (the stream's
appender while the chain waits for its checkpoint: docs/adr/0172), the fourth settled (unmarked, every entry
checkpointed, its head moved by its last entry's append); a quiet tenant's all settled. The items are written as the
store writes them (store/audit.chain_items), on moto in-process; the two pages are checked to list distinct entries
(tests/integration/test_audit_listing.py walks every page). The chains are read one after another here (the
deployment reads them side by side: the counts are the same).
Usage: .venv/bin/python bench/audit_listing.py [chains ...]   (default 1 16 128; page size PAGE)
"""

from __future__ import annotations

import random
import sys
from datetime import timedelta
from typing import Any

from _bench import offline_aws

offline_aws(TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries")

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from interlude import wiring  # noqa: E402
from interlude.app.audit import AuditTrail  # noqa: E402
from interlude.domain import clock  # noqa: E402
from interlude.domain.audit import AuditDraft  # noqa: E402
from interlude.local import moto_patches  # noqa: E402
from interlude.rules.audit import Head  # noqa: E402
from interlude.store import attributes as a  # noqa: E402
from interlude.store import audit as items  # noqa: E402
from interlude.store.provisioning import create_tables  # noqa: E402
from tests.support.dynamodb_reads import counting  # noqa: E402

TABLE = "bench"
CHAINS = (1, 16, 128)
PAGE = 50
ENTRIES = 60
PAST_HEAD = 5


def write_chain(client: Any, tenant: str, chain: int, times: list[str], marked: bool) -> int:
    """The chain's entries at `times` (oldest first) as its appends write them: all but PAST_HEAD under its head, those
    past it when `marked`; else its head settled over all of them. Answers how many entries it holds."""

    def drafts(at_times: list[str]) -> list[tuple[AuditDraft, str | None]]:
        return [
            (
                AuditDraft(
                    tenant,
                    "interrupt.decided",
                    {"subjectId": "approver@example.com", "surface": "api"},
                    {"runId": f"{tenant}/c{chain:03d}r{i:04d}", "nodeId": "gate"},
                    at,
                    {"action": "accept"},
                ),
                None,
            )
            for i, at in enumerate(at_times)
        ]

    under = times[:-PAST_HEAD] if marked else times
    made, head = items.chain_items(tenant, chain, Head(), drafts(under), 0.0)
    written = [op["Put"]["Item"] for _, op in made]
    if marked:
        past, _ = items.chain_items(tenant, chain, head, drafts(times[-PAST_HEAD:]), 0.0)
        written += [op["Put"]["Item"] for label, op in past if label == items.ENTRY_LABEL]  # the head left behind
    else:
        written = [item for item in written if item["sk"]["S"] != items.PENDING_SK]
        settled = next(item for item in written if item["sk"]["S"] == items.HEAD_SK)
        del settled["marked"], settled["pendingSince"]
        settled["checkpointSeq"] = settled["seq"]
        # Moved by the append of its last entry, a second after that entry's action.
        settled["appendedAt"] = a.n(round(clock.epoch_of(times[-1]) + 1, 3))
    for item in written:
        client.put_item(TableName=TABLE, Item=item)
    return len(times)


def tenant_of(client: Any, chains: int, busy: bool) -> tuple[str, int]:
    """A tenant whose `chains` chains hold entries, `busy` (three in four marked, the one chain of a one-chain tenant
    too) or quiet (every chain settled); and how many it holds."""
    tenant = f"{'busy' if busy else 'quiet'}{chains}"
    rng = random.Random(chains)
    now = clock.now()
    total = 0
    for chain in range(chains):
        times = sorted(clock.iso(now - timedelta(seconds=rng.uniform(0, 3600))) for _ in range(ENTRIES + PAST_HEAD))
        total += write_chain(client, tenant, chain, times, busy and chain % 4 != 3)
    return tenant, total


def main() -> None:
    sizes = [int(x) for x in sys.argv[1:]] or list(CHAINS)
    moto_patches.apply()  # as the tests and the local stack run moto: a Query reads its partition, not the table
    with mock_aws():
        client = boto3.client("dynamodb")
        create_tables(client, TABLE)
        trail = AuditTrail(items.AuditLog(TABLE, client), None)  # type: ignore[arg-type]  # the listing writes nothing
        print(
            f"audit listing, page of {PAGE}, eventually consistent; each chain {ENTRIES} entries; busy: 3 in 4 chains "
            f"marked with {PAST_HEAD} past the head; quiet: every chain settled"
        )
        print(
            f"{'tenant':>6} {'chains':>6} {'page':>6} {'Query':>6} {'BatchGet':>9} {'entries read':>13} {'RRU':>7} {'listed':>7}"
        )
        for busy, chains in [(busy, chains) for busy in (True, False) for chains in sizes]:
            wiring.AUDIT_CHAINS = max(wiring.AUDIT_CHAINS, chains)
            tenant, total = tenant_of(client, chains, busy)
            with counting(client) as first_reads:
                first = trail.entries_page(tenant, PAGE, None)
            with counting(client) as later_reads:
                later = trail.entries_page(tenant, PAGE, first["cursor"])
            for name, page, reads in (("first", first, first_reads), ("later", later, later_reads)):
                print(
                    f"{'busy' if busy else 'quiet':>6} {chains:>6} {name:>6} {reads.calls.count('Query'):>6} "
                    f"{reads.calls.count('BatchGetItem'):>9} {reads.returned['Query']:>13} {reads.blocks / 2:>7.1f} "
                    f"{len(page['entries']):>7}"
                )
            listed = [(e["chain"], e["seq"]) for page in (first, later) for e in page["entries"]]
            assert len(set(listed)) == len(listed) == min(2 * PAGE, total), f"{chains} chains: {len(listed)} listed"


if __name__ == "__main__":
    main()
