"""Print what key revocation and per-tenant limits cost, through the real `api` handler in-process on moto:

1. DynamoDB calls per authenticated request at steady state (one key, one tenant, requests for SECONDS seconds):
   the request counter (UpdateItem, leased: one per lease of up to a quarter of the limit), the key re-read once its cache lapses, the tenant's limits re-read;
2. the revocation bound: a key revoked by another instance, polled every 50 ms by a warm instance until refused;
3. what the quotas add to createRun and putWorkflow (items in their transactions).

Usage: .venv/bin/python bench/key_and_limit_calls.py [seconds]
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from typing import Any

from _bench import offline_aws

offline_aws(TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries", POWERTOOLS_LOG_LEVEL="ERROR", INTERLUDE_TENANT_REQUESTS_PER_SECOND="500")

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from interlude import wiring  # noqa: E402
from interlude.api import http  # noqa: E402
from interlude.app.limits import LIMITS_CACHE_SECONDS  # noqa: E402
from interlude.composition import Services  # noqa: E402
from interlude.config import settings  # noqa: E402
from interlude.domain.errors import DomainError  # noqa: E402
from interlude.domain.models.requests import CreateKeyRequest  # noqa: E402
from interlude.local import lambda_runtime  # noqa: E402
from interlude.local.http_gateway import to_event  # noqa: E402
from interlude.store.facade import Store  # noqa: E402
from interlude.store.provisioning import create_tables  # noqa: E402
from tests.support.local_stack import FIXTURES  # noqa: E402

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 12.0


def main() -> None:
    with mock_aws():
        create_tables(boto3.client("dynamodb"), "bench")
        services = http.services()
        created = services.keys.issue_key("bench", CreateKeyRequest(subjectId="admin", scopes=list(wiring.ALL_SCOPES)))
        calls: Counter[str] = Counter()

        def count(model: Any, params: dict[str, Any], **_: Any) -> None:
            body = str(params.get("body"))
            if model.name not in ("GetItem", "UpdateItem"):
                calls.update([model.name])
                return
            what = "request counter" if "#RATE" in body else "key read" if '"K#' in body else "settings read"
            calls.update([f"{model.name} ({what})"])

        services.store.client.meta.events.register("before-call.dynamodb", count)

        def call(method: str, path: str, body: object = None) -> tuple[int, str]:
            headers = {"authorization": f"Bearer {created['apiKey']}", "content-type": "application/json"}
            raw = json.dumps(body).encode() if body is not None else b""
            got = lambda_runtime.invoke("api", to_event(method, path, headers, raw, "127.0.0.1"))
            return got["statusCode"], got["body"]

        definition = json.loads((FIXTURES / "conformance-approval.json").read_text())
        calls.clear()
        call("PUT", f"/workflows/{definition['id']}", definition)
        put_calls = Counter(calls)
        calls.clear()
        call("POST", "/runs", {"workflowId": definition["id"]})
        create_calls = Counter(calls)

        # 1. Steady state: a warm instance, one key, requests back to back; GET /keys?limit=1 is one Query itself.
        call("GET", "/keys?limit=1")
        calls.clear()
        requests = 0
        began = time.monotonic()
        while time.monotonic() - began < SECONDS:
            status, _ = call("GET", "/keys?limit=1")
            assert status == 200, status
            requests += 1
        rate = requests / SECONDS
        print(
            f"1. steady state: {requests} authenticated requests in {SECONDS:.0f} s ({rate:.0f}/s, one instance, one key)"
        )
        auth_calls = {k: v for k, v in calls.items() if not k.startswith("Query")}
        for name, n in sorted(auth_calls.items()):
            print(f"   {name:32} {n:6}  {n / requests:.4f} per request")
        print(f"   authentication + limits: {sum(auth_calls.values()) / requests:.4f} DynamoDB calls per request")
        print(
            f"   expected: 1 UpdateItem per lease (this instance's pace a second, at most a quarter of the limit)"
            f" + 1/({settings().key_cache_seconds:g} s x rate) key reads"
            f" + 1/({LIMITS_CACHE_SECONDS:.0f} s x rate) settings reads per request"
        )

        # 2. Revocation bound: instance A trusts the key it read; instance B revokes it.
        instance_a, instance_b = Services(Store("bench", "bench-entries")), Services(Store("bench", "bench-entries"))
        victim = instance_b.keys.issue_key("bench", CreateKeyRequest(subjectId="victim", scopes=["runs:read"]))
        bearer = f"Bearer {victim['apiKey']}"
        instance_a.keys.authenticate(bearer)
        instance_b.keys.revoke_key("bench", victim["keyId"])
        revoked_at = time.monotonic()
        while True:
            try:
                instance_a.keys.authenticate(bearer)
            except DomainError:
                break
            time.sleep(0.05)
        bound = time.monotonic() - revoked_at
        try:
            instance_b.keys.authenticate(bearer)
            here = "accepted (!)"
        except DomainError:
            here = "refused at once"
        print(f"2. revocation: the revoking instance: {here}; another warm instance refused it after {bound:.2f} s")
        print(f"   (bound: key_cache_seconds = {settings().key_cache_seconds:g} s; the read is strongly consistent)")

        # 3. Quotas inside the operations' own transactions.
        print("3. quotas: calls of one operation (the counter travels inside the transaction)")
        for name, counted in (("putWorkflow", put_calls), ("createRun", create_calls)):
            detail = ", ".join(f"{k}x{v}" for k, v in sorted(counted.items()))
            print(f"   {name:12} {detail}")


if __name__ == "__main__":
    main()
