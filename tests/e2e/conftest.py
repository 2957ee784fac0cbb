from __future__ import annotations

import pytest

from tests.support.browser import chromium
from tests.support.local_stack import Api, running_stack


# One local stack per worker serves every module that asks for nothing the others must not see; each module makes
# its own objects under ids of its own (`Api.fixture`) or a tenant of its own (`tenant_admin_key`). A module starts a
# stack of its own only for what would reach the others: a clock it moves (deadlines, notifications), settings a
# stack reads once at its start and answers or acts on for every tenant (loopback receivers and retry counts the
# discovery document advertises: actions, callbacks, webhooks; short stream bounds; a one-second poll under fuzzing),
# or callbacks that must not be delivered at all (callbacks, guarded).
@pytest.fixture(scope="session")
def stack_info(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("stack")) as info:
        yield info


@pytest.fixture(scope="session")
def api(stack_info) -> Api:
    return Api.of(stack_info)


@pytest.fixture(scope="module")
def browser():
    with chromium() as launched:
        yield launched
