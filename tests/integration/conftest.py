from __future__ import annotations

from collections.abc import Iterable

import pytest

from interlude import wiring
from interlude.app.service import Service
from interlude.domain.models.requests import CreateKeyRequest
from interlude.local.lambda_runtime import fresh_instances
from interlude.rules.auth import Principal


@pytest.fixture(autouse=True)
def _fresh_lambda_instances():
    # Each test is its own moto world: handlers must not carry caches from the previous one.
    fresh_instances()
    yield
    fresh_instances()


def new_api_key(
    service: Service, subject: str = "admin", tenant: str = "t1", scopes: Iterable[str] = wiring.ALL_SCOPES, **extra
) -> str:
    """Issue an API key for `subject` in `tenant` (every scope unless told); returns the bearer secret."""
    return service.issue_key(tenant, CreateKeyRequest(subjectId=subject, scopes=list(scopes), **extra))["apiKey"]


def signed_in(
    service: Service, subject: str = "admin", tenant: str = "t1", scopes: Iterable[str] = wiring.ALL_SCOPES, **extra
) -> Principal:
    """The principal a request bearing a freshly issued key for `subject` authenticates as."""
    return service.authenticate(f"Bearer {new_api_key(service, subject, tenant, scopes, **extra)}")


def state_of(service: Service, run_id: str):
    """The run's current state (it must exist)."""
    got = service.store.get_run(run_id)
    assert got is not None
    return got[0]
