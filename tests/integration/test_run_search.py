"""Finding runs (issue 29 item 1): GET /runs by tags, searchable metadata, creation time, status sets, workflow id
prefix and the words of a run's title, through the real api handler; and every limit's refusal, a 400 in the
OpenWOP envelope before anything is written or read. What a page reads at 100 and at 20,000 runs:
tests/integration/test_run_search_scale.py."""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import urlencode

import pytest

from interlude import wiring
from interlude.adapters import migration_turns as migration_turns_adapter
from interlude.app import search_keys
from interlude.app.search_keys import NotYet
from interlude.domain import clock
from interlude.domain.ids import to_wire
from interlude.domain.models.tenants import TenantSettings
from interlude.local import lambda_runtime
from interlude.local.http_gateway import to_event
from interlude.local.sqs_pump import QueuePump
from interlude.store import item_index
from tests.integration.conftest import new_api_key, state_of
from tests.support.modulex_example import worked_example

GATE = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Check the invoice"}}
WORKFLOWS = {
    "refund-approval": {"name": "Refund approval", "nodes": [GATE], "edges": []},
    "refund-noop": {"name": "Refund bookkeeping", "nodes": [{"id": "n", "typeId": "core.noop"}], "edges": []},
    "shipping": {"name": "Ship parcel", "nodes": [{"id": "n", "typeId": "core.noop"}], "edges": []},
}


def call(key: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json", "host": "127.0.0.1"}
    if method != "GET":
        headers["idempotency-key"] = uuid.uuid4().hex
    raw = b"" if body is None else json.dumps(body).encode()
    answer = lambda_runtime.invoke("api", to_event(method, path, headers, raw, "127.0.0.1"))
    return answer["statusCode"], json.loads(answer["body"]) if answer.get("body") else None


def listed(key: str, **query: str) -> list[str]:
    """Every run id GET /runs lists for `query`, page after page (two a page: cursors carry the filters' place)."""
    seen: list[str] = []
    cursor = None
    while True:
        asked = {**query, "limit": "2", **({"cursor": cursor} if cursor else {})}
        status, body = call(key, "GET", "/runs?" + urlencode(asked))
        assert status == 200, body
        seen += [run["runId"] for run in body["runs"]]
        cursor = body.get("nextCursor")
        if cursor is None:
            assert len(seen) == len(set(seen))
            return seen


@pytest.fixture
def key(services, world, clock_file) -> str:
    # A listing walked two runs a page asks faster than a tenant's default 25 requests a second on an idle machine
    # (the pages are what is tested here, not the rate limit: tests/integration/test_keys_and_limits.py).
    services.tenants.put_settings(world.tenant, TenantSettings.model_validate({"limits": {"requestsPerSecond": 500}}), "ops")
    lambda_runtime.fresh_instances()
    admin = new_api_key(services)
    for workflow_id, definition in WORKFLOWS.items():
        status, body = call(admin, "PUT", f"/workflows/{workflow_id}", definition)
        assert status in (200, 201), body
    return admin


def start(key: str, clock_file, workflow_id: str, **body: Any) -> str:
    clock.advance(clock_file, 1)  # runs a second apart: creation bounds name them exactly
    status, created = call(key, "POST", "/runs", {"workflowId": workflow_id, **body})
    assert status == 201, created
    return created["runId"]


def declare_searchable(key: str, *keys: str) -> None:
    status, body = call(key, "PATCH", "/tenant/settings", {"searchableMetadata": list(keys)})
    assert status == 200, body
    lambda_runtime.fresh_instances()  # every instance reads the settings afresh (a warm one within 10 s)


@pytest.mark.parametrize("titles", [False, True], ids=["q on the listing", "q on title-word entries"])
def test_each_filter_lists_exactly_the_runs_it_names_newest_first(key, clock_file, services, titles) -> None:
    # A tenant indexes its runs' title words or not (searchTitles): `q` finds the same runs either way.
    if titles:
        assert call(key, "PATCH", "/tenant/settings", {"searchTitles": True})[0] == 200
    before_declared = start(key, clock_file, "refund-approval", metadata={"customer": "acme"})
    declare_searchable(key, "customer", "amount")
    r1 = start(key, clock_file, "refund-approval", tags=["eu", "vip"], metadata={"customer": "acme", "amount": 2150})
    r2 = start(key, clock_file, "refund-noop", tags=["eu"], metadata={"customer": "globex", "note": {"free": "form"}})
    r3 = start(key, clock_file, "shipping", tags=["vip"], metadata={"customer": "acme", "amount": "2150"})
    r4 = start(key, clock_file, "refund-approval")
    assert call(key, "POST", f"/runs/{to_wire(r4)}/cancel", {})[0] == 200

    assert listed(key, tags="eu") == [r2, r1]
    assert listed(key, tags="eu,vip") == [r1]
    assert listed(key, tags="vip", status="completed") == [r3]
    # Equality as text (2150 and "2150" alike); a run created before the key was declared is not indexed under it.
    assert listed(key, **{"metadata.customer": "acme"}) == [r3, r1]
    assert listed(key, **{"metadata.amount": "2150"}) == [r3, r1]
    assert listed(key, **{"metadata.customer": "acme", "tags": "eu"}) == [r1]
    assert listed(key, status="waiting-approval,cancelled") == [r4, r1, before_declared]
    assert listed(key, workflowIdPrefix="refund") == [r4, r2, r1, before_declared]
    assert listed(key, workflowIdPrefix="refund-n") == [r2]
    # The title: the workflow's id and name, and the open gate's title (a closed gate's words no longer find it).
    assert listed(key, q="Refund") == [r4, r2, r1, before_declared]
    assert listed(key, q="refund bookkeeping") == [r2]
    assert listed(key, q="parcel") == [r3]
    assert listed(key, q="check INVOICE") == [r1, before_declared]
    assert listed(key, q="invoice", tags="vip") == [r1]
    assert call(key, "POST", f"/runs/{to_wire(r1)}/interrupts/gate", {"resumeValue": {"action": "accept"}})[0] == 200
    assert listed(key, q="invoice") == [before_declared]
    # Creation bounds: at or after `createdAfter`, strictly before `createdBefore`, in any offset.
    created = {run_id: state_of(services, run_id).createdAt for run_id in (r1, r3)}
    assert listed(key, createdAfter=created[r1], createdBefore=created[r3]) == [r2, r1]
    assert listed(key, createdAfter=created[r3], q="refund") == [r4]
    assert listed(key, createdBefore=created[r1].replace("Z", "+00:00"), tags="eu") == []


def test_a_key_declared_searchable_holds_only_scalars_of_bounded_length(key, clock_file) -> None:
    declare_searchable(key, "customer")
    for metadata in ({"customer": {"id": 7}}, {"customer": ["a"]}, {"customer": "x" * 257}, {"customer": ""}):
        status, body = call(key, "POST", "/runs", {"workflowId": "shipping", "metadata": metadata})
        assert (status, body["error"], body["details"]["field"]) == (400, "validation_error", "metadata/customer"), body
    # A key nobody searches by holds anything; null is kept and not indexed.
    start(key, clock_file, "shipping", metadata={"other": {"id": 7}, "customer": None})


# Each refused in one test: one tenant and its workflows for all of them (a refusal writes nothing).
TAG_REFUSALS = [
    ([f"t{i}" for i in range(21)], "tags"),
    (["a,b"], "tags/0"),
    (["ok", "x" * 129], "tags/1"),
    (["bell\x07"], "tags/0"),
    ([""], "tags/0"),
]


def test_tags_past_their_limits_are_refused_before_the_run_is_created(key) -> None:
    for tags, field in TAG_REFUSALS:
        status, body = call(key, "POST", "/runs", {"workflowId": "shipping", "tags": tags})
        assert (status, body["error"], body["details"]["field"]) == (400, "validation_error", field), (tags, body)
        assert call(key, "GET", "/runs")[1]["runs"] == [], tags


def test_searchable_keys_are_at_most_ten_of_a_plain_name(key) -> None:
    for keys, path in (([f"k{i}" for i in range(11)], "searchableMetadata"), (["a.b"], "searchableMetadata/0"), (["ok", "x" * 65], "searchableMetadata/1")):
        status, body = call(key, "PATCH", "/tenant/settings", {"searchableMetadata": keys})
        assert (status, body["error"]) == (400, "validation_error"), body
        assert [e["path"] for e in body["details"]["errors"]] == [path], body
    declare_searchable(key, *[f"k{i}" for i in range(10)])


# Each refused in one test: one tenant for all of them (a refusal changes nothing).
LISTING_REFUSALS = [
    ({"metadata.region": "eu"}, "metadata.region"),
    ({"metadata.customer": "x" * 257}, "metadata.customer"),
    ({"q": "x" * 129}, "q"),
    ({"q": "- ."}, "q"),
    ({"q": "one two three four five six"}, "q"),
    ({"tags": ",".join(f"t{i}" for i in range(11))}, "tags"),
    ({"tags": "a,,b"}, "tags"),
    ({"tags": "x" * 129}, "tags"),
    ({"createdAfter": "yesterday"}, "createdAfter"),
    ({"createdBefore": "2026-12-05T10:00:00"}, "createdBefore"),
    ({"createdBefore": "2026-12-05"}, "createdBefore"),
    ({"createdAfter": "2026-12-05T10:00:00Z", "createdBefore": "2026-12-05T09:00:00Z"}, "createdAfter"),
    ({"status": "waiting-approval,bogus"}, "status"),
    ({"workflowIdPrefix": "a b"}, "workflowIdPrefix"),
    ({"workflowId": "a b"}, "workflowId"),
]


def test_a_listing_that_asks_past_a_limit_is_refused_naming_the_parameter(key) -> None:
    declare_searchable(key, "customer")
    refused = {}
    for query, _ in LISTING_REFUSALS:
        status, body = call(key, "GET", "/runs?" + urlencode(query))
        refused[urlencode(query)] = (status, body.get("error"), (body.get("details") or {}).get("field"), bool(body.get("message")))
    assert refused == {urlencode(query): (400, "validation_error", field, True) for query, field in LISTING_REFUSALS}


def test_a_fork_is_found_as_any_run_and_its_overlay_held_to_the_same_limits(key, clock_file) -> None:
    declare_searchable(key, "customer")
    source = start(key, clock_file, "refund-approval", tags=["eu"], metadata={"customer": "acme"})
    fork = f"/runs/{to_wire(source)}:fork"
    status, body = call(key, "POST", fork, {"mode": "branch", "fromSeq": 0, "runOptionsOverlay": {"tags": ["eu", "forked"]}})
    assert status == 201, body
    assert listed(key, tags="forked") == [body["runId"]]
    assert listed(key, **{"metadata.customer": "acme", "q": "refund"}) == [body["runId"], source]
    for overlay, field in (
        ({"tags": [f"t{i}" for i in range(21)]}, "runOptionsOverlay.tags"),
        ({"tags": ["a,b"]}, "runOptionsOverlay.tags/0"),
        ({"metadata": {"customer": {"id": 1}}}, "runOptionsOverlay.metadata/customer"),
    ):
        status, body = call(key, "POST", fork, {"mode": "branch", "fromSeq": 0, "runOptionsOverlay": overlay})
        assert (status, body["error"], body["details"]["field"]) == (400, "validation_error", field), body


def modulex_rows(key: str, **query: str) -> list[str]:
    """Every run GET /workflow-runs (ModuleX's list_runs) lists for `query`, two a page by offset, as iter_runs reads."""
    seen: list[str] = []
    while True:
        status, body = call(key, "GET", "/workflow-runs?" + urlencode({**query, "limit": "2", "offset": str(len(seen))}))
        assert status == 200, body
        seen += [row["run_id"] for row in body["runs"]]
        if not body["has_more"]:
            return seen


def test_modulex_list_runs_takes_the_same_filters_in_its_own_spelling(key, clock_file, services) -> None:
    declare_searchable(key, "customer")
    r1 = start(key, clock_file, "refund-approval", tags=["eu", "vip"], metadata={"customer": "acme"})
    r2 = start(key, clock_file, "refund-noop", tags=["eu"], metadata={"customer": "globex"})
    r3 = start(key, clock_file, "shipping", tags=["vip"], metadata={"customer": "acme"})
    r1, r2, r3 = (to_wire(r) for r in (r1, r2, r3))

    assert modulex_rows(key, tags="eu") == [r2, r1]
    assert modulex_rows(key, tags="eu,vip") == [r1]
    assert modulex_rows(key, **{"metadata.customer": "acme"}) == [r3, r1]
    assert modulex_rows(key, workflow_id_prefix="refund") == [r2, r1]
    assert modulex_rows(key, q="check invoice") == [r1]
    assert modulex_rows(key, q="parcel") == [r3]
    # A status set, in ModuleX's words or OpenWOP's (`interrupted`: waiting on a gate).
    assert modulex_rows(key, status="interrupted,completed", tags="vip") == [r3, r1]
    assert modulex_rows(key, status="waiting-approval") == [r1]
    created = {r: call(key, "GET", f"/workflow-runs/{r}")[1]["created_at"] for r in (r2, r3)}
    assert modulex_rows(key, created_after=created[r2]) == [r3, r2]
    assert modulex_rows(key, created_before=created[r3], trigger_type="api", workflow_id="refund-noop") == [r2]

    # Refusals: ModuleX's 400 `{detail}` naming its own parameter, the OpenWOP code in X-Interlude-Error.
    for query, field in (
        ({"tags": ",".join(f"t{i}" for i in range(11))}, "tags"),
        ({"created_after": "yesterday"}, "created_after"),
        ({"created_after": created[r3], "created_before": created[r2]}, "created_after"),
        ({"metadata.region": "eu"}, "metadata.region"),
        ({"q": "x" * 129}, "q"),
        ({"status": "interrupted,sleeping"}, "status"),
        ({"workflow_id_prefix": "a b"}, "workflow_id_prefix"),
    ):
        answer = lambda_runtime.invoke("api", to_event("GET", "/workflow-runs?" + urlencode(query), {"authorization": f"Bearer {key}", "host": "127.0.0.1"}, b"", "127.0.0.1"))
        body = json.loads(answer["body"])
        assert (answer["statusCode"], list(body)) == (400, ["detail"]), (query, body)
        assert body["detail"].startswith(field), (query, body)
        assert answer["headers"]["X-Interlude-Error"] == "validation_error"


def migration_turns(world) -> None:
    """The migrations queue's turns (a search-keys job's among them), each through the migrate function."""
    pump = QueuePump("migrate", world.queues["migrations"])
    while pump.pump_once():
        pass


def indexing(key: str) -> dict[str, Any]:
    status, body = call(key, "GET", "/tenant/settings")
    assert status == 200, body
    return body["searchIndexing"]


def test_a_key_declared_later_reaches_older_runs_and_one_taken_back_matches_no_more(key, clock_file, world) -> None:
    old = start(key, clock_file, "refund-approval", metadata={"customer": "acme"})
    other = start(key, clock_file, "shipping", metadata={"customer": "globex", "region": "eu", "note": {"free": "form"}})
    status, body = call(key, "PATCH", "/tenant/settings", {"searchableMetadata": ["customer"]})
    assert status == 200, body
    assert (body["searchIndexing"]["status"], body["searchIndexing"]["keys"]) == ("pending", ["customer"])
    lambda_runtime.fresh_instances()
    new = start(key, clock_file, "refund-noop", metadata={"customer": "acme"})
    # Until the job has run, the runs created before the declaration are not found by it.
    assert listed(key, **{"metadata.customer": "acme"}) == [new]

    clock.advance(clock_file, 20)  # every instance applies the declaration (its settings cache): the job starts
    migration_turns(world)
    done = indexing(key)
    assert (done["status"], done["keys"], done["runsRead"]) == ("done", ["customer"], 3), done
    assert listed(key, **{"metadata.customer": "acme"}) == [new, old]
    assert listed(key, **{"metadata.customer": "globex"}) == [other]
    assert modulex_rows(key, **{"metadata.customer": "acme"}) == [to_wire(new), to_wire(old)]

    # A key taken back matches nothing (refused by name); one declared instead reaches the older runs in turn.
    status, body = call(key, "PATCH", "/tenant/settings", {"searchableMetadata": ["region", "note"]})
    assert (body["searchIndexing"]["status"], body["searchIndexing"]["keys"]) == ("pending", ["region", "note"]), body
    lambda_runtime.fresh_instances()
    status, body = call(key, "GET", "/runs?" + urlencode({"metadata.customer": "acme"}))
    assert (status, body["details"]["field"]) == (400, "metadata.customer"), body
    clock.advance(clock_file, 20)
    migration_turns(world)
    assert indexing(key)["status"] == "done"
    assert listed(key, **{"metadata.region": "eu"}) == [other]
    # A value the index cannot hold (an object, under a key declared after the run was made) is left unindexed.
    status, body = call(key, "GET", "/runs?" + urlencode({"metadata.note": "{}"}))
    assert (status, body["runs"]) == (200, []), body


def test_the_search_keys_job_waits_for_the_declaration_then_goes_on_where_its_turn_stopped(key, clock_file, services) -> None:
    tenant = state_of(services, start(key, clock_file, "shipping", metadata={"customer": "acme"})).tenant
    # Runs until two share a shard of the run listing: a round of one entry per shard then leaves one for the next.
    shards: dict[int, str] = {}
    while True:
        run_id = start(key, clock_file, "shipping", metadata={"customer": "acme"})
        shard = item_index.shard_of(run_id, wiring.RUN_INDEX.shards)
        if shard in shards:
            break
        shards[shard] = run_id
    declare_searchable(key, "customer")
    jobs = services.search_keys
    with pytest.raises(NotYet):
        jobs.turn(tenant, lambda: True)
    clock.advance(clock_file, 20)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(search_keys, "PER_SHARD", 1)
        assert jobs.turn(tenant, lambda: False) is False  # out of time after its first round
        first = jobs.store.job(tenant)
        assert first is not None
        assert (first.after is not None, first.done_at) == (True, None)
        assert jobs.turn(tenant, lambda: True) is True
    assert jobs.progress(tenant)["runsRead"] == len(shards) + 2
    assert len(listed(key, **{"metadata.customer": "acme"})) == len(shards) + 2


def test_a_modulex_interrupts_message_is_found_by_q_as_a_gate_title(key) -> None:
    status, body = call(key, "POST", "/workflows/run", {"workflow": worked_example(), "input": {"request": "a refund"}})
    assert status == 200, body
    assert [to_wire(r) for r in listed(key, q="sending this draft")] == [body["run_id"]]


def test_a_job_whose_first_turn_was_not_queued_is_queued_again_by_a_read_once_stale(key, clock_file, world, monkeypatch) -> None:
    old = start(key, clock_file, "shipping", metadata={"customer": "acme"})

    def unreachable(*_: Any) -> None:
        raise ConnectionError("SQS unreachable")

    # The settings change stands though its job's first turn could not be queued: the job says it is pending.
    with monkeypatch.context() as patch:
        patch.setattr(migration_turns_adapter, "queue_search_keys", unreachable)
        declare_searchable(key, "customer")
    assert indexing(key)["status"] == "pending"
    clock.advance(clock_file, search_keys.STALE_S + 1)
    assert indexing(key)["status"] == "pending"  # this read finds it stale, and queues its turn
    migration_turns(world)
    assert indexing(key)["status"] == "done"
    assert listed(key, **{"metadata.customer": "acme"}) == [old]
