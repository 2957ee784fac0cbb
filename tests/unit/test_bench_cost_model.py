"""bench/cost_per_million.py's model of what a lifecycle is billed at a pace: what a batch holds (the stream's, each
queue's, a bucket schedule's), each invocation's share of its batch, and storage from each item's own expiry. `make
bench` prints the figures; these check the model on invocations made up here, so a rework cannot quietly price a busy
pace one message per invocation again, or every item for the default retention."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import cost_per_million as cost  # noqa: E402
from _prices import CALL_MS, INVOKE_OVERHEAD_MS, OUTBOUND_HTTP_MS, TTL_DELETION_LAG_DAYS  # noqa: E402

from interlude import wiring  # noqa: E402

PACES = {"busy": 25.0, "quiet": 0.2}
DISPATCH = next(spec.name for spec in wiring.FUNCTIONS if spec.consumes == wiring.OUTBOX_QUEUE)


def invocation(function: str, trigger: str, **overrides: Any) -> dict[str, Any]:
    return {
        "function": function,
        "trigger": trigger,
        "route": "",
        "cpu_ms": 5.0,
        "calls": {},
        "billed": {},
        "wru": 0.0,
        "rru": 0.0,
        "wru_by_kind": {},
        "wru_by_partition": {},
        "records": 1,
        "outbound_http": 0,
        "bucket": False,
        "log_bytes": 0,
        "log_events": 0,
        **overrides,
    }


def streamed_to(function: str, queue: str, **consumer: Any) -> list[dict[str, Any]]:
    """One event record: the stream's forward, the mapping's receive and delete, the consumer's invocation."""
    return [
        invocation(cost.STREAM_READER, "stream", calls={"sqs:SendMessageBatch": 1}, billed={"sqs:SendMessageBatch": 1}),
        invocation(f"poller:{queue}", "poller", cpu_ms=0.0, billed={"sqs:ReceiveMessage": 1, "sqs:DeleteMessageBatch": 1}),
        invocation(function, "sqs", **consumer),
    ]


def measured(invocations: list[dict[str, Any]], stored: dict[str, Any] | None = None) -> dict[str, Any]:
    lifecycle = {"title": "made up", "busy": invocations, "quiet": invocations, "stored": stored or {}}
    return {"paces": PACES, "lifecycles": {"x": lifecycle}}


# A dispatch record that waits on its calls far longer than it computes (as dispatch does: reads, writes, a send).
SLOW_DISPATCH = {"calls": {"dynamodb:GetItem": 10, "dynamodb:TransactWriteItems": 4, "sqs:SendMessageBatch": 1}}


def test_a_quiet_pace_leaves_every_record_alone_in_its_batch() -> None:
    found = measured(streamed_to(DISPATCH, wiring.OUTBOX_QUEUE, **SLOW_DISPATCH) * 2)
    sizes = cost.batch_sizes(found, "x", "quiet")
    assert sizes[DISPATCH] == 1.0
    assert sizes[cost.STREAM_READER] == pytest.approx(1.0, abs=0.01)
    shared = cost.batched(found, "x", "quiet")
    assert sum(i.get("invocations", 1.0) for i in shared if i["trigger"] != "poller") == pytest.approx(4, abs=0.02)
    assert sum(sum(i["billed"].values()) for i in shared if i["trigger"] == "poller") == pytest.approx(4, abs=0.02)


def test_a_busy_queue_shares_its_receive_delete_and_invocation_over_what_a_batch_holds() -> None:
    found = measured(streamed_to(DISPATCH, wiring.OUTBOX_QUEUE, **SLOW_DISPATCH) * 2)
    held = cost.batch_sizes(found, "x", "busy")[DISPATCH]
    assert 1.0 < held <= wiring.OUTBOX_BATCH_SIZE
    assert cost.batch_sizes(found, "x", "busy", queues_alone=True)[DISPATCH] == 1.0  # the bound printed beside it
    shared = cost.batched(found, "x", "busy")
    consumers = [i for i in shared if i["function"] == DISPATCH]
    pollers = [i for i in shared if i["trigger"] == "poller"]
    assert [i["invocations"] for i in consumers] == pytest.approx([1 / held, 1 / held])
    assert [sum(i["billed"].values()) for i in pollers] == pytest.approx([2 / held, 2 / held])
    # Their own work is not shared: each record's calls and CPU stay whole.
    assert [i["calls"] for i in consumers] == [SLOW_DISPATCH["calls"]] * 2


def test_a_batch_is_as_large_as_what_arrives_while_every_poller_is_busy() -> None:
    spec = wiring.function(DISPATCH)
    invs = [invocation(DISPATCH, "sqs", **SLOW_DISPATCH)]
    slow = cost.sqs_batch(spec, invs, 25.0)
    assert cost.sqs_batch(spec, invs, 50.0) > slow  # twice the messages, as many pollers
    assert cost.sqs_batch(spec, invs, 1e6) == wiring.OUTBOX_BATCH_SIZE
    assert cost.sqs_batch(spec, [invocation(DISPATCH, "sqs")], 25.0) == 1.0  # no round trips: a poller always waits


def test_what_a_batch_holds_does_not_move_with_the_machines_load() -> None:
    """The requests it divides are counted (load-independent): the CPU measured under load does not move them."""
    spec = wiring.function(DISPATCH)
    light = cost.sqs_batch(spec, [invocation(DISPATCH, "sqs", cpu_ms=5.0, **SLOW_DISPATCH)], 25.0)
    assert cost.sqs_batch(spec, [invocation(DISPATCH, "sqs", cpu_ms=50.0, **SLOW_DISPATCH)], 25.0) == light


def test_a_batch_is_billed_once_its_records_side_by_side_share_their_waits() -> None:
    inv = invocation(DISPATCH, "sqs", **SLOW_DISPATCH)
    cpu, waits = cost.cpu_and_waits(inv)
    assert cost.duration_ms(inv) == math.ceil(cpu + waits + INVOKE_OVERHEAD_MS)
    three = cost.share_ms(inv, 3, wiring.OUTBOX_BATCH_SIZE)
    assert three == math.ceil(max(3 * cpu, cpu + waits) + INVOKE_OVERHEAD_MS) / 3
    # One after another (a consumer that does not take runs side by side), nothing overlaps.
    assert cost.share_ms(inv, 3, 1) == math.ceil(3 * (cpu + waits) + INVOKE_OVERHEAD_MS) / 3


def test_the_streams_forward_is_one_send_per_batch_of_ten() -> None:
    inv = invocation(cost.STREAM_READER, "stream", calls={"sqs:SendMessageBatch": 1})
    cpu, waits = cost.cpu_and_waits(inv)
    assert cost.stream_share_ms(inv, 2.0) == math.ceil(2 * cpu + waits + INVOKE_OVERHEAD_MS) / 2
    found = measured(streamed_to(DISPATCH, wiring.OUTBOX_QUEUE) * 40)  # 80 records a lifecycle: many a poll
    held = cost.batch_sizes(found, "x", "busy")[cost.STREAM_READER]
    assert held > 1
    forward = next(i for i in cost.batched(found, "x", "busy") if i["trigger"] == "stream")
    assert forward["billed"]["sqs:SendMessageBatch"] == pytest.approx(math.ceil(held / 10) / held)


def test_deadlines_due_in_one_second_share_their_buckets_firing() -> None:
    firing = invocation("scheduler", "schedule", cpu_ms=0.0, bucket=True, billed={"scheduler:invocation": 1})
    target = invocation(wiring.SCHEDULES.target, "schedule", bucket=True, calls={"dynamodb:TransactWriteItems": 1})
    found = measured([firing, target])
    due = PACES["busy"] / wiring.DUE_INDEX_SHARDS
    deadlines = cost.batch_sizes(found, "x", "busy")[wiring.SCHEDULES.target]
    assert deadlines == pytest.approx(due / (1 - math.exp(-due)))
    assert cost.batch_sizes(found, "x", "quiet")[wiring.SCHEDULES.target] == pytest.approx(1.0, abs=0.02)
    fired, invoked = cost.batched(found, "x", "busy")
    assert fired["billed"]["scheduler:invocation"] == pytest.approx(1 / deadlines)
    assert invoked["invocations"] == pytest.approx(1 / deadlines)


def test_a_callbacks_post_is_billed_its_round_trips_and_the_tls_context_and_handshake_it_makes() -> None:
    notice = invocation("callbacks", "sqs", outbound_http=2)
    tls = {"tls_context_cpu_ms": 20.0, "tls_handshake_cpu_ms": 3.0}
    found = cost.with_tls({"paces": PACES, **tls, "lifecycles": {"x": {"busy": [notice], "quiet": [notice]}}})
    assert notice["tls_cpu_ms"] == 46.0
    cpu, waits = cost.cpu_and_waits(found["lifecycles"]["x"]["busy"][0])
    share = min(1.0, wiring.function("callbacks").memory_mb / cost.VCPU_MB)
    assert cpu == pytest.approx((5.0 + 46.0) / share)
    assert waits == 2 * OUTBOUND_HTTP_MS


def peers_measured() -> dict[str, Any]:
    """Lifecycles (a) to (d) as far as the peers read them: (a)'s notices, (b)'s reads of a run."""
    notices = [invocation("callbacks", "sqs", cpu_ms=6.0, outbound_http=1, calls={"dynamodb:GetItem": 3})] * 2
    read = invocation("api", "http", route="GET /runs/{runId}", calls={"dynamodb:GetItem": 1})
    lifecycle = {"title": "made up", "stored": {"bytes": 4000}}
    found = {name: {**lifecycle, "busy": notices + [read]} for name in ("a", "b", "c", "c+notices", "d")}
    logs = {"platform_bytes_per_invocation": 300, "access_log_bytes": {"GET /runs/{runId}": 400}}
    return {"paces": PACES, "lifecycles": found, "logs": logs}


def test_a_peers_lambda_work_is_priced_at_its_own_memory_whatever_interludes_functions_are_given(monkeypatch) -> None:
    """Interlude's notice work (CPU, round trips) stands for a peer's Lambda task; the peer's memory is its own, so
    sizing Interlude's callbacks function (docs/adr/0171) moves Interlude's bill, never the peer's."""
    measured = peers_measured()
    notice = measured["lifecycles"]["a"]["busy"][0]
    priced_at = {}
    for callbacks_mb in (128, 256, 512, 1024):
        monkeypatch.setattr(cost, "memory_mb", lambda function, mb=callbacks_mb: mb if function == "callbacks" else 512)
        priced_at[callbacks_mb] = (
            cost.lambda_figures(measured),
            {peer: cost.peer_total(measured, peer, lines) for peer, lines in cost.peers(measured, "a").items()},
            cost.duration_ms(notice),
        )
    figures, totals, _ = priced_at[512]
    assert all(at[:2] == (figures, totals) for at in priced_at.values())
    cpu, waits = 6.0 / (cost.PEER_MEMORY_MB / cost.VCPU_MB), 3 * CALL_MS["dynamodb:GetItem"] + OUTBOUND_HTTP_MS
    assert figures["notice_ms"] == math.ceil(cpu + waits + INVOKE_OVERHEAD_MS)
    # Interlude's own notice is billed at the size it is given.
    assert priced_at[128][2] > priced_at[512][2] > priced_at[1024][2]


def test_storage_is_priced_from_each_items_own_expiry_and_an_item_without_one_is_kept_for_ever() -> None:
    day = 86400.0
    stored = {
        "kept": [
            {"kind": "run head", "new": True, "bytes": 1000, "indexed_bytes": 0, "kept_s": 90 * day},
            {"kind": "RUNS", "new": True, "bytes": 300, "indexed_bytes": 300, "kept_s": 180 * day},
            {"kind": "RATE", "new": True, "bytes": 140, "indexed_bytes": 0, "kept_s": -5.0},  # expired before the end
            {"kind": "AUDIT", "new": True, "bytes": 600, "indexed_bytes": 0, "kept_s": None},
        ]
    }
    gb_months, how = cost.retained(stored)
    lag = TTL_DELETION_LAG_DAYS * day
    expected = (
        1000 * (90 * day + lag) + 600 * (180 * day + lag) + 140 * lag
    ) / cost.MONTH_S + 600 * cost.RETAINED_MONTHS
    assert gb_months == pytest.approx(expected / 1e9)
    assert "600 B with no ttl, kept for ever" in how
    assert "1000 B 90 days" in how
    assert "600 B 180 days" in how


def test_a_measurement_without_items_expiries_keeps_every_item_the_default_retention() -> None:
    gb_months, _ = cost.retained({"bytes": 3000, "indexed_bytes": 0})
    assert gb_months == pytest.approx(3000 / 1e9 * (90 + TTL_DELETION_LAG_DAYS) * 86400 / cost.MONTH_S)


def test_a_decision_whose_chain_is_still_marked_moves_its_head_by_a_plain_update_and_writes_no_marker() -> None:
    # Measured starting its chain's wait: the head moved in the marker's transaction (2 units), the marker (2 + 1 GSI).
    kinds = {"audit entry": 1.0, "audit chain head": 2.0, "audit pending marker": 2.0, "audit pending marker: GSI": 1.0}
    append = invocation(DISPATCH, "sqs", wru=sum(kinds.values()), wru_by_kind=kinds)
    assert cost.unmarked(append, 0.0) == append
    still = cost.unmarked(append, 1.0)
    assert still["wru_by_kind"] == {**kinds, "audit chain head": 1.0, "audit pending marker": 0.0, "audit pending marker: GSI": 0.0}
    assert still["wru"] == 2.0  # the entry's put and the head's UpdateItem (store/audit.py _append_plain)
    assert cost.unmarked(append, 0.75)["wru"] == pytest.approx(0.25 * 6.0 + 0.75 * 2.0)


AUDIT = {"chains": 128, "interval_s": 300, "interval_entries": 1000, "marker_keep_s": 1800, "sweep_every_s": 60}


def test_a_checkpoint_anchors_every_decision_its_chain_gets_while_the_first_one_waits() -> None:
    # The first entry waits 240-300 s (the first sweep past the interval less a sweep): 270 on average.
    assert cost.checkpoint_wait_s(AUDIT) == 270
    # Quiet: the decision that starts the wait and the 0.2/128 a second that reach its chain meanwhile.
    assert cost.decisions_per_checkpoint(AUDIT, 0.2) == pytest.approx(1 + 0.2 / 128 * 270)
    assert cost.decisions_per_checkpoint(AUDIT, 1e-9) == pytest.approx(1.0)
    assert cost.decisions_per_checkpoint({**AUDIT, "chains": 1}, 25.0) == 1000  # at most CHECKPOINT_INTERVAL_ENTRIES
    # A decision finds its chain marked when another reached it within the wait and the keep after it.
    assert cost.marker_kept(AUDIT, 0.2) == pytest.approx(1 - math.exp(-0.2 / 128 * (270 + 1800)))


def test_a_secret_read_through_an_instances_cache_is_fetched_once_per_its_cache_period_at_the_pace() -> None:
    api = invocation("api", "http", secrets={"interlude/key-ring@60": 1})
    found = {**measured([api]), "busy_requests_per_s": 25, "audit": AUDIT}
    busy, quiet = (cost.shares(found, "x", pace) for pace in ("busy", "quiet"))
    assert cost.secret_fetches(found, busy, "busy") == pytest.approx(1 / (25 * 60))
    # Quiet: one instance reads it at 0.2 a second, and fetches it again once a minute: one lifecycle in 12.
    assert cost.secret_fetches(found, quiet, "quiet") == pytest.approx(1 / 12)
    # Read once a minute or less, every read is a fetch.
    assert cost.secret_fetches({**found, "paces": {**PACES, "quiet": 0.001}}, quiet, "quiet") == 1.0
    assert "api one cached 60 s" in cost.secrets_read(quiet)


def test_a_provisioned_unit_used_every_second_costs_29_percent_of_the_same_unit_on_demand() -> None:
    # ADR 0168's break-even: below about 29 % of what it holds, a provisioned table costs more than on demand.
    bill = cost.Bill("a", "busy")
    bill.infra = [
        cost.Line("DynamoDB writes", 20.0, "WRU", 20.0 * cost.price("dynamodb_wru")),
        cost.Line("DynamoDB reads", 10.0, "RRU", 10.0 * cost.price("dynamodb_rru")),
        cost.Line("HTTP API requests", 2.0, "requests", 2.0 * cost.price("http_api_request")),
    ]
    used_every_second = cost.provisioned_usd(bill, 1.0) / cost.on_demand_usd(bill)
    assert used_every_second == pytest.approx(0.289, abs=0.001)
    # What is held and not used is paid for: at 70 % of it, each unit costs 1 / 0.7 of what it does used whole.
    assert cost.provisioned_usd(bill, 0.7) == pytest.approx(cost.provisioned_usd(bill, 1.0) / 0.7)
    # The lines that are not DynamoDB's are priced as they were.
    requests = bill.infra[2].usd * cost.MILLION
    assert cost.with_provisioned_tables(bill, 1.0) == pytest.approx(requests + cost.provisioned_usd(bill, 1.0))


def test_the_request_counter_is_priced_at_the_lifecycles_own_request_rate_at_the_highest_rate_measured_under_it() -> None:
    found = {
        "paces": PACES,
        "counter_writes_per_request": {"busy": {"25": 0.2}, "quiet": {"0.2": 0.33, "0.4": 0.17, "0.8": 0.08}},
    }
    # Quiet (0.2 lifecycles/s): one request a lifecycle is 0.2/s, four 0.8/s, three 0.6/s (the 0.4/s figure: more
    # writes a request than 0.6/s would make, never fewer)
    assert [cost.counter_writes(found, "quiet", n) for n in (1, 4, 3)] == [0.33, 0.08, 0.17]
    # Busy: an instance at 25 requests/s, whatever a lifecycle makes
    assert [cost.counter_writes(found, "busy", n) for n in (1, 4)] == [0.2, 0.2]


def test_a_key_or_a_tenants_limits_read_through_a_cache_are_read_again_once_per_cache_period_by_each_function() -> None:
    api = invocation("api", "http", cached={"key": 1, "limits": 2})
    dispatch = invocation("dispatch", "sqs", cached={"key": 1, "limits": 2})
    found = {**measured([api, dispatch]), "busy_requests_per_s": 25, "audit": AUDIT, "caches_s": {"key": 5, "limits": 10}}
    busy, quiet = (cost.shares(found, "x", pace) for pace in ("busy", "quiet"))
    # Busy: an instance of each function at 25 uses a second reads each again once per its period.
    per_function = 1 * 1 / (25 * 5) + 2 * 1 / (25 * 10)
    assert cost.cache_rereads(found, busy, "busy") == pytest.approx(2 * per_function)
    # Quiet: at 0.2 lifecycles a second a function's 2 limits uses a lifecycle are 0.4 a second, read again once per 10 s
    # (every fourth use), its key's once a lifecycle, every 5 s: each use a read.
    assert cost.cache_rereads(found, quiet, "quiet") == pytest.approx(2 * (1 + 2 * 1 / (0.4 * 10)))
