"""Print the DynamoDB calls each operation makes, split into authentication and the operation itself.

Runs the real services and store against moto in-process (no network). Usage: .venv/bin/python bench/calls_per_op.py
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from _bench import Calls, admin_with_approval, fmt, offline_aws

offline_aws(TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries")

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from interlude.composition import Services  # noqa: E402
from interlude.config import settings  # noqa: E402
from interlude.domain.errors import DomainError  # noqa: E402
from interlude.domain.models.requests import CreateRunRequest  # noqa: E402
from interlude.rules.interrupts.decide import Resolver  # noqa: E402
from interlude.store.facade import Store  # noqa: E402
from interlude.store.provisioning import create_tables  # noqa: E402


class BytesRead:
    """Bytes of the items DynamoDB answered with (their JSON form), per operation measured."""

    def __init__(self, client: Any) -> None:
        self.read = 0
        client.meta.events.register("after-call.dynamodb", self._count)

    def _count(self, parsed: dict[str, Any], **_: Any) -> None:
        items = parsed.get("Items") or ([parsed["Item"]] if "Item" in parsed else [])
        self.read += sum(len(json.dumps(item, default=len)) for item in items)  # binary: its length

    def take(self) -> int:
        taken, self.read = self.read, 0
        return taken


def main() -> None:
    with mock_aws():
        client = boto3.client("dynamodb")
        create_tables(client, "bench")
        services = Services(Store("bench", "bench-entries", client))
        calls = Calls(client)
        read = BytesRead(client)
        principal, bearer, workflow_id = admin_with_approval(services)
        calls.take()

        rows: list[tuple[str, Counter[str], Counter[str], int]] = []

        def measure(name: str, op) -> None:
            services.keys._cache.clear()  # a cold key cache: authentication reads the key item
            services.keys.authenticate(bearer)
            auth = calls.take()
            read.take()
            op()
            rows.append((name, auth, calls.take(), read.take()))

        state = {}
        measure(
            "create-run (version not yet cached)",
            lambda: services.lifecycle.create_run(principal, CreateRunRequest.model_validate({"workflowId": "conformance-approval"})),
        )
        # Warm: the latest-version pointer only; the immutable version comes from the process cache.
        measure(
            "create-run",
            lambda: state.update(run=services.lifecycle.create_run(principal, CreateRunRequest.model_validate({"workflowId": "conformance-approval"}))),
        )
        run_id = state["run"].runId
        measure("get-run", lambda: services.runs.load_run(principal.tenant, run_id))
        stale = services.store.get_run(run_id)
        calls.take()
        measure("resolve (winner)", lambda: services.decisions.resolve_interrupt(principal, run_id, "gate", {"action": "accept"}))

        def lose_racing() -> None:
            # Read before the winner committed, so only the transaction's failed condition tells it.
            try:
                services.store.get_run(run_id)  # the read it made before the winner wrote
                services.decisions.resolve(stale[0], stale[1], "gate", {"action": "reject"}, Resolver(principal.subject, "run"))
            except DomainError as exc:
                if exc.code != "interrupt_already_resolved":
                    raise
            else:
                raise AssertionError("the raced loser won: this figure would not be a loser's")

        def lose_late() -> None:
            try:
                services.decisions.resolve_interrupt(principal, run_id, "gate", {"action": "reject"})
            except DomainError as exc:
                if exc.code != "interrupt_already_resolved":
                    raise
            else:
                raise AssertionError("the late loser won: this figure would not be a loser's")

        measure("resolve (loser, raced)", lose_racing)
        measure("resolve (loser, late)", lose_late)

        services.definitions.forget()
        run2 = services.lifecycle.create_run(principal, CreateRunRequest.model_validate({"workflowId": "conformance-approval"})).runId
        services.definitions.forget()
        calls.take()
        measure(
            "resolve (winner, cold process)",
            lambda: services.decisions.resolve_interrupt(principal, run2, "gate", {"action": "accept"}),
        )

    width = max(len(r[0]) for r in rows)
    print(f"{'operation'.ljust(width)}  auth calls            operation calls (item bytes read)")
    for name, auth, op, read_bytes in rows:
        print(f"{name.ljust(width)}  {fmt(auth).ljust(20)}  {fmt(op)}  ({read_bytes} B)")
    print(
        f"\nAn active key is cached per process for {settings().key_cache_seconds:g} s (key_cache_seconds), so a warm "
        "function pays 0 auth calls per request within it and one GetItem per instance per period after."
    )


if __name__ == "__main__":
    main()
