"""A run moved: each transition the engine makes is written as one conditional TransactWriteItems.

What a transition writes (store/run_items.py builds each item): the run head at its next version (conditional on the
version read), a batch of its events, the interrupts it opened (but a new run's), voted on or closed, the tenant's open-runs counter
when the run starts or ends (billing its tenant's usage of the month on it: docs/adr/0123), the tasks of visits an ending run stops waiting for, its external-event waiters and
conversation claims (store/interactions.py), and with it, when given, the request's Idempotency-Key record and the
draft of the audit entry recording it, on the event batch (dispatch chains it: docs/adr/0128). Index entries (the inbox's, the run listing's) are plain writes before the transaction,
never inside it, where each would bill twice (docs/adr/0034); so are the gates' items of a run created with a fresh
id, which no other writer can write (docs/adr/0139), and from 0.7.0 its event batch (docs/adr/0165).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from interlude import wiring
from interlude.domain import formats, head_parts
from interlude.domain.audit import AuditDraft
from interlude.domain.clock import epoch_of
from interlude.domain.errors import DomainError
from interlude.domain.models.run import OpenInterrupt, RunState
from interlude.engine.effect_names import GATE_ASSIGNED, TASK
from interlude.engine.events import to_docs
from interlude.rules import run_search, usage
from interlude.rules.limits import QUOTA_EXCEEDED, quota_exceeded
from interlude.store import attributes as a
from interlude.store import gate_payloads, run_items
from interlude.store import limits as counters
from interlude.store.idempotency import AnsweredRecord, KeyAlreadyUsed
from interlude.store.inbox import Entry, InboxIndex, added_delegate_families, closed_entries
from interlude.store.interactions import transition_items as interaction_items
from interlude.store.layout import FIRST, RUN_SK, SECOND, interrupt_sk, run_pk
from interlude.store.runs import RunStore
from interlude.store.task_items import abandoned_update
from interlude.store.transactions import (
    QUOTA_NOUNS,
    Labelled,
    LostRace,
    TransactionalTable,
    refuse_if_too_large,
    within_one_item,
)

if TYPE_CHECKING:  # the engine's run rules load where a run first moves, not with the store (the dispatch function)
    from interlude.engine.run import Transition


class TransitionStore(TransactionalTable, RunStore):
    def commit(
        self,
        transition: Transition,
        expected_version: int | None,
        now_iso: str,
        answered: AnsweredRecord | None = None,
        open_runs_limit: int | None = None,
        audit: AuditDraft | None = None,
        expires: int | None = None,
    ) -> list[dict[str, Any]]:
        """Write a transition atomically; returns the RunEventDocs written. Raises LostRace on a lost race,
        KeyAlreadyUsed when `answered`'s Idempotency-Key was committed by another request first.

        The tenant's open-runs counter moves in the same transaction: a run created open claims one (refused
        past `open_runs_limit`, when given), a run that ends releases one (never refused); either adds what the run
        owes its tenant's usage of the month, which a transition that moves no counter keeps on the head. `audit`: the entry that
        records the transition (a decision, a vote, a cancel), its draft committed on the event batch. `expires`: a run that
        ends expires then (the table's TTL attribute, on every item this transaction writes of it: store/retention.py).
        """
        state = transition.state
        first_seq = state.nextSeq
        docs = to_docs(state.runId, transition.events, first_seq, now_iso)
        state.nextSeq = first_seq + len(docs)
        if state.inputsBatch is None and head_parts.inputs_leave(state, docs):
            state.inputsBatch = state.nextSeq - 1
        # Before the head is built: a new run's usage shard is recorded on it, so its end releases there; and what the
        # run owes its tenant's usage is billed on the counter item when one is written, else kept on the head.
        # The events' compact JSON, serialised once: the event batch holds it deflated and the usage bills its size.
        events_json = a.compact(docs) if docs else b""
        owed = usage.summed(state.unbilled, usage.measures(docs, len(events_json)))
        billed = usage.month_attributes(owed, now_iso[:7])  # the month (YYYY-MM) of the transition
        counter, quota = _open_runs_counter(state, expected_version, transition.reopened, open_runs_limit, billed)
        state.unbilled = {} if counter is not None else owed
        closed = [Entry.of(state.tenant, state.runId, state.workflowId, c.interrupt) for c in transition.closed]
        # A transition that writes an event batch carries its audit entry's draft on it (format 5), for the appender
        # on the stream to chain (docs/adr/0128); only one without (none that records a decision) appends in it.
        carried, audit = (audit, None) if docs else (None, audit)
        before = gates_put_before(transition, expected_version)
        batch_before = before and batch_put_before(docs)
        against = self.gate_dictionaries(transition)
        items = transition_items(
            transition, expected_version, first_seq, docs, now_iso, closed, expires, carried, events_json, before, batch_before,
            against,
        )
        if counter is not None:
            items.append(counter)
        own = [put["Put"]["Item"] for _, put in opened_items(transition, first_seq, now_iso, expires, True, against)] if before else []
        inbox = InboxIndex(self.table, self.client, self.entries_table)
        # The inbox entries of the gates it opens expire with the gates' items (docs/adr/0154): those of a transition
        # stopped before its transaction, or refused, go with the gate it never wrote.
        entries_expiry = gates_expiry(state, now_iso, expires, before)
        if batch_before:
            # With the gates' expiry too, never none: put before the transaction, it goes by itself if that never comes.
            # First of all it puts: one DynamoDB refuses as too large is refused before anything is written.
            own.insert(0, event_batch(transition, first_seq, docs, closed, entries_expiry, carried, events_json)[1]["Put"]["Item"])
        undo = self._put_entries_before(inbox, transition, expected_version, own, entries_expiry)
        try:
            if quota is not None and counters.open_runs_shards(quota[1]) == 1:
                # One shard: exact against every shard's count, read first (store/limits.py).
                items = items[:-1] + [_claim_exactly(self, state, quota[1], billed)]
            for spill in range(OPEN_RUNS_SPILLS + 1):
                try:
                    self._transact(items, answered, quota, audit)
                    break
                except DomainError as refused:
                    moved = _claimed_elsewhere(self, refused, state, quota, spill, billed)
                    if moved is None:
                        raise
                    # The head records the shard the run claims on: built again with it.
                    built = transition_items(
                        transition, expected_version, first_seq, docs, now_iso, closed, expires, carried, events_json, before,
                        batch_before, against,
                    )
                    items = built + [moved]
        except (LostRace, DomainError, KeyAlreadyUsed):
            # Refused, so nothing was written; a run never created shares its entries, gates and event batch with no
            # other writer.
            if expected_version is None and undo:
                for where, keys in undo.items():
                    inbox.delete_keys(keys, where)
            raise
        if closed and not docs:
            # No event batch to carry them to dispatch. No engine path closes an interrupt without an event
            # (a resolve emits interrupt.resolved, a cancel node.cancelled); this keeps the entries from staying
            # behind should one ever do so.
            inbox.delete(closed)
        return docs

    def gate_dictionaries(self, transition: Transition) -> dict[str, bytes]:
        """By node, what the payload of each gate the transition opens is deflated against (format 12, once this release
        writes it: store/gate_payloads.py); a node left out says too little, and its gate is written in format 3."""
        if not (formats.GATE_PAYLOAD_AGAINST_DEFINITION_WRITTEN and transition.opened):
            return {}
        state = transition.state
        found = {
            node: gate_payloads.dictionary(self.client, self.table, state.tenant, state.workflowId, state.workflowVersion, node)
            for node in {i.nodeId for i in transition.opened}
        }
        return {node: against for node, against in found.items() if against is not None}

    def rewrite_head(self, state: RunState, expected_version: int) -> None:
        """The run head alone at its next version: no event, no counter, no index. What a run records of itself
        that changes nothing of its course (the runs forked from it: app/forks.py). LostRace when it moved."""
        self._transact([(RUN_SK, run_items.head_write(state, expected_version))])

    def _put_entries_before(
        self,
        inbox: InboxIndex,
        transition: Transition,
        expected_version: int | None,
        own: list[a.Item],
        entries_expiry: int | None = None,
    ) -> dict[str, list[a.Item]]:
        """Put the index entries the transition adds, before its transaction: the inbox entries of the interrupts it
        opens (and of a gate's new delegates), expiring at `entries_expiry` when given, and a new run's listing entry,
        and `own`, a new run's own items (its gates' items, `gates_put_before`, and its event batch, `batch_put_before`).
        Their keys, to remove them again if the transaction is refused, by table. Closed interrupts' entries are deleted
        by dispatch from the event batch's image (docs/adr/0048). An inbox entry goes to the table its gate's are in (a
        new gate's: where this release writes them)."""
        state = transition.state
        for item in own:
            within_one_item(item)  # refused before anything is written, as the transaction refuses it
        puts: list[a.Item] = list(own)
        keys: list[a.Item] = [_key_of(item) for item in own]
        elsewhere: dict[str, list[a.Item]] = {}
        for entry in _added_entries(transition):
            written = [{**item, **run_items.expiring(entries_expiry)} for item in entry.items()]
            if entry.where == FIRST:
                puts += written
                keys += entry.index_keys()
            else:
                elsewhere.setdefault(entry.where, []).extend(written)
        # The run search's entries (rules/run_search.py): a new run's tags, searchable metadata and name words; the
        # title words of the gates the transition opens (left when a gate closes: a page reads the run's open gates).
        searched = run_search.gate_families(state, (i.payload for i in transition.opened))
        if expected_version is None:
            listed = run_items.run_entry(state.tenant, state.runId, state.workflowId, state.createdAt, state.searchExpiry)
            puts.append(listed[1]["Put"]["Item"])
            keys.append(run_items.run_entry_key(listed))
            searched = run_search.creation_families(state) + searched
        for item in run_items.search_entries(state, searched):
            puts.append(item)
            if expected_version is None:
                keys.append(_key_of(item))
        # One BatchWriteItem for both tables (up to 25 items), a new run's own items first: an item DynamoDB refuses as
        # too large (the whole call is refused then) is TooLarge before any entry is written, as in the transaction.
        try:
            inbox.batch_write_in({where: [{"PutRequest": {"Item": item}} for item in items] for where, items in {FIRST: puts, **elsewhere}.items()})
        except ClientError as exc:
            refuse_if_too_large(exc)
            raise
        return {FIRST: keys, **{where: [_key_of(item) for item in items] for where, items in elsewhere.items()}}

    def delete_inbox_entries(self, keys: list[tuple[str, a.Item]]) -> None:
        """Delete inbox index entries by (table, key) (those a closing transition named: store/inbox.py); idempotent."""
        InboxIndex(self.table, self.client, self.entries_table).delete_marked(keys)


def _key_of(item: a.Item) -> a.Item:
    return {k: item[k] for k in (wiring.PARTITION_KEY, wiring.SORT_KEY)}


def gates_put_before(transition: Transition, expected_version: int | None) -> bool:
    """Whether the items of the gates the transition opens are plain puts before its transaction (1 WRU per KB, not 2),
    with its index entries, rather than conditional puts inside it: only when it creates a run whose id was minted for
    it, which no other writer can hold, so its own puts are the only ones and a refusal takes them back (docs/adr/0139).
    A child run's id is derived from its parent's step (engine/subworkflows.child_run_id), and redeliveries of the
    request race to create it; a later transition's gate key (node and visit) is open to every transition racing from
    the same version: both keep the condition that only the winner meets."""
    return expected_version is None and transition.state.parentRunId is None


def batch_put_before(docs: list[dict[str, Any]]) -> bool:
    """Whether the event batch of a transition whose gates are put before it (`gates_put_before`: a create whose run id
    was minted for it) is put with them, plainly, not in the transaction: from 0.7.0, whose previous release's dispatch
    waits for a batch's run head (docs/adr/0165). Its stream record may then reach dispatch before the head commits;
    a refused create takes it back with its gates."""
    return bool(docs) and formats.CREATE_BATCH_PUT_BEFORE_WRITTEN


def _added_entries(transition: Transition) -> list[Entry]:
    """The inbox entries of the interrupts the transition opens, and of a gate's new delegates: a gate with a
    delegation (issue 14 item 4) is listed under each delegate's own family too, put by the transition that records
    the delegation, once per delegate (a quorum's later votes change no entry)."""
    state = transition.state

    def entry(interrupt: OpenInterrupt) -> Entry:
        return Entry.of(state.tenant, state.runId, state.workflowId, interrupt)

    delegated = [(i, added_delegate_families(i)) for i in transition.updated]
    return [entry(i) for i in transition.opened] + [
        entry(i)._replace(families=tuple(added)) for i, added in delegated if added
    ]


# The label of an inbox entry a transaction puts (a claim's: its assignee).
INBOX_ENTRY_LABEL = "INBOX"
# Claims a create tries on other shards (each the roomiest, read then) after its own shard's part was full.
OPEN_RUNS_SPILLS = 2


def _claim_exactly(table: TransactionalTable, state: RunState, limit: int, billed: dict[str, int]) -> Labelled:
    """The claim of a quota of one shard: on shard 0, up to what every shard's count read now leaves; refused at once
    when they hold the whole quota."""
    cap = counters.exact_cap(counters.LimitStore(table.table, table.client).open_runs_by_shard(state.tenant), limit)
    if cap is None:
        raise quota_exceeded(
            counters.OPEN_RUNS, limit, f"this tenant has reached its limit of {limit} {QUOTA_NOUNS[counters.OPEN_RUNS]}"
        )
    state.usageShard = 0
    return counters.claim(state.tenant, counters.OPEN_RUNS, cap, 0, billed)


def _claimed_elsewhere(
    table: TransactionalTable,
    refused: DomainError,
    state: RunState,
    quota: tuple[str, int] | None,
    spill: int,
    billed: dict[str, int],
) -> Labelled | None:
    """The claim on another usage shard when `refused` was the open-runs quota on this one and another has room
    (recorded on the run as its shard); None when the refusal stands (the shards hold the whole quota)."""
    if quota is None or refused.code != QUOTA_EXCEEDED or spill >= OPEN_RUNS_SPILLS:
        return None
    if counters.open_runs_shards(quota[1]) == 1:
        return None
    counts = counters.LimitStore(table.table, table.client).open_runs_by_shard(state.tenant)
    found = counters.roomiest_shard(counts, quota[1])
    if found is None:
        return None
    state.usageShard, part = found
    return counters.claim(state.tenant, counters.OPEN_RUNS, part, state.usageShard, billed)


def _open_runs_counter(
    state: RunState, expected_version: int | None, reopened: bool, open_runs_limit: int | None, billed: dict[str, int]
) -> tuple[Labelled | None, tuple[str, int] | None]:
    """The transition's move of the tenant's open-runs counter and the quota it is refused by: a run created open,
    or a failed one running again (`reopened`: engine.run.retry_action), claims a place (on the usage shard it
    records), one that ends releases its place (never refused); each adds `billed`, the usage the run owes. A run
    that starts and ends in one transition moves no counter: the item of its shard bills its usage alone."""
    limit = open_runs_limit if open_runs_limit is not None else 2**53
    if (expected_version is None or reopened) and not state.terminal:
        state.usageShard, shard_limit = counters.open_runs_shard(state.runId, limit)
        claim = counters.claim(state.tenant, counters.OPEN_RUNS, shard_limit, state.usageShard, billed)
        return claim, (counters.OPEN_RUNS, limit)
    if expected_version is not None and state.terminal:
        return counters.release(state.tenant, counters.OPEN_RUNS, state.usageShard, billed), None
    if expected_version is None and billed:
        state.usageShard = counters.open_runs_shard(state.runId, limit)[0]
        return counters.bill(state.tenant, state.usageShard, billed), None
    return None, None


def transition_items(
    transition: Transition,
    expected_version: int | None,
    first_seq: int,
    docs: list[dict[str, Any]],
    now_iso: str,
    closed: list[Entry],
    expires: int | None = None,
    audit: AuditDraft | None = None,
    events_json: bytes | None = None,
    gates_before: bool = False,
    batch_before: bool = False,
    against: Mapping[str, bytes] | None = None,
) -> list[Labelled]:
    """(label, TransactWriteItem) for everything one transition writes: head, events (naming the inbox entries of
    the interrupts it closes, for dispatch to delete, and carrying `audit`, the draft of its audit entry, for the
    appender on the stream; unless `batch_before`: put before it, `batch_put_before`), interrupts (those it opens
    unless `gates_before`: put before it, `gates_put_before`), abandoned tasks, external-event waiters. `events_json`:
    `docs`' compact JSON, when the caller has it; `against`: as `opened_items` takes it."""
    state = transition.state
    pk = run_pk(state.runId)
    run_items.mark_written(state, transition.opened)
    items: list[Labelled] = [(RUN_SK, run_items.head_write(state, expected_version, expires))]
    kept = _items_expiry(state, now_iso, expires)
    if docs and not batch_before:
        items.append(event_batch(transition, first_seq, docs, closed, kept, audit, events_json))
    if not gates_before:
        items += opened_items(transition, first_seq, now_iso, expires, against=against)
    # A gate claimed, released or assigned (engine.run.assign): every inbox entry of it says who works it now, in the
    # same transaction, so the inbox's "mine" and "unclaimed" read the entries alone (store/inbox.py). They are put
    # without an expiry, which its item records for the daily sweep (run_items.ENTRIES_UNEXPIRING).
    assigned = {e.node_id for e in transition.events if e.type == GATE_ASSIGNED}
    # A new delegate's entries, put before the transaction with the gates' expiry of now (`commit`), give it to the
    # gate's item if the daily sweep took its own off: else no sweep would find the gate to keep them (ADR 0154).
    delegated = gates_expiry(state, now_iso, expires, gates_before)
    items += [
        (
            interrupt_sk(u.key),
            {
                "Update": run_items.interrupt_votes(
                    pk, u, u.nodeId in assigned, delegated if added_delegate_families(u) else None
                )
            },
        )
        for u in transition.updated
    ]
    for c in transition.closed:
        close = run_items.interrupt_close(pk, c.interrupt, c.status, c.resolution, expires)
        if close is not None:  # a format-3 gate's close writes nothing to its item
            items.append((interrupt_sk(c.interrupt.key), {"Update": close}))
    items += [
        (INBOX_ENTRY_LABEL, {"Put": {"Item": item, **({"TableName": SECOND} if entry.where == SECOND else {})}})
        for u in transition.updated
        if u.nodeId in assigned
        for entry in [Entry.of(state.tenant, state.runId, state.workflowId, u)]
        for item in entry.items()
    ]
    # The tasks of visits the run stopped waiting for end with it (store/task_items.py).
    items += [abandoned_update(state.runId, n, p, kept) for n, p in transition.abandoned if p.kind == TASK]
    # External-event waiters and conversation claims (store/interactions.py) travel in the same transaction.
    return items + interaction_items(transition, now_iso)


def event_batch(
    transition: Transition,
    first_seq: int,
    docs: list[dict[str, Any]],
    closed: list[Entry],
    expires: int | None,
    audit: AuditDraft | None,
    events_json: bytes | None,
) -> Labelled:
    """(label, conditional Put) of the transition's event batch (run_items.event_batch_put)."""
    return run_items.event_batch_put(
        transition.state.runId, first_seq, docs, closed_entries(closed), expires, audit, transition.opened, events_json
    )


def opened_items(
    transition: Transition,
    first_seq: int,
    now_iso: str,
    expires: int | None = None,
    before: bool = False,
    against: Mapping[str, bytes] | None = None,
) -> list[Labelled]:
    """(label, conditional Put) of the items of the gates the transition opens, expiring as its event batch does; put
    `before` the transaction that creates the run (`gates_put_before`), never without an expiry; `against`: by node, the
    configuration a gate's payload is deflated against (TransitionStore.gate_dictionaries)."""
    state = transition.state
    run_items.mark_written(state, transition.opened)  # the format they are written in, which the head records
    kept = gates_expiry(state, now_iso, expires, before)
    against = against or {}
    return [
        (interrupt_sk(i.key), {"Put": run_items.interrupt_put(state, i, first_seq, kept, against.get(i.nodeId))})
        for i in transition.opened
    ]


def gates_expiry(state: RunState, now_iso: str, expires: int | None, before: bool) -> int | None:
    """What the items of the gates a transition opens expire at, and their inbox entries, put before its transaction
    (docs/adr/0154): the run's items' (`_items_expiry`), else its search entries' while that is not near, else one as
    far from now (`run_search.late_gate_expiry`); none only for a run created before its items had an expiry, whose
    items the daily sweep never keeps."""
    kept = _items_expiry(state, now_iso, expires)
    if kept is None and state.searchExpiry is not None:
        # The run's items' provisional expiry is near (from its creation with retentionDays ≤ 22, ADR 0133, or the run
        # has waited): a gate whose transaction never came, or its entries, would be orphans for ever. They take the
        # search entries' (creation + retentionDays + 90 days), never near at a creation: an orphan goes then; an open
        # run's is far from the daily sweep, which takes an expiry off only when near; the retention turn gives it the
        # run's (it keeps no later one than the provisional). Once that is near too (a run older than retentionDays +
        # 60 days), one as far from the transition's instant. docs/adr/0147, 0154.
        now_s = epoch_of(now_iso)
        kept = state.searchExpiry if before else run_search.open_expiry(state.searchExpiry, now_s)
        if kept is None:
            kept = run_search.late_gate_expiry(now_s)
    return kept


def _items_expiry(state: RunState, now_iso: str, expires: int | None) -> int | None:
    """What the transition's own items of the run expire at: the run's expiry when it ends, else the provisional one
    its items are written with (ADR 0133), so a run that ends soon has them stamped already, and the gates of a run
    whose creation never committed go by themselves."""
    if expires is not None:
        return expires
    return run_search.open_expiry(run_search.items_expiry(state.searchExpiry), epoch_of(now_iso))
