"""Issue 16 item 5 over HTTP against the local stack: discovery advertises the checkpoint key, `GET /audit` lists
what was done across the tenant's chains, `openwop-client`'s `audit_verify` and `interlude audit verify` report a valid chain, then a broken
one once a stored entry is altered behind the service's back; the refusals of the two routes."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest
from openwop_client import OpenwopClient

from interlude import wiring
from interlude.local.stack import TABLE_NAME
from interlude.store import audit as items
from tests.support.local_stack import Api, cli, quiesce, stack_client, tenant_admin_key


@pytest.fixture
def tenant(stack_info: dict[str, str]) -> Api:
    name = f"audit-{uuid.uuid4().hex[:6]}"
    return Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name), name)


def audit_cli(stack_info: dict[str, str], api: Api, *args: str) -> Any:
    return cli(stack_info, "audit", *args, "--url", api.base_url, "--key", api.api_key, check=False)


def decide_one(stack_info: dict[str, str], api: Api, apart_from: int) -> str:
    """A gate rejected on a run whose audit chain is not `apart_from` (run ids are random: runs are started until one
    draws another chain), once the decision's entry is chained."""
    workflow_id = f"gate-{uuid.uuid4().hex[:6]}"
    nodes = [{"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship it?"}}]
    assert api.put_workflow(workflow_id, {"nodes": nodes, "edges": []}).status_code == 201
    run_id = api.start(workflow_id)["runId"]
    while items.chain_of_member(run_id) == apart_from:
        run_id = api.start(workflow_id)["runId"]
    assert api.resolve(run_id, "gate", {"action": "reject", "comment": "not today"}).status_code == 200
    # The decision's entry is chained once its record reaches dispatch (docs/adr/0128): by the time every pump has
    # moved what it was given (the stack's quiet barrier).
    quiesce(stack_info)
    return run_id


def test_discovery_advertises_the_audit_family_with_its_public_key(api: Api) -> None:
    caps = api.call("GET", "/.well-known/openwop").json()
    family = caps["auditLogIntegrity"]
    assert re.fullmatch(r"MCowBQYDK2VwAyEA[A-Za-z0-9+/]{43}=", family["checkpointPublicKey"])
    assert family["checkpointSignatureAlgorithm"] == "ed25519"
    assert family["checkpointIntervalEntries"] == 1000
    assert family["checkpointIntervalSeconds"] == 300


def test_the_log_lists_what_was_done_and_verifies_until_an_entry_is_altered(stack_info: dict[str, str], tenant: Api) -> None:
    # The decision on a chain apart from the admin key's, whose entry waits for its checkpoint: there the decision's
    # entry would lie past a head left behind (docs/adr/0172), and a rewrite of it is caught only once a checkpoint
    # covers it (test_audit_lagging_head.py), not by the verification below. One run in 128 drew that chain.
    (admin_created,) = tenant.call("GET", "/audit").json()["entries"]
    run_id = decide_one(stack_info, tenant, apart_from=admin_created["chain"])
    robot = tenant.call("POST", "/keys", {"subjectId": "robot", "scopes": ["runs:read"]}).json()
    assert tenant.call("DELETE", f"/keys/{robot['keyId']}").status_code == 200

    page = tenant.call("GET", "/audit?limit=10").json()
    assert [e["action"] for e in page["entries"]] == ["key.revoked", "key.created", "interrupt.decided", "key.created"]
    decided = page["entries"][2]
    assert decided["target"]["runId"] == run_id
    assert decided["details"] == {"kind": "approval", "outcome": "failed", "action": "reject", "comment": "not today"}
    # The decision is in its run's chain; the robot key's two entries share its key's chain, in order.
    assert decided["chain"] == items.chain_of_member(run_id)
    revoked, created = page["entries"][:2]
    assert (revoked["chain"], revoked["seq"]) == (created["chain"], created["seq"] + 1)
    chains = {e["chain"] for e in page["entries"]}
    assert page["chains"] == {str(c): max(e["seq"] for e in page["entries"] if e["chain"] == c) for c in chains}
    assert page["headSeq"] == max(page["chains"].values())

    client = OpenwopClient(tenant.base_url, tenant.api_key)
    valid = client.audit_verify(1, 4)
    assert valid.chainValid is True
    assert valid.anomalies == []
    assert valid.checkpoints == []
    # Issue 26 row 2: the whole log, however wide the range asked (clamped to the chains' ends, not refused).
    whole = client.audit_verify(0, 1_000_000)
    assert (whole.fromSeq, whole.toSeq, whole.chainValid, whole.anomalies) == (0, 1_000_000, True, [])
    done = audit_cli(stack_info, tenant, "verify")
    assert done.returncode == 0, done.stderr
    span = f"4 entries in {len(chains)} chain{'' if len(chains) == 1 else 's'}"
    assert done.stdout.strip() == f"audit log valid: {span}, no anomalies"

    # Someone with write access to the table rewrites who decided.
    dynamodb = stack_client(stack_info, "dynamodb")
    key = {"pk": {"S": items.log_pk(tenant.tenant, decided["chain"])}, "sk": {"S": items.entry_sk(decided["seq"])}}
    entry = json.loads(dynamodb.get_item(TableName=TABLE_NAME, Key=key)["Item"]["entry"]["S"])
    entry["actor"]["subjectId"] = "someone-else"
    dynamodb.put_item(TableName=TABLE_NAME, Item={**key, "entry": {"S": json.dumps(entry)}})

    broken = client.audit_verify(1, 4)
    assert broken.chainValid is False
    # The entry is its chain's last (the head holds its hash) or the next one's prevHash no longer matches.
    ((anomaly),) = broken.anomalies
    assert (anomaly.atSeq, anomaly.kind) in {(decided["seq"], "hash-mismatch"), (decided["seq"] + 1, "chain-break")}
    assert anomaly.detail.startswith(f"chain {decided['chain']}")
    done = audit_cli(stack_info, tenant, "verify")
    assert done.returncode == 2, done.stderr
    assert done.stdout.splitlines()[0] == f"audit log BROKEN: {span}, 1 anomaly"
    assert done.stdout.splitlines()[1].startswith(f"  entry {anomaly.atSeq}: {anomaly.kind}")
    assert json.loads(audit_cli(stack_info, tenant, "verify", "--json").stdout)["anomalies"][0]["atSeq"] == anomaly.atSeq
    # One chain verified alone is judged by its own entries: the key's chain is clean unless the run's chain is the
    # same one (members hash onto a fixed number of chains, so the two can meet).
    only = audit_cli(stack_info, tenant, "verify", "--chain", str(revoked["chain"]))
    assert only.returncode == (2 if revoked["chain"] == decided["chain"] else 0), only.stdout
    alone = audit_cli(stack_info, tenant, "verify", "--chain", str(decided["chain"]))
    assert alone.returncode == 2, alone.stdout


def test_the_audit_routes_refuse_a_key_without_audit_read_and_a_bad_range(tenant: Api) -> None:
    reader = tenant.new_key(["runs:read"])
    refused = tenant.call("GET", "/audit/verify?fromSeq=1&toSeq=2", key=reader)
    assert refused.status_code == 403
    assert refused.json()["details"] == {"scopeRequired": "audit:read"}
    assert tenant.call("GET", "/audit", key=reader).status_code == 403
    for query, field in [("fromSeq=1", "toSeq"), ("toSeq=1", "fromSeq"), ("fromSeq=3&toSeq=2", "toSeq"), ("fromSeq=x&toSeq=2", "fromSeq")]:
        got = tenant.call("GET", f"/audit/verify?{query}")
        assert got.status_code == 400, got.text
        assert got.json()["error"] == "validation_error"
        assert got.json()["details"]["field"] == field
    got = tenant.call("GET", f"/audit/verify?fromSeq=1&toSeq={10**12}")
    assert got.status_code == 400
    assert got.json()["details"]["field"] == "toSeq"
    got = tenant.call("GET", f"/audit/verify?fromSeq=1&toSeq=2&chain={wiring.AUDIT_CHAINS}")
    assert got.status_code == 400
    assert got.json()["details"]["field"] == "chain"
    got = tenant.call("GET", "/audit?cursor=bogus")
    assert got.status_code == 400
    assert got.json()["details"] == {"field": "cursor"}
