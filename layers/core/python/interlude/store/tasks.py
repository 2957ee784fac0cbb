"""Task items (issue 15 item 2): one per task node visit, and the per-queue ready index a claim reads.

Items:
  task    T#{tenant}#TK#{opaque}                 TASK     status ready|claimed|completed|failed|cancelled, attempt,
                                                          queue, runId, nodeId, visit, request (what the worker
                                                          gets), nonce + leaseUntil + deadline + checkAt of the
                                                          standing claim (nonce: the digest of the claim's secret,
                                                          or, claimed by 0.11.0, its nonce itself: ADR 0197; kept
                                                          once the claim ended, until the task is ready again),
                                                          outcome once settled, readySk (the
                                                          sort key of its ready entry while it is ready)
  ready   T#{tenant}#TASKQ#{queue}#{shard:02d}   {notBefore ms:015d}#{opaque}   taskId, attempt

The ready entry exists while its task is ready (wiring.TASK_QUEUES, sharded like the inbox: store/sharded.py). A
claim reads each shard of each asked queue once, oldest first and only entries whose not-before has come (Limit
CLAIM_READ), and takes a task with one conditional write of the task item (ready -> claimed at the attempt the entry
names), then deletes the entry. So two workers never hold one attempt: the task item decides, and an entry is only
a pointer to it. Making and claiming a task are plain writes, not transactions (issue 31, ADR 0125), ordered so that
a stop between the two leaves nothing wrong:
  * made: the task item first (ready, naming its entry's key), then the entry. Stopped between, the task is ready
    with no entry, and the outbox record that makes it comes again (dispatch fails it): `create` then finds the task
    and puts its entry again.
  * claimed: the task item first, then the entry deleted. Stopped between, the entry outlives its task's readiness,
    and the next claim that meets it finds the task claimed (or at a later attempt) and drops it.
A requeue (a retry) stays one transaction: its callers (a worker's failure, a lapsing check) find the task ready
when they come again, with nothing to tell them its entry is missing. So every entry names a task item that exists
(a claim meeting one whose task is gone drops it), and a claim never trusts an entry without reading its task.

A run that ends while a task waits ends the task in its own transaction (store/task_items.abandoned_update), so a
claim never takes it, and dispatch removes its ready entry (`retire`). Every later change of a claim (heartbeat,
complete, fail, lapse) is conditional on status, attempt and, from a worker, the claim's nonce: one winner. Neither
item starts with "E#": the stream filter never passes them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from interlude import wiring
from interlude.store import attributes as a
from interlude.store.sharded import entry_pk, family_pks
from interlude.store.table import Table
from interlude.store.task_items import TASK_SK, task_fields, task_pk

# Entries a claim reads per shard of a queue: enough to pass a few stale ones in one round.
CLAIM_READ = 5
FAILED_CONDITION = ("ConditionalCheckFailedException", "TransactionCanceledException")


def ready_sk(not_before: float, task_id: str) -> str:
    return f"{int(not_before * 1000):015d}#{task_id.split('/', 1)[1]}"


@dataclass(frozen=True)
class Task:
    task_id: str
    run_id: str
    node_id: str
    visit: int
    queue: str
    status: str
    attempt: int
    request: dict[str, Any]
    nonce: str = ""
    lease_until: float = 0.0
    deadline: float = 0.0
    check_at: float = 0.0
    # The check before the last (a heartbeat's new check keeps it): still pending, perhaps, when the task ends.
    previous_check_at: float = 0.0
    outcome: dict[str, Any] | None = None
    ready_sk: str = ""

    @staticmethod
    def of(item: dict[str, Any]) -> Task:
        plain = a.plain(item)
        return Task(
            task_id=plain["taskId"],
            run_id=plain["runId"],
            node_id=plain["nodeId"],
            visit=int(plain["visit"]),
            queue=plain["queue"],
            status=plain["status"],
            attempt=int(plain["attempt"]),
            request=json.loads(plain["request"]),
            nonce=plain.get("nonce", ""),
            lease_until=float(plain.get("leaseUntil", 0)),
            deadline=float(plain.get("deadline", 0)),
            check_at=float(plain.get("checkAt", 0)),
            previous_check_at=float(plain.get("previousCheckAt", 0)),
            outcome=json.loads(plain["outcome"]) if "outcome" in plain else None,
            ready_sk=plain.get("readySk", ""),
        )


@dataclass(frozen=True)
class ReadyEntry:
    pk: str
    sk: str
    task_id: str
    attempt: int


@dataclass(frozen=True)
class Claim:
    """A claim as its task keeps it: the attempt, and what the task keeps of the claim's secret (interlude.app.tasks)."""

    attempt: int
    nonce: str


class TaskStore:
    def __init__(self, store: Table) -> None:
        self.client = store.client
        self.table = store.table

    # -- creation and the ready index ----------------------------------------------------------------

    def create(
        self,
        task_id: str,
        run_id: str,
        node_id: str,
        visit: int,
        request: dict[str, Any],
        now: float,
        expires: int | None = None,
    ) -> bool:
        """The task, ready at attempt 1, then its ready entry; False when it existed already (a redelivered record),
        whose entry is put again while it is ready (the first delivery may have stopped before its entry). `expires`:
        its run's items' provisional expiry (store/retention.py: the daily sweep takes it off the task of a run waiting
        near it)."""
        entry = self._entry(task_id, request["queue"], 1, now)
        item: a.Item = {
            **a.key(task_pk(task_id), TASK_SK),
            **task_fields(task_id, run_id, node_id, visit, request),
            "status": a.s("ready"),
            "readySk": entry["Item"][wiring.SORT_KEY],
            **({} if expires is None else {wiring.TTL_ATTRIBUTE: a.n(expires)}),
        }
        try:
            self.client.put_item(TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(sk)")
        except ClientError as exc:
            if exc.response["Error"]["Code"] not in FAILED_CONDITION:
                raise
            task = self.get(task_id)
            if task is not None and task.status == "ready" and task.ready_sk:
                # The same entry its item names: putting it again changes nothing when it is there.
                self.client.put_item(**self._entry(task_id, task.queue, task.attempt, 0, task.ready_sk))
            return False
        self.client.put_item(**entry)
        return True

    def _entry(self, task_id: str, queue: str, attempt: int, not_before: float, sk: str = "") -> Any:
        tenant = task_id.split("/", 1)[0]
        pk = entry_pk(tenant, wiring.TASK_QUEUES, queue, task_id)
        item = {**a.key(pk, sk or ready_sk(not_before, task_id)), "taskId": a.s(task_id), "attempt": a.n(attempt)}
        return {"TableName": self.table, "Item": item}

    def ready(self, tenant: str, queue: str, now: float) -> list[ReadyEntry]:
        """The ready entries of a queue whose not-before has come, oldest first: CLAIM_READ per shard at most."""
        upto = f"{int(now * 1000):015d}#~"
        out: list[ReadyEntry] = []
        for pk in family_pks(tenant, wiring.TASK_QUEUES, queue):
            got = self.client.query(
                TableName=self.table,
                KeyConditionExpression="pk = :pk AND sk <= :upto",
                ExpressionAttributeValues={":pk": a.s(pk), ":upto": a.s(upto)},
                Limit=CLAIM_READ,
            )
            for item in got.get("Items") or []:
                plain = a.plain(item)
                out.append(ReadyEntry(pk, plain[wiring.SORT_KEY], plain["taskId"], int(plain["attempt"])))
        return sorted(out, key=lambda e: e.sk)

    def drop(self, entry: ReadyEntry) -> None:
        self.client.delete_item(TableName=self.table, Key=a.key(entry.pk, entry.sk))

    # -- the claim and what follows it --------------------------------------------------------------

    def get(self, task_id: str) -> Task | None:
        got = self.client.get_item(TableName=self.table, Key=a.key(task_pk(task_id), TASK_SK), ConsistentRead=True)
        item = got.get("Item")
        return Task.of(item) if item else None

    def claim(self, entry: ReadyEntry, nonce: str, lease_until: float, deadline: float, check_at: float) -> bool:
        """Take the entry's attempt (ready -> claimed): one conditional write of the task item. The caller then drops
        the entry (`drop`); an entry left behind is dropped by the next claim that meets it."""
        values = {
            ":claimed": a.s("claimed"),
            ":ready": a.s("ready"),
            ":attempt": a.n(entry.attempt),
            ":nonce": a.s(nonce),
            ":lease": a.n(round(lease_until, 3)),
            ":deadline": a.n(round(deadline, 3)),
            ":check": a.n(round(check_at, 3)),
        }
        expression = (
            "SET #st = :claimed, nonce = :nonce, leaseUntil = :lease, deadline = :deadline, checkAt = :check REMOVE readySk"
        )
        return self._update(entry.task_id, expression, "#st = :ready AND attempt = :attempt", {"#st": "status"}, values)

    @staticmethod
    def _held(claim: Claim, names: dict[str, str], values: dict[str, Any]) -> str:
        """The condition that the claim still stands (any claim of that attempt when `claim` has no nonce)."""
        names["#st"] = "status"
        values[":claimed"] = a.s("claimed")
        values[":attempt"] = a.n(claim.attempt)
        condition = "#st = :claimed AND attempt = :attempt"
        if claim.nonce:
            values[":nonce"] = a.s(claim.nonce)
            condition += " AND nonce = :nonce"
        return condition

    def heartbeat(
        self, task_id: str, claim: Claim, lease_until: float, check_at: float | None, previous_check_at: float = 0
    ) -> bool:
        names: dict[str, str] = {}
        values: dict[str, Any] = {":lease": a.n(round(lease_until, 3))}
        expression = "SET leaseUntil = :lease"
        if check_at is not None:
            expression += ", checkAt = :check, previousCheckAt = :previous"
            values[":check"] = a.n(round(check_at, 3))
            values[":previous"] = a.n(round(previous_check_at, 3))
        return self._update(task_id, expression, self._held(claim, names, values), names, values)

    def settle(self, task_id: str, claim: Claim, status: str, outcome: dict[str, Any], lapsed_by: float = 0) -> bool:
        """The attempt ends the task (completed or failed), recording its outcome. `lapsed_by`: a lapse (no nonce),
        allowed only while the lease or the deadline has passed at that moment."""
        names: dict[str, str] = {}
        values: dict[str, Any] = {":status": a.s(status), ":outcome": a.as_json(outcome)}
        condition = self._held(claim, names, values) + self._lapsed(lapsed_by, values)
        # The nonce stays: the claim's holder is still told what became of its task (interlude.app.tasks).
        return self._update(task_id, "SET #st = :status, outcome = :outcome", condition, names, values)

    def requeue(self, task: Task, claim: Claim, not_before: float, lapsed_by: float = 0) -> bool:
        """The attempt ends and the task is ready again at attempt + 1 from `not_before`, its entry written with it."""
        names: dict[str, str] = {}
        entry = self._entry(task.task_id, task.queue, claim.attempt + 1, not_before)
        values: dict[str, Any] = {
            ":ready": a.s("ready"),
            ":next": a.n(claim.attempt + 1),
            ":rsk": entry["Item"][wiring.SORT_KEY],
        }
        condition = self._held(claim, names, values) + self._lapsed(lapsed_by, values)
        update: Any = {
            "TableName": self.table,
            "Key": a.key(task_pk(task.task_id), TASK_SK),
            "UpdateExpression": "SET #st = :ready, attempt = :next, readySk = :rsk "
            "REMOVE nonce, leaseUntil, deadline, checkAt",
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        try:
            self.client.transact_write_items(TransactItems=[{"Update": update}, {"Put": entry}])
        except ClientError as exc:
            if exc.response["Error"]["Code"] not in FAILED_CONDITION:
                raise
            return False
        return True

    def cancel(self, task_id: str) -> bool:
        """The run no longer waits on the task: it is cancelled whatever it was (its entry is dropped by the next
        claim that meets it), so its holder's next heartbeat or completion answers 409. A completed or failed task
        is cancelled too: callers know its outcome never landed (the run ended with its visit still waiting), and
        a recorded outcome kept as completed would claim a use it never had. False when it was cancelled already
        or does not exist."""
        values = {
            ":ready": a.s("ready"),
            ":claimed": a.s("claimed"),
            ":completed": a.s("completed"),
            ":failed": a.s("failed"),
            ":cancelled": a.s("cancelled"),
        }
        condition = "#st IN (:ready, :claimed, :completed, :failed)"
        return self._update(task_id, "SET #st = :cancelled", condition, {"#st": "status"}, values)

    def retire(self, task_id: str) -> None:
        """The run cancelled the task's node: the task ends cancelled (the run's transaction did so already, unless
        it was written before abandoned_update existed) and its ready entry, if it has one, leaves the index."""
        got = self.client.get_item(TableName=self.table, Key=a.key(task_pk(task_id), TASK_SK), ConsistentRead=True)
        item = got.get("Item")
        if item is None:
            return
        plain = a.plain(item)
        if plain["status"] != "cancelled":
            self.cancel(task_id)
        if "readySk" in plain:
            # Deleting an entry already gone (a claim dropped it, or a redelivered record) changes nothing.
            pk = entry_pk(task_id.split("/", 1)[0], wiring.TASK_QUEUES, plain["queue"], task_id)
            self.client.delete_item(TableName=self.table, Key=a.key(pk, plain["readySk"]))

    @staticmethod
    def _lapsed(moment: float, values: dict[str, Any]) -> str:
        if not moment:
            return ""
        values[":moment"] = a.n(round(moment, 3))
        return " AND (leaseUntil <= :moment OR deadline <= :moment)"

    def _update(
        self, task_id: str, expression: str, condition: str, names: dict[str, str], values: dict[str, Any]
    ) -> bool:
        try:
            self.client.update_item(
                TableName=self.table,
                Key=a.key(task_pk(task_id), TASK_SK),
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] not in FAILED_CONDITION:
                raise
            return False
        return True
