"""GET /runs and POST /runs:bulk-cancel on the local stack, driven by openwop-client (issue 16, item 2)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import openwop_client
import pytest
from openwop_client import OpenwopClient
from openwop_client.errors import WopError

from interlude.local.environment import TABLE_NAME
from tests.support.local_stack import Api, stack_client, tenant_admin_key, wire
from tests.support.seeded_runs import seed_runs


@pytest.fixture(scope="module")
def api(stack_info: dict[str, str]) -> Api:
    """A tenant of this module's own: its listing holds only the runs these tests start. (The seeded tenant's held
    every run of every module before it on the shared stack, which the walks below crossed page by page.)"""
    name = f"listing-{uuid.uuid4().hex[:6]}"
    return Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name), name)


@pytest.fixture(scope="module")
def client(api: Api) -> OpenwopClient:
    return OpenwopClient(api.base_url, api.api_key)


def walk(client: OpenwopClient, limit: int, **filters: str) -> tuple[list[str], int]:
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = client.runs_list(limit=limit, cursor=cursor, **filters)
        assert page is not None
        assert len(page.runs) <= limit
        seen += [r.runId for r in page.runs]
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            return seen, pages


def test_discovery_advertises_run_list(api: Api) -> None:
    caps = api.call("GET", "/.well-known/openwop").json()
    assert caps["runList"] == {
        "status": "stable",
        "since": "2.0",
        "witness": "witnessable-gated",
        "maxPageSize": 100,
        "filters": ["workflowId", "status", "workflowIdPrefix", "tags", "metadata", "createdAfter", "createdBefore", "q"],
    }


def test_the_client_pages_through_40_runs_with_filters(
    api: Api, client: OpenwopClient, stack_info: dict[str, str]
) -> None:
    # Small pages over 40 runs cross as many page boundaries as large pages over many more runs would (the page
    # sizes are chosen so that each walk, filtered or not, ends on a partial page after three or more full ones).
    # The runs are written as the store writes them (a head and a listing entry each), 24 waiting then 16 completed,
    # a millisecond apart: the subject is the reader (40 runs made through the API cost the stack seconds).
    approval = api.fixture("conformance-approval")
    noop = api.fixture("conformance-noop")
    dynamodb = stack_client(stack_info, "dynamodb")
    began = datetime.now(UTC) - timedelta(minutes=1)
    waiting = seed_runs(dynamodb, TABLE_NAME, api.tenant, approval, 24, began, status="waiting-approval")
    done = seed_runs(dynamodb, TABLE_NAME, api.tenant, noop, 16, began + timedelta(milliseconds=24))
    mine = set(waiting + done)
    everything, pages = walk(client, 6)
    assert mine <= set(everything)
    assert len(everything) == len(set(everything))  # no run twice across pages
    assert pages >= 7
    # Newest first: my runs appear in the reverse of the order they were created.
    assert [r for r in everything if r in mine] == list(reversed(waiting + done))
    assert sorted(walk(client, 10, workflow_id=approval)[0]) == sorted(waiting)
    assert sorted(walk(client, 5, workflow_id=noop, status="completed")[0]) == sorted(done)
    assert walk(client, 50, workflow_id=noop, status="waiting-approval")[0] == []
    snapshot = client.runs_list(limit=1, workflow_id=approval)
    assert snapshot is not None
    assert snapshot.runs[0].status == "waiting-approval"
    assert snapshot.runs[0].owner.tenant == api.tenant


def test_limit_is_clamped_and_bad_parameters_are_refused(api: Api, client: OpenwopClient) -> None:
    got = api.call("GET", "/runs?limit=5000")
    assert got.status_code == 200
    assert len(got.json()["runs"]) <= 100
    for query in ("limit=0", "limit=x", "status=paused-ish", "workflowId=%20bad", "cursor=" + "a" * 2049):
        refused = api.call("GET", f"/runs?{query}")
        assert refused.status_code == 400, query
        assert refused.json()["error"] == "validation_error"
    with pytest.raises(WopError) as forged:
        client.runs_list(cursor="bm90LWEtY3Vyc29y")
    assert forged.value.status == 400


def test_another_tenants_cursor_and_runs_are_not_this_tenants(api: Api, stack_info: dict[str, str]) -> None:
    other_key = tenant_admin_key(stack_info, f"other-{uuid.uuid4().hex[:6]}")
    other = Api(api.base_url, other_key, "other")
    noop = other.fixture("conformance-noop")
    theirs = {other.start(noop)["runId"] for _ in range(3)}
    their_page = other.call("GET", "/runs?limit=1").json()
    assert "nextCursor" in their_page
    refused = api.call("GET", f"/runs?cursor={their_page['nextCursor']}")
    assert refused.status_code == 400
    assert refused.json()["details"] == {"field": "cursor"}
    mine = api.call("GET", "/runs?limit=100").json()["runs"]
    assert not theirs & {r["runId"] for r in mine}


def test_bulk_cancel_answers_each_id_in_order(api: Api, client: OpenwopClient, stack_info: dict[str, str]) -> None:
    approval = api.fixture("conformance-approval")
    live = [api.start(approval)["runId"] for _ in range(2)]
    other = Api(api.base_url, tenant_admin_key(stack_info, f"bulk-{uuid.uuid4().hex[:6]}"), "bulk")
    foreign = other.start(other.fixture("conformance-approval"))["runId"]
    ids = [*live, foreign, live[0]]
    answer = client.runs_bulk_cancel(openwop_client.BulkCancelRunsRequest(runIds=ids, reason="tidy"))
    assert [r.runId for r in answer.results] == ids
    assert [(r.ok, r.status) for r in answer.results[:2]] == [(True, "cancelled"), (True, "cancelled")]
    assert not answer.results[2].ok
    assert answer.results[2].error["error"] == "run_forbidden"
    assert not answer.results[3].ok
    assert answer.results[3].error["error"] == "run_terminal"
    assert api.run(live[1])["status"] == "cancelled"
    assert other.run(foreign)["status"] == "waiting-approval"
    too_many = api.call("POST", "/runs:bulk-cancel", {"runIds": [live[0]] * 101})
    assert too_many.status_code == 400
    assert too_many.json()["details"]["maxRunIds"] == 100
    assert api.call("POST", "/runs:bulk-cancel", {"runIds": []}).status_code == 400
    reader = api.new_key(["runs:read"])
    assert api.call("POST", "/runs:bulk-cancel", {"runIds": live}, key=reader).status_code == 403
    assert wire(live[0])  # ids in bodies are tenant-bound, never wire-encoded
