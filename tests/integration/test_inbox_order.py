"""The inbox ordered and filtered across all of it, not within a page (issue 29 item 3): GET /interrupts `sort`
(newest, oldest, due first) and `claim` (mine, unclaimed), through the real api handler on the shared moto world,
walked one gate a page so that every order is the whole inbox's. What a page reads whatever the tenant holds:
tests/integration/test_inbox_scale.py."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest

from interlude.domain import clock
from interlude.domain.ids import to_wire
from interlude.local import lambda_runtime
from tests.integration.conftest import new_api_key
from tests.integration.test_run_search import call


def gate(timeout_ms: int = 0) -> dict[str, Any]:
    config = {"title": "Refund?", "actions": ["accept", "reject"], "approversList": ["ana", "bo"], "timeoutMs": timeout_ms}
    return {"nodes": [{"id": "gate", "typeId": "core.approvalGate", "config": config}], "edges": []}


@pytest.fixture
def keys(services, world, clock_file) -> dict[str, str]:
    lambda_runtime.fresh_instances()
    admin = new_api_key(services)
    for workflow_id, definition in {"plain": gate(), "in-2h": gate(7_200_000), "in-1h": gate(3_600_000)}.items():
        status, body = call(admin, "PUT", f"/workflows/{workflow_id}", definition)
        assert status in (200, 201), body
    scopes = ["approvals:respond", "runs:read"]
    return {"admin": admin, **{who: new_api_key(services, who, scopes=scopes) for who in ("ana", "bo")}}


@pytest.fixture
def listed(clock_file):
    def walk(key: str, **query: str) -> list[str]:
        clock.advance(clock_file, 1)  # each walk in a second of its own: the tenant's request rate is not the point
        return pages(key, **query)

    return walk


def pages(key: str, **query: str) -> list[str]:
    """The run of each gate GET /interrupts lists for `query`, one a page, cursor after cursor."""
    seen: list[str] = []
    cursor = None
    while True:
        status, body = call(key, "GET", "/interrupts?" + urlencode({**query, "limit": "1", **({"cursor": cursor} if cursor else {})}))
        assert status == 200, body
        seen += [i["runId"] for i in body["interrupts"]]
        cursor = body.get("nextCursor")
        if cursor is None:
            return seen


def test_each_order_is_the_whole_inboxs_and_claims_filter_it(keys, clock_file, listed) -> None:
    runs: dict[str, str] = {}
    for name, workflow_id in (("first", "plain"), ("due-late", "in-2h"), ("due-soon", "in-1h"), ("last", "plain")):
        clock.advance(clock_file, 1)
        status, body = call(keys["admin"], "POST", "/runs", {"workflowId": workflow_id})
        assert status == 201, body
        runs[name] = body["runId"]
    first, late, soon, last = (runs[n] for n in ("first", "due-late", "due-soon", "last"))

    assert listed(keys["ana"]) == [last, soon, late, first]
    assert listed(keys["ana"], sort="oldest") == [first, late, soon, last]
    # Due first: soonest due across the inbox, then those with no deadline, newest first.
    assert listed(keys["ana"], sort="due") == [soon, late, last, first]
    assert listed(keys["ana"], sort="due", workflowId="in-2h") == [late]

    # Bo claims one gate and Ana hands him another: his, and nobody's, as the entries now say.
    def claim(run_id: str, key: str, method: str = "POST") -> None:
        status, body = call(key, method, f"/runs/{to_wire(run_id)}/interrupts/gate/claim")
        assert status == 200, body

    claim(late, keys["bo"])
    status, body = call(keys["ana"], "PUT", f"/runs/{to_wire(first)}/interrupts/gate/assignee", {"assignee": "bo"})
    assert status == 200, body
    assert listed(keys["bo"], claim="mine") == [late, first]
    assert listed(keys["bo"], claim="mine", sort="due") == [late, first]
    assert listed(keys["ana"], claim="mine") == []
    assert listed(keys["ana"], claim="unclaimed") == [last, soon]
    claim(late, keys["bo"], "DELETE")
    assert listed(keys["bo"], claim="mine") == [first]
    assert listed(keys["ana"], claim="unclaimed", sort="oldest") == [late, soon, last]


def test_an_unknown_order_or_claim_filter_is_refused_naming_it(keys) -> None:
    status, body = call(keys["admin"], "POST", "/runs", {"workflowId": "plain"})
    run_id = to_wire(body["runId"])
    for query, field in (({"sort": "sideways"}, "sort"), ({"claim": "everyone"}, "claim"), ({"runId": run_id, "claim": "mine"}, "runId")):
        status, body = call(keys["ana"], "GET", "/interrupts?" + urlencode(query))
        assert (status, body["error"], body["details"]["field"]) == (400, "validation_error", field), body
