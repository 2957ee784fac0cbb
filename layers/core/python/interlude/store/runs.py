"""A run as read: its head (the state and its version), its events, its interrupts, the run listing.

Reads only: what moves a run is store/transitions.py. The functions that read runs and move none (notify) take this.
"""

from __future__ import annotations

from typing import Any

from interlude import wiring
from interlude.domain import formats
from interlude.domain.errors import Internal, NotFound
from interlude.domain.models.run import RunState, state_from_json
from interlude.store import attributes as a
from interlude.store import gate_closes, gate_payloads, head_parts, item_index
from interlude.store.expiry import past_expiry, run_expiry
from interlude.store.layout import LAST_EVENT_SK, RUN_SK, event_sk, interrupt_sk, run_id_of, run_pk
from interlude.store.table import BATCH_GET_MAX, Table, batch_get, batch_get_answers

# What closed_interrupt reads of a gate's item (with what a format-12 item's payload is put back from).
_CLOSED_INTERRUPT_READ = ("#st", "resolution", "raisedAt", "interruptId", "payload", "votes", "nodeId", "#v", "#seq")


def head_of(item: dict[str, Any]) -> tuple[RunState, int]:
    """The state and version a head item holds, as it holds them: a format-4 head's parts held elsewhere are not
    read (store/head_parts.complete reads them)."""
    return state_from_json(a.unpacked_json(item["state"])), int(item["version"]["N"])


class RunStore(Table):
    def get_run(self, run_id: str) -> tuple[RunState, int] | None:
        item = self.client.get_item(TableName=self.table, Key=a.key(run_pk(run_id), RUN_SK)).get("Item")
        if not item:
            return None
        try:
            return self.complete(head_of(item))
        except Internal:
            if past_expiry(item):  # its parts deleted by TTL before it: the run is gone, not broken
                return None
            raise

    def get_runs(self, run_ids: list[str]) -> dict[str, tuple[RunState, int]]:
        """The heads of `run_ids` (BatchGetItem, 100 keys a call); a run that is gone is left out."""
        found: dict[str, tuple[RunState, int]] = {}
        for item in self._batch_get([a.key(run_pk(r), RUN_SK) for r in dict.fromkeys(run_ids)]):
            run_id = run_id_of(item[wiring.PARTITION_KEY]["S"])
            if run_id is not None:
                found[run_id] = head_of(item)
        head_parts.complete(self.client, self.table, (state for state, _ in found.values()))
        return found

    def complete(self, head: tuple[RunState, int]) -> tuple[RunState, int]:
        """`head` with the parts it holds elsewhere read back (store/head_parts.py)."""
        head_parts.complete(self.client, self.table, [head[0]])
        return head

    def run_head(self, run_id: str) -> tuple[RunState, int] | None:
        # Whole: read here, its inputs come with its gates' payloads, in one call (dispatch's held head may lack them).
        return self.get_run(run_id)

    def run_index(self, tenant: str, family: str | None = None) -> item_index.ItemIndexReader:
        """The run listing, or with a family the run search's entries of the runs that hold it (rules/run_search.py)."""
        if family is None:
            return item_index.ItemIndexReader(self.client, self.table, tenant, wiring.RUN_INDEX)
        return item_index.ItemIndexReader(self.client, self.table, tenant, wiring.RUN_SEARCH, family)

    def read_events(
        self,
        run_id: str,
        after_sequence: int = -1,
        limit: int | None = None,
        holder: RunState | None = None,
        consistent: bool = False,
    ) -> list[dict[str, Any]]:
        """Events with sequence > after_sequence, in order, as they were emitted (a gate's text a format-9 batch holds
        elsewhere put back: store/head_parts.filled_events; `holder`, the run's head as the caller read it, has its open
        gates' texts). Batches are keyed by their last sequence. `consistent`: every batch committed before the read
        (twice the read units), not only those the read's replica has."""
        kwargs: dict[str, Any] = {
            "ConsistentRead": consistent,
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {
                ":pk": a.s(run_pk(run_id)),
                ":lo": a.s(event_sk(max(after_sequence + 1, 0))),
                ":hi": a.s(LAST_EVENT_SK),
            },
        }
        out: list[dict[str, Any]] = []
        expired = False
        for page in self.client.get_paginator("query").paginate(**kwargs):
            for item in page.get("Items") or []:
                out.extend(e for e in a.unpacked(item["events"]) if e["sequence"] > after_sequence)
                expired = expired or past_expiry(item)
            if limit is not None and len(out) >= limit:
                out = out[:limit]
                break  # no further page is fetched
        try:
            return head_parts.filled_events(self.client, self.table, run_id, out, holder)
        except Internal:
            if expired:  # a gate's item that held its text deleted by TTL before the batch: the run is gone
                raise NotFound("no such run") from None
            raise

    # -- interrupts ------------------------------------------------------------------------------------

    def interrupts(self, run_id: str) -> list[dict[str, Any]]:
        """Every interrupt the run raised (open, resolved, cancelled), oldest first."""
        from interlude.store.inbox import run_interrupts  # the export's read only: the inbox rules load with it

        return run_interrupts(self.client, self.table, run_id)

    def expires_at(self, run_id: str) -> int | None:
        """When the run's head expires (the table's TTL attribute, epoch seconds); None: not finished, or not yet."""
        value = run_expiry(self.client, self.table, run_id).get(wiring.TTL_ATTRIBUTE)
        return int(value["N"]) if value else None

    def raised_at(self, run_id: str, key: str) -> str | None:
        """When the interrupt raised under `key` was raised (it may be open or closed), read from its item; None if none
        was (dispatch answers from the record that closed it where it can: app/dispatch.py HeldRuns.raised_at)."""
        got = self.client.get_item(
            TableName=self.table,
            Key=a.key(run_pk(run_id), interrupt_sk(key)),
            ProjectionExpression="raisedAt",
        )
        item = got.get("Item") or {}
        return item["raisedAt"]["S"] if "raisedAt" in item else None

    def closed_interrupt(self, run_id: str, key: str) -> dict[str, Any] | None:
        """The interrupt raised under `key`: {status, resolution?, raisedAt, interruptId, payload, votes?}; None if none
        was. `votes` (JSON text) are those recorded while it was open, the one that closed it not among them. A
        format-3 item's status and resolution are read from the run's events (store/gate_closes.py)."""
        got = self.client.get_item(
            TableName=self.table,
            Key=a.key(run_pk(run_id), interrupt_sk(key)),
            ProjectionExpression=", ".join(dict.fromkeys(_CLOSED_INTERRUPT_READ + gate_payloads.FILL_NEEDS)),
            ExpressionAttributeNames={"#st": "status", "#v": formats.FORMAT_FIELD, "#seq": gate_closes.RAISED_SEQ},
        )
        item = got.get("Item")
        if not item:
            return None
        gate_payloads.fill(self.client, self.table, [item])
        doc = gate_payloads.plain_payload(a.plain(item))
        if not gate_closes.written_once(doc):
            return doc
        return gate_closes.with_close(doc, gate_closes.closes(self.client, self.table, run_id, [doc]).get(doc["interruptId"]))

    def gate_close(
        self, run_id: str, node_id: str, interrupt_id: str, after_seq: int
    ) -> tuple[str, dict[str, Any]] | None:
        """How a format-3 gate closed (status, resolution) by its events from `after_seq` on (a sequence its close came
        at or after: the run's next one when the caller read the gate open); None: no close there."""
        doc = {"nodeId": node_id, "interruptId": interrupt_id, gate_closes.RAISED_SEQ: after_seq}
        return gate_closes.closes(self.client, self.table, run_id, [doc]).get(interrupt_id)

    def raised_any(self, run_id: str, keys: list[str]) -> bool:
        """Whether the run ever raised an interrupt under one of `keys` (open, resolved or cancelled alike)."""
        pk = run_pk(run_id)
        pending = [a.key(pk, interrupt_sk(k)) for k in keys]
        while pending:
            batch, pending = pending[:BATCH_GET_MAX], pending[BATCH_GET_MAX:]
            request: dict[str, Any] = {self.table: {"Keys": batch, "ProjectionExpression": "sk"}}
            for got in batch_get_answers(self.client, request):
                if got.get("Responses", {}).get(self.table):
                    return True
        return False

    def _batch_get(self, keys: list[a.Item]) -> list[dict[str, Any]]:
        """The items of `keys` that exist."""
        return list(batch_get(self.client, self.table, keys))
