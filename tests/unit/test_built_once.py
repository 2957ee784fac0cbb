"""A process's services are built once, however many threads ask for one first (interlude/domain/built_once.py):
dispatch handles a batch's runs side by side, and on the functions' Python (3.12 on) `functools.cached_property`
no longer holds a lock, so each thread built and kept its own service."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from interlude.composition import Services
from interlude.domain.built_once import built_once
from interlude.store import inbox


def test_two_threads_asking_for_a_service_first_get_the_one_built(monkeypatch: Any) -> None:
    built: list[object] = []
    second_asked = threading.Event()

    class SlowInboxIndex(inbox.InboxIndex):
        def __init__(self, *args: Any) -> None:
            built.append(self)
            if len(built) == 1:
                # Hold the first build until another thread builds too, or long enough for it to have asked.
                second_asked.wait(timeout=0.5)
            else:
                second_asked.set()
            super().__init__(*args)

    monkeypatch.setattr(inbox, "InboxIndex", SlowInboxIndex)
    services = Services(_StoreStandIn())
    with ThreadPoolExecutor(max_workers=2) as pool:
        got = list(pool.map(lambda _: services.inbox_index, range(2)))

    assert len(built) == 1
    assert got[0] is got[1] is built[0]
    assert services.inbox_index is built[0]


def test_a_service_built_from_others_builds_them_under_the_same_lock() -> None:
    class Built:
        @built_once
        def first(self) -> list[str]:
            return ["first"]

        @built_once
        def second(self) -> list[str]:
            return [*self.first, "second"]

    built = Built()
    assert built.second == ["first", "second"]
    assert built.first is built.first
    assert vars(built) == {"first": ["first"], "second": ["first", "second"]}


def test_every_service_of_the_composition_is_built_once() -> None:
    lazy = {name for name, value in vars(Services).items() if isinstance(value, built_once)}
    assert {"inbox_index", "keys", "limiter", "deliveries", "audit"} <= lazy
    assert not [name for name, value in vars(Services).items() if type(value).__name__ == "cached_property"]


class _StoreStandIn:
    table = "runs"
    entries_table = "entries"
    client = object()
    after_audit = None
