"""Issue 11, items 7 and 8, over HTTP against the local stack: listing and revoking keys (API and CLI), expiry,
revocation everywhere within the documented bound, per-tenant request rate (two tenants, one flooding), and the
quotas on open runs, stored workflow versions, definition size and nodes."""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import requests

from interlude.local.stack import TABLE_NAME
from interlude.store.limits import rate_pk
from tests.e2e.conftest import KEY_CACHE_SECONDS
from tests.support.local_stack import Api, cli, stack_client, tenant_admin_key, until, wire

# The deployment's bound (docs/configuration.md, "Keys: revocation and expiry"): a key revoked elsewhere is refused
# by a warm instance within it, the shared stack's (5 s unless a deployment chooses).
REVOCATION_BOUND_S = KEY_CACHE_SECONDS
# Requests sent once the bound has passed, each answered by whichever instance is free: more than the stack's four.
PAST_THE_BOUND = 8
# A key made to expire this soon: long enough that a loaded machine still creates it (a time already past is refused).
BRIEF_KEY_S = 4


def error_of(response: requests.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == code, body
    return body


def refused_past_the_bound(api: Api, run_id: str, key: str, revoked_at: float) -> None:
    """Every request sent once the bound has passed since the revocation (`revoked_at`, time.monotonic() once it was
    answered: every instance's cached read of the key is older) is refused, whichever instance answers. The guarantee
    itself, and not how long the requests before it took, which a loaded machine stretches past any slack."""
    time.sleep(max(0.0, revoked_at + REVOCATION_BOUND_S - time.monotonic()))
    for _ in range(PAST_THE_BOUND):
        refused = error_of(api.call("GET", f"/runs/{wire(run_id)}", key=key), 401, "unauthenticated")
        assert refused["message"] == "the API key is revoked"


def tenant_api(stack_info: dict[str, str], name: str) -> Api:
    tenant = f"{name}-{uuid.uuid4().hex[:6]}"
    return Api(stack_info["baseUrl"], tenant_admin_key(stack_info, tenant), tenant)


def gate_workflow(api: Api) -> str:
    workflow_id = f"gate-{uuid.uuid4().hex[:8]}"
    nodes = [{"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship it?"}}]
    got = api.put_workflow(workflow_id, {"nodes": nodes, "edges": []})
    assert got.status_code == 201, got.text
    return workflow_id


def set_limits(api: Api, **limits: int) -> dict[str, Any]:
    got = api.call("PUT", "/tenant/settings", {"limits": limits})
    assert got.status_code == 200, got.text
    return got.json()


# -- key lifecycle -----------------------------------------------------------------------------------------


def test_keys_are_listed_by_metadata_paged_and_only_the_tenants_own(stack_info: dict[str, str]) -> None:
    api = tenant_api(stack_info, "keys")
    other = tenant_api(stack_info, "other")
    expires = (datetime.now(UTC) + timedelta(days=30)).isoformat().replace("+00:00", "Z")
    created = api.call("POST", "/keys", {"subjectId": "robot", "scopes": ["runs:read"], "expiresAt": expires})
    assert created.status_code == 201, created.text
    made = created.json()
    assert made["expiresAt"].startswith(expires[:19])

    listed = api.call("GET", "/keys")
    assert listed.status_code == 200, listed.text
    keys = listed.json()["keys"]
    # The admin key the CLI made, then the robot's: oldest first, metadata only.
    assert [k["subject"]["subjectId"] for k in keys] == ["admin", "robot"]
    robot = keys[1]
    assert robot["keyId"] == made["keyId"]
    assert robot["status"] == "active"
    assert robot["scopes"] == ["runs:read"]
    assert robot["expiresAt"] == made["expiresAt"]
    text = listed.text
    assert made["apiKey"] not in text
    assert made["apiKey"][20:] not in text
    assert '"hash"' not in text
    # The other tenant sees only its own key.
    assert [k["subject"]["subjectId"] for k in other.call("GET", "/keys").json()["keys"]] == ["admin"]

    first = api.call("GET", "/keys?limit=1").json()
    assert len(first["keys"]) == 1
    assert first["cursor"]
    second = api.call("GET", f"/keys?limit=1&cursor={first['cursor']}").json()
    assert [k["keyId"] for k in second["keys"]] == [made["keyId"]]
    last = api.call("GET", f"/keys?limit=1&cursor={second['cursor']}").json() if "cursor" in second else {"keys": []}
    assert last["keys"] == []
    assert "cursor" not in last
    # Another tenant's cursor, a made-up one and a bad limit are 400s naming the field.
    assert error_of(other.call("GET", f"/keys?cursor={first['cursor']}"), 400, "validation_error")["details"] == {
        "field": "cursor"
    }
    error_of(api.call("GET", "/keys?cursor=bm9wZQ"), 400, "validation_error")
    assert error_of(api.call("GET", "/keys?limit=0"), 400, "validation_error")["details"] == {"field": "limit"}
    # Listing and revoking need keys:admin.
    reader = api.new_key(["runs:read"])
    error_of(api.call("GET", "/keys", key=reader), 403, "forbidden")
    error_of(api.call("DELETE", f"/keys/{made['keyId']}", key=reader), 403, "forbidden")

    # The CLI lists the same, without secrets.
    printed = json.loads(cli(stack_info, "keys", "list", "--local", "--tenant", api.tenant).stdout)
    assert made["keyId"] in [k["keyId"] for k in printed["keys"]]
    assert "hash" not in json.dumps(printed)


def test_a_revoked_key_is_refused_at_once_here_and_within_the_bound_when_revoked_elsewhere(
    stack_info: dict[str, str],
) -> None:
    api = tenant_api(stack_info, "revoke")
    other = tenant_api(stack_info, "intruder")
    workflow = gate_workflow(api)
    run_id = api.start(workflow)["runId"]
    victim = api.call("POST", "/keys", {"subjectId": "leaked", "scopes": ["runs:read", "approvals:respond"]}).json()
    assert api.call("GET", f"/runs/{wire(run_id)}", key=victim["apiKey"]).status_code == 200

    # Another tenant cannot revoke it, nor learn that it exists; an unknown or malformed id is the same 404.
    error_of(other.call("DELETE", f"/keys/{victim['keyId']}"), 404, "not_found")
    error_of(api.call("DELETE", "/keys/0123456789abcdef"), 404, "not_found")
    error_of(api.call("DELETE", "/keys/not-a-key"), 404, "not_found")
    assert api.call("GET", f"/runs/{wire(run_id)}", key=victim["apiKey"]).status_code == 200

    # Revoked through the API, and a second key revoked by another process (the CLI writes the table directly, as
    # another instance would) while the API's cache trusts it: each refused on every route once the bound has passed
    # since its revocation (at once by the instance that revoked the first; the local stack runs four instances of
    # the api function, as Lambda would run several). Both revoked before either bound is waited out: one wait.
    second = api.call("POST", "/keys", {"subjectId": "second", "scopes": ["runs:read"]}).json()
    assert api.call("GET", f"/runs/{wire(run_id)}", key=second["apiKey"]).status_code == 200
    revoked = api.call("DELETE", f"/keys/{victim['keyId']}")
    revoked_here_at = time.monotonic()
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["status"] == "revoked"
    assert revoked.json()["revokedAt"]
    cli(stack_info, "keys", "revoke", "--local", "--tenant", api.tenant, second["keyId"])
    revoked_elsewhere_at = time.monotonic()
    # Revoking again changes nothing; the listing shows it revoked.
    again = api.call("DELETE", f"/keys/{victim['keyId']}").json()
    assert again["revokedAt"] == revoked.json()["revokedAt"]
    statuses = {k["keyId"]: k["status"] for k in api.call("GET", "/keys").json()["keys"]}
    assert statuses[victim["keyId"]] == "revoked"
    # The CLI refuses another tenant's key by name.
    foreign = cli(stack_info, "keys", "revoke", "--local", "--tenant", other.tenant, second["keyId"], check=False)
    assert foreign.returncode != 0
    assert "no such key" in foreign.stderr

    refused_past_the_bound(api, run_id, victim["apiKey"], revoked_here_at)
    error_of(
        api.call("POST", f"/runs/{wire(run_id)}/interrupts/gate/tokens", {"intent": "resolve"}, key=victim["apiKey"]),
        401,
        "unauthenticated",
    )
    refused_past_the_bound(api, run_id, second["apiKey"], revoked_elsewhere_at)


def test_an_expired_key_is_refused_and_listed_as_expired(stack_info: dict[str, str]) -> None:
    api = tenant_api(stack_info, "expiry")
    past = api.call("POST", "/keys", {"subjectId": "late", "scopes": ["runs:read"], "expiresAt": "2020-01-01T00:00:00Z"})
    assert error_of(past, 400, "validation_error")["details"] == {"field": "expiresAt"}
    naive = api.call("POST", "/keys", {"subjectId": "late", "scopes": ["runs:read"], "expiresAt": "2099-01-01T00:00:00"})
    error_of(naive, 400, "validation_error")

    soon = datetime.now(UTC) + timedelta(seconds=BRIEF_KEY_S)
    made = api.call("POST", "/keys", {"subjectId": "brief", "scopes": ["keys:admin"], "expiresAt": soon.isoformat()})
    assert made.status_code == 201, made.text
    # Served until it expires: an answer received before then was accepted (a loaded machine may answer after it).
    served = api.call("GET", "/keys", key=made.json()["apiKey"])
    assert served.status_code == 200 or datetime.now(UTC) >= soon, served.text
    made = made.json()
    # Nothing to poll for before it expires (each request costs the stack's instances and pumps CPU).
    time.sleep(max(0.0, (soon - datetime.now(UTC)).total_seconds()))
    refused = until(lambda: api.call("GET", "/keys", key=made["apiKey"]).status_code == 401, 30)
    assert refused
    body = error_of(api.call("GET", "/keys", key=made["apiKey"]), 401, "unauthenticated")
    assert body["message"] == "the API key is expired"
    statuses = {k["keyId"]: k["status"] for k in api.call("GET", "/keys").json()["keys"]}
    assert statuses[made["keyId"]] == "expired"


# -- request rate ------------------------------------------------------------------------------------------


# Requests a round sends at once. They reach the request counter together (the stack serialises its DynamoDB calls,
# not its requests), so a round puts more than the limit into one window however long each request takes end to end.
BURST = 8
FLOOD_DEADLINE_S = 90.0


def burst(api: Api, size: int) -> list[requests.Response]:
    def one(_: int) -> requests.Response:
        return requests.get(api.base_url + "/keys", headers=api.headers(), timeout=60)

    with ThreadPoolExecutor(max_workers=size) as pool:
        return list(pool.map(one, range(size)))


def request_windows(stack_info: dict[str, str], tenant: str) -> dict[str, int]:
    """The tenant's request counter as the stack's table holds it: requests counted per one-second window (each span
    item holds its windows' counts, `n{k}` the k-th second's)."""
    got = stack_client(stack_info, "dynamodb").query(
        TableName=TABLE_NAME,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": rate_pk(tenant)}},
        ConsistentRead=True,
    )
    return {
        f"{int(item['sk']['S'].removeprefix('S#')) + int(name[1:])}": int(value["N"])
        for item in got["Items"]
        for name, value in item.items()
        if name[:1] == "n" and name[1:].isdigit()
    }


def test_a_flooding_tenant_gets_429_with_retry_after_while_another_tenant_is_unaffected(
    stack_info: dict[str, str],
) -> None:
    flooder = tenant_api(stack_info, "flood")
    neighbour = tenant_api(stack_info, "calm")
    assert set_limits(flooder, requestsPerSecond=3)["settings"]["limits"] == {"requestsPerSecond": 3}

    flood: list[requests.Response] = []
    calm: list[requests.Response] = []
    began, flood_from = time.monotonic(), int(time.time())
    # Rounds until one is refused: on a machine slow enough to spread a round over several windows, the next round.
    while not any(r.status_code == 429 for r in flood) and time.monotonic() - began < FLOOD_DEADLINE_S:
        flood.extend(burst(flooder, BURST))
        calm.append(neighbour.call("GET", "/keys"))

    elapsed, flood_to = time.monotonic() - began, int(time.time())
    limited = [r for r in flood if r.status_code == 429]
    assert limited, [r.status_code for r in flood]
    assert {r.status_code for r in flood} <= {200, 429}
    for response in limited:
        body = error_of(response, 429, "rate_limited")
        assert body["details"] == {"limit": 3, "unit": "requests per second"}
        assert 1 <= int(response.headers["Retry-After"]) <= 1
        assert "retryAfter" not in json.dumps(body)
    # No window the flood hit let more than the limit through: each window's count (a request is admitted only once
    # counted) is at most 3, and every admitted request is in the counts of the seconds the flood lasted (beside what
    # instances counted ahead in them, before it or during it, and then had no request for: docs/adr/0174).
    windows = request_windows(stack_info, flooder.tenant)
    assert max(windows.values()) <= 3, windows
    admitted = len(flood) - len(limited)
    assert admitted <= sum(n for second, n in windows.items() if flood_from <= int(second) <= flood_to), windows
    assert admitted <= 3 * (int(elapsed) + 2)
    assert [r.status_code for r in calm] == [200] * len(calm)

    # After Retry-After the flooder is served again.
    time.sleep(int(limited[-1].headers["Retry-After"]))
    assert flooder.call("GET", "/keys").status_code == 200


# -- quotas ------------------------------------------------------------------------------------------------


def test_tenant_settings_show_the_default_limits_and_usage_and_refuse_limits_past_the_ceilings(
    stack_info: dict[str, str],
) -> None:
    api = tenant_api(stack_info, "defaults")
    settings = api.call("GET", "/tenant/settings").json()
    # Documented defaults (docs/limits.md); the local stack's rate default is the ceiling.
    assert settings["limits"] == {
        "requestsPerSecond": 500,
        "openRuns": 1000,
        "workflowVersions": 1000,
        "definitionBytes": 262144,
        "definitionNodes": 500,
    }
    assert settings["usage"] == {"openRuns": 0, "workflowVersions": 0}
    for limits in ({"openRuns": 0}, {"requestsPerSecond": 501}, {"definitionBytes": 10**6}, {"nodes": 3}):
        error_of(api.call("PUT", "/tenant/settings", {"limits": limits}), 400, "validation_error")


def test_quotas_on_definitions_versions_and_open_runs_and_runs_at_the_quota_still_end(
    stack_info: dict[str, str],
) -> None:
    api = tenant_api(stack_info, "quota")
    # The tenant's first request sets its limits, so no instance of the api holds the defaults for it.
    set_limits(api, openRuns=2, workflowVersions=3, definitionNodes=2, definitionBytes=2048)

    gate = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship it?"}}
    three = {"nodes": [gate, {**gate, "id": "b"}, {**gate, "id": "c"}], "edges": []}
    body = error_of(api.put_workflow("three", three), 403, "interlude.quota_exceeded")
    assert body["details"] == {"quota": "definitionNodes", "limit": 2, "nodes": 3}
    large = {"nodes": [gate], "edges": [], "metadata": {"note": "x" * 3000}}
    body = error_of(api.put_workflow("large", large), 403, "interlude.quota_exceeded")
    assert body["details"]["quota"] == "definitionBytes"
    assert body["details"]["limit"] == 2048
    # Nothing refused was stored.
    error_of(api.call("GET", "/workflows/three"), 404, "not_found")

    workflow = gate_workflow(api)
    second = gate_workflow(api)
    gate_workflow(api)
    body = error_of(api.put_workflow("fourth", {"nodes": [gate], "edges": []}), 403, "interlude.quota_exceeded")
    assert body["details"] == {"quota": "workflowVersions", "limit": 3}

    first_run = api.start(workflow)["runId"]
    second_run = api.start(second)["runId"]
    body = error_of(api.call("POST", "/runs", {"workflowId": workflow}), 403, "interlude.quota_exceeded")
    assert body["details"] == {"quota": "openRuns", "limit": 2}
    assert api.call("GET", "/tenant/settings").json()["usage"] == {"openRuns": 2, "workflowVersions": 3}

    # At the quota, open runs still end (a decision, a cancel), and each end frees its place.
    assert api.resolve(first_run, "gate", {"action": "accept"}).json()["status"] == "completed"
    assert api.call("POST", f"/runs/{wire(second_run)}/cancel", {}).status_code == 200
    assert api.call("GET", "/tenant/settings").json()["usage"]["openRuns"] == 0
    third_run = api.start(workflow)["runId"]
    assert api.run(third_run)["status"] == "waiting-approval"
