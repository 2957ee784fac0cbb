"""What an invocation of the `timeouts` function by one of EventBridge Scheduler's one-time schedules does: a bucket
schedule's input names a partition of the due index, whose deadlines it fires side by side (ADR 0132); any other
schedule (one a release before that made, a reminder's, a task check's, a deferred deadline handed back) has one
deadline as its input. The function's handler only wires this to its services, which it loads with the first
deadline (the audit sweep, every minute, loads none of them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, get_args

from interlude import wiring
from interlude.adapters import metrics
from interlude.adapters.held_work import deadline_admitted
from interlude.adapters.scheduler.buckets import DUE_SECOND, SHARD
from interlude.domain import formats
from interlude.store.due_index import DueIndex
from interlude.store.tenant_standing import TenantStanding

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger

    from interlude.adapters.notify.outbox import NotificationOutbox
    from interlude.app.runs import Runs
    from interlude.app.tasks import Tasks


class DeadlineServices(Protocol):
    @property
    def runs(self) -> Runs: ...

    @property
    def tasks(self) -> Tasks: ...

    @property
    def notification_outbox(self) -> NotificationOutbox: ...


@dataclass(frozen=True)
class DeadlineFiring:
    # Each is called when first needed, so what a deadline needs loads with the first one.
    services: Callable[[], DeadlineServices]
    due_index: Callable[[], DueIndex]
    standing: Callable[[], TenantStanding]
    logger: Logger

    def invoked(self, event: dict[str, Any]) -> dict[str, Any]:
        # A schedule's input in a format this release does not read (a later release's) fails: Scheduler retries it,
        # and after its retries it waits in the dead-letter queue, where it is not lost as a misread one would be.
        formats.check("deadline schedule input", event.get(formats.FORMAT_FIELD))
        if DUE_SECOND in event:
            return self.fire_bucket(int(event[DUE_SECOND]), int(event[SHARD]))
        return self.fired(event)

    def fire_bucket(self, second: int, shard: int) -> dict[str, Any]:
        """Fire every deadline listed in one bucket of the due index, side by side. Each fires as a schedule of its
        own would (`fired`); if any fails, the others still fire and then the invocation fails, so Scheduler invokes
        the bucket again and the deadlines applied already are no-ops (Runs.fire_deadline)."""
        from interlude.adapters.batch import side_by_side  # the thread pool, with the first bucket

        listed = self.due_index().due(second, shard)
        outcomes = side_by_side(self.fired_or_failure, listed, wiring.DUE_BUCKET_WORKERS)
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        self.logger.info(
            "deadline bucket fired",
            extra={"dueSecond": second, "shard": shard, "deadlines": len(listed), "failed": len(failures)},
        )
        if failures:
            raise failures[0]
        fired = [outcome for outcome in outcomes if not isinstance(outcome, BaseException)]
        return {"deadlines": len(listed), "events": sum(int(outcome.get("events", 0)) for outcome in fired)}

    def fired_or_failure(self, body: dict[str, Any]) -> dict[str, Any] | BaseException:
        # Every line about a deadline carries its run id, also as the correlation id (this thread's keys alone).
        run_id = body.get("runId")
        self.logger.thread_safe_append_keys(runId=run_id, correlation_id=run_id)
        try:
            return self.fired(body)
        except Exception as exc:
            self.logger.exception("a deadline of the bucket failed; the bucket is invoked again")
            return exc
        finally:
            self.logger.thread_safe_remove_keys(["runId", "correlation_id"])

    def fired(self, event: dict[str, Any]) -> dict[str, Any]:
        """One deadline's input: a deadline, a reminder or a task check."""
        from interlude.engine.deadlines import Purpose  # with the first deadline, as the engine loads

        # No input this release or an earlier one schedules (no run named: a sweep a later release added, an input
        # edited by hand; or a purpose a later release added) is refused as a later format is, not counted as a
        # deadline fired and acknowledged, its work lost. An input without a purpose applies what its run has due.
        if not isinstance(event.get("runId"), str):
            raise ValueError(f"a schedule input that names no run and no due bucket: {sorted(event)}")
        if "purpose" in event and event["purpose"] not in get_args(Purpose):
            raise ValueError(f"a schedule input of a purpose this release does not fire: {event['purpose']!r}")
        if not deadline_admitted(self.standing(), event):
            # Deferred for the tenant's resume (handed back to the scheduler then), or dropped: the tenant is going.
            return {"events": 0, "deferred": True}
        if event.get("purpose") == "reminder":
            # A gate's reminder (issue 14): no state changes; its non-voters are queued for the notify function.
            queued = self.services().notification_outbox.enqueue_reminders(event)
            self.logger.info("reminder fired", extra={"runId": event.get("runId"), "queued": queued})
            metrics.count("DeadlinesFired", purpose="reminder")
            return {"events": 0, "queued": queued}
        if event.get("purpose") == "task":
            # A task claim's check (issue 15 item 2): its lease or deadline lapsed, or its outcome is yet to land.
            written = self.services().tasks.check(event)
            self.logger.info("task check fired", extra={"runId": event.get("runId"), "events": written})
            metrics.count("DeadlinesFired", purpose="task")
            return {"events": written}
        written = self.services().runs.fire_deadline(event)
        self.logger.info(
            "deadline fired", extra={"runId": event.get("runId"), "purpose": event.get("purpose"), "events": written}
        )
        metrics.count("DeadlinesFired", purpose=event.get("purpose", "unknown"))
        return {"events": written}
