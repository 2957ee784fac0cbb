"""The search-keys job's record and reads (issue 29 item 1: app/search_keys.py): runs created before a metadata key
was declared searchable get their entries under it.

  job      T#{tenant}   SEARCHKEYS   keys (being indexed), generation, after (the run listing's sort key the job goes
                                     on below), runsRead, entriesWritten, declaredAt, updatedAt, doneAt (once done)

Written with the settings change that declares keys (in its transaction: Tenants._write_settings), then by each turn
of the job, on condition that no later declaration replaced it (its `generation`). The job reads the run listing
(wiring.RUN_INDEX) a round at a time and the heads it names, and puts run search entries (wiring.RUN_SEARCH): plain
writes of items that are each the same whoever writes them, so a turn taken twice writes nothing new.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from interlude import wiring
from interlude.store import attributes as a
from interlude.store import item_index
from interlude.store.inbox import InboxIndex
from interlude.store.interactions import tenant_pk
from interlude.store.layout import RUN_SK, run_pk
from interlude.store.runs import head_of
from interlude.store.table import Table, batch_get, conditionally

if TYPE_CHECKING:
    from interlude.domain.models.run import RunState

SEARCH_KEYS_SK = "SEARCHKEYS"


@dataclass(frozen=True)
class SearchKeysJob:
    keys: tuple[str, ...]
    generation: int
    after: str | None
    runs_read: int
    entries_written: int
    declared_at: str
    updated_at: str
    done_at: str | None

    def view(self) -> dict[str, Any]:
        """The job as the tenant's settings answer shows it (`searchIndexing`)."""
        view: dict[str, Any] = {
            "status": "done" if self.done_at else "pending",
            "keys": list(self.keys),
            "runsRead": self.runs_read,
            "entriesWritten": self.entries_written,
            "declaredAt": self.declared_at,
        }
        if self.done_at:
            view["doneAt"] = self.done_at
        return view


def job_put(tenant: str, keys: list[str], generation: int, at: str) -> dict[str, Any]:
    """A new job over `keys`, from the newest run down (a TransactWriteItem, beside the settings that declare them)."""
    item = {
        **a.key(tenant_pk(tenant), SEARCH_KEYS_SK),
        "keys": a.as_json(keys),
        "generation": a.n(generation),
        "runsRead": a.n(0),
        "entriesWritten": a.n(0),
        "declaredAt": a.s(at),
        "updatedAt": a.s(at),
    }
    return {"Put": {"Item": item}}


class SearchKeysStore(Table):
    def job(self, tenant: str) -> SearchKeysJob | None:
        got = self.client.get_item(
            TableName=self.table, Key=a.key(tenant_pk(tenant), SEARCH_KEYS_SK), ConsistentRead=True
        ).get("Item")
        if got is None:
            return None
        plain = a.plain(got)
        return SearchKeysJob(
            keys=tuple(a.unpacked(got["keys"])),
            generation=int(plain["generation"]),
            after=plain.get("after"),
            runs_read=int(plain.get("runsRead", 0)),
            entries_written=int(plain.get("entriesWritten", 0)),
            declared_at=plain["declaredAt"],
            updated_at=plain.get("updatedAt", plain["declaredAt"]),
            done_at=plain.get("doneAt"),
        )

    def save(self, tenant: str, job: SearchKeysJob) -> bool:
        """The job's progress, on condition that it is still the generation read (False: a later declaration
        replaced it, and its own turns go on)."""
        values: a.Item = {
            ":generation": a.n(job.generation),
            ":read": a.n(job.runs_read),
            ":written": a.n(job.entries_written),
            ":updated": a.s(job.updated_at),
        }
        sets = ["runsRead = :read", "entriesWritten = :written", "updatedAt = :updated"]
        removes = []
        for name, value in (("after", job.after), ("doneAt", job.done_at)):
            if value is None:
                removes.append(f"#{name}")
            else:
                sets.append(f"#{name} = :{name}")
                values[f":{name}"] = a.s(value)
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        return conditionally(
            self.client.update_item,
            TableName=self.table,
            Key=a.key(tenant_pk(tenant), SEARCH_KEYS_SK),
            UpdateExpression=expression,
            ConditionExpression="generation = :generation",
            ExpressionAttributeNames={"#after": "after", "#doneAt": "doneAt"},
            ExpressionAttributeValues=values,
        ) is not None

    def run_listing(self, tenant: str) -> item_index.ItemIndexReader:
        return item_index.ItemIndexReader(self.client, self.table, tenant, wiring.RUN_INDEX)

    def heads(self, run_ids: list[str]) -> list[tuple[RunState, int | None]]:
        """The heads of `run_ids` that exist, each with its ttl (a finished run's: its entries are given the same). Of a
        format-4 head only its metadata is read here, which it never holds elsewhere (domain/head_parts.py)."""
        found: list[tuple[RunState, int | None]] = []
        for item in batch_get(self.client, self.table, [a.key(run_pk(r), RUN_SK) for r in run_ids]):
            ttl = item.get(wiring.TTL_ATTRIBUTE)
            found.append((head_of(item)[0], int(ttl["N"]) if ttl else None))
        return found

    def put(self, entries: list[a.Item]) -> None:
        InboxIndex(self.table, self.client, self.entries_table).batch_write([{"PutRequest": {"Item": item}} for item in entries])

