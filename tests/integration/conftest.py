from __future__ import annotations

import pytest

from interlude.local.lambda_runtime import fresh_instances


@pytest.fixture(autouse=True)
def _fresh_lambda_instances():
    # Each test is its own moto world: handlers must not carry caches from the previous one.
    fresh_instances()
    yield
    fresh_instances()
