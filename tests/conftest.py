"""Every test runs with fake AWS credentials and no endpoint override: nothing can reach real AWS."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# Before the package is imported: every event the suite writes is checked against the OpenWOP schemas (a debug
# switch that production leaves off; interlude.engine.events). Local stacks the suite starts inherit it.
os.environ["INTERLUDE_VALIDATE_EVENTS"] = "1"
# And every DynamoDB request the store sends is checked against the service's model by botocore before moto reads it
# (the functions leave that check to DynamoDB; interlude.store.table).
os.environ["INTERLUDE_VALIDATE_REQUESTS"] = "1"

from interlude.composition import compose
from interlude.config import forget as forget_settings
from interlude.local import moto_patches
from tests.support.receiver import Receiver

# Every AWS call the tests make is checked against its function's role in the synthesized template (issue 25).
pytest_plugins = ("tests.support.iam_plugin",)

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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "private_world: a moto world of the test's own (tests/integration/conftest.py, `world`)"
    )


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


@pytest.fixture(autouse=True)
def _settings_read_afresh():
    # The package reads its settings once per process, as a Lambda instance does (interlude.config): each test reads
    # them from the environment it sets, as a new instance would.
    forget_settings()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A callback receiver on 127.0.0.1 (tests/support/receiver.py), answering 200 until a test scripts it."""
    started = Receiver().start()
    yield started
    started.close()


# `make test` runs `pytest -n 2 --dist loadfile --no-loadscope-reorder`: each xdist worker takes whole files, in the
# order collected. These take the longest (measured with --durations), so they go first and the many short files fill
# in after them: the two workers then finish within a short file of each other, instead of one running a long file
# alone at the end. Longest first; a file not named keeps its place (e2e, infra, integration, unit).
# tests/infra is one unit (INFRA): its modules share one synthesis of each app per process, so one worker takes them
# all and synthesizes once. The tenant operator's file runs first on the other worker: its deletion scans the whole
# table of that worker's shared stack, which is smallest then.
INFRA = "tests/infra"
LONGEST_FIRST = (
    INFRA,
    "tests/e2e/test_tenants_cli.py",
    "tests/unit/test_cold_imports.py",
    "tests/integration/test_resilience.py",
    # The runtime pass only (RUNTIME_ONLY, Makefile), where collection put it fourth from last: 39 s alone (load 11).
    "tests/integration/test_upgrade.py",
    # The rest by a --durations profile of the 3.11 pass (12-06, load 8–14), less what ADR 0148 took off each.
    "tests/e2e/test_replay.py",
    "tests/e2e/test_callbacks.py",
    "tests/e2e/test_readme.py",
    "tests/integration/test_retention.py",
    "tests/e2e/test_schemathesis.py",
    "tests/e2e/test_console_browser.py",
    "tests/e2e/test_console_scopes.py",
    "tests/e2e/test_console_http.py",
    "tests/e2e/test_notifications.py",
    "tests/e2e/test_modulex_fidelity.py",
    "tests/e2e/test_cli_operator.py",
    "tests/integration/test_run_search.py",
    "tests/integration/test_migrations.py",
    "tests/e2e/test_idempotency.py",
    "tests/e2e/test_api_errors.py",
    "tests/e2e/test_hitl_e2e.py",
    "tests/e2e/test_webhooks.py",
    "tests/integration/test_moto_patches.py",
    "tests/integration/test_run_search_scale.py",
    "tests/e2e/test_cli_lifecycle.py",
    "tests/integration/test_inbox_scale.py",
    "tests/integration/test_tasks.py",
    "tests/e2e/test_tokens_http.py",
    "tests/integration/test_run_listing.py",
    "tests/e2e/test_gate_forms_browser.py",
    "tests/e2e/test_human_moment_http.py",
    "tests/integration/test_audit.py",
    "tests/e2e/test_keys_and_limits.py",
)


def scheduling_unit(path: str) -> str:
    """What one worker takes whole: a file, or every infra file together."""
    return INFRA if path.startswith(INFRA + "/") else path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {path: place for place, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(scheduling_unit(item.nodeid.partition("::")[0]), len(rank)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`--dist loadfile` with tests/infra as one unit (scheduling_unit)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class UnitScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scheduling_unit(super()._split_scope(nodeid))

    return UnitScheduling(config, log)
