"""A finished run's items, given the table's TTL attribute (issue 30 item 4): what the retention job
(interlude.app.retention) reads and writes.

  run head      T#{tenant}#R#{run}   RUN   ttl: when the run expires (its end + the tenant's retentionDays), written
                                           by the transaction that ends it (or by the job, for a run ended before);
                                           its state's searchExpiry names the provisional expiry its items are
                                           written with (run_search.items_expiry: the run's creation + retentionDays
                                           + ITEMS_MARGIN_DAYS, ADR 0133);
                                           retentionStamped (only on a head re-stamped since its end, ended too late
                                           for its items' provisional expiry, or marked by an earlier release): the
                                           ttl the job's last whole turn gave every item, 0 while that turn is under way
  run items     T#{tenant}#R#{run}   *     ttl: the provisional one while the run is open and it is not near (none
                                           once it is: the daily sweep takes it off), the run's once it ended (event
                                           batches, interrupts, callback and webhook deliveries, notifications); one
                                           written before the end keeps the later provisional one unless the run
                                           ended too late for it or was re-stamped; the effect ledger's is never
                                           shortened, so a ledger entry keeps its own at least 14 days past its effect;
                                           a new run's gate (and its event batch, ADR 0165) put before its creating
                                           transaction when the provisional one was near: the search entries' (ADR
                                           0147), taken off by the sweep once near, the run's once it ended
  listing       T#{tenant}#RUNS#{shard}  {createdAt}#{run}    ttl: the search entries' provisional one, written with
                                                             the entry (ADR 0131), the head's (never less than the
                                                             provisional) only for a run ending too late for it
                                                             (run_search.listing_stamped_at_end); none for an open run
                                                             the daily sweep found near it, or created before it
  search        T#{tenant}#RUNX#{family}#{shard}  (same)     ttl: a provisional one written with each entry (the
                                                             run's creation + retentionDays + 90 days), the head's
                                                             only for a run ending too late for it (run_search.
                                                             stamped_at_end) or created before it existed
  effect        T#{tenant}#EF#{opaque}   EFFECT               ttl raised to the head's with its ledger entry's, never
                                                             shortened (none written when the entry's is later)
  task          T#{tenant}#TK#{opaque}   TASK                 ttl: the run's items' provisional one (none when it is
                                                             near), kept as those items keep theirs; else the head's
                                                             (each task an event batch names)
  inbox         T#{tenant}#INBOX#…       (store/inbox.py)     ttl: its gate's, put before the transaction that opens
                                                             the gate (ADR 0154), taken off by the sweep before the
                                                             gate's while it is open; none once claimed or assigned
                                                             (put again in that transaction, which the gate's item
                                                             records: run_items.ENTRIES_UNEXPIRING, so the sweep
                                                             writes none of them); every entry deleted when its gate
                                                             closes

  re-stamp job T#{tenant}#RETENTION   RESTAMP  a change of the tenant's retentionDays given to its finished runs
                                               (app/retention.Restamp): days, generation (the change's instant),
                                               state running|done, shard and after (where its listing read goes
                                               on), runsSeen, runsRestamped, startedAt, finishedAt

A run that runs again (a failed run's action retried) loses its ttl on the head at once (store/run_items.head_write),
and the job gives the other items the provisional one again (none when it is near). An item written after the job (a late delivery) is created with the
head's ttl by its ledger (store/expiry.py). Every write here is one UpdateItem of one item: no transaction, so a
run of any size is retained in pages, each bounded, resumable from the last key done.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from interlude import wiring
from interlude.domain.ids import tenant_of
from interlude.domain.models.run import RunState
from interlude.rules import run_search
from interlude.store import attributes as a
from interlude.store import expiry, gate_payloads
from interlude.store.effects import EFFECT_SK, LEDGER_SK_PREFIX, effect_pk
from interlude.store.gate_closes import RAISED_SEQ
from interlude.store.inbox import ENTRY_SOURCE_ATTRIBUTES, Entry
from interlude.store.item_index import index_pk
from interlude.store.layout import FIRST, RUN_SK, SECOND, run_pk
from interlude.store.recoveries import RECOVERY_SK
from interlude.store.run_items import ENTRIES_UNEXPIRING, entries_unexpiring, run_entry, run_entry_key, search_entries
from interlude.store.runs import head_of
from interlude.store.table import Table, batch_get, conditionally
from interlude.store.task_items import TASK_SK, task_pk

# Before a sort key, in where a turn goes on (`items_page`): a key of the run's partition in the second table (no key of
# the first starts so; a release that does not know it reads the first table's items after it again, none lost).
SECOND_PAGES = "@" + SECOND + "@"
# Items a page of the run's partition reads (keys, ttl and an event batch's events; a page reads at most 1 MB).
PAGE_ITEMS = 200
_TTL = {"#ttl": wiring.TTL_ATTRIBUTE}
_GATE_NAMES = {f"#g{i}": name for i, name in enumerate((*ENTRY_SOURCE_ATTRIBUTES, ENTRIES_UNEXPIRING))}
# The head's record that a turn that writes every item is done (expiry.RETAINED): a head that has one and whose
# `ttl` differs is a finished run whose retention is yet to be done (ADRs 0118, 0133).
RETAINED = expiry.RETAINED
RESTAMPING = expiry.RESTAMPING


RESTAMP_SK = "RESTAMP"
RUNNING = "running"
DONE = "done"


def restamp_key(tenant: str) -> a.Item:
    return a.key(f"T#{tenant}#RETENTION", RESTAMP_SK)


def restamp_put(tenant: str, days: int, generation: str) -> dict[str, Any]:
    """The TransactWriteItem that starts (or starts over) the tenant's re-stamp job, written with the settings change
    that asks for it: a job under way for an earlier change is replaced, and its turns stop at their next page."""
    item = {
        **restamp_key(tenant),
        "days": a.n(days),
        "generation": a.s(generation),
        "state": a.s(RUNNING),
        "shard": a.n(0),
        "runsSeen": a.n(0),
        "runsRestamped": a.n(0),
        "startedAt": a.s(generation),
    }
    return {"Put": {"Item": item}}


@dataclass(frozen=True)
class RetainedRun:
    state: RunState
    version: int
    ttl: int | None
    # RETAINED, when the head has one.
    stamped: int | None = None
    # The provisional expiry the run's items are written with (rules/run_search.items_expiry), when it has one.
    provisional: int | None = None

    @classmethod
    def of(cls, state: RunState, version: int, ttl: int | None, stamped: int | None) -> RetainedRun:
        return cls(state, version, ttl, stamped, run_search.items_expiry(state.searchExpiry))


@dataclass(frozen=True)
class RunItem:
    sk: str
    ttl: int | None
    # A ledger entry's effect (its own item, outside the run's partition).
    effect_id: str | None = None
    # An event batch's events (the tasks the run requested are named there).
    events: tuple[dict[str, Any], ...] = ()
    # A gate's item (format 3): the first sequence of the events of the transition that opened it.
    raised: int | None = None
    # The table it is in (store/layout.py: a delivery record may be in the second).
    where: str = FIRST


@dataclass(frozen=True)
class RunPage:
    items: list[RunItem]
    # The key to go on after, when more may follow.
    last: str | None
    # The run's head, when the page read it.
    head: RetainedRun | None = None


class RetentionStore(Table):
    def retained_run(self, run_id: str) -> RetainedRun | None:
        got = self.client.get_item(TableName=self.table, Key=a.key(run_pk(run_id), RUN_SK), ConsistentRead=True)
        item = got.get("Item")
        if item is None:
            return None
        return retained_head(item)

    def heads_among(self, run_ids: list[str]) -> list[RetainedRun]:
        """The heads of `run_ids` that are still there. Eventually consistent: what the daily sweep reads of each run it
        finds by an item without an expiry (an open run, nearly always: 0.5 read units each)."""
        keys = [a.key(run_pk(run_id), RUN_SK) for run_id in dict.fromkeys(run_ids)]
        return [retained_head(item) for item in batch_get(self.client, self.table, keys)]

    def keep_listed(self, state: RunState) -> bool:
        """The open run's listing entry without an expiry: its provisional one taken off, or the entry put back if it
        expired already; whether it was written (one read of the entry, and a write only for one that has an expiry
        or is gone)."""
        listed = run_entry(state.tenant, state.runId, state.workflowId, state.createdAt)
        got = self.client.get_item(
            TableName=self.table,
            Key=run_entry_key(listed),
            ProjectionExpression="#sk, #ttl",
            ExpressionAttributeNames={"#sk": wiring.SORT_KEY, **_TTL},
        )
        if "Item" in got and wiring.TTL_ATTRIBUTE not in got["Item"]:
            return False
        self.client.put_item(TableName=self.table, Item=listed[1]["Put"]["Item"])
        return True

    def keep_task(self, task_id: str) -> bool:
        """The task an open run waits for without an expiry: its provisional one taken off (one read, and a write only
        for one that has it); whether it was written. A task gone is left gone."""
        key = a.key(task_pk(task_id), TASK_SK)
        got = self.client.get_item(
            TableName=self.table,
            Key=key,
            ProjectionExpression="#sk, #ttl",
            ExpressionAttributeNames={"#sk": wiring.SORT_KEY, **_TTL},
        )
        if wiring.TTL_ATTRIBUTE not in got.get("Item", {}):
            return False
        self._set_ttl(key, None)
        return True

    def keep_items(self, run_id: str, now_s: float, entries_of: Collection[str] = ()) -> int:
        """The open run's items without an expiry: each one with one that is near (its provisional, written while it was
        not; run_search.listing_kept_open) has it taken off, but a ledger entry of an effect and a recovery's record
        (each keeps its own: store/effects.py, store/recoveries.py); how many were. One Query of the partition, and a
        write only for an item that has one. An expiry not near is left to a later day's sweep: a gate written while the
        run's provisional expiry was near carries its search entries', a far one, or, once that is near too, one 90 days
        from its opening (store/transitions.gates_expiry), which a run decided within weeks never has written. The gates
        of `entries_of` (interrupt ids: the run's open gates) have their inbox entries' expiry, written with the gate's
        (store/transitions.gates_expiry), taken off first: once the gate has none, no later sweep finds them
        (docs/adr/0154); but not a gate's whose item says none of them has one (run_items.entries_unexpiring: put again
        by a claim, release or assignment). The gate's own is taken off only while it holds the votes read (`_keep_gate`)."""
        kept, after = 0, None
        near = run_search.near_expiries(now_s)
        while True:
            kwargs: dict[str, Any] = {
                "TableName": self.table,
                "KeyConditionExpression": "#pk = :pk",
                "FilterExpression": (
                    "#ttl < :near AND #sk <> :run AND NOT begins_with(#sk, :ledger) AND NOT begins_with(#sk, :recovery)"
                ),
                # A gate's attributes its inbox entries' keys are made of (Entry.of_item), and whether they carry an
                # expiry (run_items.entries_unexpiring).
                "ProjectionExpression": "#sk, " + ", ".join(_GATE_NAMES),
                "ExpressionAttributeNames": {"#pk": wiring.PARTITION_KEY, "#sk": wiring.SORT_KEY, **_TTL, **_GATE_NAMES},
                "ExpressionAttributeValues": {
                    ":pk": a.s(run_pk(run_id)),
                    ":run": a.s(RUN_SK),
                    ":ledger": a.s(LEDGER_SK_PREFIX),
                    ":recovery": a.s(RECOVERY_SK),
                    ":near": a.n(near),
                },
            }
            if after is not None:
                kwargs["ExclusiveStartKey"] = after
            got = self.client.query(**kwargs)
            # A gate's entries are named from its payload (Entry.of_item): a format-12 item's put back.
            gate_payloads.fill(self.client, self.table, got.get("Items") or [])
            for item in got.get("Items") or []:
                key = a.key(run_pk(run_id), item[wiring.SORT_KEY]["S"])
                if item.get("interruptId", {}).get("S") in entries_of and not entries_unexpiring(item):
                    gate = Entry.of_item(item)
                    for entry_key in gate.index_keys():
                        self._set_ttl(entry_key, None, gate.where)
                        kept += 1
                    kept += self._keep_gate(key, item.get("votes"))
                    continue
                self._set_ttl(key, None)
                kept += 1
            after = got.get("LastEvaluatedKey")
            if after is None:
                return kept + self._keep_records(run_id, near)

    def _keep_records(self, run_id: str, near: int) -> int:
        """keep_items for the run's delivery records in the second table (store/layout.py): how many were written."""
        kept = 0
        pages = self.client.get_paginator("query").paginate(
            TableName=self.entries_table,
            KeyConditionExpression="#pk = :pk",
            FilterExpression="#ttl < :near",
            ProjectionExpression="#sk",
            ExpressionAttributeNames={"#pk": wiring.PARTITION_KEY, "#sk": wiring.SORT_KEY, **_TTL},
            ExpressionAttributeValues={":pk": a.s(run_pk(run_id)), ":near": a.n(near)},
        )
        for page in pages:
            for item in page.get("Items") or []:
                self._set_ttl(a.key(run_pk(run_id), item[wiring.SORT_KEY]["S"]), None, SECOND)
                kept += 1
        return kept

    def _keep_gate(self, key: a.Item, votes: dict[str, Any] | None) -> bool:
        """The open gate's expiry taken off, after its entries', on condition that its votes are still `votes` (as read
        with it): a delegation since put its delegate's entries, which those did not include, with the gates' expiry of
        then, and the gate keeps its own (near) for the next day's sweep, which reads it with them (docs/adr/0154)."""
        names = {"#pk": wiring.PARTITION_KEY, "#votes": "votes", **_TTL}
        if votes is None:
            return self._update(key, "REMOVE #ttl", "attribute_exists(#pk) AND attribute_not_exists(#votes)", names, {})
        return self._update(key, "REMOVE #ttl", "attribute_exists(#pk) AND #votes = :votes", names, {":votes": votes})

    def expire_head(self, run_id: str, version: int, ttl: int, restamped: bool = False) -> bool:
        """The head's ttl, on condition that the run is still at `version` (False: it moved since it was read).
        `restamped`: a finished run's expiry changed, its items not yet: the head's RETAINED says so until the turn
        that gives them the new one is whole, so the daily sweep finds a turn that never finished."""
        expression = "SET #ttl = :ttl"
        names, values = {"#version": "version", **_TTL}, {":version": a.n(version), ":ttl": a.n(ttl)}
        if restamped:
            expression += ", #retained = :restamping"
            names["#retained"], values[":restamping"] = RETAINED, a.n(RESTAMPING)
        return self._update(a.key(run_pk(run_id), RUN_SK), expression, "#version = :version", names, values)

    def mark_retained(self, run_id: str, version: int, ttl: int) -> bool:
        """The head records that every item of the run was given `ttl` (RETAINED: a head that has one), on condition
        that the run is still at `version` with that expiry (False: it moved since)."""
        return self._update(
            a.key(run_pk(run_id), RUN_SK),
            "SET #retained = :ttl",
            "#version = :version AND #ttl = :ttl",
            {"#version": "version", "#retained": RETAINED, **_TTL},
            {":version": a.n(version), ":ttl": a.n(ttl)},
        )

    def restamp_job(self, tenant: str) -> dict[str, Any] | None:
        """The tenant's re-stamp job as it stands (plain), or None when its retentionDays never changed."""
        got = self.client.get_item(TableName=self.table, Key=restamp_key(tenant), ConsistentRead=True)
        return a.plain(got["Item"]) if "Item" in got else None

    def record_restamp(
        self, tenant: str, job: Mapping[str, Any], shard: int, after: str | None, seen: int, restamped: int, at: str
    ) -> bool:
        """A page of the job done: where it goes on (`shard` past the last: done) and what it counted; on condition
        that the job is still the one read and where it was read (False: a newer change replaced it, or another copy
        of its turn recorded this page first)."""
        position = "#shard = :was AND " + ("#after = :was_after" if "after" in job else "attribute_not_exists(#after)")
        names = {"#shard": "shard", "#after": "after"}
        values: a.Item = {
            ":generation": a.s(job["generation"]),
            ":was": a.n(job["shard"]),
            ":shard": a.n(shard),
            ":seen": a.n(seen),
            ":restamped": a.n(restamped),
        }
        if "after" in job:
            values[":was_after"] = a.s(job["after"])
        sets, remove = ["#shard = :shard"], ""
        if after is None:
            remove = " REMOVE #after"
        else:
            sets.append("#after = :after")
            values[":after"] = a.s(after)
        if shard >= wiring.RUN_INDEX.shards:
            sets += ["#state = :done", "finishedAt = :at"]
            names["#state"] = "state"
            values |= {":done": a.s(DONE), ":at": a.s(at)}
        return self._update(
            restamp_key(tenant),
            f"SET {', '.join(sets)}{remove} ADD runsSeen :seen, runsRestamped :restamped",
            f"generation = :generation AND {position}",
            names,
            values,
        )

    def listing_page(self, tenant: str, shard: int, after: str | None, limit: int) -> tuple[list[str], str | None]:
        """Run ids of one shard of the tenant's run listing (store/item_index.py), in sort-key order after `after`; and
        the last sort key read when more may follow."""
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#pk = :pk",
            "ProjectionExpression": "#sk, runId",
            "ExpressionAttributeNames": {"#pk": wiring.PARTITION_KEY, "#sk": wiring.SORT_KEY},
            "ExpressionAttributeValues": {":pk": a.s(index_pk(tenant, wiring.RUN_INDEX, shard))},
            "Limit": limit,
        }
        if after is not None:
            kwargs["ExclusiveStartKey"] = a.key(index_pk(tenant, wiring.RUN_INDEX, shard), after)
        got = self.client.query(**kwargs)
        runs = [item["runId"]["S"] for item in got.get("Items") or [] if "runId" in item]
        last = got.get("LastEvaluatedKey")
        return runs, last[wiring.SORT_KEY]["S"] if last else None

    def items_page(self, run_id: str, after: str | None) -> RunPage:
        """A page of the run's items, in key order after sort key `after`; the last key read when more may follow; and
        the head, when the page holds it (a Query bills every item it reads, the head too: a turn that finds it there
        reads it no other way). Its partition in the first table, then in the second (its delivery records may be
        there: store/layout.py), whose keys `after` names with SECOND_PAGES before them."""
        where, after = (SECOND, after.removeprefix(SECOND_PAGES) or None) if after and after.startswith(SECOND_PAGES) else (FIRST, after)
        kwargs: dict[str, Any] = {
            "TableName": self.table_named(where),
            "KeyConditionExpression": "#pk = :pk",
            "ProjectionExpression": "#sk, #ttl, events, #state, #version, #retained, #raised",
            "ExpressionAttributeNames": {
                "#pk": wiring.PARTITION_KEY,
                "#sk": wiring.SORT_KEY,
                "#state": "state",
                "#version": "version",
                "#retained": RETAINED,
                "#raised": RAISED_SEQ,
                **_TTL,
            },
            "ExpressionAttributeValues": {":pk": a.s(run_pk(run_id))},
            "Limit": PAGE_ITEMS,
            # Strongly consistent: an item created before a change of the head's ttl that queued this turn is read
            # (store/expiry.py: why no late item is missed).
            "ConsistentRead": True,
        }
        if after is not None:
            kwargs["ExclusiveStartKey"] = a.key(run_pk(run_id), after)
        got = self.client.query(**kwargs)
        items, head = [], None
        for item in got.get("Items") or []:
            sk = item[wiring.SORT_KEY]["S"]
            if sk == RUN_SK:
                head = retained_head(item)
                continue
            # A ledger entry is keyed by its effect's opaque id (store/effects.py, ledger_sk).
            effect = f"{tenant_of(run_id)}/{sk.removeprefix(LEDGER_SK_PREFIX)}" if sk.startswith(LEDGER_SK_PREFIX) else None
            events = tuple(a.unpacked(item["events"])) if "events" in item else ()
            items.append(RunItem(sk, a.integer(item, wiring.TTL_ATTRIBUTE), effect, events, a.integer(item, RAISED_SEQ), where))
        last = got.get("LastEvaluatedKey")
        if where == SECOND:
            return RunPage(items, SECOND_PAGES + last[wiring.SORT_KEY]["S"] if last else None, head)
        if last:
            return RunPage(items, last[wiring.SORT_KEY]["S"], head)
        # The first table's partition read to its end: the second's first page follows in the same page (a run whose
        # items fit one page is still retained in one).
        rest = self.items_page(run_id, SECOND_PAGES)
        return RunPage(items + rest.items, rest.last, head)

    def set_item_ttl(self, run_id: str, sk: str, ttl: int | None, where: str = FIRST) -> None:
        """One item of the run's partition (in table `where`) expires at `ttl` (None: never, its ttl removed); an item
        gone meanwhile is left gone."""
        self._set_ttl(a.key(run_pk(run_id), sk), ttl, where)

    def set_listing_ttl(self, state: RunState, ttl: int | None) -> None:
        """The run's listing entry (store/item_index.py) expires with it."""
        self._set_ttl(run_entry_key(run_entry(state.tenant, state.runId, state.workflowId, state.createdAt)), ttl)

    def put_search_entries(self, state: RunState, families: list[str], ttl: int | None) -> None:
        """The run's search entries under `families` (rules/run_search.py, store/run_items.search_entries) written
        anew, expiring with it (None: not at all, the run runs again); one an entry expired meanwhile is put back.
        One PutItem each, as many units as the UpdateItem of its ttl alone (an entry is under 1 KB)."""
        for entry in search_entries(state, families, ttl):
            if ttl is None:
                entry.pop(wiring.TTL_ATTRIBUTE, None)
            self.client.put_item(TableName=self.table, Item=entry)

    def set_task_ttl(self, task_id: str, ttl: int | None) -> None:
        """A task the run requested (store/tasks.py; settled or abandoned once the run ended) expires with it."""
        self._set_ttl(a.key(task_pk(task_id), TASK_SK), ttl)

    def raise_ttl(self, run_id: str, sk: str, ttl: int) -> None:
        """An item kept for its own reason too (a ledger entry: at least 14 days past its effect) expires at `ttl`
        only if that is later than its own."""
        self._raise(a.key(run_pk(run_id), sk), ttl)

    def raise_effect_ttl(self, effect_id: str, ttl: int) -> None:
        """The effect record a ledger entry names (keyed by the effect, perhaps shared by other runs) is kept at least
        as long as the run."""
        self._raise(a.key(effect_pk(effect_id), EFFECT_SK), ttl)

    def _raise(self, key: a.Item, ttl: int) -> None:
        condition = "attribute_exists(#pk) AND (attribute_not_exists(#ttl) OR #ttl < :ttl)"
        self._update(key, "SET #ttl = :ttl", condition, {"#pk": wiring.PARTITION_KEY, **_TTL}, {":ttl": a.n(ttl)})

    def _set_ttl(self, key: a.Item, ttl: int | None, where: str = FIRST) -> None:
        names = {"#pk": wiring.PARTITION_KEY, **_TTL}
        if ttl is None:
            self._update(key, "REMOVE #ttl", "attribute_exists(#pk)", names, {}, where)
        else:
            self._update(key, "SET #ttl = :ttl", "attribute_exists(#pk)", names, {":ttl": a.n(ttl)}, where)

    def _update(
        self, key: a.Item, expression: str, condition: str, names: dict[str, str], values: a.Item, where: str = FIRST
    ) -> bool:
        kwargs: dict[str, Any] = {
            "TableName": self.table_named(where),
            "Key": key,
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
        }
        if values:
            kwargs["ExpressionAttributeValues"] = values
        return conditionally(self.client.update_item, **kwargs) is not None


def retained_head(head: dict[str, Any]) -> RetainedRun:
    # Retention reads of a head its status, times, tags, metadata and gates' titles, none of which a format-4 head
    # holds elsewhere (domain/head_parts.py): its other parts are not read back.
    state, version = head_of(head)
    return RetainedRun.of(state, version, a.integer(head, wiring.TTL_ATTRIBUTE), a.integer(head, RETAINED))
