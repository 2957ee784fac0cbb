"""Every test runs with fake AWS credentials and no endpoint override: nothing can reach real AWS."""

from __future__ import annotations

import os

import pytest

# Before the package is imported: every event the suite writes is checked against the OpenWOP schemas (a debug
# switch that production leaves off; interlude.engine.events). Local stacks the suite starts inherit it.
os.environ["INTERLUDE_VALIDATE_EVENTS"] = "1"

from interlude.composition import compose
from interlude.local import moto_patches

# The entry points compose the faces into the engine; tests that call the package directly need the same.
compose()
# In-process moto behaves as the local stack's does (transactions and queries that cost what they touch).
moto_patches.apply()

FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
}


@pytest.fixture(autouse=True, scope="session")
def _fake_aws_environment():
    saved = {k: os.environ.get(k) for k in [*FAKE_AWS, "AWS_ENDPOINT_URL", "AWS_PROFILE"]}
    os.environ.update(FAKE_AWS)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    os.environ.pop("AWS_PROFILE", None)
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
