"""Print the DynamoDB calls of the issue-3 operations: votes on a quorum gate, POST /events, the inbox.

Runs the real services and store against moto in-process (no network). Usage: .venv/bin/python bench/hitl_calls.py
"""

from __future__ import annotations

from collections import Counter

from _bench import offline_aws

offline_aws(TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries")

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from interlude import wiring  # noqa: E402
from interlude.composition import Services  # noqa: E402
from interlude.domain.models.requests import CreateKeyRequest, CreateRunRequest  # noqa: E402
from interlude.domain.models.tenant_requests import PostEventRequest  # noqa: E402
from interlude.domain.models.workflow import WorkflowDefinition  # noqa: E402
from interlude.store.facade import Store  # noqa: E402
from interlude.store.provisioning import create_tables  # noqa: E402


def main() -> None:
    with mock_aws():
        create_tables(boto3.client("dynamodb"), "bench")
        services = Services(Store("bench", "bench-entries"))
        counter: Counter[str] = Counter()
        services.store.client.meta.events.register(
            "before-call.dynamodb", lambda model, **_: counter.update([model.name])
        )

        def principal(name: str):
            created = services.keys.issue_key("t1", CreateKeyRequest(subjectId=name, scopes=list(wiring.ALL_SCOPES)))
            return services.keys.authenticate(f"Bearer {created['apiKey']}")

        admin, bob, carol = principal("admin"), principal("bob"), principal("carol")
        gate = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "t", "requiredApprovals": 3}}
        services.workflows.put_workflow(admin, "quorum", WorkflowDefinition.model_validate({"nodes": [gate]}))
        wait = {"eventType": "order.paid", "correlation": {"orderId": "o-1"}}
        ext = {"id": "wait", "typeId": "core.interrupt", "config": {"kind": "external-event", "data": wait}}
        services.workflows.put_workflow(admin, "ext", WorkflowDefinition.model_validate({"nodes": [ext]}))
        run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "quorum"})).runId
        for _ in range(30):
            services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "quorum"}))

        def measure(label: str, fn) -> None:
            counter.clear()
            fn()
            print(f"{label:<52} {sum(counter.values()):>3}  {dict(sorted(counter.items()))}")

        print("operation (authentication excluded)                  calls")
        measure(
            "vote 1 of 3 (recorded, gate stays open)",
            lambda: services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"}),
        )
        measure("vote 2 of 3", lambda: services.decisions.resolve_interrupt(bob, run_id, "gate", {"action": "accept"}))
        measure("vote 3 of 3 (decides)", lambda: services.decisions.resolve_interrupt(carol, run_id, "gate", {"action": "accept"}))
        measure("inbox page of 25 (31 pending)", lambda: services.inbox.inbox(admin, 25, {}, None))
        body = {**wait, "payload": {}}
        measure("POST /events, nobody waiting (kept)", lambda: services.external_events.post_event(admin, PostEventRequest.model_validate(body)))
        for _ in range(3):
            services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "ext"}))
        measure("POST /events, 3 waiting interrupts resolved", lambda: services.external_events.post_event(admin, PostEventRequest.model_validate(body)))
        later = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "ext"})).runId
        events = services.store.read_events(later)
        measure("outbox: a raised gate takes a kept event", lambda: services.external_events.resolve_kept_events(later, events))


if __name__ == "__main__":
    main()
