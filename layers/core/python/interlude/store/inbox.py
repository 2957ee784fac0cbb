"""The inbox index: pending interrupts by what an inbox page asks, on write-sharded partitions (store/sharded.py).

  entry   T#{tenant}#INBOX#{family}#{shard:02d}   {raisedAt}#{interruptId}   runId, key, kind, workflowId, due?,
                                                                             assignee?
  due     T#{tenant}#INBOX#DUE#{shard:02d}        {due}#{interruptId}        (the same)


One entry per family an open interrupt belongs to: ANY or each approver ref that binds on it (`P#`, `G#`,
`ROLE#`: rules.interrupts.approvers.approver_families), `WF#{workflowId}` and, but for an approval, `KIND#{kind}` (a
`kind=approval` page reads the caller's own families: kind_family, docs/adr/0160), and `P#{delegate}` for each
principal an approver handed their vote on this gate to (issue 14 item 4: written by the transition that records the
delegation), and `DUE` for a gate with a deadline, sorted by when it is due (issue 29 item 3: the inbox's "due first"
order). Each entry carries the gate's due time and who works it (`assignee`: put again, every entry of the gate, in the
transaction that claims, releases or assigns it), so a page filters "mine" and "unclaimed" on the entries it reads.
Entries are pointers: a page reads the interrupt items they name and their runs' heads (one BatchGetItem) and lists only
those still open, so the interrupt item stays the one truth of payload and votes, and of status in format 1; a format-3
item's gate is open while its head holds it (store/gate_closes.py).

Entries are plain writes outside the run's transaction (BatchWriteItem: 1 unit each instead of 2), written
before the transaction that opens the interrupt. The transaction that closes it names the entries on its event
batch item (CLOSED_ENTRIES), and the stream consumer (`dispatch`) deletes them, off the request path. So an entry
may name an interrupt not open (yet, any more, or never: a lost race): pages skip those, and sweep the entries of
interrupts that closed and of ones still absent after ORPHAN_GRACE_S. Reasons: docs/adr/0024 and 0048.
"""

import json
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from interlude import wiring
from interlude.domain.clock import epoch_of, iso
from interlude.domain.ids import tenant_of
from interlude.rules.interrupts.approvers import approver_families
from interlude.store import attributes as a
from interlude.store import gate_closes, gate_payloads, layout, sharded
from interlude.store.checkpoints import finished
from interlude.store.layout import FIRST, INTERRUPT_SK_PREFIX, RUN_SK, SECOND, interrupt_sk, run_pk
from interlude.store.table import BATCH_GET_MAX, BATCH_WRITE_MAX, batch_get_answers, batch_write_all

if TYPE_CHECKING:
    from interlude.domain.models.run import OpenInterrupt

INDEX = wiring.INBOX
# An entry whose interrupt item does not exist is swept only once it is older than any request that could still
# be committing it (the longest function timeout, with margin).
ORPHAN_GRACE_S = 300
# The event batch item's attribute listing the index keys of the interrupts its transition closed (packed
# [pk, sk] pairs): written in the closing transaction, deleted by `dispatch` from the stream record's image.
CLOSED_ENTRIES = "closedEntries"


# The family of every gate with a deadline, sorted by it (its entries' sort key is the due time, not the raising).
DUE_FAMILY = "DUE"
# The kind a `kind` page finds in the caller's own families: every approval is listed under the refs that may decide
# it, else ANY (approver_families), which the caller's unfiltered page reads, so an approval needs no KIND entry
# (docs/adr/0160: 2 WRU less per approval, and per claim, release or assignment).
OWN_FAMILIES_KIND = "approval"


def kind_family(kind: str) -> str | None:
    """The family a page filtered by `kind` reads; None: the caller's own families (OWN_FAMILIES_KIND)."""
    return None if kind == OWN_FAMILIES_KIND else f"KIND#{kind}"


def interrupt_families(kind: str, workflow_id: str, payload: dict[str, Any], due: str | None = None) -> list[str]:
    families = [*approver_families(kind, payload.get("data") or {}), f"WF#{workflow_id}"]
    if (by_kind := kind_family(kind)) is not None:
        families.append(by_kind)
    return families + [DUE_FAMILY] if due is not None else families


def due_of(deadline: float | None) -> str | None:
    """A gate's deadline (epoch seconds) as its entries sort it: the instant, as raisedAt is written."""
    return iso(datetime.fromtimestamp(float(deadline), UTC)) if deadline is not None else None


def delegate_families(interrupt: "OpenInterrupt") -> list[str]:
    """`P#{delegate}` for each delegation recorded on the gate: the delegate's page reads their own `P#` family, so
    a gate handed to them is listed there at no extra read."""
    return _delegates_of((v.action, v.delegate) for v in interrupt.votes)


def _delegates_of(votes: Iterable[tuple[str, str | None]]) -> list[str]:
    return list(dict.fromkeys(f"P#{delegate}" for action, delegate in votes if action == "delegate" and delegate))


def added_delegate_families(interrupt: "OpenInterrupt") -> list[str]:
    """The delegate family a transition that updated the gate adds to its entries: only a delegation record naming
    a delegate no earlier record named. A transition appends at most one vote, last (engine.run.resolve records a
    vote, engine.run.delegate a delegation), so every other update (a quorum's later votes) adds none."""
    if not interrupt.votes:
        return []
    last = interrupt.votes[-1]
    if last.action != "delegate" or not last.delegate:
        return []
    earlier = {v.delegate for v in interrupt.votes[:-1] if v.action == "delegate"}
    return [] if last.delegate in earlier else [f"P#{last.delegate}"]


# The field of a gate's open interrupt on its head, and the attribute of its item, that names the table its entries are
# in (store/layout.py: SECOND; absent: the first), so every write of them (a claim's put, a delegate's, the close's
# delete) goes where they are.
ENTRIES_TABLE = "entriesTable"
# The interrupt item's attributes Entry.of_item reads (a Query that hands it items projects these).
ENTRY_SOURCE_ATTRIBUTES = tuple(
    dict.fromkeys(
        (
            "runId",
            "interruptId",
            "raisedAt",
            "kind",
            "workflowId",
            "payload",
            "deadline",
            "votes",
            ENTRIES_TABLE,
            # And what a format-12 item's payload is put back from (gate_payloads.fill).
            *gate_payloads.FILL_NEEDS,
        )
    )
)


class Entry(NamedTuple):
    """What an entry names: enough to find the interrupt item, and to filter by kind before reading it."""

    tenant: str
    run_id: str
    key: str
    interrupt_id: str
    raised_at: str
    kind: str
    workflow_id: str
    families: tuple[str, ...]
    due: str | None = None
    assignee: str | None = None
    # The table its gate's entries are in (store/layout.py: FIRST, or SECOND as the gate's mark says).
    where: str = FIRST

    @classmethod
    def of(cls, tenant: str, run_id: str, workflow_id: str, interrupt: "OpenInterrupt") -> "Entry":
        due = due_of(interrupt.deadline)
        families = interrupt_families(interrupt.kind, workflow_id, interrupt.payload, due) + delegate_families(interrupt)
        return cls(
            tenant,
            run_id,
            interrupt.key,
            interrupt.interruptId,
            interrupt.raisedAt,
            interrupt.kind,
            workflow_id,
            tuple(dict.fromkeys(families)),
            due,
            interrupt.assignee,
            layout.where_of(interrupt.entriesTable),
        )

    @classmethod
    def of_item(cls, item: a.Item) -> "Entry":
        """The entry of an interrupt as its item holds it (store/run_items.interrupt_put): what a backfill writes for an
        interrupt opened before the index existed (interlude.migrations); a format-12 item's payload put back first
        (gate_payloads.fill)."""
        plain = gate_payloads.plain_payload(a.plain(item))
        votes = gate_votes(plain)
        delegates = _delegates_of((v.get("action", ""), v.get("delegate")) for v in votes)
        due = due_of(plain.get("deadline"))
        families = interrupt_families(plain["kind"], plain["workflowId"], plain["payload"], due) + delegates
        return cls(
            plain["runId"].split("/", 1)[0],
            plain["runId"],
            plain[wiring.SORT_KEY].removeprefix(INTERRUPT_SK_PREFIX),
            plain["interruptId"],
            plain["raisedAt"],
            plain["kind"],
            plain["workflowId"],
            tuple(dict.fromkeys(families)),
            due,
            where=layout.where_of(plain.get(ENTRIES_TABLE)),
        )

    def index_keys(self) -> list[a.Item]:
        def sk(family: str) -> str:
            return sharded.entry_sk(self.due if family == DUE_FAMILY and self.due else self.raised_at, self.interrupt_id)

        return [a.key(sharded.entry_pk(self.tenant, INDEX, f, self.interrupt_id), sk(f)) for f in self.families]

    def items(self) -> list[a.Item]:
        body = {
            "runId": a.s(self.run_id),
            "key": a.s(self.key),
            "kind": a.s(self.kind),
            "workflowId": a.s(self.workflow_id),
            **({"due": a.s(self.due)} if self.due else {}),
            **({"assignee": a.s(self.assignee)} if self.assignee else {}),
        }
        return [{**key, **body} for key in self.index_keys()]


def closed_entries(entries: Iterable[Entry]) -> a.Item:
    """The CLOSED_ENTRIES attribute naming `entries`' index keys, or none when there are none: [pk, sk], and the table's
    mark third for an entry in the second table (format 11)."""
    pairs = [
        [key[wiring.PARTITION_KEY]["S"], key[wiring.SORT_KEY]["S"], *([SECOND] if e.where == SECOND else [])]
        for e in entries
        for key in e.index_keys()
    ]
    return {CLOSED_ENTRIES: a.packed(pairs)} if pairs else {}


def closed_entry_keys(image: a.Item) -> list[tuple[str, a.Item]]:
    """The index keys an event batch item's image names in CLOSED_ENTRIES (none if it names none), each with the
    table it is in (no mark: the first)."""
    if CLOSED_ENTRIES not in image:
        return []
    return [(layout.where_of(mark[0] if mark else None), a.key(pk, sk)) for pk, sk, *mark in a.unpacked(image[CLOSED_ENTRIES])]


class ClosedGate(NamedTuple):
    """What the index keys of a closed gate's entries tell of it."""

    # When it was raised: the time its entries sort by, in any of them but its DUE one (sorted by the deadline); every
    # gate has a `WF#` entry.
    raised_at: str
    # The families it was listed under (`interrupt_families` and `delegate_families`: a `P#` family of a gate whose
    # node names no approver is a delegate's).
    families: tuple[str, ...]


def closed_gates(keys: Iterable[tuple[str, a.Item]]) -> dict[str, ClosedGate]:
    """The gates whose index keys are among `keys` (`closed_entry_keys`'), by interrupt id."""
    raised: dict[str, str] = {}
    families: dict[str, list[str]] = {}
    for _, key in keys:
        at, _, interrupt_id = key[wiring.SORT_KEY]["S"].partition("#")
        family = sharded.family_of(key[wiring.PARTITION_KEY]["S"], tenant_of(interrupt_id), INDEX)
        families.setdefault(interrupt_id, []).append(family)
        if family != DUE_FAMILY:
            raised[interrupt_id] = at
    return {i: ClosedGate(raised[i], tuple(f)) for i, f in families.items() if i in raised}


class EntryFilter(NamedTuple):
    """What a page keeps of the entries it reads, decided on the entries alone (before any interrupt is read)."""

    kind: str | None = None
    workflow_id: str | None = None
    # "mine": gates this subject works (claimed by them, or assigned to them); `unclaimed`: gates nobody works.
    assignee: str | None = None
    unclaimed: bool = False

    def accepts(self, item: a.Item) -> bool:
        if self.kind is not None and item["kind"]["S"] != self.kind:
            return False
        if self.workflow_id is not None and item["workflowId"]["S"] != self.workflow_id:
            return False
        works = (item.get("assignee") or {}).get("S")
        if self.unclaimed and works is not None:
            return False
        return self.assignee is None or works == self.assignee


class InboxPage(NamedTuple):
    interrupts: list[dict[str, Any]]
    cursor: str | None
    calls: int
    entries_read: int
    interrupts_read: int



# How long a process that found the entries' move (layout.ENTRIES_MOVED) not done yet reads both tables before it asks
# again; once done, it never asks again.
MOVE_ASKED_AGAIN_S = 300.0


class InboxIndex:
    def __init__(self, table: str, client: Any, entries_table: str) -> None:
        self.table = table
        self.client = client
        self.tables = {FIRST: table, SECOND: entries_table}
        self._moved = False
        self._asked_at: float | None = None

    def read_tables(self) -> tuple[str, ...]:
        """The tables a page reads its entries in (layout.INBOX_ENTRIES.read): the second alone once the deployment's
        migration moved the first's there (docs/adr/0170), asked of its checkpoint once per index (one a process:
        composition.Services.inbox_index) and, while not done, again after MOVE_ASKED_AGAIN_S."""
        moved_by = layout.INBOX_ENTRIES.moved_by
        now = time.monotonic()
        if moved_by is not None and not self._moved and (self._asked_at is None or now - self._asked_at >= MOVE_ASKED_AGAIN_S):
            self._moved, self._asked_at = finished(self.client, self.table, moved_by), now
        return layout.INBOX_ENTRIES.read(self._moved)

    # -- writes -----------------------------------------------------------------------------------------

    def delete(self, entries: Iterable[Entry]) -> None:
        self.delete_marked((e.where, key) for e in entries for key in e.index_keys())

    def delete_keys(self, keys: Iterable[a.Item], where: str = FIRST) -> None:
        """Delete entries by key from table `where`; deleting one already gone changes nothing and fails nothing."""
        self.batch_write([{"DeleteRequest": {"Key": key}} for key in keys], where)

    def delete_marked(self, keys: Iterable[tuple[str, a.Item]]) -> None:
        """Delete entries by (table, key), as closed_entry_keys names them."""
        grouped: dict[str, list[a.Item]] = {}
        for where, key in keys:
            grouped.setdefault(where, []).append(key)
        for where, group in grouped.items():
            self.delete_keys(group, where)

    def batch_write(self, requests: list[dict[str, Any]], where: str = FIRST) -> None:
        self.batch_write_in({where: requests})

    def batch_write_in(self, requests: dict[str, list[dict[str, Any]]]) -> None:
        """Write `requests` (by table: FIRST, SECOND) in BatchWriteItem calls of up to 25, each over both tables."""
        flat = [(self.tables[where], request) for where, some in requests.items() for request in some]
        for start in range(0, len(flat), BATCH_WRITE_MAX):
            pending: dict[str, Any] = {}
            for table, request in flat[start : start + BATCH_WRITE_MAX]:
                pending.setdefault(table, []).append(request)
            batch_write_all(self.client, pending)

    # -- the page ---------------------------------------------------------------------------------------

    def page(
        self,
        tenant: str,
        families: list[str],
        limit: int,
        cursor: str | None,
        query: str,
        wanted: EntryFilter | None = None,
        now_epoch: float | None = None,
        order: str = "newest",
    ) -> InboxPage:
        """The open interrupts of one round over `families`' partitions, in `order` (newest, oldest, due), as plain interrupt
        documents (status, payload, votes ...); `wanted` narrows the entries read. `query` names what was asked (a
        cursor resumes only the same); a cursor this tenant's same query did not mint raises ValueError.

        `due`: the DUE family's partitions first, soonest due first (a gate any caller may be eligible for: the
        service checks each), then `families`' entries of gates with no deadline, newest first. A page reads one
        round of the first and, once it is read to its end, one of the second: at most two rounds, whatever the
        tenant holds."""
        wanted = wanted or EntryFilter()
        tables = self.read_tables()
        streams = _in_tables([pk for family in families for pk in sharded.family_pks(tenant, INDEX, family)], tables)
        due = _in_tables(sharded.family_pks(tenant, INDEX, DUE_FAMILY), tables) if order == "due" else []
        streams = due + [pk for pk in streams if pk not in due]
        if cursor is None:
            positions = sharded.Positions(after=dict.fromkeys(streams))
        else:
            positions = sharded.decode_cursor(cursor, tenant, query, streams)
        items: list[a.Item] = []
        sources: list[str] = []
        queries = entries_read = 0
        if pending := [pk for pk in due if pk not in positions.done]:
            found = sharded.read_page(
                self.client, self.table, positions.of(pending), limit, wanted.accepts, True, self._locate
            )
            positions.moved(found.positions)
            items, sources, queries, entries_read = found.items, found.sources, found.queries, found.entries_read
        if len(items) < limit and set(due) <= positions.done:
            # Gates with a deadline were listed by DUE: the rest are those without one.
            accept = (lambda item: wanted.accepts(item) and "due" not in item) if due else wanted.accepts
            rest = [pk for pk in streams if pk not in due]
            found = sharded.read_page(
                self.client, self.table, positions.of(rest), limit - len(items), accept, order == "oldest", self._locate
            )
            positions.moved(found.positions)
            items, sources = items + found.items, sources + found.sources
            queries, entries_read = queries + found.queries, entries_read + found.entries_read
        wheres = [_stream_table(stream) for stream in sources]
        interrupts, reads, stale = self._open_interrupts(items, wheres, now_epoch or time.time())
        self.delete_marked(stale)
        next_cursor = None if positions.finished else sharded.encode_cursor(tenant, query, positions)
        return InboxPage(
            interrupts=interrupts,
            cursor=next_cursor,
            calls=queries + reads + len({where for where, _ in stale}),
            entries_read=entries_read,
            interrupts_read=len(items),
        )

    def _locate(self, stream: str) -> tuple[str | None, str]:
        where = _stream_table(stream)
        return self.tables[where], stream.removesuffix(_SECOND_TABLE_STREAM)

    def _open_interrupts(
        self, entries: list[a.Item], wheres: list[str], now_epoch: float
    ) -> tuple[list[dict[str, Any]], int, list[tuple[str, a.Item]]]:
        """The interrupt items the entries name that are open, in the entries' order; the BatchGetItem calls
        made; and the keys of entries to sweep, each with its table (`wheres`: each entry's). The heads of their runs are read in the same calls: a format-3 item's
        gate is open while its head holds it (store/gate_closes.py)."""
        keys = [a.key(run_pk(e["runId"]["S"]), interrupt_sk(e["key"]["S"])) for e in entries]
        heads = [a.key(pk, RUN_SK) for pk in dict.fromkeys(k[wiring.PARTITION_KEY]["S"] for k in keys)]
        got: dict[tuple[str, str], a.Item] = {}
        calls = 0
        # Two entries may name one interrupt (a losing transition's, put before it with its own time, outlives it until
        # the gate closes): BatchGetItem refuses a repeated key, and the page lists the interrupt once.
        pending = [a.key(*pair) for pair in dict.fromkeys((k[wiring.PARTITION_KEY]["S"], k[wiring.SORT_KEY]["S"]) for k in keys)] + heads
        while pending:
            batch, pending = pending[:BATCH_GET_MAX], pending[BATCH_GET_MAX:]
            request: dict[str, Any] = {self.table: {"Keys": batch}}
            for answer in batch_get_answers(self.client, request):
                calls += 1
                for item in answer.get("Responses", {}).get(self.table, []):
                    got[(item[wiring.PARTITION_KEY]["S"], item[wiring.SORT_KEY]["S"])] = item
        calls += gate_payloads.fill(self.client, self.table, got.values())
        held: dict[str, set[str]] = {}
        out: list[dict[str, Any]] = []
        stale: list[tuple[str, a.Item]] = []
        listed: set[tuple[str, str]] = set()
        for entry, where, key in zip(entries, wheres, keys, strict=True):
            pk = key[wiring.PARTITION_KEY]["S"]
            if (pk, key[wiring.SORT_KEY]["S"]) in listed:
                continue
            item = got.get((pk, key[wiring.SORT_KEY]["S"]))
            entry_key = (where, _entry_key(entry))
            if item is None:
                raised_at = entry[wiring.SORT_KEY]["S"].rsplit("#", 1)[0]
                if now_epoch - epoch_of(raised_at) > ORPHAN_GRACE_S:
                    stale.append(entry_key)
                continue
            doc = interrupt_document(item)
            if gate_closes.written_once(doc):
                if pk not in held:
                    head = got.get((pk, RUN_SK))
                    held[pk] = gate_closes.open_ids(head) if head else set()
                is_open = doc["interruptId"] in held[pk]
                doc["status"] = "open"
            else:
                is_open = doc.get("status") == "open"
            if not is_open:
                stale.append(entry_key)
                continue
            listed.add((pk, key[wiring.SORT_KEY]["S"]))
            out.append(doc)
        return out, calls, stale


# A page's stream of a partition in the second table: its key, then this (a partition key of the inbox ends with its
# shard's digits, so no first-table stream ends so). A cursor names each stream it read.
_SECOND_TABLE_STREAM = "@" + SECOND


def _in_tables(pks: list[str], tables: tuple[str, ...]) -> list[str]:
    """The streams of partitions `pks` in `tables` (InboxIndex.read_tables). Each partition's stream of the first
    table sorts before its second's (read_page queries them in that order), so a page that meets a gate's entries
    during their move (migration 0011: put in the second, then deleted from the first) finds them in one or both, and
    lists the gate once (read_page consumes entries of one sort key together)."""
    return [pk + ("" if where == FIRST else _SECOND_TABLE_STREAM) for where in tables for pk in pks]


def _stream_table(stream: str) -> str:
    return SECOND if stream.endswith(_SECOND_TABLE_STREAM) else FIRST


def _entry_key(entry: a.Item) -> a.Item:
    return a.key(entry[wiring.PARTITION_KEY]["S"], entry[wiring.SORT_KEY]["S"])


def interrupt_document(item: a.Item) -> dict[str, Any]:
    """An interrupt item as plain JSON (its votes and payload parsed: a format-12 item's put back first,
    gate_payloads.fill), without its keys."""
    skip = {wiring.PARTITION_KEY, wiring.SORT_KEY, wiring.INBOX_INDEX.partition_key, wiring.INBOX_INDEX.sort_key}
    doc = gate_payloads.plain_payload(a.plain({k: v for k, v in item.items() if k not in skip}))
    doc["votes"] = gate_votes(doc)
    return doc


def gate_votes(plain: dict[str, Any]) -> list[dict[str, Any]]:
    """The votes of an interrupt item read plain (a JSON text as store/run_items writes it; none: [])."""
    votes = plain.get("votes")
    return json.loads(votes) if isinstance(votes, str) else votes or []


def run_interrupts(client: Any, table: str, run_id: str) -> list[dict[str, Any]]:
    """Every interrupt the run raised, open or closed, with its status (and resolution once closed), oldest first
    (a run's export: app/run_export.py). A format-3 item's are read from the run's events (store/gate_closes.py)."""
    pages = client.get_paginator("query").paginate(
        TableName=table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :i)",
        ExpressionAttributeValues={":pk": a.s(run_pk(run_id)), ":i": a.s(interrupt_sk(""))},
    )
    items = [item for page in pages for item in page.get("Items") or []]
    gate_payloads.fill(client, table, items)
    docs = [interrupt_document(item) for item in items]
    once = [d for d in docs if gate_closes.written_once(d)]
    if once:
        found = gate_closes.closes(client, table, run_id, once)
        docs = [gate_closes.with_close(d, found.get(d["interruptId"])) if d in once else d for d in docs]
    docs.sort(key=lambda d: sharded.entry_sk(d["raisedAt"], d["interruptId"]))
    return docs


def run_open_interrupts(client: Any, table: str, run_id: str) -> tuple[list[dict[str, Any]], int]:
    """The run's open interrupts, newest first, read from its own partition (bounded by the run's step budget),
    and the calls sent: its format-3 items (no status) are those its head holds open, read once any is found."""
    pages = client.get_paginator("query").paginate(
        TableName=table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :i)",
        FilterExpression="#st = :open OR attribute_not_exists(#st)",
        ExpressionAttributeNames={"#st": "status"},
        ExpressionAttributeValues={":pk": a.s(run_pk(run_id)), ":i": a.s(interrupt_sk("")), ":open": a.s("open")},
    )
    items: list[a.Item] = []
    calls = 0
    for page in pages:
        calls += 1
        items += page.get("Items") or []
    calls += gate_payloads.fill(client, table, items)
    docs = [interrupt_document(item) for item in items]
    if any(gate_closes.written_once(d) for d in docs):
        head = client.get_item(TableName=table, Key=a.key(run_pk(run_id), RUN_SK)).get("Item")
        calls += 1
        held = gate_closes.open_ids(head) if head else set()
        docs = [
            {**d, "status": "open"} if gate_closes.written_once(d) else d
            for d in docs
            if not gate_closes.written_once(d) or d["interruptId"] in held
        ]
    docs.sort(key=lambda d: sharded.entry_sk(d["raisedAt"], d["interruptId"]), reverse=True)
    return docs, calls
