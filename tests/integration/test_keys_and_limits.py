"""Issue 11 items 7 and 8 in process (moto): revocation across two instances of the service, the request counter
under its limit, the open-runs counter kept in the run's own transactions (and never in the way of a run ending),
and a transaction that lost only to a concurrent one (TransactionConflict) sent again."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError

from interlude.app import keys as keys_module
from interlude.app import limits as app_limits
from interlude.app.limits import RequestLeases
from interlude.composition import Services
from interlude.config import forget
from interlude.domain.errors import DomainError
from interlude.domain.models.requests import CancelRunRequest, CreateRunRequest
from interlude.domain.models.tenants import TenantSettings
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.rules import limits as rules
from interlude.store import limits as counters_module
from interlude.store.facade import Store
from interlude.store.limits import LimitStore, rate_pk
from tests.integration.conftest import new_api_key, signed_in
from tests.support.moto_world import ENTRIES_TABLE, TABLE

GATE = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship it?"}}


def test_a_key_revoked_by_one_instance_is_refused_there_at_once_and_by_another_once_its_cache_lapses(
    services, tenant, other_tenant, monkeypatch
) -> None:
    # The instances' cache clock, moved by the test: how long the calls between take (a loaded machine's) moves nothing.
    cache_clock = [1_000.0]
    monkeypatch.setattr(keys_module, "time", SimpleNamespace(monotonic=lambda: cache_clock[0]))
    other_instance = Services(Store(TABLE, ENTRIES_TABLE))
    api_key = new_api_key(services, "robot")
    key_id = api_key[3:19]
    assert other_instance.keys.authenticate(f"Bearer {api_key}").subject["subjectId"] == "robot"
    assert services.keys.authenticate(f"Bearer {api_key}").subject["subjectId"] == "robot"

    services.keys.revoke_key(tenant, key_id)
    with pytest.raises(DomainError) as here:
        services.keys.authenticate(f"Bearer {api_key}")
    assert here.value.message == "the API key is revoked"
    # The other instance trusted its read for the deployment's key_cache_seconds, and not a moment longer.
    cache_clock[0] += other_instance.keys.cache_seconds - 0.001
    other_instance.keys.authenticate(f"Bearer {api_key}")
    cache_clock[0] += 0.001
    with pytest.raises(DomainError):
        other_instance.keys.authenticate(f"Bearer {api_key}")
    # Another tenant cannot revoke (or discover) the key.
    with pytest.raises(DomainError) as foreign:
        services.keys.revoke_key(other_tenant, key_id)
    assert foreign.value.code == "not_found"


def test_the_keys_service_trusts_a_key_for_the_deployments_bound(monkeypatch) -> None:
    monkeypatch.setenv("TABLE_NAME", TABLE)
    monkeypatch.setenv("ENTRIES_TABLE_NAME", ENTRIES_TABLE)
    monkeypatch.setenv("INTERLUDE_KEY_CACHE_SECONDS", "0.25")
    forget()
    assert Services(Store(TABLE, ENTRIES_TABLE)).keys.cache_seconds == 0.25


def test_the_request_counter_stops_at_the_limit_and_counts_no_refusal(services, tenant, other_tenant) -> None:
    counters = LimitStore(TABLE, services.store.client)
    window = rules.window_of(1_000.5)
    assert [counters.count_request(tenant, window, 3) for _ in range(5)] == [1, 2, 3, None, None]
    assert counters.count_request(other_tenant, window, 3) == 1  # another tenant's window is its own
    assert counters.count_request(tenant, rules.window_of(1_001.0), 3) == 1  # the next window starts afresh


class CountedStore(LimitStore):
    """The real counter, with the UpdateItems it sends counted."""

    def __init__(self, client: Any) -> None:
        super().__init__(TABLE, client)
        self.writes = 0

    def count_request(self, tenant: str, window: rules.Window, limit: int, requests: int = 1, windows: int = 1) -> int | None:
        self.writes += 1
        return super().count_request(tenant, window, limit, requests, windows)


def window_counts(client: Any, tenant: str, first: int, last: int) -> list[int]:
    """What the tenant's request counter holds for each one-second window from `first` to `last` (epoch seconds)."""
    counts = []
    for start in range(first, last + 1):
        window = rules.window_of(start)
        item = client.get_item(TableName=TABLE, Key={"pk": {"S": rate_pk(tenant)}, "sk": {"S": f"S#{window.span}"}})
        counts.append(int(item.get("Item", {}).get(f"n{start - window.span}", {"N": "0"})["N"]))
    return counts


def test_leased_requests_never_pass_the_limit_and_a_refusal_leaves_less_than_a_lease_unused(services, tenant) -> None:
    counters = CountedStore(services.store.client)
    here, there = RequestLeases(), RequestLeases()
    limit, window = 40, rules.window_of(2_000.0)
    # Each instance was busy in the window before, so it leases its pace at once (at most a quarter of the limit).
    for leases in (here, there):
        for _ in range(30):
            assert leases.admit(counters, tenant, rules.window_of(1_999.0), 500).allowed
    admitted = {"here": 0, "there": 0}
    for turn in range(200):
        name, leases = ("here", here) if turn % 3 else ("there", there)
        if leases.admit(counters, tenant, window, limit).allowed:
            admitted[name] += 1
    # the window's count is full: nothing more is admitted anywhere
    assert window_counts(services.store.client, tenant, 2000, 2000) == [limit]
    assert sum(admitted.values()) <= limit  # never more than the limit, whichever instance answered
    unused = limit - sum(admitted.values())
    assert unused < 2 * (limit // app_limits.LEASE_LIMIT_DIVISOR)  # each instance holds less than one lease unused


def test_a_busy_instance_counts_its_requests_in_leases_and_a_quiet_one_its_next_seconds_in_one_write(
    services, tenant, other_tenant
) -> None:
    counters = CountedStore(services.store.client)
    busy = RequestLeases()
    for second in (3_000, 3_001, 3_002):
        for _ in range(40):
            assert busy.admit(counters, tenant, rules.window_of(second + 0.5), 400).allowed
    # The first window grows its leases (1, 1, 2, 4, 8, 16, 32); each later one leases its pace (40) at once.
    assert counters.writes == 7 + 1 + 1
    # A quiet instance counts one request in each of the next windows its span holds (docs/adr/0174): one write for
    # its requests of the next 15 seconds, where it wrote once for each
    quiet = RequestLeases()
    counters.writes = 0
    for second in (4_000, 4_002, 4_004, 4_014):
        assert quiet.admit(counters, other_tenant, rules.window_of(second + 0.5), 400).allowed
    assert counters.writes == 1
    assert window_counts(services.store.client, other_tenant, 3_999, 4_015) == [0] + [1] * rules.AHEAD_WINDOWS + [0]
    # ... and the next window, past them, counts again, as far as its span goes (4,019: the span of 3,960 ends)
    assert quiet.admit(counters, other_tenant, rules.window_of(4_015.5), 400).allowed
    assert counters.writes == 2
    assert window_counts(services.store.client, other_tenant, 4_015, 4_020) == [1, 1, 1, 1, 1, 0]


def test_a_lease_counted_ahead_never_passes_a_later_windows_limit_and_is_counted_alone_where_it_does_not_fit(
    services, tenant
) -> None:
    counters = CountedStore(services.store.client)
    limit = 4
    # Other instances hold the whole of a window five seconds on
    assert counters.count_request(tenant, rules.window_of(5_005.5), limit, limit) == limit
    quiet = RequestLeases()
    counters.writes = 0

    # Counting ahead would pass that window's limit: refused whole, this window is counted alone, and so is each
    # next one of the span (no more writes refused on the crowded window)
    assert quiet.admit(counters, tenant, rules.window_of(5_000.5), limit).allowed
    assert counters.writes == 2
    assert window_counts(services.store.client, tenant, 5_000, 5_006) == [1, 0, 0, 0, 0, limit, 0]
    assert quiet.admit(counters, tenant, rules.window_of(5_001.5), limit).allowed
    assert counters.writes == 3
    assert not quiet.admit(counters, tenant, rules.window_of(5_005.5), limit).allowed
    assert window_counts(services.store.client, tenant, 5_000, 5_006) == [1, 1, 0, 0, 0, limit, 0]
    # The next span counts ahead again
    assert quiet.admit(counters, tenant, rules.window_of(5_040.5), limit).allowed
    assert window_counts(services.store.client, tenant, 5_039, 5_041)[1:] == [1, 1]


def test_instances_that_counted_ahead_and_went_quiet_never_hold_a_tenants_whole_second(services, tenant) -> None:
    counters = CountedStore(services.store.client)
    limit = 4
    # Ten instances each answer one request of the tenant's in the same second, then none (a burst spread over a
    # fleet): each counts ahead where a later second has room under half the limit, else that second alone
    for _ in range(10):
        RequestLeases().admit(counters, tenant, rules.window_of(6_000.5), limit)
    later = window_counts(services.store.client, tenant, 6_001, 6_014)
    assert max(later) <= limit // 2, later
    # so a request in a later second, on an instance that counted nothing ahead, is still admitted
    assert RequestLeases().admit(counters, tenant, rules.window_of(6_001.5), limit).allowed


def test_open_runs_are_counted_in_their_transactions_and_a_lowered_quota_never_stops_a_run_ending(
    services, tenant
) -> None:
    admin = signed_in(services)
    services.workflows.put_workflow(admin, "gate", WorkflowDefinition.model_validate({"nodes": [GATE], "edges": []}))
    services.workflows.put_workflow(
        admin,
        "instant",
        WorkflowDefinition.model_validate({"nodes": [{"id": "n", "typeId": "core.noop"}], "edges": []}),
    )
    runs = [services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "gate"})).runId for _ in range(3)]
    # A run that ends in the transaction that creates it never counts.
    assert services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "instant"})).status == "completed"
    assert services.limiter.counters.usage(tenant) == {"openRuns": 3, "workflowVersions": 2}

    services.tenants.put_settings(tenant, TenantSettings.model_validate({"limits": {"openRuns": 1}}), "admin")
    with pytest.raises(DomainError) as refused:
        services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "gate"}))
    assert refused.value.details == {"quota": "openRuns", "limit": 1}
    services.decisions.resolve_interrupt(admin, runs[0], "gate", {"action": "accept"})
    services.decisions.resolve_interrupt(admin, runs[1], "gate", {"action": "reject"})
    services.lifecycle.cancel_run(admin, runs[2], CancelRunRequest())
    assert services.limiter.counters.usage(tenant)["openRuns"] == 0
    services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "gate"}))
    with pytest.raises(DomainError):
        services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "gate"}))


def test_a_transaction_cancelled_only_by_a_concurrent_one_is_sent_again(services, tenant) -> None:
    admin = signed_in(services)
    services.workflows.put_workflow(admin, "gate", WorkflowDefinition.model_validate({"nodes": [GATE], "edges": []}))
    calls: list[int] = []

    def conflict_once(**_: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            error = {
                "Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
                "CancellationReasons": [{"Code": "None"}, {"Code": "TransactionConflict"}],
            }
            raise ClientError(error, "TransactWriteItems")

    services.store.client.meta.events.register("before-call.dynamodb.TransactWriteItems", conflict_once)
    state = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "gate"}))
    assert len(calls) == 2
    assert services.store.get_run(state.runId) is not None
    assert services.limiter.counters.usage(tenant)["openRuns"] == 1


def test_a_high_open_runs_quota_spreads_its_counter_and_each_run_releases_where_it_claimed(services, tenant) -> None:
    admin = signed_in(services)
    services.workflows.put_workflow(admin, "gate", WorkflowDefinition.model_validate({"nodes": [GATE], "edges": []}))
    services.tenants.put_settings(tenant, TenantSettings.model_validate({"limits": {"openRuns": 3000}}), "admin")
    runs = [services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "gate"})).runId for _ in range(6)]
    shards = {services.store.get_run(run)[0].usageShard for run in runs}
    assert shards <= set(range(counters_module.open_runs_shards(3000)))
    assert len(shards) > 1  # 6 runs over 24 items
    assert services.limiter.counters.usage(tenant)["openRuns"] == 6
    # A lowered quota (one shard) later counts every shard: 6 open runs refuse a create under a quota of 6
    services.tenants.put_settings(tenant, TenantSettings.model_validate({"limits": {"openRuns": 6}}), "admin")
    with pytest.raises(DomainError):
        services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "gate"}))
    # And every run still releases on the shard it claimed on.
    for run in runs:
        services.lifecycle.cancel_run(admin, run, CancelRunRequest())
    assert services.limiter.counters.usage(tenant)["openRuns"] == 0
    for shard in shards:
        got = services.store.client.get_item(TableName=TABLE, Key=counters_module.usage_key(tenant, shard)).get("Item")
        assert got is None or int(got.get("openRuns", {"N": "0"})["N"]) == 0


def test_the_default_open_runs_quota_spreads_its_counter_a_full_shard_spills_and_the_old_counter_still_counts(
    services, tenant
) -> None:
    # Given the default quota of 1,000 (8 shards of 125): the key counted before the split (shard 0) holding 125 open
    # runs, as a tenant upgraded with them would, and the other shards 873 more: 2 places left, wherever they are
    admin = signed_in(services)
    services.workflows.put_workflow(admin, "gate", WorkflowDefinition.model_validate({"nodes": [GATE], "edges": []}))
    services.tenants.put_settings(tenant, TenantSettings.model_validate({"limits": {"openRuns": 1000}}), "admin")
    assert counters_module.open_runs_shards(1000) == 8
    held = {0: 125, 1: 125, 2: 125, 3: 125, 4: 125, 5: 125, 6: 125, 7: 123}
    for shard, count in held.items():
        services.store.client.put_item(
            TableName=TABLE, Item={**counters_module.usage_key(tenant, shard), "openRuns": {"N": str(count)}}
        )
    assert services.limiter.counters.usage(tenant)["openRuns"] == 998

    # When three runs are created: the first two, whatever shard their ids hash to, claim the places on shard 7
    runs = [services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "gate"})).runId for _ in range(2)]
    assert {services.store.get_run(run)[0].usageShard for run in runs} == {7}
    assert services.limiter.counters.usage(tenant)["openRuns"] == 1000
    # Then the third is refused at the quota, the old counter's runs counted in it
    with pytest.raises(DomainError) as refused:
        services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "gate"}))
    assert refused.value.details == {"quota": "openRuns", "limit": 1000}
    # And a run that ends gives its place back where it claimed it
    services.lifecycle.cancel_run(admin, runs[0], CancelRunRequest())
    assert services.limiter.counters.usage_by_shard(tenant)[7]["openRuns"] == 124


def test_an_instances_first_request_of_a_tenant_reads_its_status_and_its_settings_in_one_call(
    services, tenant, other_tenant
) -> None:
    """ADR 0137: a new instance trusts neither a tenant's status nor its limits, so its first request reads both in
    one BatchGetItem (then the key's, the counter's and the route's own calls); what it read is what it applies."""
    from interlude.api import http
    from interlude.local import lambda_runtime
    from interlude.local.http_gateway import to_event
    from interlude.store.tenants import SUSPENDED, Stored, TenantRecords

    services.tenants.put_settings(tenant, TenantSettings.model_validate({"limits": {"requestsPerSecond": 7}}), "ops")
    TenantRecords(services.store).put(Stored(other_tenant, "active", 0, {}), SUSPENDED, {})
    keys = {t: new_api_key(services, tenant=t) for t in (tenant, other_tenant)}
    calls: list[tuple[str, dict[str, Any]]] = []

    def sent(model: Any, params: dict[str, Any], **_: Any) -> None:
        body = params["body"]
        calls.append((model.name, json.loads(body) if isinstance(body, bytes | str) else body))

    http.services().store.client.meta.events.register("before-call.dynamodb", sent)

    def first_request(of: str) -> dict[str, Any]:
        calls.clear()
        headers = {"authorization": f"Bearer {keys[of]}", "host": "127.0.0.1"}
        answer: dict[str, Any] = lambda_runtime.invoke("api", to_event("GET", "/runs", headers, b"", "127.0.0.1"))
        return answer

    assert first_request(tenant)["statusCode"] == 200
    tenant_reads = [(name, params) for name, params in calls if tenant in json.dumps(params) and name != "UpdateItem"]
    batch = [params for name, params in tenant_reads if name == "BatchGetItem"]
    assert len(batch) == 1, [name for name, _ in tenant_reads]
    asked = {(k["pk"]["S"], k["sk"]["S"]) for k in batch[0]["RequestItems"][TABLE]["Keys"]}
    assert asked == {("TENANTS", tenant), (f"T#{tenant}", "SETTINGS")}
    assert not [name for name, params in tenant_reads if name == "GetItem" and "SETTINGS" in json.dumps(params)]
    assert http.standing().knows(tenant)
    assert http.services().limiter.limits(tenant).requests_per_second == 7
    # A suspended tenant's first request is refused from the same one read.
    refused = first_request(other_tenant)
    assert refused["statusCode"] == 403, refused
    assert "interlude.tenant_suspended" in refused["body"]
    assert [name for name, params in calls if name == "BatchGetItem" and other_tenant in json.dumps(params)] == [
        "BatchGetItem"
    ]
