"""Links for the tools a team already uses (issue 28 item 5), over HTTP on the local stack: a tenant's administrator
(or a key holding `links:mint`) mints a link bound to a directory principal, `POST /runs/{runId}/interrupts/{nodeId}/
links`, and the link votes as that principal; its lifetime is a day unless asked, at most a week or the tenant's own
cap, never past the gate's deadline; `interlude links mint RUN NODE --for alice --ttl 3d` does the same.

Each test runs in a tenant of its own: its directory and settings are that test's.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

import pytest
import requests

from tests.support.local_stack import Api, run_cli, tenant_admin_key, wire

DAY = 24 * 3600


@pytest.fixture
def api(stack_info: dict[str, str]) -> Api:
    name = f"links-{uuid.uuid4().hex[:8]}"
    tenant = Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name), name)
    assert tenant.call("PUT", "/principals/alice", {"displayName": "Alice Martin"}).status_code in (200, 201)
    return tenant


def gated_run(api: Api, **config: Any) -> str:
    workflow_id = f"links-{uuid.uuid4().hex[:8]}"
    gate = {"title": "Refund Ana Lima?", "actions": ["accept", "reject"], "approversList": ["alice"], **config}
    definition = {"nodes": [{"id": "review", "typeId": "core.approvalGate", "config": gate}], "edges": []}
    assert api.put_workflow(workflow_id, definition).status_code == 201
    return api.start(workflow_id)["runId"]


def mint(api: Api, run_id: str, body: dict[str, Any], key: str | None = None, node: str = "review") -> requests.Response:
    return api.call("POST", f"/runs/{wire(run_id)}/interrupts/{node}/links", body, key)


def lives(api: Api, run_id: str, minted: dict[str, Any]) -> float:
    """Seconds from the gate's asking (the stack's clock) to the link's expiry."""
    raised = api.run(run_id)["extensions"]["interlude.run"]["openInterrupts"]["review"]["raisedAt"]
    return (instant(minted["expiresAt"]) - instant(raised)).total_seconds()


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_an_administrators_link_votes_as_the_principal_it_names(api: Api) -> None:
    run_id = gated_run(api)
    admin_only = api.new_key(["keys:admin"], subject="it-ops")
    got = mint(api, run_id, {"principal": "alice"}, admin_only)
    assert got.status_code == 201, got.text
    assert got.headers["Cache-Control"] == "no-store"
    link = got.json()
    assert link["principal"] == "alice"
    assert link["url"].startswith(f"{api.base_url}/interrupts/")
    # The link decides as alice, the gate's one approver, though the key that minted it may not decide at all
    decided = requests.post(link["url"], json={"resumeValue": {"action": "accept"}}, timeout=30)
    assert decided.status_code == 200, decided.text
    run = api.run(run_id)
    assert run["status"] == "completed"
    events = api.events(run_id)
    resolved = next(e for e in events if e["type"] == "interrupt.resolved")
    assert resolved["payload"]["resolvedBy"]["subjectId"] == "alice"


def test_a_key_holding_links_mint_mints_and_one_without_it_is_refused(api: Api) -> None:
    run_id = gated_run(api)
    minter = api.new_key(["links:mint"], subject="chatops")
    assert mint(api, run_id, {"principal": "alice"}, minter).status_code == 201
    responder = api.new_key(["approvals:respond", "runs:read"], subject="bob")
    refused = mint(api, run_id, {"principal": "alice"}, responder)
    assert refused.status_code == 403
    assert refused.json()["error"] == "forbidden"
    assert refused.json()["details"] == {"scopeRequired": "links:mint"}


def test_an_administrator_may_grant_links_mint_to_a_key(api: Api) -> None:
    admin_only = api.new_key(["keys:admin"], subject="it-ops")
    granted = api.call("POST", "/keys", {"subjectId": "chatops", "scopes": ["links:mint"]}, admin_only)
    assert granted.status_code == 201, granted.text
    assert granted.json()["scopes"] == ["links:mint"]


def test_a_link_lives_a_day_unless_asked_at_most_a_week_never_past_the_gates_deadline(api: Api) -> None:
    run_id = gated_run(api)
    assert abs(lives(api, run_id, mint(api, run_id, {"principal": "alice"}).json()) - DAY) < 120
    asked = mint(api, run_id, {"principal": "alice", "lifetimeSeconds": 3 * DAY}).json()
    assert abs(lives(api, run_id, asked) - 3 * DAY) < 120
    too_long = mint(api, run_id, {"principal": "alice", "lifetimeSeconds": 7 * DAY + 1})
    assert too_long.status_code == 400
    assert too_long.json()["error"] == "validation_error"
    assert "lifetimeSeconds" in too_long.text
    # A gate that times out in an hour: the link ends with it
    hurried = gated_run(api, timeoutMs=3600 * 1000)
    assert abs(lives(api, hurried, mint(api, hurried, {"principal": "alice"}).json()) - 3600) < 120


def test_a_tenant_may_shorten_the_longest_link(api: Api) -> None:
    settings = api.call("GET", "/tenant/settings").json()["settings"]
    changed = api.call("PUT", "/tenant/settings", {**settings, "maxLinkLifetimeSeconds": 3600})
    assert changed.status_code == 200, changed.text
    run_id = gated_run(api)
    assert abs(lives(api, run_id, mint(api, run_id, {"principal": "alice"}).json()) - 3600) < 120
    refused = mint(api, run_id, {"principal": "alice", "lifetimeSeconds": 7200})
    assert refused.status_code == 400
    assert refused.json()["error"] == "validation_error"
    assert refused.json()["details"] == {"field": "lifetimeSeconds", "maximum": 3600}


def test_a_link_for_someone_the_directory_does_not_know_is_refused(api: Api) -> None:
    run_id = gated_run(api)
    refused = mint(api, run_id, {"principal": "mallory"})
    assert refused.status_code == 400
    assert refused.json()["error"] == "validation_error"
    assert refused.json()["details"] == {"field": "principal"}
    assert "mallory" in refused.json()["message"]
    assert mint(api, run_id, {}).status_code == 400  # no principal at all


def test_a_link_to_no_open_gate_is_refused(api: Api) -> None:
    run_id = gated_run(api)
    assert mint(api, f"{api.tenant}/{'A' * 24}", {"principal": "alice"}).status_code == 404
    assert mint(api, run_id, {"principal": "alice"}, node="nowhere").status_code == 404
    link = mint(api, run_id, {"principal": "alice"}).json()["url"]
    assert requests.post(link, json={"resumeValue": {"action": "accept"}}, timeout=30).status_code == 200
    closed = mint(api, run_id, {"principal": "alice"})
    assert closed.status_code == 409
    assert closed.json()["error"] == "interrupt_already_resolved"


def test_the_cli_mints_a_link_for_a_principal_with_a_lifetime_in_days(api: Api) -> None:
    run_id = gated_run(api)
    endpoint = ("--url", api.base_url, "--key", api.api_key)
    shown = run_cli("links", "mint", run_id, "review", "--for", "alice", "--ttl", "3d", *endpoint).stdout
    url, said = shown.strip().splitlines()
    assert url.startswith(f"{api.base_url}/interrupts/")
    assert said.startswith("decides as alice until ")
    answer = json.loads(run_cli("links", "mint", run_id, "review", "--for", "alice", "--ttl", "3d", "--json", *endpoint).stdout)
    assert abs(lives(api, run_id, answer) - 3 * DAY) < 120
    wrong = run_cli("links", "mint", run_id, "review", "--for", "alice", "--ttl", "soon", *endpoint, check=False)
    assert wrong.returncode == 2
    assert "not a lifetime such as 3d" in wrong.stderr


@pytest.mark.parametrize("damage", ["/", "/.", "/%20", "/x/y"])
def test_a_link_a_tool_damaged_by_appending_is_a_page_to_a_browser_and_json_to_a_client(api: Api, damage: str) -> None:
    link = mint(api, gated_run(api), {"principal": "alice"}).json()["url"]
    browser = requests.get(link + damage, headers={"Accept": "text/html"}, timeout=30)
    assert (browser.status_code, browser.headers["Content-Type"].split(";")[0]) == (404, "text/html"), browser.text[:200]
    assert "This link is not valid" in browser.text
    client = requests.get(link + damage, headers={"Accept": "application/json"}, timeout=30)
    assert (client.status_code, client.json()["error"]) == (404, "not_found")
