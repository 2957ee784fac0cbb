"""Print what the audit appender reads back, per chain, to skip drafts an earlier delivery appended, during a backlog.

k decisions of one chain, taken 10 minutes ago, reach the appender (store/audit.AuditLog.append_drafts, as dispatch
runs it) one per batch in order: a dispatch backlog (a burst, the outbox queue behind, a redrive). Each append's
skip-by-source check may read the chain back from its head (`sources_since`): the Query pages, the entries they hold
and the read units they bill (strongly consistent: 1 RRU per started 4 KB of a page) are counted, with the head's
GetItem and the Query past the head (orphans) apart. Cases, each on a chain of its own:
  in order      one appender, the k drafts each in its own batch, in order;
  redelivered   the same, and every 10th batch carries again the draft appended 5 batches before (its record
                delivered again after a failure further on: skipped, never appended twice);
  2 appenders   the same drafts taking turns between two appenders (two dispatch instances on one chain);
  10 appenders  and between ten;
  cold          every batch appended by a new appender (a new instance each time: what a cold start pays, and what
                every append paid before docs/adr/0156: k(k-1)/2 entries read; up to COLD_UP_TO drafts, as moto
                takes minutes over the million entries of k = 1,000).
The real store runs against moto in-process; every case checks the chain holds each draft once.
Usage: .venv/bin/python bench/audit_backlog.py [k ...]   (default 10 100 1000)
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from datetime import timedelta
from typing import Any

from _bench import offline_aws

offline_aws(TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries")

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from interlude.domain import clock  # noqa: E402
from interlude.domain.audit import AuditDraft  # noqa: E402
from interlude.store import attributes as a  # noqa: E402
from interlude.store import audit as items  # noqa: E402
from interlude.store.layout import event_sk, run_pk  # noqa: E402
from interlude.store.provisioning import create_tables  # noqa: E402

SIZES = (10, 100, 1_000)
BACKLOG_S = 600.0
REDELIVER_EVERY = 10
REDELIVER_BACK = 5
COLD_UP_TO = 100
APPENDERS = {"2 appenders": 2, "10 appenders": 10}
TABLE = "bench"


class ChainReads:
    """The appender's reads of the audit chain: GetItem of the head; Query pages back from the head (sources) and
    past it (orphans), their entries and strongly consistent read units."""

    def __init__(self, client: Any) -> None:
        self.counts: Counter[str] = Counter()
        client.meta.events.register("provide-client-params.dynamodb.Query", self._query)
        client.meta.events.register("after-call.dynamodb", self._after)
        self._backwards = False

    def _query(self, params: dict[str, Any], **_: Any) -> None:
        self._backwards = params.get("ScanIndexForward") is False

    def _after(self, model: Any, parsed: dict[str, Any], **_: Any) -> None:
        if model.name == "GetItem":
            self.counts["head reads"] += 1
        elif model.name == "Query":
            kind = "back" if self._backwards else "past head"
            got = parsed.get("Items") or []
            self.counts[f"{kind} pages"] += 1
            self.counts[f"{kind} entries"] += len(got)
            self.counts[f"{kind} RRU"] += max(1, -(-sum(a.billed_size(i) for i in got) // 4096))

    def take(self) -> Counter[str]:
        taken, self.counts = self.counts, Counter()
        return taken


def backlog(tenant: str, k: int) -> list[tuple[AuditDraft, str]]:
    """k decisions of k runs, 10 ms apart, taken BACKLOG_S ago, each with the source its event batch would name."""
    start = clock.now() - timedelta(seconds=BACKLOG_S)
    placed = []
    for i in range(k):
        run_id = f"{tenant}/r{i:06d}0123456789abcdef"
        at = clock.iso(start + timedelta(milliseconds=10 * i))
        target = {"runId": run_id, "nodeId": "gate", "interruptId": f"{run_id}#gate"}
        draft = AuditDraft(tenant, "interrupt.decided", {"subjectId": "approver@example.com", "surface": "api"}, target, at, {"action": "accept"})
        placed.append((draft, items.draft_source(run_pk(run_id), event_sk(4))))
    return placed


def batches(placed: list[tuple[AuditDraft, str]], redelivered: bool) -> list[list[tuple[AuditDraft, str]]]:
    out = []
    for i, one in enumerate(placed):
        batch = [one]
        if redelivered and i % REDELIVER_EVERY == REDELIVER_EVERY - 1:
            batch.insert(0, placed[i - REDELIVER_BACK])
        out.append(batch)
    return out


def run_case(client: Any, reads: ChainReads, case: str, k: int) -> tuple[Counter[str], float]:
    tenant = f"{case.replace(' ', '')}{k}"
    placed = backlog(tenant, k)
    logs = [items.AuditLog(TABLE, client) for _ in range(APPENDERS.get(case, 1))]
    reads.take()
    started = time.process_time()
    for i, batch in enumerate(batches(placed, case == "redelivered")):
        if case == "cold":
            log = items.AuditLog(TABLE, client)
        else:
            log = logs[i % len(logs)]
        log.append_drafts(tenant, 0, batch, time.time())
    cpu = time.process_time() - started
    counts = reads.take()
    entries = client.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :a)",
        ExpressionAttributeValues={":pk": a.s(items.log_pk(tenant, 0)), ":a": a.s(items.ENTRY_SK_PREFIX)},
        ConsistentRead=True,
    )["Items"]
    runs = [json.loads(i["entry"]["S"])["target"]["runId"] for i in entries]
    assert runs == [d.target["runId"] for d, _ in placed], f"{case} {k}: the chain does not hold each draft once, in order"
    return counts, cpu


def main() -> None:
    sizes = [int(x) for x in sys.argv[1:]] or list(SIZES)
    with mock_aws():
        client = boto3.client("dynamodb")
        create_tables(client, TABLE)
        reads = ChainReads(client)
        print("audit appender, one chain, k drafts taken 10 min ago, one per dispatch batch (moto in-process)")
        print(f"{'case':<14} {'k':>6} {'head GetItem':>12} {'back: pages':>12} {'entries':>9} {'RRU':>8} {'RRU/append':>11} {'past head':>10} {'CPU s':>7}")
        for case in ("in order", "redelivered", *APPENDERS, "cold"):
            for k in sizes:
                if case == "cold" and k > COLD_UP_TO:
                    continue
                counts, cpu = run_case(client, reads, case, k)
                print(
                    f"{case:<14} {k:>6} {counts['head reads']:>12} {counts['back pages']:>12} {counts['back entries']:>9} "
                    f"{counts['back RRU']:>8} {counts['back RRU'] / k:>11.2f} {counts['past head pages']:>10} {cpu:>7.2f}"
                )


if __name__ == "__main__":
    main()
