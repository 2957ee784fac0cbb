from __future__ import annotations

import pytest

from tests.support.browser import chromium
from tests.support.local_stack import Api, running_stack

# The shared stack trusts a tenant's status and an API key it read for a second, not five, and waits a second, not
# five, for work in flight before a deletion reads the table: a suspension, a resume, a deletion (tests/e2e/
# test_tenants_cli.py) and a revocation (test_keys_and_limits.py, test_console_http.py) are then seen in about a
# second; the rules under test are the same, only the periods are shorter.
KEY_CACHE_SECONDS = 1.0
SHARED_STACK_ENV = {
    "INTERLUDE_TENANT_STATUS_CACHE_SECONDS": "1",
    "INTERLUDE_TENANT_DELETION_GRACE_SECONDS": "1",
    "INTERLUDE_KEY_CACHE_SECONDS": f"{KEY_CACHE_SECONDS:g}",
}


# One local stack per worker serves every module that asks for nothing the others must not see; each module makes
# its own objects under ids of its own (`Api.fixture`) or a tenant of its own (`tenant_admin_key`). A module starts a
# stack of its own only for what would reach the others: a clock it moves (deadlines, notifications), settings a
# stack reads once at its start and answers or acts on for every tenant (loopback receivers and retry counts the
# discovery document advertises: actions, callbacks, webhooks; short stream bounds; a one-second poll under fuzzing),
# or callbacks that must not be delivered at all (callbacks, guarded).
@pytest.fixture(scope="session")
def stack_info(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("stack"), SHARED_STACK_ENV) as info:
        yield info


@pytest.fixture(scope="session")
def api(stack_info) -> Api:
    return Api.of(stack_info)


@pytest.fixture(scope="module")
def browser():
    with chromium() as launched:
        yield launched
