"""The items of a run as a transition writes them: its head, an event batch, its interrupts, its listing entry.

Each builder returns the body of one TransactWriteItem (a Put or an Update); store/transitions.py puts them together
into the transition's one transaction. The bench and test loaders write the same items (tests/support).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from interlude import wiring
from interlude.domain import formats, head_parts
from interlude.domain.audit import AuditDraft
from interlude.domain.models.run import OpenInterrupt, RunState, state_json
from interlude.rules import run_search
from interlude.store import attributes as a
from interlude.store import audit as audit_log
from interlude.store import gate_closes, gate_payloads, item_index, layout
from interlude.store.expiry import RESTAMPING, RETAINED
from interlude.store.inbox import ENTRIES_TABLE, gate_votes
from interlude.store.layout import RUN_SK, event_sk, interrupt_sk, run_pk
from interlude.store.transactions import Labelled

# The label of the run entry (its PutItem's, as run_entry returns it).
RUN_ENTRY_LABEL = "RUNS"


def run_entry(tenant: str, run_id: str, workflow_id: str, created_at: str, expires: int | None = None) -> Labelled:
    """(label, Put) of the run listing's entry for a run, written just before the transaction that creates the run
    (removed again if it is refused; a listing skips an entry whose run head is missing), expiring at `expires`: a new
    run's provisional expiry, its search entries' (rules/run_search.listing_stamped_at_end)."""
    sort = f"{created_at}#{run_id.split('/', 1)[1]}"
    put = item_index.entry_put(tenant, wiring.RUN_INDEX, run_id, sort, {"runId": run_id, "workflowId": workflow_id})
    put["Put"]["Item"].update(expiring(expires))
    return RUN_ENTRY_LABEL, put


def search_entries(state: RunState, families: list[str], expires: int | None = None) -> list[a.Item]:
    """The run search's entries of a run under `families` (rules/run_search.py): the run listing's entry, in each
    family's partitions, expiring at the run's provisional search expiry (`expires`: the retention job's, when it
    writes them again). Plain writes beside the run listing's (store/transitions.py)."""
    sort = f"{state.createdAt}#{state.runId.split('/', 1)[1]}"
    body = {"runId": state.runId, "workflowId": state.workflowId}
    ttl = expiring(expires if expires is not None else state.searchExpiry)
    return [
        {**item_index.entry_put(state.tenant, wiring.RUN_SEARCH, state.runId, sort, body, family)["Put"]["Item"], **ttl}
        for family in dict.fromkeys(families)
    ]


def run_entry_key(entry: Labelled) -> a.Item:
    item = entry[1]["Put"]["Item"]
    return {wiring.PARTITION_KEY: item[wiring.PARTITION_KEY], wiring.SORT_KEY: item[wiring.SORT_KEY]}


def head_attributes(state: RunState, version: int, rest: a.Item) -> a.Item:
    """The head's attributes a transition changes, `version` first; its state in format 4 when a gate's text or the
    inputs are large (domain/head_parts.py: held by the interrupt item and the run.started event, which are written
    with or before the head that names them), or when an open gate's smaller text leaving makes the head (with `rest`,
    the attributes the write sets besides) a KB smaller: `fewer_units`."""
    owned: a.Item = {"version": a.n(version), "status": a.s(state.status), "state": a.packed_json(state_json(head_parts.lean(state)))}
    return fewer_units(owned, rest, lambda: _leanest_state(state))


def _leanest_state(state: RunState) -> a.Item | None:
    leanest = head_parts.lean(state, head_parts.ANY_TEXT)
    return {"state": a.packed_json(state_json(leanest))} if leanest is not state else None


def fewer_units(item: a.Item, rest: a.Item, leaner: Callable[[], a.Item | None]) -> a.Item:
    """`item` (the attributes a write sets, `rest` the others the item holds), or it with the attributes `leaner` makes
    (an open gate's text of any size held by its interrupt item, not here) when they make the item a KB smaller: each
    started KB is a unit of a plain write (two in a transaction), and a text that grows past its head's or its batch's
    boundary below the large-text threshold would otherwise cost more than a larger text does (docs/adr/0153). A KB
    smaller only: the text held elsewhere costs a read of its interrupt item where a read needs it whole. Nothing more
    is built for an item of a KB or less."""
    size = a.billed_size(item) + a.billed_size(rest)
    if size <= 1024:
        return item
    changed = leaner()
    if changed is None:
        return item
    lean = {**item, **changed}
    return lean if a.billed_units(a.billed_size(lean) + a.billed_size(rest)) < a.billed_units(size) else item


def ending(state: RunState, expires: int | None) -> a.Item:
    """What the head of a run written with `expires` carries of it: the TTL attribute, and the mark that its retention
    turn is under way when that turn is to write every item (the run ended too late for their provisional expiry:
    rules/run_search.items_stamped_at_end), so that a turn cut short is found by the daily sweep."""
    provisional = run_search.items_expiry(state.searchExpiry)
    if expires is None or provisional is None or not run_search.items_stamped_at_end(provisional, expires):
        return expiring(expires)
    return {**expiring(expires), RETAINED: a.n(RESTAMPING)}


def expiring(expires: int | None) -> a.Item:
    """The TTL attribute of an item of a run (issue 30 item 4): the run's expiry when the transition ends it, its
    items' provisional one while it is open (ADR 0133); none when neither is known."""
    return {} if expires is None else {wiring.TTL_ATTRIBUTE: a.n(expires)}


def head_put(state: RunState, expires: int | None = None) -> dict[str, Any]:
    """A new run head's Put, on condition that none exists."""
    rest = {
        **a.key(run_pk(state.runId), RUN_SK),
        "workflowId": a.s(state.workflowId),  # the run's for its life: written once
        **ending(state, expires),
    }
    head = {**rest, **head_attributes(state, 1, rest)}
    return {"Item": head, "ConditionExpression": "attribute_not_exists(pk)"}


def head_write(state: RunState, expected_version: int | None, expires: int | None = None) -> dict[str, Any]:
    """The TransactWriteItem of the run head at its next version, on condition that no one wrote the version
    expected. A new head is put; an existing one is updated attribute by attribute, so an attribute a later
    release added to it stays (a rollback's writes strand nothing: docs/operations.md, "Upgrades and rollbacks")."""
    if expected_version is None:
        return {"Put": head_put(state, expires)}
    rest = {**a.key(run_pk(state.runId), RUN_SK), "workflowId": a.s(state.workflowId), **ending(state, expires)}
    owned = list({**head_attributes(state, expected_version + 1, rest), **ending(state, expires)}.items())
    expression = "SET " + ", ".join(f"#h{i} = :h{i}" for i in range(len(owned)))
    names = {f"#h{i}": name for i, (name, _) in enumerate(owned)}
    if not state.terminal:
        # A finished run that runs again (a failed action retried) is kept until it ends anew (store/retention.py).
        expression += " REMOVE #ttl"
        names["#ttl"] = wiring.TTL_ATTRIBUTE
    return {
        "Update": {
            "Key": a.key(run_pk(state.runId), RUN_SK),
            "UpdateExpression": expression,
            "ConditionExpression": "#h0 = :expected",  # #h0: `version`
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {
                ":expected": a.n(expected_version),
                **{f":h{i}": value for i, (_, value) in enumerate(owned)},
            },
        }
    }


def event_batch_put(
    run_id: str,
    first_seq: int,
    docs: list[dict[str, Any]],
    closed_entries: a.Item,
    expires: int | None = None,
    audit: AuditDraft | None = None,
    opened: list[OpenInterrupt] | None = None,
    events_json: bytes | None = None,
) -> Labelled:
    """The batch of the events one transition wrote, keyed by its last sequence; `closed_entries`: the inbox entries
    of the interrupts it closed (store/inbox.py), which dispatch deletes from its stream record; `audit`: the entry
    recording the transition, which the appender on the stream chains (format 5: store/audit.py); `opened`: the gates
    whose interrupt items the transition puts, which hold the large texts of their events in format 9
    (domain/head_parts.py lean_events; read back by store/head_parts.py); `events_json`: `docs`' compact JSON, when the
    caller has it."""
    sk = event_sk(first_seq + len(docs) - 1)
    holds = bool(opened) and formats.GATE_TEXT_OFF_EVENTS_WRITTEN
    key = a.key(run_pk(run_id), sk)

    def written(lean: list[dict[str, Any]] | None) -> a.Item:
        if lean is not None:
            events = a.compact(lean)
        else:
            events = a.compact(docs) if events_json is None else events_json
        batch: a.Item = {
            "first": a.n(first_seq),
            "last": a.n(first_seq + len(docs) - 1),
            "events": a.packed_json(events),
            **closed_entries,
            **expiring(expires),
            **(audit_log.draft_attributes(audit, events) if audit is not None else {}),
        }
        if lean is not None:
            # The newest format the batch is in: a release that reads 9 reads what an older one (5: the audit draft) adds.
            carried = int(batch.get(formats.FORMAT_FIELD, {}).get("N", 1))
            batch[formats.FORMAT_FIELD] = a.n(max(carried, formats.GATE_TEXT_OFF_EVENTS))
        return batch

    def leanest() -> a.Item | None:
        lean = head_parts.lean_events(docs, opened or [], head_parts.ANY_TEXT)
        return written(lean) if lean is not None else None

    large = head_parts.lean_events(docs, opened or []) if holds else None
    batch = written(large)
    if holds and large is None:
        batch = fewer_units(batch, key, leanest)
    return sk, {"Put": {"Item": {**key, **batch}, "ConditionExpression": "attribute_not_exists(sk)"}}


def mark_written(state: RunState, opened: list[OpenInterrupt]) -> None:
    """The head records the format each gate it opens has its item written in (OpenInterrupt.itemFormat), so that the
    transition that closes it, by whichever release, knows whether the item has a status to set. The state's own
    copy is marked (a commit that chains steps holds each step's copy of a gate opened early)."""
    ids = {interrupt.interruptId for interrupt in opened}
    for interrupt in [*opened, *state.interrupts.values()]:
        if interrupt.interruptId in ids:
            interrupt.itemFormat = formats.INTERRUPT_ITEM_WRITTEN
            # Where its inbox entries are put (store/layout.py), for every later write of them: a mark for the second.
            interrupt.entriesTable = layout.mark_of(layout.INBOX_ENTRIES.written)


def interrupt_put(
    state: RunState, interrupt: OpenInterrupt, raised_seq: int, expires: int | None = None, against: bytes | None = None
) -> dict[str, Any]:
    """The gate's item, put by the transition that opens it; `raised_seq`: the first sequence of its events;
    `expires`: what the transition's event batch expires at (the run's items' provisional expiry, or the run's);
    `against`: its node's configuration, which its payload is deflated against (format 12: store/gate_payloads.py)."""
    item: a.Item = {
        **expiring(expires),
        **a.key(run_pk(state.runId), interrupt_sk(interrupt.key)),
        "interruptId": a.s(interrupt.interruptId),
        "nodeId": a.s(interrupt.nodeId),
        "kind": a.s(interrupt.kind),
        "runId": a.s(state.runId),
        "workflowId": a.s(state.workflowId),
        **gate_payloads.payload_attributes(interrupt.payload, against if interrupt.written_once else None),
        "raisedAt": a.s(interrupt.raisedAt),
    }
    if interrupt.written_once:
        # Its status is the head's, its close the run's events' from here on (store/gate_closes.py).
        item[formats.FORMAT_FIELD] = a.n(formats.GATE_STATUS_ON_HEAD)
        item[gate_closes.RAISED_SEQ] = a.n(raised_seq)
        if against is not None:
            item[formats.FORMAT_FIELD] = a.n(formats.GATE_PAYLOAD_AGAINST_DEFINITION)
            item[gate_payloads.WORKFLOW_VERSION] = a.n(state.workflowVersion)
    else:
        item["status"] = a.s("open")
    if interrupt.deadline is not None:
        item["deadline"] = a.n(interrupt.deadline)
    if interrupt.entriesTable is not None:
        item[ENTRIES_TABLE] = a.s(interrupt.entriesTable)
    if interrupt.votes:  # a fork's gate, opened with the votes its source had cast (engine/run.py carry_votes)
        item["votes"] = a.as_json([v.model_dump() for v in interrupt.votes])
    # Re-entry guard: one interrupt per key for the lifetime of the run.
    return {"Item": item, "ConditionExpression": "attribute_not_exists(sk)"}


# On a gate's item: how many votes it held when a transaction last put all its inbox entries again without an expiry
# (a claim, release or assignment: store/transitions.transition_items). While it still holds that many, no entry of it
# carries an expiry, so the daily sweep that keeps the gate writes none of them (store/retention.keep_items). A vote
# or a delegation since (which may have put a new delegate's entries with one) makes them differ, whichever release
# wrote it.
ENTRIES_UNEXPIRING = "entriesUnexpiring"


def interrupt_votes(
    pk: str, interrupt: OpenInterrupt, entries_unexpiring: bool = False, entries_expiry: int | None = None
) -> dict[str, Any]:
    """The update of an open gate's item a transition makes: its votes; `entries_unexpiring`, when the transaction puts
    every inbox entry of the gate again without an expiry (ENTRIES_UNEXPIRING); `entries_expiry`, what the entries of
    a new delegate it put before it expire at, which the item takes if it has none (the daily sweep took it off while
    the gate waited): the sweep finds the gate again by it, and takes it off those entries before they go (ADR 0154)."""
    values = {":votes": a.as_json([v.model_dump() for v in interrupt.votes])}
    sets = "votes = :votes"
    if entries_unexpiring:
        sets += f", {ENTRIES_UNEXPIRING} = :votes_held"
        values[":votes_held"] = a.n(len(interrupt.votes))
    if entries_expiry is not None:
        sets += ", #ttl = if_not_exists(#ttl, :entries_expiry)"
        values[":entries_expiry"] = a.n(entries_expiry)
    if interrupt.written_once:
        # No status to hold: the head's version condition, in the same transaction, says the gate is still open.
        update: dict[str, Any] = {
            "Key": a.key(pk, interrupt_sk(interrupt.key)),
            "UpdateExpression": f"SET {sets}",
            "ConditionExpression": "attribute_exists(sk)",
            "ExpressionAttributeValues": values,
        }
    else:
        update = _while_open(pk, interrupt, sets, values)
    if entries_expiry is not None:
        update["ExpressionAttributeNames"] = {**update.get("ExpressionAttributeNames", {}), "#ttl": wiring.TTL_ATTRIBUTE}
    return update


def entries_unexpiring(gate: a.Item) -> bool:
    """Whether no inbox entry of the gate whose item is `gate` carries an expiry (ENTRIES_UNEXPIRING)."""
    plain = a.plain(gate)
    if ENTRIES_UNEXPIRING not in plain:
        return False
    return int(plain[ENTRIES_UNEXPIRING]) == len(gate_votes(plain))


def interrupt_close(
    pk: str, interrupt: OpenInterrupt, status: str, resolution: dict[str, Any] | None, expires: int | None = None
) -> dict[str, Any] | None:
    """The close of a gate's item in format 1 (its status, resolution and, when the run ends, ttl); None for a
    format-3 item, which the close leaves as it is (the head and the close's event say it closed)."""
    if interrupt.written_once:
        return None
    values: a.Item = {":status": a.s(status), ":resolution": a.packed(resolution)}
    if expires is None:
        return _while_open(pk, interrupt, "#st = :status, resolution = :resolution", values)
    update = _while_open(pk, interrupt, "#st = :status, resolution = :resolution, #ttl = :ttl", {**values, ":ttl": a.n(expires)})
    update["ExpressionAttributeNames"]["#ttl"] = wiring.TTL_ATTRIBUTE
    return update


def _while_open(pk: str, interrupt: OpenInterrupt, sets: str, values: a.Item) -> dict[str, Any]:
    """The Update of an interrupt's item that sets `sets`, on condition that it is still open."""
    return {
        "Key": a.key(pk, interrupt_sk(interrupt.key)),
        "UpdateExpression": f"SET {sets}",
        "ConditionExpression": "#st = :open",
        "ExpressionAttributeNames": {"#st": "status"},
        "ExpressionAttributeValues": {**values, ":open": a.s("open")},
    }
