"""Per-tenant counters split over items once a limit is high enough to make one item hot (docs/scale.md)."""

from __future__ import annotations

import pytest

from interlude.store import limits as counters


@pytest.mark.parametrize("limit", [1, 3, 25, 500, 999, 1000, 5_001, 100_000])
def test_the_shards_parts_add_up_to_the_limit_exactly(limit):
    shards = counters.rate_shards(limit)
    assert sum(counters.share(limit, shards, s) for s in range(shards)) == limit
    runs = max(1, min(counters.MAX_SHARDS, limit // counters.OPEN_RUNS_PER_SHARD))
    assert sum(counters.share(limit, runs, s) for s in range(runs)) == limit


def test_default_limits_keep_one_exact_counter_and_high_ones_spread():
    assert counters.rate_shards(25) == counters.rate_shards(500) == 1
    assert counters.rate_shards(501) == 2
    assert counters.rate_shards(20_000) == 32  # 5,000 lifecycles/s of four requests each
    # A small open-runs quota keeps one exact item; the default 1,000 spreads over 8 (2,000 lifecycles/s a tenant at
    # 250 a shard), so no one item is in every create and end
    assert counters.open_runs_shard("t1/AAAA", 249) == (0, 249)
    assert counters.open_runs_shards(1000) == 8
    shard, part = counters.open_runs_shard("t1/AAAA", 1000)
    assert 0 <= shard < 8
    assert part == 125
    assert counters.open_runs_shards(1_000_000) == counters.MAX_SHARDS
    assert counters.usage_key("t1", 0) == counters.usage_key("t1")  # shard 0 is the key counted before


def test_a_full_shard_sends_a_claim_to_the_roomiest_and_a_full_quota_refuses():
    # 1,000 over 8 shards of 125: shard 0 full (the key counted before the split), shard 5 has the most room
    counts = {0: 125, 1: 120, 5: 3}
    assert counters.roomiest_shard(counts, 1000) == (2, 125)  # an empty shard has the most room
    assert counters.roomiest_shard(dict.fromkeys(range(8), 124) | {3: 100}, 1000) == (3, 125)
    # the shards hold the whole quota (or more, from before the split): refused
    assert counters.roomiest_shard({0: 1000}, 1000) is None
    assert counters.roomiest_shard(dict.fromkeys(range(8), 125), 1000) is None
