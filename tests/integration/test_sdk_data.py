"""The SDK data the layer ships (interlude.adapters.sdk_data) serves every call the functions make: each DynamoDB
operation and each service the code calls is in it, and a run created and decided through a default session that
reads only it works, its calls allowed by the roles as every other call is (the IAM check records them)."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path

import botocore.session
import pytest
from botocore import xform_name

from interlude import config, sdk_clients
from interlude.adapters import sdk_data
from interlude.composition import Services
from interlude.config.runtime import SDK_DATA_ENV
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.store.facade import Store
from tests.integration.conftest import signed_in, state_of

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "layers" / "core" / "python" / "interlude"
# The code the functions run: the package without the operator's CLI and the local stack, and the entry modules.
FUNCTION_CODE = [
    *(p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in ("cli", "local")),
    *(ROOT / "functions").rglob("*.py"),
]
GATE = {"nodes": [{"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship?"}}], "edges": []}


def _calls() -> Iterator[ast.Call]:
    for path in FUNCTION_CODE:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                yield node


def _first_text(call: ast.Call) -> str | None:
    first = call.args[0] if call.args else None
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


@pytest.fixture(scope="module")
def packaged(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("layer") / sdk_clients.PACKAGED_MODELS
    sdk_data.write(out)
    return out


def _packaged_dynamodb(packaged: Path, kind: str) -> dict:
    (version,) = (packaged / "dynamodb").iterdir()
    return json.loads((version / f"{kind}.json").read_text())


def test_every_dynamodb_operation_the_functions_call_is_in_the_layers_model(packaged) -> None:
    every = botocore.session.get_session().get_service_model("dynamodb").operation_names
    by_method = {xform_name(name): name for name in every}
    called = {by_method[c.func.attr] for c in _calls() if c.func.attr in by_method}
    paginated = {_first_text(c) for c in _calls() if c.func.attr == "get_paginator"} & set(by_method)
    awaited = {_first_text(c) for c in _calls() if c.func.attr == "get_waiter"}

    assert {"GetItem", "TransactWriteItems", "Query"} <= called  # the scan finds the calls
    assert called <= set(_packaged_dynamodb(packaged, "service-2")["operations"])
    assert {by_method[p] for p in paginated} <= set(_packaged_dynamodb(packaged, "paginators-1")["pagination"])
    assert {xform_name(w) for w in _packaged_dynamodb(packaged, "waiters-2")["waiters"]} >= awaited - {None}


def test_every_service_the_functions_make_a_client_of_is_in_the_layers_data() -> None:
    made = {_first_text(c) for c in _calls() if c.func.attr == "client"} - {None}

    assert "dynamodb" in made
    assert made <= set(sdk_data.SERVICES)


def test_a_client_from_the_layers_data_finds_the_endpoint_botocores_own_data_gives(packaged, monkeypatch) -> None:
    # The layer's endpoints.json keeps only the six services' entries: their endpoints resolve as before, everywhere.
    monkeypatch.setenv(SDK_DATA_ENV, str(packaged))
    config.forget()
    monkeypatch.setattr(sdk_clients, "_session", None)
    sdk_clients.use_packaged_models()
    ours, botocores = sdk_clients.session(), botocore.session.get_session()
    for service in sdk_data.SERVICES:
        for region in ("eu-west-3", "cn-north-1"):  # two partitions
            mine, theirs = (s.create_client(service, region_name=region).meta for s in (ours, botocores))
            assert (mine.endpoint_url, mine.partition) == (theirs.endpoint_url, theirs.partition), (service, region)


def test_a_run_is_created_and_decided_through_a_session_that_reads_only_the_layers_data(
    world, packaged, monkeypatch
) -> None:
    monkeypatch.setenv(SDK_DATA_ENV, str(packaged))
    config.forget()  # read as a process starting with it would
    monkeypatch.setattr(sdk_clients, "_session", None)
    sdk_clients.use_packaged_models()
    services = Services(Store(world.table, world.entries_table))
    # The store's client was made from the layer's model: DynamoDB's operations cut to the code's.
    assert set(services.store.client.meta.service_model.operation_names) == sdk_data.DYNAMODB_OPERATIONS
    admin = signed_in(services)
    services.workflows.put_workflow(admin, "ship", WorkflowDefinition.model_validate(GATE))
    run_id = services.lifecycle.create_run(admin, CreateRunRequest(workflowId="ship")).runId

    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})

    assert state_of(services, run_id).status == "completed"
