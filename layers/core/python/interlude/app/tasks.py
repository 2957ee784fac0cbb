"""Task workers (issue 15 item 2) on the service side: tasks made from the run's requests, claimed, heartbeated,
completed and failed by the tenant's workers, retried, and lapsed by their schedules.

* The outbox (on_events) makes the task of every `interlude.action-requested` of kind "task" (once: the task id
  derives from run, node and visit). A run that ends while its tasks wait cancels them in its own transaction
  (store.tasks.abandoned_update), so no claim hands one out; the outbox then removes their ready entries.
* A claim takes a ready task (store/tasks.py) and hands its worker a token naming the run, the node, the visit and
  the attempt, with a secret only the claimant knows (the task keeps its digest: ADR 0197). Every later call must
  hold the claim: a second completion, a completion after a failure or a lapse, or a stale attempt's token answers
  409 interlude.task_not_claimed. Only the token of the task's latest claim (its attempt and secret, whose digest
  the task keeps once the claim ended) is told what became of the task (`details`); any other token of the tenant,
  one naming no task among them, is answered alike and told nothing, so a caller without the claim cannot learn
  whether a task exists or how it stands (ADR 0194).
* The first outcome of a claim wins (one conditional write on the task item) and is recorded there, then lands on
  the run (app.actions.finish_action, which ignores a visit that no longer waits). A recorded outcome the run
  never heard (the request died between the two writes) lands when the claim's check fires.
* Checks are one-time schedules (engine.deadlines purpose "task"): one at the claim's first lease end (or at its
  deadline, timeoutSeconds after the claim, when that comes first), and one more whenever a heartbeat carries the
  lease past the last check (at twice the heartbeat timeout, never past the deadline, so a worker heartbeating often
  makes about one schedule per heartbeat timeout and the chain ends at the deadline: issue 31, ADR 0125). A check
  that finds the lease or the deadline passed lapses the attempt: like a retryable failure, the task goes back to
  its queue at attempt + 1 after the retry_config's backoff (`node.retried`), or, with no attempts left, the node
  fails with interlude.task_timeout. So a dead worker's task is claimed again within about two heartbeat timeouts.
  Once a worker's outcome is on the run (completed, failed, or back in its queue), the attempt's pending checks are
  deleted (issue 31, item 4): at most two (the last check and the one before: each new check is more than a
  heartbeat timeout after the last). Their due times are rounded to the millisecond the task item keeps, so the
  names made at the claim are the names made again from the item. (A claim made by a release before ADR 0125 also
  scheduled its deadline's own check; completed by this one, that check fires once and changes nothing.)
* A worker's call on a task whose run no longer waits for it answers 409 interlude.task_not_claimed with
  `status: cancelled`, and the task ends cancelled: the run's end cancelled the task item already, or (a completion
  recorded just before the run ended, landing just after) the outcome does not land and the task is cancelled
  then, rather than left completed, unused. A heartbeat reads the run first.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import random
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from interlude.app.caught import caught
from interlude.app.retries import MAX_RACE_RETRIES
from interlude.domain.budgets import MAX_VALUE_BYTES, within_budget
from interlude.domain.clock import Clock, iso_epoch
from interlude.domain.errors import Conflict, Forbidden, Invalid, run_error
from interlude.domain.ids import tenant_of
from interlude.domain.models.tasks import WorkerError
from interlude.domain.written_numbers import OUTCOME_KEY
from interlude.engine import run as engine
from interlude.engine.deadlines import Deadline, NotDueYet
from interlude.engine.effect_names import ACTION_REQUESTED, TASK, task_id
from interlude.engine.tasks import RetryConfig, text_output
from interlude.rules import run_search
from interlude.store.tasks import Claim
from interlude.store.transactions import LostRace

if TYPE_CHECKING:
    from interlude.app.ports import ActionOutcomes, RunLedger, RunRecords, TaskRecords
    from interlude.rules import auth
    from interlude.store.tasks import ReadyEntry, Task

logger = logging.getLogger(__name__)
TOKEN_PREFIX = "tt1"
# What a claim made by this release keeps (claim_digest); a 0.11.0 claim kept its nonce, 22 characters of base64url.
DIGEST = re.compile(r"[0-9a-f]{64}")
# A worker's error as it reaches the node's failure (message, code and details together).
MAX_WORKER_ERROR_BYTES = 8 * 1024
# (run id, deadline) -> the deadline's one-time schedule exists (interlude.adapters.scheduler at the API edge).
Schedule = Callable[[str, Deadline], Any]


# -- tokens ----------------------------------------------------------------------------------------


def claim_digest(secret: str) -> str:
    """What the task item keeps of a claim's secret (as of an API key's): who reads the table cannot hold the claim."""
    return hashlib.sha256(secret.encode()).hexdigest()


def issue_token(task: Task, secret: str) -> str:
    """The claim's token: run, node, visit, attempt and the claim's secret, then the secret's digest. The digest is the
    last part, where 0.11.0 reads the nonce it compares with the one its item keeps: a claim made here is held by its
    token there too, after a rollback (ADR 0197)."""
    named = {"r": task.run_id, "n": task.node_id, "v": task.visit, "a": task.attempt, "s": secret}
    raw = json.dumps(named, separators=(",", ":"), sort_keys=True, allow_nan=False).encode()
    return f"{TOKEN_PREFIX}.{base64.urlsafe_b64encode(raw).decode().rstrip('=')}.{claim_digest(secret)}"


@dataclass(frozen=True)
class Presented:
    """What a worker's token says of its claim: the attempt, its last part, and the claim's secret (None: a token
    0.11.0 issued, whose last part is the nonce its item keeps)."""

    attempt: int
    last: str
    secret: str | None

    def holds(self, task: Task) -> Claim | None:
        """The claim on `task`, as its item keeps it, when this token holds it. A token 0.11.0 issued holds only a claim
        0.11.0 made (the nonce itself kept): a digest kept by this release is never taken for a nonce."""
        if task.attempt != self.attempt or not task.nonce:
            return None
        kept = task.nonce.encode()
        if self.secret is not None:
            # Its last part is the digest it was issued with, as 0.11.0 reads it: one with another is none issued.
            digest = secrets.compare_digest(kept, claim_digest(self.secret).encode())
            held = digest & secrets.compare_digest(kept, self.last.encode())
        else:
            held = not DIGEST.fullmatch(task.nonce) and secrets.compare_digest(kept, self.last.encode())
        return Claim(self.attempt, task.nonce) if held else None


def read_token(token: str) -> tuple[str, Presented]:
    """(task id, the claim it presents); Invalid (interlude.task_token_invalid) unless Interlude could have issued it."""
    try:
        prefix, body, last = token.split(".")
        named = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        run_id, node_id, visit, attempt = named["r"], named["n"], named["v"], named["a"]
        secret = named.get("s")
        if prefix != TOKEN_PREFIX or not last or not all(isinstance(x, str) and x for x in (run_id, node_id)):
            raise ValueError
        if not all(isinstance(x, int) and x >= 1 for x in (visit, attempt)) or "/" not in run_id:
            raise ValueError
        # ASCII, as every secret, nonce and digest issued is: compared as bytes, anything else would not encode.
        if not last.isascii() or (secret is not None and not (isinstance(secret, str) and secret and secret.isascii())):
            raise ValueError
    except (ValueError, TypeError, KeyError, AttributeError):
        raise Invalid("the task token is not one Interlude issued", code="interlude.task_token_invalid") from None
    return task_id(run_id, node_id, visit), Presented(attempt, last, secret)


def not_claimed(task: Task) -> Conflict:
    return Conflict(
        "this token no longer holds its task (completed, failed, lapsed or cancelled)",
        {"status": task.status, "attempt": task.attempt},
        code="interlude.task_not_claimed",
    )


def holds_nothing() -> Conflict:
    """What a token that is not the task's latest claim is told (one naming no task too): nothing of the task."""
    return Conflict("this token holds no task (its claim ended, or was never made)", code="interlude.task_not_claimed")


def not_waited(task: Task) -> Conflict:
    """The same answer as not_claimed (a worker does the same: stop, send nothing again), saying why."""
    return Conflict(
        "the run no longer waits for this task (cancelled, ended, or its node moved on): its result was not used",
        {"status": "cancelled", "attempt": task.attempt},
        code="interlude.task_not_claimed",
    )


def _check(task: Task, attempt: int, due: float) -> Deadline:
    return Deadline("task", due, task.node_id, interrupt_id=task.task_id, visit=attempt)


def _claimed(task: Task, secret: str) -> dict[str, Any]:
    request = task.request
    return {
        "taskToken": issue_token(task, secret),
        "runId": task.run_id,
        "nodeId": request["nodeId"],
        "nodeType": request["nodeType"],
        "queue": task.queue,
        "config": request["config"],
        "input": request["input"],
        "attempt": task.attempt,
        "heartbeatTimeoutSeconds": request["heartbeatTimeoutSeconds"],
        "timeoutSeconds": request["timeoutSeconds"],
    }


# What Tasks._end_attempt answers when the attempt ended but the run no longer waits for the task (now cancelled).
DROPPED: dict[str, Any] = {"status": "cancelled"}


def _brief(error: dict[str, Any]) -> dict[str, Any]:
    return {k: error[k] for k in ("code", "message") if k in error}


class Tasks:
    def __init__(
        self, tasks: TaskRecords, records: RunRecords, runs: RunLedger, actions: ActionOutcomes, clock: Clock
    ) -> None:
        self.tasks = tasks
        self.records = records
        self.runs = runs
        self.actions = actions
        self.clock = clock

    def on_events(self, run_id: str, events: list[dict[str, Any]]) -> None:
        requested = [
            e["payload"] for e in events if e.get("type") == ACTION_REQUESTED and (e.get("payload") or {}).get("kind") == TASK
        ]
        cancelled = [e["payload"]["nodeId"] for e in events if e.get("type") == "node.cancelled"]
        if not requested and not cancelled:
            return
        got = self.records.get_run(run_id)
        if got is None:
            return
        state = got[0]
        store = self.tasks
        now = self.clock().timestamp()
        for payload in requested:
            pending = state.actions.get(payload["nodeId"])
            if state.terminal or pending is None or pending.visit != payload["visit"] or pending.kind != TASK:
                continue  # settled before this record was handled
            # With the run's items' provisional expiry, none when it is near (rules/run_search.open_expiry): the
            # retention job gives it the run's only when it does to those items (ADRs 0131, 0142).
            node_id = payload["nodeId"]
            expires = run_search.open_expiry(run_search.items_expiry(state.searchExpiry), now)
            store.create(pending.effectId, run_id, node_id, pending.visit, pending.request, now, expires)
        for node_id in cancelled:
            node = state.nodes.get(node_id)
            if node is not None and node.visits:
                store.retire(task_id(run_id, node_id, node.visits))

    def _held(self, principal: auth.Principal, token: str) -> tuple[Task, Claim]:
        """The task a worker's token holds: 403 for another tenant's task, 409 when the claim is gone (telling what
        became of the task only to its latest claim: `holds_nothing`)."""
        tid, presented = read_token(token)
        if tenant_of(tid) != principal.tenant:
            raise Forbidden("the task belongs to another tenant", code="id_tenant_mismatch")
        task = self.tasks.get(tid)
        claim = None if task is None else presented.holds(task)
        if task is None or claim is None:
            raise holds_nothing()
        if task.status != "claimed":
            raise not_claimed(task)
        return task, claim

    def _waits(self, task: Task) -> bool:
        pending = self.actions.pending_action(task.run_id, task.node_id, task.visit)
        return pending is not None and pending.kind == TASK and pending.effectId == task.task_id

    def _drop(self, task: Task) -> Conflict:
        """The run no longer waits for the task's visit: the task ends cancelled, whatever its holder recorded."""
        self.tasks.cancel(task.task_id)
        return not_waited(task)

    def claim(
        self,
        principal: auth.Principal,
        queues: list[str],
        wait_s: float,
        schedule: Schedule,
        sleep: Callable[[float], None] = time.sleep,
    ) -> dict[str, Any] | None:
        """A ready task of one of `queues`, claimed; None when none became ready within `wait_s` (long poll)."""
        give_up = time.monotonic() + wait_s
        delay = 0.2
        while True:
            got = self._claim_once(principal.tenant, list(dict.fromkeys(queues)), schedule)
            if got is not None or time.monotonic() + delay > give_up:
                return got
            sleep(delay)
            delay = min(delay * 1.5, 1.0)

    def _claim_once(self, tenant: str, queues: list[str], schedule: Schedule) -> dict[str, Any] | None:
        store = self.tasks
        # Queues in a random order, so one busy queue does not starve the others a worker serves.
        for queue in random.sample(queues, len(queues)):
            now = self.clock().timestamp()
            for entry in store.ready(tenant, queue, now):
                task = store.get(entry.task_id)
                if task is None or task.status != "ready" or task.attempt != entry.attempt:
                    store.drop(entry)  # the task moved on (cancelled, or claimed from another entry)
                    continue
                limits = task.request
                lease = round(now + int(limits["heartbeatTimeoutSeconds"]), 3)
                deadline = round(now + int(limits["timeoutSeconds"]), 3)
                check_at = min(lease, deadline)
                # One check, scheduled before the claim (a check that finds no claim of its attempt changes nothing):
                # the deadline is reached by the chain of checks the heartbeats make (see heartbeat).
                schedule(task.run_id, _check(task, task.attempt, check_at))
                secret = secrets.token_urlsafe(16)
                if store.claim(entry, claim_digest(secret), lease, deadline, check_at):
                    self._drop_entry(entry)
                    return _claimed(task, secret)
        return None

    def _drop_entry(self, entry: ReadyEntry) -> None:
        """The claimed task's entry leaves its queue; one left behind is dropped by the next claim that meets it."""
        try:
            self.tasks.drop(entry)
        except Exception:
            caught(logger, "task-entry-drop", "the ready entry of claimed task %s was not deleted", entry.task_id)

    def heartbeat(self, principal: auth.Principal, token: str, schedule: Schedule) -> dict[str, Any]:
        task, held = self._held(principal, token)
        if not self._waits(task):
            raise self._drop(task)  # the worker should stop: nothing will use what it makes
        beat_s = int(task.request["heartbeatTimeoutSeconds"])
        now = self.clock().timestamp()
        lease = now + beat_s
        check_at: float | None = None
        if task.check_at < lease and task.check_at < task.deadline:
            # The lease now outruns the last check: one more, far enough out to serve a while, and never past the
            # deadline, so the chain of checks ends at the deadline (the claim schedules none of its own there).
            check_at = min(round(now + 2 * beat_s, 3), task.deadline)
            schedule(task.run_id, _check(task, task.attempt, check_at))
        if not self.tasks.heartbeat(task.task_id, held, lease, check_at, task.check_at):
            raise not_claimed(task)
        return {
            "runId": task.run_id,
            "nodeId": task.request["nodeId"],
            "heartbeatTimeoutSeconds": beat_s,
            "leaseExpiresAt": iso_epoch(min(lease, task.deadline)),
        }

    def complete(
        self,
        principal: auth.Principal,
        token: str,
        output: Any,
        unschedule: Schedule | None = None,
        written_numbers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """`unschedule`: (run id, deadline) -> its schedule deleted (a missing one is no error); None: checks left.
        `written_numbers`: how the request wrote the output's numbers, kept with the outcome (RunState.writtenNumbers)."""
        task, held = self._held(principal, token)
        within_budget(output, MAX_VALUE_BYTES, "the task's output")
        outcome: dict[str, Any] = {"output": text_output(output) if task.request.get("textOutput") else output}
        if written_numbers and not task.request.get("textOutput"):
            outcome[OUTCOME_KEY] = dict(written_numbers)
        if not self.tasks.settle(task.task_id, held, "completed", outcome):
            raise not_claimed(task)
        landed = self._landed(task, outcome)
        self._unschedule_checks(task, unschedule)
        if not landed:
            raise self._drop(task)
        return {"runId": task.run_id, "nodeId": task.request["nodeId"], "status": "completed"}

    def fail(
        self,
        principal: auth.Principal,
        token: str,
        error: WorkerError | str,
        retryable: bool,
        unschedule: Schedule | None = None,
    ) -> dict[str, Any]:
        task, held = self._held(principal, token)
        worker = WorkerError(message=error) if isinstance(error, str) else error
        reported = worker.model_dump(exclude_none=True)
        within_budget(reported, MAX_WORKER_ERROR_BYTES, "the worker's error")
        failure = run_error(
            "interlude.task_failed",
            f"node {task.request['nodeId']!r}: its worker failed attempt {held.attempt}: {worker.message}"[:1000],
            {"nodeId": task.request["nodeId"], "attempt": held.attempt, "error": reported},
        )
        answer = self._end_attempt(task, held, failure, retryable)
        if answer is None:
            raise not_claimed(task)
        self._unschedule_checks(task, unschedule)
        if answer is DROPPED:
            raise not_waited(task)
        return answer

    def _end_attempt(
        self, task: Task, held: Claim, failure: dict[str, Any], retryable: bool, lapsed_by: float = 0
    ) -> dict[str, Any] | None:
        """Requeue the attempt's task (retryable, attempts left) or fail its node; None when the claim is gone, DROPPED
        when the run no longer waits for the task (which is then cancelled)."""
        store = self.tasks
        retry = RetryConfig.model_validate(task.request.get("retry") or {})
        node = task.request["nodeId"]
        if retryable and held.attempt < retry.max_attempts:
            delay_ms = retry.delay_ms(held.attempt)
            not_before = self.clock().timestamp() + delay_ms / 1000
            if not store.requeue(task, held, not_before, lapsed_by):
                return None
            retried = {"attempt": held.attempt + 1, "delayMs": delay_ms, "error": _brief(failure)}
            if not self._note_retry(task, retried):
                store.cancel(task.task_id)
                return DROPPED
            return {
                "runId": task.run_id,
                "nodeId": node,
                "status": "retrying",
                "attempt": held.attempt + 1,
                "retryInSeconds": delay_ms / 1000,
            }
        outcome = {"error": failure}
        if not store.settle(task.task_id, held, "failed", outcome, lapsed_by):
            return None
        if not self._landed(task, outcome):
            store.cancel(task.task_id)
            return DROPPED
        return {"runId": task.run_id, "nodeId": node, "status": "failed"}

    def _unschedule_checks(self, task: Task, unschedule: Schedule | None) -> None:
        """The ended attempt's checks, deleted: called once its outcome is on the run, since until then a check is
        what lands a recorded outcome the run never heard. One that cannot be deleted fires and changes nothing."""
        if unschedule is None:
            return
        for due in sorted({task.check_at, task.previous_check_at} - {0.0}):
            try:
                unschedule(task.run_id, _check(task, task.attempt, due))
            except Exception:
                caught(logger, "task-check-delete", "a check of task %s was not deleted; it fires for nothing", task.task_id)

    def _land(self, task: Task, outcome: dict[str, Any]) -> int:
        return self.actions.finish_action(task.run_id, task.node_id, task.visit, outcome)

    def _landed(self, task: Task, outcome: dict[str, Any]) -> bool:
        """Land the outcome; whether the task's visit ended with it (here, or by a check that landed it first) rather
        than with the run (cancelled or ended while the visit waited: the outcome is unused)."""
        return self._land(task, outcome) > 0 or self._ended_by_outcome(task)

    def _ended_by_outcome(self, task: Task) -> bool:
        got = self.records.get_run(task.run_id)
        node = got[0].nodes.get(task.node_id) if got is not None else None
        if node is None:
            return False
        # An action's visit ends by its outcome or by the run's end (the node skipped); a later visit follows an outcome.
        return node.visits > task.visit or (node.visits == task.visit and node.status in ("completed", "failed"))

    def _note_retry(self, task: Task, retried: dict[str, Any]) -> bool:
        """Record the retry on the run; False when the run no longer waits for the task's visit."""
        for _ in range(MAX_RACE_RETRIES):
            got = self.records.get_run(task.run_id)
            if got is None:
                return False
            state, version = got
            now = self.clock()
            transition = engine.retry_task(state, task.node_id, task.visit, retried, now)
            if not transition.events:
                return False
            try:
                self.runs.commit_answered(transition, version, now)
                return True
            except LostRace:
                continue
        caught(logger, "task-retry-record", "the run %s kept changing while a task retry was recorded; the retry is not", task.run_id)
        return True

    def check(self, body: dict[str, Any]) -> int:
        """A task check's schedule fired: lapse the named attempt if its lease or deadline has passed; land a recorded
        outcome the run never heard. Returns the events written on the run (0: nothing to do)."""
        tid, attempt = body.get("interruptId"), body.get("visit")
        if not isinstance(tid, str) or "/" not in tid or not isinstance(attempt, int):
            return 0
        store = self.tasks
        task = store.get(tid)
        if task is None:
            return 0
        if task.status in ("completed", "failed") and task.outcome is not None:
            written = self._land(task, task.outcome)
            if not written and not self._ended_by_outcome(task):
                store.cancel(task.task_id)
            return written
        now = self.clock().timestamp()
        if task.status != "claimed" or task.attempt != attempt:
            return 0
        if task.deadline <= now:
            reason, limit = "timeout", f"timeoutSeconds={task.request['timeoutSeconds']}"
        elif task.lease_until <= now:
            reason, limit = "heartbeat", f"heartbeatTimeoutSeconds={task.request['heartbeatTimeoutSeconds']}"
        elif now < float(body.get("due") or 0):
            # Fired before its time by this process's clock: fail, so Scheduler tries again (as fire_deadline does).
            raise NotDueYet(f"task check of {tid} is not due yet")
        else:
            return 0  # a heartbeat kept it: a later check stands (see heartbeat)
        node = task.request["nodeId"]
        failure = run_error(
            "interlude.task_timeout",
            f"node {node!r}: attempt {attempt} passed its {limit}",
            {"nodeId": node, "attempt": attempt, "reason": reason},
        )
        before = self._events(task.run_id)
        self._end_attempt(task, Claim(attempt, ""), failure, retryable=True, lapsed_by=now)
        return self._events(task.run_id) - before

    def _events(self, run_id: str) -> int:
        got = self.records.get_run(run_id)
        return got[0].nextSeq if got else 0
