"""Print the AWS calls each token operation makes, and how long the pure parts take (verify, page render).

Runs the real services (the token surface among them) and store against moto in-process (no network), with the key ring read
through adapters/secret_values.py from moto's Secrets Manager. Usage: .venv/bin/python bench/token_calls.py
"""

from __future__ import annotations

import contextlib
import time

from _bench import Calls, admin_with_approval, fmt, offline_aws

offline_aws(TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries")

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from interlude.adapters.keyring_store import ensure_key_ring, load_key_ring  # noqa: E402
from interlude.api.page import approval  # noqa: E402
from interlude.api.page.graph import GraphNode  # noqa: E402
from interlude.composition import Services  # noqa: E402
from interlude.domain.errors import DomainError  # noqa: E402
from interlude.domain.models.requests import CreateRunRequest  # noqa: E402
from interlude.rules.tokens import verify  # noqa: E402
from interlude.store.facade import Store  # noqa: E402
from interlude.store.provisioning import create_tables  # noqa: E402

SECRET = "bench/token-keys"


def per_call_us(fn, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    with mock_aws():
        calls = Calls()
        dynamo = boto3.client("dynamodb")
        secrets = boto3.client("secretsmanager")
        calls.watch(dynamo)
        create_tables(dynamo, "bench")
        ensure_key_ring(SECRET, client=secrets)
        calls.watch(secrets)
        services = Services(Store("bench", "bench-entries", dynamo))
        surface = services.token_surface(lambda force: load_key_ring(SECRET, force_fetch=force, client=secrets))
        principal, _bearer, workflow_id = admin_with_approval(services)
        run_id = services.lifecycle.create_run(principal, CreateRunRequest.model_validate({"workflowId": workflow_id})).runId
        calls.take()

        rows = []
        minted = {}
        rows.append(
            ("mint (cold ring cache)", minted.update(surface.mint(principal, run_id, "gate", "resolve")), calls.take())
        )
        token = minted["token"]
        surface.mint(principal, run_id, "gate", "resolve")
        rows.append(("mint (warm)", None, calls.take()))
        surface.inspect(token)
        rows.append(("inspect (GET /interrupts/{token})", None, calls.take()))
        surface.resolve(token, {"action": "accept"})
        rows.append(("resolve via token (winner)", None, calls.take()))
        with contextlib.suppress(DomainError):  # 409 interrupt_already_resolved
            surface.resolve(token, {"action": "accept"})
        rows.append(("resolve via token (after resolution: 409)", None, calls.take()))

        width = max(len(r[0]) for r in rows)
        print(f"{'operation'.ljust(width)}  AWS calls")
        for name, _, counted in rows:
            print(f"{name.ljust(width)}  {fmt(counted)}")

        ring = surface.ring()
        at = time.time()
        verify_us = per_call_us(lambda: verify(token, ring, now=at), 20000)
        payload = minted["payload"]
        nodes = [GraphNode(f"step-{i}", "core.noop", "completed") for i in range(12)] + [
            GraphNode("gate", "core.approvalGate", "suspended")
        ]
        edges = [(f"step-{i}", f"step-{i + 1}") for i in range(11)] + [("step-11", "gate")]
        view = approval.View(payload, "gate", "resolve", "waiting-approval", int(at) + 600, nodes, edges)
        render_us = per_call_us(
            lambda: approval.document("t", approval.render_open(view, style_nonce="n", csrf_field="f"), "n"), 2000
        )
        size = len(approval.document("t", approval.render_open(view, style_nonce="n", csrf_field="f"), "n"))
        print(
            f"\nverify one token: {verify_us:.1f} µs; render the page (13-node graph): {render_us:.0f} µs, {size} bytes"
        )


if __name__ == "__main__":
    main()
