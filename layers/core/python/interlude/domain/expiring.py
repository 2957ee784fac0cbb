"""What a warm instance keeps of what it read, each value trusted for a period of its own, the least recently used
dropped past the cache's size: the API keys (app/keys.py), the tenants' limits and settings (app/limits.py) and their
statuses (store/tenant_standing.py), the secrets (adapters/secret_values.py) and the webhook signing secrets
(adapters/delivery). A caller naming made-up keys or tenants costs one read each and never grows an instance."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class ExpiringCache(Generic[K, V]):
    def __init__(self, size: int, monotonic: Callable[[], float]) -> None:
        """`monotonic`: the clock a period is read on, asked at each use (a wall clock set back would keep a value
        too long)."""
        self.size = size
        self._monotonic = monotonic
        self._kept: OrderedDict[K, tuple[float, V]] = OrderedDict()
        # dispatch's and the delivery workers' threads share one instance's caches.
        self._lock = threading.Lock()

    def fresh(self, key: K) -> tuple[V] | None:
        """The value kept for `key` while its period lasts, in a 1-tuple (a kept value may itself be None: a key
        or a secret that is not there); None once its period is over or when nothing is kept."""
        now = self._monotonic()
        with self._lock:
            kept = self._kept.get(key)
            if kept is None or kept[0] <= now:
                return None
            self._kept.move_to_end(key)
        return (kept[1],)

    def fresh_or_read(self, key: K, read: Callable[[], V], seconds: float) -> V:
        """The value kept for `key` while its period lasts, else `read()`'s, kept for `seconds`."""
        hit = self.fresh(key)
        return hit[0] if hit is not None else self.keep(key, read(), seconds)

    def keep(self, key: K, value: V, seconds: float) -> V:
        until = self._monotonic() + seconds
        with self._lock:
            self._kept[key] = (until, value)
            self._kept.move_to_end(key)
            if len(self._kept) > self.size:
                self._kept.popitem(last=False)
        return value

    def forget(self, key: K) -> None:
        with self._lock:
            self._kept.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()

    def __len__(self) -> int:
        return len(self._kept)

    def __iter__(self) -> Iterator[K]:
        """The keys kept, least recently used first."""
        with self._lock:
            return iter(list(self._kept))
