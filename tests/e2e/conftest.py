from __future__ import annotations

import pytest

from tests.support.local_stack import Api, LocalStackProcess


@pytest.fixture(scope="session")
def stack_info(tmp_path_factory):
    stack = LocalStackProcess(tmp_path_factory.mktemp("stack"))
    try:
        yield {**stack.wait(), "stateFile": str(stack.state_file)}
    finally:
        stack.stop()


@pytest.fixture(scope="session")
def api(stack_info) -> Api:
    return Api(stack_info["baseUrl"], stack_info["apiKey"], stack_info["tenant"])
