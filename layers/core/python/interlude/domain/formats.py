"""The formats of stored items, and the newest this release reads.

A stored item (or a stored document: the run head's state, RunState.v) carries its format in `v`, a whole number; an
item without one is in format 1, and every kind of item is written in format 1 so far (the kinds: the docstrings of
interlude.store's modules). A change that keeps every field's meaning (a new optional field, a new kind of item) is
no new format: the previous release reads it and keeps the field (interlude.domain.models.Stored). A field's default
is part of its format: the run head's state leaves out the fields at their defaults (docs/adr/0153), so a default
changed would change what every such head already stored means. A change it could
not read is a new format of that kind (numbered across the table: the next number, whichever kind, so one set
covers every kind), shipped in two releases: the first reads it (its number joins READ_FORMATS) and still writes the
old one, the next writes it (setting `v` on that kind's items), so the release before every release reads what that
release writes and a rollback of one release strands nothing (docs/operations.md, "Upgrades and rollbacks"). An item
in a format this release does not read is refused, by name, wherever it is read (`interlude.item_too_new`), never
misread. The formats are a set, not a bound: numbers are handed out before their readers are built, and a reader
that ships without an earlier number's must not claim to read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from interlude.domain.errors import Internal

# The item attribute (and the document field) that holds an item's format; absent: 1.
FORMAT_FIELD = "v"
# Format 2: a workflow version whose edges carry conditions (engine/conditions.py). A release that does not know them
# would read the edges as unconditional and send a `refine` on to what the approval releases, so it must refuse such
# a version (item_too_new) rather than run it. Only versions that use conditions carry it; every other item is
# written in format 1 as before.
CONDITIONED_WORKFLOW = 2
# Format 3: an interrupt item written once, when its gate opens, and never again by its close (docs/adr/0126): no
# `status`, no `resolution`, and `raisedSeq`, the first sequence of the events its opening wrote. Whether its gate is
# open is the run head's (the gate is among its state's open interrupts, marked `itemFormat` 3 there); how it closed
# is the close's event in the run's log from `raisedSeq` on (`interrupt.resolved`, or `node.cancelled`). A release
# that does not know it would list the gate as open for ever and close it on a condition that never holds.
GATE_STATUS_ON_HEAD = 3
# Format 4: a run head whose state holds a large gate text or large inputs elsewhere (domain/head_parts.py, ADR 0127):
# an open interrupt's `payload` keeps what the decision reads and `payloadDigest` names the whole, which the interrupt
# item holds; the run's `inputs` are left empty and `inputsDigest` names them, which the run.started event holds. A
# release that does not know it would decide and display the gate without its text and run templates against no
# inputs, so it must refuse such a head. Only heads that hold something elsewhere carry it.
HEAD_PARTS_ELSEWHERE = 4
# Format 5: an event batch that carries its transition's audit draft (`audit`) instead of the transition appending
# to the audit chain itself; the appender on the stream (app/dispatch.py, store/audit.py) chains it (docs/adr/0128).
# A release that does not know it would dispatch the batch and drop the draft: the action would never get its entry.
AUDIT_DRAFT_ON_BATCH = 5
# Format 8: deadlines due in one second share schedules (ADR 0132): a due item (store/due_index.py) lists one deadline
# in the partition of its second and shard, and a bucket schedule's input names that partition (its `v`) instead of a
# deadline. A release that does not know them would take the bucket's invocation for a deadline naming no run and
# fire nothing, so it must refuse both (the invocation then fails, and Scheduler retries it).
DEADLINE_BUCKETS = 8
# Format 9: an event batch whose events that repeat a gate's large text (`interrupt.requested` and its kind's own type,
# written with the gate's interrupt item) keep only what a format-4 head keeps of it and name the whole payload by the
# interrupt's key and digest (domain/head_parts.py, docs/adr/0134); every read of stored events puts it back. A release
# that does not know it would show, send and export those events without the gate's text, so it must refuse the batch.
GATE_TEXT_OFF_EVENTS = 9
# Format 10: one callback delivery for the notices of one transition (docs/adr/0155): a queued message with `notices`
# (in order) where it had one `notice`, and one delivery record (store/deliveries.py) under its first notice's id whose
# `notices` say which were delivered, which died and each one's attempts, with every notice's attempt records in its
# history. A release that does not know them would fail the message on its missing `notice` until the queue dropped it
# into its dead letters, and read the record as one notice's: the others would never be delivered nor replayed.
NOTICE_BUNDLES = 10
# Format 11: the inbox entries and the callback and webhook delivery records in the deployment's second table (docs/adr/
# 0161, store/layout.py): a gate whose entries are there says so on its head's open interrupt and on its item
# (`entriesTable`), a closing event batch names each entry's table with its key (closedEntries), and a delivery's queued
# message names its record's (`table`). A release that does not know them would look for those items in the first
# table only: list no gate opened since, leave closed gates' entries behind, and deliver nothing twice but record
# nothing either; so it must refuse such a message.
ENTRIES_TABLE = 11
# Format 12: an interrupt item whose gate payload is deflated against its node's configuration in the workflow version
# its run follows (`payloadAgainst`, `workflowVersion`: store/gate_payloads.py, docs/adr/0169), and otherwise as format
# 3 (written once, its status the head's). A release that does not know it would find the gate without a payload:
# list, show and send it without its text, and decide it without its answer's schema; so it must refuse the item.
GATE_PAYLOAD_AGAINST_DEFINITION = 12
# The formats this release reads, of any kind (1: no `v`), and the newest of them.
READ_FORMATS = frozenset(
    {
        1,
        CONDITIONED_WORKFLOW,
        GATE_STATUS_ON_HEAD,
        HEAD_PARTS_ELSEWHERE,
        AUDIT_DRAFT_ON_BATCH,
        DEADLINE_BUCKETS,
        GATE_TEXT_OFF_EVENTS,
        NOTICE_BUNDLES,
        ENTRIES_TABLE,
        GATE_PAYLOAD_AGAINST_DEFINITION,
    }
)
READS = max(READ_FORMATS)


def check(kind: str, written_in: object) -> None:
    """Refuse an item of `kind` whose format (its `v`, None when absent) this release does not read."""
    if written_in is None or (isinstance(written_in, int) and written_in in READ_FORMATS):
        return
    raise Internal(
        f"a stored {kind} item is in format {written_in}, newer than this release of Interlude reads (up to {READS}):"
        " it was written by a later release; deploy that release (or a later one) again",
        {"kind": kind, "format": written_in, "reads": READS},
        code="interlude.item_too_new",
    )


# The format this release writes a new gate's interrupt item in (None: 1, no `v`): 3 from 0.3.0, whose previous release
# (0.2.0) reads it and decides its gates (docs/adr/0126).
INTERRUPT_ITEM_WRITTEN: int | None = GATE_STATUS_ON_HEAD
# Whether an event batch that repeats a gate's large text is written in format 9 (without it): from 0.4.0, whose
# previous release (0.3.0) reads it (docs/adr/0134).
GATE_TEXT_OFF_EVENTS_WRITTEN = True
# Whether a transition's callback notices (two or more) are queued as one message and delivered under one record, in
# format 10: from 0.5.0, whose previous release (0.4.0) reads them (docs/adr/0155).
NOTICE_BUNDLES_WRITTEN = True
# Whether new inbox entries and delivery records are written to the second table, with their marks, in format 11
# (store/layout.py's INBOX_ENTRIES and DELIVERY_RECORDS): from 0.6.0, whose previous release (0.5.0) reads them
# (docs/adr/0161).
ENTRIES_TABLE_WRITTEN = True
# Whether a create whose run id was minted for it puts its event batch before its transaction, as a plain put with its
# gates and index entries (1 WRU per KB, not 2): from 0.7.0, whose previous release (0.6.0) waits for such a batch's
# run head in dispatch (0.5.0 would take the batch for a deleted run's and drop its outbox work: a new shape of the
# outbox's, not of an item, shipped as a format is; docs/adr/0165).
CREATE_BATCH_PUT_BEFORE_WRITTEN = True
# Whether a gate's interrupt item is written in format 12 (its payload deflated against its node), where its node says
# enough (store/gate_payloads.DICTIONARY_MIN): from 0.8.0, whose previous release (0.7.0) reads it (docs/adr/0169).
GATE_PAYLOAD_AGAINST_DEFINITION_WRITTEN = True
# Whether the audit appender on the stream leaves its chain's head behind its newest entries (rules/audit.head_may_lag):
# no item changes shape, but 0.7.0's readers stop at the head and would hide those entries, its sweep could take the
# chain off the pending index past them. 0.8.0 reads past the head (docs/adr/0172): on from 0.9.0, whose previous
# release (0.8.0) reads it.
AUDIT_HEAD_LAGS_WRITTEN = True


def workflow_version_format(definition: Mapping[str, Any]) -> int | None:
    """The format a workflow version's item is written in (None: 1, no `v`)."""
    edges = definition.get("edges") or []
    conditioned = any(isinstance(e, Mapping) and e.get("condition") is not None for e in edges)
    return CONDITIONED_WORKFLOW if conditioned else None
