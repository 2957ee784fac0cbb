from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from interlude import config, wiring
from interlude.composition import Services
from interlude.domain import clock
from interlude.domain.models.requests import CreateKeyRequest
from interlude.local import lambda_runtime
from interlude.local.http_gateway import Gateway
from interlude.local.lambda_runtime import fresh_instances
from interlude.rules.auth import Principal
from interlude.store.facade import Store
from tests.support.local_stack import wire
from tests.support.moto_world import World, check_left_intact, create_world, private_account, shared_world

# Longer than any test that bills usage to this month and reads it back takes on a loaded machine.
MONTH_END_MARGIN_S = 3600.0
# The tenant of the running test's world: the one keys are issued in unless a test names another.
_tenant_of_test: str | None = None


@pytest.fixture(autouse=True)
def _fresh_lambda_instances():
    # Handlers must not carry caches (settings, services, key rings) from the previous test into this one.
    fresh_instances()
    yield
    fresh_instances()


def _entered(world: World, monkeypatch: pytest.MonkeyPatch) -> World:
    global _tenant_of_test
    for name, value in world.env.items():
        monkeypatch.setenv(name, value)
    _tenant_of_test = world.tenant
    return world


@pytest.fixture
def world(request, monkeypatch) -> Iterator[World]:
    """The process's shared moto world (tests/support/moto_world.py), as a tenant no other test uses; for a test
    marked `private_world` (the table itself under test: every item, every stream record, a sweep across all
    tenants), a world of its own, made the same way in an AWS account no other test sees."""
    global _tenant_of_test
    if request.node.get_closest_marker("private_world"):
        with private_account():
            yield _entered(create_world(), monkeypatch)
    else:
        shared = _entered(shared_world(), monkeypatch)
        yield shared
        check_left_intact(shared)
    _tenant_of_test = None


def clear_of_a_month_end(clock_file: Path) -> None:
    """Move the process clock (forward only) into the next month when this one ends within MONTH_END_MARGIN_S: a test
    that bills usage to the clock's month and reads it back by the clock's month then reads one month, whatever the
    hour it runs (a run started at 23:59:59 on the 31st is billed to a month the listing a moment later no longer
    shows)."""
    now = clock.now()
    next_month = (now.replace(day=1, hour=0, minute=0, second=0, microsecond=0) + timedelta(days=32)).replace(day=1)
    left = (next_month - now).total_seconds()
    if left < MONTH_END_MARGIN_S:
        clock.advance(clock_file, left + 1)


@pytest.fixture
def clock_file(tmp_path, monkeypatch):
    """This process's clock (and its handlers') at the real time, moved by `clock.advance(clock_file, s)`."""
    path = tmp_path / "clock"
    clock.reset(path)
    monkeypatch.setenv(clock.CLOCK_FILE_ENV, str(path))
    # Fixtures made before this one (the moto world) may already have read the settings without the offset file.
    config.forget()
    return path


@pytest.fixture
def tenant(world) -> str:
    """The test's own tenant."""
    return world.tenant


@pytest.fixture
def other_tenant(world) -> str:
    """Another tenant, as fresh as the test's own."""
    return world.other_tenant


def tenant_of_test() -> str:
    """The running test's tenant, for helpers that are not fixtures (keys are issued in it unless told)."""
    assert _tenant_of_test is not None, "the test uses no world fixture"
    return _tenant_of_test


@pytest.fixture
def services(world) -> Services:
    return Services(Store(world.table, world.entries_table))


@pytest.fixture
def admin(services) -> Principal:
    return signed_in(services, "admin")


def _tenant(tenant: str | None) -> str:
    return tenant or _tenant_of_test or "t1"


def new_api_key(
    services: Services,
    subject: str = "admin",
    tenant: str | None = None,
    scopes: Iterable[str] = wiring.ALL_SCOPES,
    **extra,
) -> str:
    """Issue an API key for `subject` in `tenant` (the test world's, unless told; every scope unless told); returns
    the bearer secret."""
    request = CreateKeyRequest(subjectId=subject, scopes=list(scopes), **extra)
    return services.keys.issue_key(_tenant(tenant), request)["apiKey"]


def signed_in(
    services: Services,
    subject: str = "admin",
    tenant: str | None = None,
    scopes: Iterable[str] = wiring.ALL_SCOPES,
    **extra,
) -> Principal:
    """The principal a request bearing a freshly issued key for `subject` authenticates as."""
    return services.keys.authenticate(f"Bearer {new_api_key(services, subject, tenant, scopes, **extra)}")


def decision_token(gateway: str, run_id: str, key: str, node: str = "gate") -> str:
    """A decision link's token for the run's gate, minted over HTTP with `key` as a tenant's client mints one."""
    minted = requests.post(
        f"{gateway}/runs/{wire(run_id)}/interrupts/{node}/tokens",
        json={"intent": "resolve"},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert minted.status_code == 201, minted.text
    token: str = minted.json()["token"]
    return token


def state_of(services: Services, run_id: str):
    """The run's current state (it must exist)."""
    got = services.store.get_run(run_id)
    assert got is not None
    return got[0]


class InProcessApi:
    """The gateway's `api` instances as the real handler in this process (moto's mocks are this process's), one
    request at a time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def invoke(self, event: dict[str, Any]) -> Any:
        with self.lock:
            return lambda_runtime.invoke(wiring.ROUTES_FUNCTION, event)

    def stop(self) -> None:
        pass


@pytest.fixture
def gateway(services) -> Iterator[str]:
    """The real api handler behind an HTTP server on loopback: its base URL (for real clients: openwop-client)."""
    started = Gateway().start(InProcessApi())
    yield started.base_url
    started.stop()
