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
    assert counters.open_runs_shard("t1/AAAA", 1000) == (0, 1000)
    shard, part = counters.open_runs_shard("t1/AAAA", 5000)
    assert 0 <= shard < 5
    assert part == 1000
    assert counters.usage_key("t1", 0) == counters.usage_key("t1")  # shard 0 is the key counted before
