"""The one bounded, expiring cache every warm instance keeps its reads in (domain/expiring.py)."""

from __future__ import annotations

from interlude.domain.expiring import ExpiringCache


def test_a_value_is_trusted_for_its_own_period_and_a_kept_absence_is_a_value() -> None:
    now = [100.0]
    cache: ExpiringCache[str, str | None] = ExpiringCache(10, lambda: now[0])
    cache.keep("key", "record", 5)
    cache.keep("refused", None, 30)
    assert cache.fresh("key") == ("record",)
    assert cache.fresh("refused") == (None,)
    assert cache.fresh("never") is None
    now[0] = 105.0
    assert cache.fresh("key") is None
    assert cache.fresh("refused") == (None,)
    cache.forget("refused")
    assert cache.fresh("refused") is None


def test_past_its_size_the_least_recently_used_is_dropped() -> None:
    cache: ExpiringCache[str, int] = ExpiringCache(2, lambda: 0.0)
    cache.keep("a", 1, 60)
    cache.keep("b", 2, 60)
    assert cache.fresh("a") == (1,)  # a used after b was kept
    cache.keep("c", 3, 60)
    assert list(cache) == ["a", "c"]
    assert len(cache) == 2
    cache.clear()
    assert list(cache) == []


def test_a_value_read_through_the_cache_is_read_once_a_period() -> None:
    now = [0.0]
    reads: list[str] = []
    cache: ExpiringCache[str, str | None] = ExpiringCache(10, lambda: now[0])

    def read() -> str | None:
        reads.append("secret")
        return None  # a secret not there is kept as well

    assert cache.fresh_or_read("secret", read, 60) is None
    assert cache.fresh_or_read("secret", read, 60) is None
    now[0] = 60.0
    assert cache.fresh_or_read("secret", read, 60) is None
    assert reads == ["secret", "secret"]
