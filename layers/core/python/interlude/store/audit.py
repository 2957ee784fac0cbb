"""The audit log's items: wiring.AUDIT_CHAINS hash chains per tenant, each with its head and signed checkpoints.

  entry       T#{tenant}#AUDIT#{chain:03}      A#{seq:012}   entry: the JSON document that is hashed (rules/audit.py)
  checkpoint  T#{tenant}#AUDIT#{chain:03}      C#{at:012}    checkpoint id, atSequence, merkleRoot, signature, at
  head        T#{tenant}#AUDITHEAD#{chain:03}  AUDITHEAD     seq, hash (of entry seq), checkpointSeq, pendingSince,
                                                             marked (the pending marker is written), checkpointedAt
  pending     T#{tenant}#AUDITHEAD#{chain:03}  PENDING       on the `inbox` GSI (gsi1pk AUDIT#PENDING#{shard}, gsi1sk
                                                             {tenant}#{chain:03}) while an entry waits for a checkpoint
                                                             or the chain's head for its tenant's anchor, and
                                                             rules/audit.MARKER_KEEP_SECONDS after

An entry goes to the chain its run (or key, or else its tenant) hashes to (`chain_of`), so a run's entries form
one chain in order. Each chain is an RFC 0218 log of its own: sequence from 1, prevHash, checkpoints over its own
ranges. The head is its chain's single writer: an append writes the entry (never over an existing one) and moves
the head on condition that it still names the entry and checkpoint it read, in the same TransactWriteItems as the
action it records, so an action and its entry land together or not at all. A concurrent append that moved the head
first makes the transaction fail on the head alone; the head it failed on comes back with the failure (ALL_OLD),
so the append places its entry after that one without reading again (APPEND_RETRIES). The pending marker is
written only by an append that finds the head unmarked, and removed by the sweep (`settle`, with the head's mark, in
one transaction) once a checkpoint anchors all of it, the tenant's anchor holds that head and no entry has come for
MARKER_KEEP_SECONDS: at most one GSI write per checkpoint interval, not one per append, and at a quiet tenant's pace
not one per decision (ADR 0122). Entries live in partitions that are only
ever Put into (every deployed role is denied UpdateItem and DeleteItem on them: wiring.APPEND_ONLY_PARTITIONS);
docs/scale.md has the ceilings.

An action with an event batch may carry its entry's draft on that item instead (`audit`, format 5: docs/adr/0128): the
appender on the stream (`AuditLog.append_drafts`, from dispatch) chains a batch's drafts per chain without a
transaction (docs/adr/0135): each entry one conditional PutItem at the next sequence (never over an existing one: a
second appender's put on a taken place fails, and it reads the head again), then the head moved over them by one
conditional UpdateItem (on condition that it is the head read, and marked; an unmarked head is moved with its marker
in one transaction). Each such entry names its `source` (the event batch's key) and every entry when it was
`appended`, and the head when an append last moved it (`appendedAt`): a draft delivered again finds its entry among
those appended since its action, or past the head, and is skipped, so each action has one entry. An appender keeps
the newest entries of each chain it put or read (`KnownEntries`: their sources, in memory) and reads back only those
appended since, so a dispatch backlog's appends do not each read its whole tail again (docs/adr/0156).

An entry may lie beyond its chain's head (docs/adr/0135): an append of plain writes that stopped before moving the
head leaves its entries there, orphans; and where heads lag (docs/adr/0172, formats.AUDIT_HEAD_LAGS_WRITTEN) an append
leaves the head behind its entries on purpose (rules/audit.head_may_lag). The run of them that chains from the head
(each the next sequence, its prevHash the hash before it: the draft of a committed action) is part of the chain for
every reader: the listing reads it with a marked chain's page (`listed`: docs/adr/0173), verification to its end
(`tails`), a checkpoint moves the head over it before it covers it (`caught_up`), the sweep's settle leaves the chain
on the pending index while an entry lies past its head.
Every append that finds its entry's place taken while the head held reads what lies beyond (`orphans`): it ADOPTS
that run, placing its own entries after it (and moving the head over them, unless it may lag), and a draft it carries
that an adopted orphan names (`source`) is not appended again. An entry beyond the head that does
not chain from it was not written by an append (none chains from anything but the entry before it, which the head
covers or an adopted orphan is), was never part of the chain and never could be (no append adopts it, so no head
ever covers it): an append writes over it, on condition that it is still what was read and that the head has not
moved, and logs what it was.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import zlib
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from interlude import wiring
from interlude.domain import clock, formats
from interlude.domain.audit import AuditDraft
from interlude.domain.errors import Unavailable
from interlude.domain.formats import AUDIT_DRAFT_ON_BATCH, FORMAT_FIELD
from interlude.rules.audit import HEAD_LAG_ENTRIES, Head, canonical, entry_hash, hash_of, head_may_lag
from interlude.store import attributes as a
from interlude.store.item_index import shard_of
from interlude.store.table import batch_get

ENTRY_SK_PREFIX = "A#"
CHECKPOINT_SK_PREFIX = "C#"
HEAD_SK = "AUDITHEAD"
PENDING_SK = "PENDING"
# How an append's items are labelled among a transaction's items (a failed condition names its label).
ENTRY_LABEL = "AUDIT#ENTRY"
PENDING_LABEL = "AUDIT#PENDING"
APPEND_LABELS = frozenset({HEAD_SK, ENTRY_LABEL, PENDING_LABEL})
# Chains waiting for a checkpoint are spread over this many index partitions (the sweep reads each).
PENDING_SHARDS = 8
# Appends that lose the head to a concurrent one are sent again this often before the action is refused as busy.
APPEND_RETRIES = 8
# An event batch's attribute holding the draft of the entry that records its transition (format 5).
DRAFT_ATTRIBUTE = "audit"
# The most entries one append from the stream writes before moving the head: the transaction of an append that writes
# over a stale entry past the head holds 100 items, with the head and the marker.
MAX_ENTRIES_PER_APPEND = 98
# How far apart two functions' clocks may be (an action's `at` against the appender's `appended`): Lambda's follow
# Amazon Time Sync to well under a millisecond. An entry appended this long before a draft's action cannot be its.
CLOCK_SLACK_S = 5.0
# An entry from before `appended` was kept is timed by its action's `at` (the same transaction as its append), less
# this: an action's request may spend a while (its retries) between taking `at` and committing.
UNTIMED_ENTRY_SLACK_S = 60.0
# Entries read back per page while looking for drafts appended before (≈ 5 KB: 2 RRU, strongly consistent).
SOURCE_PAGE = 10
# The most entries per page when reading those appended since the ones an appender knows, when it reads them whole:
# the fewer pages, the fewer started 4 KB (100 entries ≈ 40 KB: 11 RRU, against 20 in pages of 10).
NEWER_PAGE = 100
# The highest sequence an entry's key holds (entry_sk: twelve digits).
LAST_SEQ = 10**12 - 1
# The most entries an appender knows (`KnownEntries`) over all its chains: ≈ 0.3 KB each in memory, 6 MB in all. A
# dispatch backlog of this many entries per instance is not read back again by each append (docs/adr/0156). It bounds
# the number of chains known too, so many chains of few entries stay bounded as well.
KNOWN_ENTRIES = 20_000

# A listing's page that starts at most this many entries under a marked head reads them too, and drops them, in the one
# Query that reads the run past the head (`AuditLog.listed`): seven entries of ≈ 520 B fill the 4 KB of the read unit
# a second Query would bill (docs/adr/0173).
FOLDED_GAP = HEAD_LAG_ENTRIES - 1

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Listed:
    """A chain as a listing's page reads it: its tail (docs/adr/0172), its entries newest first (each with its key's
    sequence as `_seq`), and whether older ones remain."""

    tail: Head
    entries: list[dict[str, Any]]
    more: bool


def chain_of(draft: AuditDraft) -> int:
    """The chain an entry goes to: its run's (a run's decisions, votes, mints and cancel stay in one chain), its
    key's, or else its tenant's."""
    member = draft.target.get("runId") or draft.target.get("keyId") or draft.tenant
    return chain_of_member(str(member))


def chain_of_member(member: str) -> int:
    return shard_of(member, wiring.AUDIT_CHAINS)


def log_pk(tenant: str, chain: int) -> str:
    return f"T#{tenant}#AUDIT#{chain:03d}"


def head_pk(tenant: str, chain: int) -> str:
    return f"T#{tenant}#AUDITHEAD#{chain:03d}"


def entry_sk(seq: int) -> str:
    return f"{ENTRY_SK_PREFIX}{seq:012d}"


def checkpoint_sk(at: int) -> str:
    return f"{CHECKPOINT_SK_PREFIX}{at:012d}"


def pending_shard(tenant: str, chain: int) -> str:
    return f"AUDIT#PENDING#{zlib.crc32(f'{tenant}#{chain}'.encode()) % PENDING_SHARDS}"


def head_of(item: dict[str, Any] | None) -> Head:
    return head_of_plain(a.plain(item)) if item else Head()


def head_of_plain(item: dict[str, Any] | None) -> Head:
    """The head from a failed condition's old image (store/attributes.plain)."""
    if not item or "seq" not in item:
        return Head()
    since, anchored, appended = item.get("pendingSince"), item.get("checkpointedAt"), item.get("appendedAt")
    return Head(
        int(item["seq"]),
        str(item["hash"]),
        int(item.get("checkpointSeq") or 0),
        float(since) if since is not None else None,
        "marked" in item,
        float(anchored) if anchored is not None else None,
        float(appended) if appended is not None else None,
    )


def draft_attributes(draft: AuditDraft, events: bytes) -> a.Item:
    """An event batch's attributes carrying the draft of its transition's entry, for the appender (format 5): deflated
    against the batch's `events` (their compact JSON), whose ids, subject and values it repeats, so that it rarely
    takes the item past a kilobyte it was under (a transaction bills 2 WRU per started kilobyte)."""
    return {DRAFT_ATTRIBUTE: a.packed_against(draft.fields(), events), FORMAT_FIELD: a.n(AUDIT_DRAFT_ON_BATCH)}


def carried_draft(image: a.Item) -> AuditDraft | None:
    """The draft an event batch carries (format 5), if it carries one."""
    carried = image.get(DRAFT_ATTRIBUTE)
    if carried is None:
        return None
    events = a.unpacked_json(image["events"])
    dictionary = events.encode() if isinstance(events, str) else events
    return AuditDraft.of_fields(a.unpacked_against(carried, dictionary))


def draft_source(pk: str, sk: str) -> str:
    """What names the event batch a draft came on, on the entry appended from it."""
    return f"{pk}/{sk}"


# An entry as the check for drafts appended before reads it: (sequence, `appended`, source or None).
Row = tuple[int, float, str | None]


class KnownEntries:
    """The newest entries of a chain that its appender read back or put itself, contiguous up to a head it read or
    moved (`top`, the hash there `top_hash`), oldest first, with the sequence of each source they name: what the check
    for drafts appended before reads back from the head otherwise (docs/adr/0156). An entry at or under a head is never
    written again (its partition is only Put into, and an append writes over an entry only past the head it read), so
    these stay what the table holds while the chain is the one known: its head is the top, or the entry after the top
    names the top's hash."""

    def __init__(self, top: int, top_hash: str, rows: Iterable[Row]) -> None:
        self.top, self.top_hash = top, top_hash
        self.rows: deque[Row] = deque()
        self.sources: dict[str, int] = {}
        self.extend_older(reversed(list(rows)))

    @property
    def bottom(self) -> int:
        return self.rows[0][0] if self.rows else self.top + 1

    def under(self, head: Head) -> bool:
        """Whether `head` may be this chain's now: at the top (the same hash) or past it."""
        return self.top < head.seq or (self.top == head.seq and self.top_hash == head.hash)

    def reach_back(self, since: float) -> bool:
        """Whether an entry appended at or after `since` may lie below these (none of them was appended before it)."""
        return not self.rows or self.rows[0][1] >= since

    def extend(self, head: Head, rows: Iterable[Row]) -> None:
        """The entries after the top, oldest first, up to `head`."""
        for row in rows:
            self.rows.append(row)
            if row[2] is not None:
                self.sources[row[2]] = row[0]
        self.top, self.top_hash = head.seq, str(head.hash)

    def extend_older(self, rows: Iterable[Row]) -> None:
        """The entries below the bottom, newest first."""
        for row in rows:
            self.rows.appendleft(row)
            if row[2] is not None:
                self.sources.setdefault(row[2], row[0])

    def drop_oldest(self) -> None:
        seq, _, source = self.rows.popleft()
        if source is not None and self.sources.get(source) == seq:
            del self.sources[source]


@dataclass(frozen=True)
class Orphans:
    """What lies beyond a chain's head that was read: `seq` and `hash` are the last entry of the run that chains from
    the head (the head's own when none does), which an append adopts; `sources` what those name; `stale` the text of
    each entry past that run, by sequence, which an append writes over. An adopted entry joins the chain when the
    head covers it: it waits for a checkpoint from then (`pendingSince`), as the append's own entries do."""

    seq: int
    hash: str | None
    sources: frozenset[str] = frozenset()
    stale: dict[int, str] = field(default_factory=dict)
    # When the last entry of the run was appended (None when the run is empty, or its entries do not say).
    appended: float | None = None

    def adopts(self, head: Head) -> bool:
        return self.seq > head.seq

    def tail(self, head: Head) -> Head:
        """The chain as its readers take it (docs/adr/0172): `head` moved over the run that chains from it."""
        if not self.adopts(head):
            return head
        return head._replace(seq=self.seq, hash=self.hash, appended_at=self.appended or head.appended_at)


def orphans_of(head: Head, chain: int, beyond: Sequence[dict[str, Any]]) -> Orphans:
    """The orphans among the entry items stored past `head` (ascending): the run that chains from it, and the rest."""
    seq, digest, sources, appended = head.seq, head.hash, set[str](), None
    stale: dict[int, str] = {}
    for item in beyond:
        at, entry = _seq_of(item), _entry(item)
        if not stale and at == seq + 1 and entry.get("seq") == at and entry.get("chain") == chain and entry.get("prevHash") == digest:
            seq, digest = at, entry_hash(entry)
            appended = float(item["appended"]["N"]) if "appended" in item else None
            if "source" in item:
                sources.add(item["source"]["S"])
        else:
            stale[at] = item["entry"]["S"]
    return Orphans(seq, digest, frozenset(sources), stale, appended)


def append_items(
    draft: AuditDraft, chain: int, head: Head, now_epoch: float, orphans: Orphans | None = None
) -> tuple[list[tuple[str, dict[str, Any]]], Head]:
    """The entry after `head` (after the orphans it adopts) and the head's move to it, as labelled
    TransactWriteItems, and the head written."""
    return chain_items(draft.tenant, chain, head, [(draft, None)], now_epoch, orphans)


def chain_items(
    tenant: str,
    chain: int,
    head: Head,
    placed: Sequence[tuple[AuditDraft, str | None]],
    now_epoch: float,
    orphans: Orphans | None = None,
) -> tuple[list[tuple[str, dict[str, Any]]], Head]:
    """The entries of `placed` (each draft with the source it came from, None when its action appends it itself)
    after `head`, or after the orphans read past it that it adopts, in order, and the head's move to the last, as
    labelled TransactWriteItems; and the head written."""
    appended = round(clock.now().timestamp(), 3)
    seq, digest = (orphans.seq, orphans.hash) if orphans is not None else (head.seq, head.hash)
    stale = orphans.stale if orphans is not None else {}
    entries: list[tuple[str, dict[str, Any]]] = []
    for draft, source in placed:
        seq += 1
        text = canonical(draft.entry(seq, digest, chain))
        digest = hash_of(text)
        entry: a.Item = {
            **a.key(log_pk(tenant, chain), entry_sk(seq)),
            "entry": a.s(text.decode("utf-8")),
            "appended": a.n(appended),
        }
        if source is not None:
            entry["source"] = a.s(source)
        put: dict[str, Any] = {"Item": entry, "ConditionExpression": "attribute_not_exists(sk)"}
        if seq in stale:
            # Not part of the chain (module docstring): written over while it is what was read, and the head (whose
            # condition is in the same transaction) has not moved.
            # No append writes such an entry (module docstring): ERROR, for the operator's search of caught errors.
            logger.error(
                "audit chain %s of tenant %s: entry %s did not chain from the head; written over: %s",
                chain,
                tenant,
                seq,
                stale[seq],
                extra={"caughtError": "audit-stale-entry"},
            )
            put["ConditionExpression"] = "#entry = :stale"
            put["ExpressionAttributeNames"] = {"#entry": "entry"}
            put["ExpressionAttributeValues"] = {":stale": a.s(stale[seq])}
        entries.append((ENTRY_LABEL, {"Put": put}))
    # The head is written whole, on condition that it still names the entry, the checkpoint and the mark read. Those
    # pin every attribute a head holds: hash moves only with seq (appends), pendingSince only with seq (an append sets
    # it when absent) or with checkpointSeq (a checkpoint always moves it forward), checkpointedAt only with
    # checkpointSeq, the mark only with seq (an append sets it) or by the sweep's settle (which removes the marker with
    # it: an append that read the mark then fails here, and writes the marker when it tries again), and no head exists
    # before its chain's first append. So the head the condition admits is the one read, and the Put leaves it as an
    # update expression setting each field would (same write unit; a fifth of the update's work in the local stack's
    # moto: docs/adr/0045). checkpointedAt is dropped: it only tells when a chain with no entry waiting was anchored.
    if head.seq == 0:
        condition, values = "attribute_not_exists(seq)", None
    else:
        mark = "attribute_exists(marked)" if head.marked else "attribute_not_exists(marked)"
        condition = f"seq = :prev AND checkpointSeq = :cp AND {mark}"
        values = {":prev": a.n(head.seq), ":cp": a.n(head.checkpoint_seq)}
    since = head.pending_since if head.pending_since is not None else round(now_epoch, 3)
    move: dict[str, Any] = {
        "Item": {
            **a.key(head_pk(tenant, chain), HEAD_SK),
            "seq": a.n(seq),
            "hash": a.s(str(digest)),
            "pendingSince": a.n(since),
            "checkpointSeq": a.n(head.checkpoint_seq),
            "marked": a.n(1),
            "appendedAt": a.n(appended),
        },
        "ConditionExpression": condition,
    }
    if values is not None:
        move["ExpressionAttributeValues"] = values
    items: list[tuple[str, dict[str, Any]]] = [(HEAD_SK, {"Put": move}), *entries]
    # A head from before the mark was kept has its marker while an entry waits (pendingSince), as then.
    if not head.marked and head.pending_since is None:
        index = wiring.INBOX_INDEX
        marker = {
            **a.key(head_pk(tenant, chain), PENDING_SK),
            index.partition_key: a.s(pending_shard(tenant, chain)),
            index.sort_key: a.s(f"{tenant}#{chain:03d}"),
        }
        items.append((PENDING_LABEL, {"Put": {"Item": marker}}))
    pending = head.pending_since if head.pending_since is not None else now_epoch
    written = Head(seq, digest, head.checkpoint_seq, pending, True, None, appended)
    return items, written


class AuditLog:
    def __init__(self, table: str, client: Any) -> None:
        self.table = table
        self.client = client
        # By (tenant, chain), the least recently used first: what this appender knows of each chain's newest entries,
        # and how many entries that is. A thread takes a chain's out while it reads or appends, and puts it back.
        self._known: OrderedDict[tuple[str, int], KnownEntries] = OrderedDict()
        self._known_held = 0
        self._known_lock = threading.Lock()

    def head(self, tenant: str, chain: int) -> Head:
        got = self.client.get_item(TableName=self.table, Key=a.key(head_pk(tenant, chain), HEAD_SK), ConsistentRead=True)
        return head_of(got.get("Item"))

    def heads(self, tenant: str, chains: list[int] | None = None, consistent: bool = True) -> dict[int, Head]:
        """Every chain of the tenant (or of `chains`) that holds an entry, with its head (one BatchGetItem per 100;
        `consistent`: strongly consistent, else eventually, at half the read units)."""
        wanted = range(wiring.AUDIT_CHAINS) if chains is None else sorted(set(chains))
        keys = [a.key(head_pk(tenant, chain), HEAD_SK) for chain in wanted]
        found = {
            int(item[wiring.PARTITION_KEY]["S"].rsplit("#", 1)[1]): head_of(item)
            for item in batch_get(self.client, self.table, keys, ConsistentRead=consistent)
        }
        return {chain: found[chain] for chain in sorted(found)}

    def append_drafts(self, tenant: str, chain: int, placed: list[tuple[AuditDraft, str]], now_epoch: float) -> Head | None:
        """Chain drafts carried on event batches (each with its source: `draft_source`), in order, skipping those
        already appended (a record delivered again, its entry in the chain or past its head), up to
        MAX_ENTRIES_PER_APPEND at a time: each entry put on its own, then the head moved on condition that it is the
        head read (`_append_plain`), unless it may lag (`_lags`). The chain as its readers take it after (its tail:
        `Orphans.tail`); None when every draft was appended before. Unavailable when other appends keep moving the head
        (the record goes again)."""
        unique: dict[str, AuditDraft] = {}
        for draft, source in placed:
            unique.setdefault(source, draft)  # one record twice in a batch: one entry
        waiting = [(draft, source) for source, draft in unique.items()]
        since = min(clock.epoch_of(draft.at) for draft, _ in waiting) - CLOCK_SLACK_S
        head, written, lost, checked = self.head(tenant, chain), None, 0, False
        # The run past the head this append's entries follow (None: none is known, a taken place tells).
        orphans = self.beyond(tenant, chain, head)
        while waiting or (orphans is not None and orphans.adopts(head) and not self._lags(head, orphans.seq)):
            tail = orphans.tail(head) if orphans is not None else head
            if not checked:
                # Entries appended since the first of these actions, newest first: any of these sources among them
                # was appended by an earlier delivery. Not read again while the head is the one this append wrote.
                # Nor among the orphans it adopts (its own draft, put by a delivery that stopped before the head).
                found = self.sources_since(tenant, chain, tail, since, {source for _, source in waiting})
                if orphans is not None:
                    found |= orphans.sources
                waiting = [(draft, source) for draft, source in waiting if source not in found]
                checked = True
                continue
            chunk = waiting[:MAX_ENTRIES_PER_APPEND]
            items, moved = chain_items(tenant, chain, head, chunk, now_epoch, orphans)
            # Plain writes, unless an entry past the head is written over: then in the head's transaction (its
            # condition ties the overwrite to a place the head does not cover).
            if not (orphans is not None and orphans.stale):
                lag = self._lags(head, moved.seq)
                if self._append_plain(tenant, chain, head, items, moved, lag):
                    self._know_appended(tenant, chain, chunk, tail, moved)
                    written = moved
                    head, orphans = (head, Orphans(moved.seq, moved.hash, appended=moved.appended_at)) if lag else (moved, None)
                    waiting = waiting[len(chunk) :]
                    continue
                lost += 1
                if lost > APPEND_RETRIES:
                    raise Unavailable("the audit chain kept moving while appending; the record goes again")
                # A place taken (orphans, or another append's entries) or the head moved: read both again.
                head, checked = self.head(tenant, chain), False
                orphans = self.orphans(tenant, chain, head)
                continue
            for _, op in items:
                body = next(iter(op.values()))
                body["TableName"] = self.table
                body["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
            try:
                self.client.transact_write_items(TransactItems=[op for _, op in items])
            except self.client.exceptions.TransactionCanceledException as exc:
                lost += 1
                if lost > APPEND_RETRIES:
                    raise Unavailable("the audit chain kept moving while appending; the record goes again") from exc
                # Another append moved the head (its image comes with the failure) or held it (read again); or the
                # head held and an entry's place was taken: what lies beyond the head is read, to adopt.
                reasons = exc.response.get("CancellationReasons") or []
                moved_on = bool(reasons) and reasons[0].get("Code") == "ConditionalCheckFailed"
                old = reasons[0].get("Item") if moved_on else None
                head, checked = head_of(old) if old else self.head(tenant, chain), False
                taken = any(r.get("Code") == "ConditionalCheckFailed" for r in reasons[1:])
                orphans = self.orphans(tenant, chain, head) if taken and not moved_on else None
                continue
            self._know_appended(tenant, chain, chunk, tail, moved)
            head = written = moved
            orphans = None
            waiting = waiting[len(chunk) :]
        return written

    @staticmethod
    def _lags(head: Head, tail: int) -> bool:
        """Whether an append whose entries reach `tail` leaves the head where it is (formats.AUDIT_HEAD_LAGS_WRITTEN)."""
        return formats.AUDIT_HEAD_LAGS_WRITTEN and head_may_lag(head, tail)

    def beyond(self, tenant: str, chain: int, head: Head) -> Orphans | None:
        """The run past `head` an append's entries follow, read before any put where this head may lag: one strongly
        consistent Query (at most HEAD_LAG_ENTRIES - 1 entries, one read unit). Not the tail this appender knows:
        another instance's append may lie past it, and a put on a taken place costs a write unit, the head read again
        and this Query anyway (docs/adr/0172). None where the head may not lag: an entry past it is rare then (a
        crash's, a later release's after a rollback, an append's that read the head before a checkpoint), and the put
        that finds its place taken reads it; a quiet chain's append (its head unmarked) reads nothing more."""
        return self.orphans(tenant, chain, head) if self._lags(head, head.seq + 1) else None

    def _append_plain(
        self, tenant: str, chain: int, head: Head, items: list[tuple[str, dict[str, Any]]], moved: Head, lag: bool = False
    ) -> bool:
        """Write an append's entries one conditional PutItem each, in order, then move the head over them (and the
        orphans it adopts), unless it may `lag` (docs/adr/0172): a marked head by one conditional UpdateItem, 1 WRU an
        entry and 1 the head against 2 each in a transaction (docs/adr/0135). An unmarked head (the chain off the
        pending index) is moved with its marker in one transaction, as before: the sweep's `settle` takes both off
        together, which a marker put apart from the head's move could not tell. False when an entry's place was taken
        or the head moved (or its mark changed) since it was read: the entries put stay past the head, orphans the next
        append adopts (this one's, when it tries again)."""
        for label, op in items:
            if label != ENTRY_LABEL:
                continue
            try:
                self.client.put_item(TableName=self.table, **op["Put"])
            except self.client.exceptions.ConditionalCheckFailedException:
                return False
        if lag:
            return True
        if not head.marked:
            moves = [op for label, op in items if label != ENTRY_LABEL]
            for op in moves:
                next(iter(op.values()))["TableName"] = self.table
            try:
                self.client.transact_write_items(TransactItems=moves)
            except self.client.exceptions.TransactionCanceledException:
                return False
            return True
        values = {
            ":read": a.n(head.seq),
            ":seq": a.n(moved.seq),
            ":hash": a.s(str(moved.hash)),
            ":at": a.n(moved.appended_at or 0),
            ":since": a.n(round(moved.pending_since or 0, 3)),
        }
        try:
            # pendingSince stays when set (the oldest entry waiting); a checkpoint that took it since brings it back.
            # checkpointSeq is the checkpoints' own (an UpdateItem leaves it), so a checkpoint in between stands.
            self.client.update_item(
                TableName=self.table,
                Key=a.key(head_pk(tenant, chain), HEAD_SK),
                UpdateExpression="SET seq = :seq, #hash = :hash, appendedAt = :at, pendingSince = if_not_exists(pendingSince, :since)"
                " REMOVE checkpointedAt",
                ConditionExpression="seq = :read AND attribute_exists(marked)",
                ExpressionAttributeNames={"#hash": "hash"},
                ExpressionAttributeValues=values,
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def orphans(self, tenant: str, chain: int, head: Head, consistent: bool = True) -> Orphans:
        """What lies beyond the chain's `head` (strongly consistent unless not `consistent`): the orphans an append
        adopts, and the stale."""
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":pk": a.s(log_pk(tenant, chain)),
                ":lo": a.s(entry_sk(head.seq + 1)),
                ":hi": a.s(entry_sk(LAST_SEQ)),
            },
            ConsistentRead=consistent,
        )
        return orphans_of(head, chain, [item for page in pages for item in page.get("Items") or []])

    def tails(self, tenant: str, heads: dict[int, Head], consistent: bool = True) -> dict[int, Head]:
        """Each chain as its readers take it: its head moved over the run past it that chains from it (docs/adr/0172),
        one Query past each marked head (`consistent`: strongly, else eventually, at half the read units). A head is
        left behind only while it is marked (rules/audit.head_may_lag), and the sweep's settle, which unmarks it, moves
        it over any entry past it first: an unmarked head is its chain's tail but for a crash's orphan (ADR 0135), so a
        settled chain (a quiet tenant's, most of them) costs a reader no read past it."""
        return {
            chain: self.orphans(tenant, chain, head, consistent).tail(head) if head.marked else head
            for chain, head in heads.items()
        }

    def caught_up(self, tenant: str, chain: int, head: Head) -> Head | None:
        """The chain's head moved over the run past it that chains from it, before a checkpoint covers them (their
        checkpoint stays at or under the head, as the sweep, its settle and the anchor take it); `head` itself when
        none lies there. None when the head moved since it was read."""
        orphans = self.orphans(tenant, chain, head)
        if not orphans.adopts(head):
            return head
        items, moved = chain_items(tenant, chain, head, [], clock.now().timestamp(), orphans)
        return moved if self._append_plain(tenant, chain, head, items, moved) else None

    def sources_since(self, tenant: str, chain: int, head: Head, since: float, sources: set[str]) -> set[str]:
        """Which of `sources` the chain's entries up to `head` name, reading back from the head only as far as the
        entries appended at or after `since` (epoch seconds): none when the head was last moved before it. The entries
        this appender knows (`KnownEntries`) are not read again: only those appended since, and any below them that
        may have been appended after `since`. `head` may be the chain's tail, past its stored head (docs/adr/0172)."""
        if not sources or head.seq == 0 or (head.appended_at is not None and head.appended_at < since):
            return set()
        known = self._take_known(tenant, chain)
        if known is not None and not known.under(head):
            known = None  # not this chain's entries (it began again: its tenant deleted and made anew)
        found: set[str] = set()

        def seen(row: Row) -> bool:
            """Note an entry read, newest first; True once those below cannot matter."""
            _, appended, source = row
            if source is not None and source in sources:
                found.add(source)
            return found == sources or appended < since

        newer = known.top + 1 if known is not None else 1
        read: list[Row] = []  # newest first
        done, lowest = False, None
        # Entries appended after the known top, itself appended since then, are all read (unless every draft is found):
        # in as few pages as may be. Otherwise the read may stop at the first: small pages.
        whole = known is not None and bool(known.rows) and known.rows[-1][1] >= since
        # One more than are left: a page that stops at the limit has a next (empty) one.
        page = min(head.seq - newer + 2, NEWER_PAGE) if whole else SOURCE_PAGE
        for item in self._back(tenant, chain, head.seq, newer, page):
            read.append(_row(item))
            lowest = item
            if seen(read[-1]):
                done = True
                break
        if known is not None and (read[-1][0] if read else head.seq + 1) == newer:
            # Every entry appended since is read: they continue the known ones if the lowest names the top's hash as
            # its prevHash (or, none appended, the head is the top).
            if (head.hash if lowest is None else _entry(lowest).get("prevHash")) != known.top_hash:
                return self.sources_since(tenant, chain, head, since, sources)  # not this chain's: read as if unknown
            known.extend(head, reversed(read))
            if not done:
                # Any draft a known entry names is in the chain, whenever it was appended.
                found |= {source for source in sources if source in known.sources}
                done = found == sources or not known.reach_back(since)
        else:
            known = KnownEntries(head.seq, str(head.hash), reversed(read))
        if not done:
            # Below the known entries: a draft delivered again older than they are.
            older: list[Row] = []
            for item in self._back(tenant, chain, known.bottom - 1, 1, SOURCE_PAGE):
                older.append(_row(item))
                if seen(older[-1]):
                    break
            known.extend_older(older)
        self._remember(tenant, chain, known)
        return found

    def _back(self, tenant: str, chain: int, top: int, bottom: int, page: int) -> Iterator[dict[str, Any]]:
        """The chain's entry items from sequence `top` down to `bottom`, newest first, `page` a page (a page is billed
        whole however few of its entries are looked at)."""
        if top < bottom:
            return
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":pk": a.s(log_pk(tenant, chain)),
                ":lo": a.s(entry_sk(bottom)),
                ":hi": a.s(entry_sk(top)),
            },
            ScanIndexForward=False,
            ConsistentRead=True,
            PaginationConfig={"PageSize": page},
        )
        for got in pages:
            yield from got.get("Items") or []

    def _know_appended(self, tenant: str, chain: int, placed: Sequence[tuple[AuditDraft, str]], base: Head, moved: Head) -> None:
        """Know the entries of `placed` this appender put after `base` (the chain's tail: docs/adr/0172), up to
        `moved`, after those known below them when they continue them."""
        first = moved.seq - len(placed) + 1
        rows = [(seq, float(moved.appended_at or 0), source) for seq, (_, source) in enumerate(placed, first)]
        known = self._take_known(tenant, chain)
        if known is not None and known.top == base.seq == first - 1 and known.top_hash == base.hash:
            known.extend(moved, rows)
        else:
            known = KnownEntries(moved.seq, str(moved.hash), rows)
        self._remember(tenant, chain, known)

    def _take_known(self, tenant: str, chain: int) -> KnownEntries | None:
        with self._known_lock:
            known = self._known.pop((tenant, chain), None)
            if known is not None:
                self._known_held -= len(known.rows)
            return known

    def _remember(self, tenant: str, chain: int, known: KnownEntries) -> None:
        """Keep `known` as the chain's, the most recently used: past KNOWN_ENTRIES in all, the least recently used
        chains' are forgotten, then this one's oldest entries."""
        with self._known_lock:
            kept = self._known.pop((tenant, chain), None)  # another thread's, kept meanwhile: this one is as good
            self._known_held -= len(kept.rows) if kept is not None else 0
            while self._known and (self._known_held + len(known.rows) > KNOWN_ENTRIES or len(self._known) >= KNOWN_ENTRIES):
                _, dropped = self._known.popitem(last=False)
                self._known_held -= len(dropped.rows)
            while len(known.rows) > KNOWN_ENTRIES:
                known.drop_oldest()
            self._known[(tenant, chain)] = known
            self._known_held += len(known.rows)

    def entries(self, tenant: str, chain: int, first: int, last: int) -> Iterator[tuple[int, dict[str, Any]]]:
        """(sequence, entry) of the chain's stored entries in [first, last], ascending, the sequence read from the
        item's key (a missing one is simply absent; one whose text is not JSON is {"unreadable": text})."""
        if last < first:
            return
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":pk": a.s(log_pk(tenant, chain)),
                ":lo": a.s(entry_sk(max(first, 0))),
                ":hi": a.s(entry_sk(last)),
            },
            ConsistentRead=True,
        )
        for page in pages:
            for item in page.get("Items") or []:
                yield _seq_of(item), _entry(item)

    def newest(self, tenant: str, chain: int, limit: int, before: int) -> tuple[list[dict[str, Any]], bool]:
        """Up to `limit` of the chain's entries below sequence `before`, newest first (each with its key's sequence
        as `_seq`), eventually consistent, and whether older ones remain."""
        got = self.client.query(**self._newest_first(tenant, chain, before - 1), Limit=limit)
        entries = [_listed(item) for item in got.get("Items") or []]
        return entries, _older_left(entries, "LastEvaluatedKey" in got)

    def listed(self, tenant: str, chain: int, head: Head, limit: int, before: int | None = None) -> Listed:
        """A listing's page of the chain (docs/adr/0173): its tail, and up to `limit` of its entries under the tail and
        below `before` (None: from the tail), newest first, eventually consistent. Under a settled head (its chain's
        tail: `tails`) one Query. Past a marked head the run that chains from it (`orphans_of`) is read with the page:
        one Query newest first from the top of the chain's key range, taking `limit` and the most entries that may lie
        past the head (HEAD_LAG_ENTRIES - 1) and those between the head and `before` (at most FOLDED_GAP); a page that
        starts further under the head reads past it (`orphans`) and below `before`, two Queries."""
        if not head.marked:
            return Listed(head, *self.newest(tenant, chain, limit, min(before or LAST_SEQ, head.seq + 1)))
        below = LAST_SEQ + 1 if before is None else before
        gap = max(0, head.seq + 1 - below)
        if gap > FOLDED_GAP:
            return Listed(
                self.orphans(tenant, chain, head, consistent=False).tail(head),
                *self.newest(tenant, chain, limit, below),
            )
        pages = self.client.get_paginator("query").paginate(
            **self._newest_first(tenant, chain, LAST_SEQ),
            PaginationConfig={"PageSize": limit + HEAD_LAG_ENTRIES - 1 + gap},
        )
        read: list[dict[str, Any]] = []  # newest first
        tail: Head | None = None
        more = False
        for got in pages:
            read += got.get("Items") or []
            more = "LastEvaluatedKey" in got
            if tail is None and read and _seq_of(read[-1]) <= head.seq:
                # Every entry past the head is read.
                tail = orphans_of(head, chain, [item for item in reversed(read) if _seq_of(item) > head.seq]).tail(head)
            if tail is not None and _seq_of(read[-1]) < min(below, tail.seq + 1):
                break  # an entry of the page is read: the page holds one at least
        if tail is None:
            tail = orphans_of(head, chain, read[::-1]).tail(head)
        entries = [_listed(item) for item in read if _seq_of(item) < min(below, tail.seq + 1)]
        return Listed(tail, entries, _older_left(entries, more))

    def _newest_first(self, tenant: str, chain: int, top: int) -> dict[str, Any]:
        """A Query of the chain's entries from sequence `top` down, eventually consistent (the listing's)."""
        return {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {
                ":pk": a.s(log_pk(tenant, chain)),
                ":lo": a.s(entry_sk(0)),
                ":hi": a.s(entry_sk(top)),
            },
            "ScanIndexForward": False,
        }

    def checkpoints(self, tenant: str, chain: int, first: int, last: int) -> list[dict[str, Any]]:
        """The chain's checkpoints with atSequence in [first, last], ascending."""
        if last < first:
            return []
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":pk": a.s(log_pk(tenant, chain)),
                ":lo": a.s(checkpoint_sk(max(first, 0))),
                ":hi": a.s(checkpoint_sk(last)),
            },
            ConsistentRead=True,
        )
        return [_checkpoint(item) for page in pages for item in page.get("Items") or []]

    def checkpoint_before(self, tenant: str, chain: int, at: int) -> int:
        """The atSequence of the chain's last checkpoint below `at`; 0 when there is none."""
        got = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":pk": a.s(log_pk(tenant, chain)),
                ":lo": a.s(checkpoint_sk(0)),
                ":hi": a.s(checkpoint_sk(max(at - 1, 0))),
            },
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        )
        items = got.get("Items") or []
        return int(items[0]["atSequence"]["N"]) if items else 0

    def put_checkpoint(
        self, tenant: str, chain: int, head: Head, checkpoint: dict[str, Any], pending_since: float | None, now_epoch: float
    ) -> bool:
        """Store a checkpoint and move the head's checkpointSeq to it; False when the head moved meanwhile (another
        checkpoint, or an append that this checkpoint would leave waiting without a pendingSince). The pending marker
        stays: the chain's new head is yet to be published in its tenant's anchor (`settle` removes it after)."""
        at = int(checkpoint["atSequence"])
        values: dict[str, Any] = {":at": a.n(at), ":p": a.n(head.checkpoint_seq)}
        condition = "(checkpointSeq = :p OR attribute_not_exists(checkpointSeq))" if head.checkpoint_seq == 0 else "checkpointSeq = :p"
        if pending_since is None:
            # Every entry anchored, unless an entry was appended meanwhile.
            update = "SET checkpointSeq = :at, checkpointedAt = :now REMOVE pendingSince"
            values[":now"] = a.n(round(now_epoch, 3))
            condition += " AND seq = :at"
        else:
            update = "SET checkpointSeq = :at, pendingSince = :since"
            values[":since"] = a.n(round(pending_since, 3))
        item = {
            **a.key(log_pk(tenant, chain), checkpoint_sk(at)),
            "checkpoint": a.s(checkpoint["checkpoint"]),
            "atSequence": a.n(at),
            "merkleRoot": a.s(checkpoint["merkleRoot"]),
            "signature": a.s(checkpoint["signature"]),
            "at": a.s(checkpoint["at"]),
        }
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": self.table, "Item": item, "ConditionExpression": "attribute_not_exists(sk)"}},
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": a.key(head_pk(tenant, chain), HEAD_SK),
                            "UpdateExpression": update,
                            "ConditionExpression": condition,
                            "ExpressionAttributeValues": values,
                        }
                    },
                ]
            )
        except self.client.exceptions.TransactionCanceledException:
            return False
        return True

    def settle(self, tenant: str, chain: int, head: Head) -> bool:
        """Take the chain off the pending index: every entry up to `head` is checkpointed and its tenant's anchor holds
        that head. The marker goes with the head's mark, on condition that the head is still `head` (an append that
        read the mark fails on it, and writes the marker again). False (the marker stays) when the head moved, or when
        entries past it chain from it (one strongly consistent Query): the head is moved over them (`caught_up`), to
        wait for a checkpoint. Those are an append's that read the head before the checkpoint (rules/audit.head_may_lag:
        docs/adr/0172); no later append leaves one past this head: settle_due waits MARKER_KEEP_SECONDS after that
        checkpoint, longer than any append takes from its read of the head to its puts (the dispatch function's
        timeout), and an append that reads the head after it finds no entry waiting, and moves the head."""
        if self.caught_up(tenant, chain, head) != head:
            return False
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": a.key(head_pk(tenant, chain), HEAD_SK),
                            "UpdateExpression": "REMOVE marked",
                            "ConditionExpression": "seq = :s AND checkpointSeq = :s",
                            "ExpressionAttributeValues": {":s": a.n(head.seq)},
                        }
                    },
                    {"Delete": {"TableName": self.table, "Key": a.key(head_pk(tenant, chain), PENDING_SK)}},
                ]
            )
        except self.client.exceptions.TransactionCanceledException:
            return False
        return True

    def pending_chains(self) -> Iterator[tuple[str, int]]:
        """(tenant, chain) of every chain with an entry no checkpoint anchors yet, or a head its tenant's anchor does
        not hold yet (the periodic sweep's work list)."""
        index = wiring.INBOX_INDEX
        for shard in range(PENDING_SHARDS):
            pages = self.client.get_paginator("query").paginate(
                TableName=self.table,
                IndexName=index.name,
                KeyConditionExpression="#gpk = :gpk",
                ExpressionAttributeNames={"#gpk": index.partition_key},
                ExpressionAttributeValues={":gpk": a.s(f"AUDIT#PENDING#{shard}")},
            )
            for page in pages:
                for item in page.get("Items") or []:
                    tenant, chain = item[index.sort_key]["S"].rsplit("#", 1)
                    yield tenant, int(chain)


def _appended(item: dict[str, Any]) -> float:
    """When an entry was appended: its `appended`, else (an older release's) its action's `at`, less the slack."""
    if "appended" in item:
        return float(item["appended"]["N"])
    at = _entry(item).get("at")
    try:
        return clock.epoch_of(at) - UNTIMED_ENTRY_SLACK_S if isinstance(at, str) else 0.0
    except ValueError:
        return 0.0


def _row(item: dict[str, Any]) -> Row:
    source = item.get("source")
    return _seq_of(item), _appended(item), source["S"] if source is not None else None


def _listed(item: dict[str, Any]) -> dict[str, Any]:
    return {**_entry(item), "_seq": _seq_of(item)}


def _older_left(entries: list[dict[str, Any]], cut: bool) -> bool:
    """Whether a chain's entries continue below those read, newest first, by a Query that `cut` short (its
    LastEvaluatedKey): not below the first entry (a Query stopped at its limit there cannot tell), nor below none."""
    return cut and bool(entries) and entries[-1]["_seq"] > 1


def _seq_of(item: dict[str, Any]) -> int:
    return int(item[wiring.SORT_KEY]["S"].removeprefix(ENTRY_SK_PREFIX))


def _entry(item: dict[str, Any]) -> dict[str, Any]:
    text = item["entry"]["S"]
    try:
        entry = json.loads(text)
    except ValueError:
        return {"unreadable": text}
    return entry if isinstance(entry, dict) else {"unreadable": text}


def _checkpoint(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "checkpoint": item["checkpoint"]["S"],
        "atSequence": int(item["atSequence"]["N"]),
        "merkleRoot": item["merkleRoot"]["S"],
        "signature": item["signature"]["S"],
        "at": item["at"]["S"],
    }


def encode_before(before: dict[int, int], tenant: str) -> str:
    """The listing's cursor: for each chain with older entries left, the sequence to continue below; and the tenant
    whose listing issued it (`t`), whose listing alone reads it."""
    plain = {"before": {str(chain): seq for chain, seq in sorted(before.items())}, "t": tenant}
    return base64.urlsafe_b64encode(json.dumps(plain, separators=(",", ":"), allow_nan=False).encode()).decode().rstrip("=")


def decode_before(cursor: str, tenant: str) -> dict[int, int] | None:
    """What `encode_before` wrote, or None: one naming another tenant, or none, is refused. Every cursor names its
    tenant since 0.11.0 (0.10.0 read `t` but did not write it, and 0.11.0 read its cursors naming none, so a page in
    flight across that upgrade went on); this release's previous, 0.11.0, issues no other."""
    try:
        plain = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, TypeError):
        return None
    if not isinstance(plain, dict) or set(plain) != {"before", "t"}:
        return None
    if not isinstance(plain["before"], dict) or plain["t"] != tenant:
        return None
    before: dict[int, int] = {}
    for chain, seq in plain["before"].items():
        if not (isinstance(chain, str) and chain.isdigit() and int(chain) < wiring.AUDIT_CHAINS):
            return None
        if type(seq) is not int or seq < 2:
            return None
        before[int(chain)] = seq
    return before
