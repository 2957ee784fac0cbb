"""Print the AWS calls a deadline costs: DynamoDB and Scheduler calls per step of a timed gate's life.

Runs the real services, the real dispatch outbox handler and the real timeouts handler against moto
in-process (no network), moving the process clock with its offset file instead of sleeping.
Usage: .venv/bin/python bench/deadline_calls.py
"""

from __future__ import annotations

import json
import os

from _bench import Calls, fmt, movable_clock, offline_aws

offline_aws(TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries")

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from interlude import wiring  # noqa: E402
from interlude.adapters.scheduler import scheduler as scheduler_module  # noqa: E402
from interlude.api.errors import status_of  # noqa: E402
from interlude.composition import Services  # noqa: E402
from interlude.domain import clock  # noqa: E402
from interlude.domain.errors import DomainError  # noqa: E402
from interlude.domain.models.requests import CreateKeyRequest, CreateRunRequest  # noqa: E402
from interlude.domain.models.workflow import WorkflowDefinition  # noqa: E402
from interlude.store.facade import Store  # noqa: E402
from interlude.store.provisioning import create_tables  # noqa: E402
from tests.support.local_stack import FIXTURES  # noqa: E402


def main() -> None:
    clock_file = movable_clock()
    with mock_aws():
        from interlude.local.schedules import SchedulePump, create_local_deadline_resources

        client = boto3.client("dynamodb")
        create_tables(client, "bench")
        os.environ.update(create_local_deadline_resources())
        services = Services(Store("bench", "bench-entries", client))
        sched = scheduler_module.Scheduler(scheduler_module.SchedulerSettings.from_env())
        scheduler_module._cached = (sched.settings, sched)
        calls = Calls(client, sched.client, qualified=True)
        created = services.keys.issue_key("bench", CreateKeyRequest(subjectId="admin", scopes=list(wiring.ALL_SCOPES)))
        principal = services.keys.authenticate(f"Bearer {created['apiKey']}")
        definition = json.loads((FIXTURES / "conformance-approval-timeout.json").read_text())
        services.workflows.put_workflow(principal, definition["id"], WorkflowDefinition.model_validate(definition))
        calls.take()

        def lifecycle(label: str, finish) -> None:
            state = services.lifecycle.create_run(principal, CreateRunRequest.model_validate({"workflowId": definition["id"]}))
            print(f"{label}: createRun                      {fmt(calls.take())}")
            batch = services.store.read_events(state.runId)
            calls.take()  # the bench's own read of the batch, which the stream record carries
            services.deadline_schedules.on_events(state.runId, batch)
            print(f"{label}: outbox on the suspend batch   {fmt(calls.take())}")
            services.deadline_schedules.on_events(state.runId, batch)
            print(f"{label}: same batch delivered again    {fmt(calls.take())}")
            finish(state)

        def timeout(state) -> None:
            clock.advance(clock_file, 3)
            body = {"runId": state.runId}
            print(f"timed out : worker fires                 {services.runs.fire_deadline(body)} events")
            print(f"timed out : worker call cost             {fmt(calls.take())}")
            services.runs.fire_deadline(body)
            print(f"timed out : second firing (no-op)        {fmt(calls.take())}")

        def human(state) -> None:
            services.decisions.resolve_interrupt(principal, state.runId, "gate", {"action": "accept"})
            print(f"decided   : resolve in time              {fmt(calls.take())}")
            last = services.store.read_events(state.runId)
            calls.take()
            services.deadline_schedules.on_events(state.runId, last)
            print(f"decided   : outbox on the resolve batch  {fmt(calls.take())}")

        def late(state) -> None:
            clock.advance(clock_file, 3)
            try:
                services.decisions.resolve_interrupt(principal, state.runId, "gate", {"action": "accept"})
            except DomainError as exc:
                # The status is the API edge's choice (interlude.api.errors), not the refusal's.
                print(f"late      : resolve after deadline → {status_of(exc)} {exc.code}  {fmt(calls.take())}")

        lifecycle("timed out ", timeout)
        lifecycle("decided   ", human)
        lifecycle("late      ", late)
        pump = SchedulePump(wiring.LOCAL_SCHEDULE_GROUP)
        calls.take()
        clock.advance(clock_file, 10)
        print(f"local pump tick with leftovers: fired {pump.pump_once()}")


if __name__ == "__main__":
    main()
