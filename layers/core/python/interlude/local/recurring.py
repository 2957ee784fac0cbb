"""The local stack's recurring schedules (wiring.RECURRING_SCHEDULES): what a rate-based EventBridge Scheduler
schedule does deployed, a pump does here — invoke the schedules' target handler with the schedule's input, every
period."""

from __future__ import annotations

from interlude import wiring
from interlude.local.lambda_runtime import invoke
from interlude.local.pump import Pump, note_change


class RecurringPump(Pump):
    def __init__(self, schedule: wiring.RecurringSchedule) -> None:
        super().__init__(f"recurring-{schedule.name}", float(schedule.every_s))
        self.schedule = schedule
        self.invocations = 0

    def pump_once(self) -> int:
        invoke(wiring.SCHEDULES.target, dict(self.schedule.input))
        self.invocations += 1
        note_change()  # what the sweep queued or wrote woke the pumps that carry it (moto_server)
        return 0  # then wait a whole period, as the deployed rate does
