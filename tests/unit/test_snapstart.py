"""SnapStart (InterludeProps.api_snap_start): every api instance restored from the one snapshot gets randomness,
clients and caches of its own.

The api handler module is loaded as Lambda loads it; the hooks it registered with `snapshot_restore_py` (the AWS
library the managed runtime ships, here from PyPI) are then called as the runtime calls them after a restore.
"""

from __future__ import annotations

import importlib.util
import random
import sys
import time
from pathlib import Path

import pytest
import snapshot_restore_py

from interlude import composition, sdk_clients
from interlude.adapters import queues, secret_values
from interlude.api import app as api_app
from interlude.api import idempotency, tokens
from interlude.api.console import routes as console
from interlude.api.snapstart import after_restore, before_snapshot
from interlude.config import settings

API_HANDLER = Path(__file__).resolve().parents[2] / "functions" / "api" / "handler.py"


@pytest.fixture
def hooks(monkeypatch) -> tuple[list, list]:
    """The (before-snapshot, after-restore) hooks the api handler registers when it is imported (in its environment:
    its table)."""
    monkeypatch.setenv("TABLE_NAME", "snapshotted")
    monkeypatch.setenv("ENTRIES_TABLE_NAME", "snapshotted-entries")
    monkeypatch.setattr(snapshot_restore_py, "_before_snapshot_registry", [])
    monkeypatch.setattr(snapshot_restore_py, "_after_restore_registry", [])
    spec = importlib.util.spec_from_file_location("api_handler_under_test", API_HANDLER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return snapshot_restore_py._before_snapshot_registry, snapshot_restore_py._after_restore_registry


@pytest.fixture
def registered(hooks) -> list:
    return hooks[1]


@pytest.fixture
def initialized(monkeypatch):
    """What an api instance holds once initialized (the state a snapshot captures)."""
    monkeypatch.setenv("TABLE_NAME", "snapshotted")
    monkeypatch.setenv("ENTRIES_TABLE_NAME", "snapshotted-entries")
    settings.cache_clear()
    held = {
        "service": composition.services(),
        "surface": tokens.surface(),
        "records": idempotency.records(),
        "sqs": queues._sqs(),
        "session": sdk_clients.session(),
        "secrets": secret_values._client(),
    }
    secret_values._kept().keep("a-ring", "the snapshotted instance's ring", float("inf"))
    console._last_ring_refetch[0] = time.monotonic()
    yield held
    for factory in (composition.services, tokens.surface, idempotency.records, settings):
        factory.cache_clear()


def restore(hooks: list) -> None:
    for function, args, kwargs in hooks:
        function(*args, **kwargs)


def test_the_api_handler_registers_its_priming_and_restore_hooks(hooks):
    before, after = hooks
    assert [function for function, _, _ in before] == [before_snapshot]
    assert [function for function, _, _ in after] == [after_restore]


def test_priming_builds_before_the_snapshot_what_a_first_request_would(monkeypatch):
    monkeypatch.setenv("TABLE_NAME", "snapshotted")
    monkeypatch.setenv("ENTRIES_TABLE_NAME", "snapshotted-entries")
    settings.cache_clear()
    composition.services.cache_clear()
    try:
        before_snapshot()
        # Every route module is registered on the resolver, so a restored instance's first request imports none
        assert set(api_app.ROUTE_MODULES) <= api_app._loaded
        assert all(f"interlude.api.{module}" in sys.modules for module in api_app.ROUTE_MODULES)
        # The services are made, their DynamoDB client with them, over the function's table
        assert composition.services.cache_info().currsize == 1
        assert composition.services().store.table == "snapshotted"
        assert "jsonschema" in sys.modules
    finally:
        composition.services.cache_clear()
        settings.cache_clear()


def test_a_restored_instance_makes_its_clients_from_the_models_parsed_before_the_snapshot(registered, initialized):
    loader = initialized["session"].get_component("data_loader")
    credentials = initialized["session"]._credentials
    restore(registered)
    session = sdk_clients.session()
    assert session is not initialized["session"]
    # The parsed service models are shared (read-only data); credentials are resolved again by the new session
    assert session.get_component("data_loader") is loader
    assert session._credentials is None or session._credentials is not credentials


def test_two_instances_restored_from_one_snapshot_draw_different_random_numbers(registered):
    snapshot = random.getstate()
    draws = []
    for _ in range(2):
        random.setstate(snapshot)
        restore(registered)
        draws.append([random.random() for _ in range(4)])
    assert draws[0] != draws[1]
    # Without the hook, both would have drawn the snapshot's sequence
    random.setstate(snapshot)
    replayed = [random.random() for _ in range(4)]
    random.setstate(snapshot)
    assert [random.random() for _ in range(4)] == replayed


def test_a_restore_drops_the_clients_and_caches_the_snapshot_holds(registered, initialized):
    restore(registered)
    # The SDK session (the snapshotted instance's credentials) and every client made from it
    assert sdk_clients.held() is not initialized["session"]
    assert queues._sqs() is not initialized["sqs"]
    assert composition.services() is not initialized["service"]
    assert composition.services().store.client is not initialized["service"].store.client
    # The token surface (its key ring) and the idempotency records are made again over the new service
    assert tokens.surface() is not initialized["surface"]
    assert idempotency.records() is not initialized["records"]
    # The secrets read (adapters/secret_values.py), and their client
    assert list(secret_values._kept()) == []
    assert secret_values._client() is not initialized["secrets"]
    # The console's ring re-read lease, taken on the snapshotted instance's monotonic clock
    assert console._last_ring_refetch[0] == float("-inf")
