from __future__ import annotations

import pytest

from tests.support.local_stack import Api, running_stack


@pytest.fixture(scope="session")
def stack_info(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("stack")) as info:
        yield info


@pytest.fixture(scope="session")
def api(stack_info) -> Api:
    return Api.of(stack_info)
