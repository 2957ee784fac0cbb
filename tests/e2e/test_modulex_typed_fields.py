"""Every field of every ModuleX body read as the contract types it, on the real local stack (the real handler behind
the local HTTP gateway on 127.0.0.1, over moto).

A value of another JSON type is answered `422 {detail: [{loc, msg, type}]}` naming the field (FastAPI's answer, which
modulex-python raises as ValidationError), `X-Interlude-Error: interlude.field_unprocessable`, and nothing happens;
never read as another value (`"stream": "false"` was true, `"config": 0` no config, `"recursion_limit": "7"` no limit).
A value of the right type is taken as sent. Query parameters are text: a number that is not a whole one is refused.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest
import requests

from tests.support.local_stack import Api, running_stack, until
from tests.support.modulex_example import MISTYPED_DEFINITION_FIELDS, node, worked_example


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("modulex-fields")) as info:
        yield info


@pytest.fixture(scope="module")
def api(stack) -> Api:
    return Api.of(stack)


def steps(count: int, **extra: Any) -> dict[str, Any]:
    """An inline definition: `count` transformer steps in a chain, then a question."""
    names = [f"step_{i}" for i in range(count)]
    nodes = [node(n, "transformer", i * 100, operations=[]) for i, n in enumerate(names)]
    nodes.append(node("ask", "interrupt", count * 100, message="Go on?"))
    ids = [*names, "ask"]
    return {
        "metadata": {"name": f"steps {uuid.uuid4().hex[:6]}", "version": "1.0.0"},
        "nodes": nodes,
        "edges": [{"source": a, "target": b} for a, b in zip(ids, ids[1:], strict=False)],
        **extra,
    }


def unprocessable(reply: requests.Response) -> list[dict[str, Any]]:
    """The detail list of a 422 that names fields of another type."""
    assert reply.status_code == 422, (reply.status_code, reply.text)
    assert reply.headers["X-Interlude-Error"] == "interlude.field_unprocessable"
    assert set(reply.json()) == {"detail"}
    detail = reply.json()["detail"]
    for problem in detail:
        assert set(problem) == {"loc", "msg", "type"}
        assert problem["msg"].startswith(".".join(str(part) for part in problem["loc"][1:]))  # the SDK shows msg alone
    return list(detail)


def run(api: Api, body: dict[str, Any]) -> requests.Response:
    return api.call("POST", "/workflows/run", body)


def waiting(api: Api, run_id: str) -> None:
    until(lambda: api.call("GET", f"/workflows/state/{run_id}").json()["metadata"]["status"] == "interrupted", 30)


# -- POST /workflows/run --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "kind"),
    [
        ("stream", "false", "bool_type"),
        ("stream", "true", "bool_type"),
        ("stream", 0, "bool_type"),
        ("stream", {}, "bool_type"),
        ("ephemeral", "false", "bool_type"),
        ("ephemeral", [], "bool_type"),
        ("ephemeral", 1, "bool_type"),
        ("is_private", "yes", "bool_type"),
        ("is_private", 0.5, "bool_type"),
        ("input", [], "dict_type"),
        ("input", "x", "dict_type"),
        ("config", 0, "dict_type"),
        ("config", [], "dict_type"),
        ("config", False, "dict_type"),
        ("attribution_workflow_id", {"id": "w"}, "string_type"),
        ("attribution_workflow_id", 42, "string_type"),
    ],
)
def test_a_run_field_of_another_json_type_is_422_naming_it(api, field, value, kind):
    [problem] = unprocessable(run(api, {"workflow": steps(1), field: value}))
    assert (problem["loc"], problem["type"]) == (["body", field], kind)


@pytest.mark.parametrize("value", ["7", "7.0", True, 7.5, 0, -1, [7]])
def test_a_recursion_limit_that_is_not_a_positive_integer_is_422_never_no_limit(api, value):
    [problem] = unprocessable(run(api, {"workflow": steps(1), "config": {"recursion_limit": value}}))
    assert problem["loc"] == ["body", "config", "recursion_limit"]


def test_a_workflow_id_that_is_not_a_string_is_422(api):
    [problem] = unprocessable(run(api, {"workflow_id": 7}))
    assert problem["loc"] == ["body", "workflow_id"]


def test_every_field_of_another_type_is_named_in_one_answer(api):
    detail = unprocessable(run(api, {"workflow": steps(1), "stream": "no", "ephemeral": 1, "input": []}))
    assert [p["loc"][1] for p in detail] == ["input", "stream", "ephemeral"]


@pytest.mark.parametrize(("stream", "ephemeral"), [(False, True), (True, False), (None, None)])
def test_the_run_s_booleans_are_answered_as_sent(api, stream, ephemeral):
    body: dict[str, Any] = {"workflow": steps(1), "stream": stream, "ephemeral": ephemeral, "is_private": True}
    got = run(api, body)
    assert got.status_code == 200, got.text
    assert (got.json()["stream"], got.json()["ephemeral"]) == (
        True if stream is None else stream,
        False if ephemeral is None else ephemeral,
    )


@pytest.mark.parametrize("where", ["request", "workflow"])
def test_a_recursion_limit_written_as_json_writes_it_is_honoured(api, where):
    # Three steps and a question are four node executions: a limit of 2.0 (Python's json writes a float so) stops it.
    body: dict[str, Any] = {"workflow": steps(3), "config": {"recursion_limit": 2.0}}
    if where == "workflow":
        body = {"workflow": steps(3, config={"recursion_limit": 2.0})}
    got = run(api, body)
    assert got.status_code == 200, got.text
    run_id = got.json()["run_id"]
    failed = until(
        lambda: (s := api.call("GET", f"/workflows/state/{run_id}").json())["metadata"]["status"] == "failed" and s, 30
    )
    assert failed, api.call("GET", f"/workflows/state/{run_id}").json()
    rows = api.call("GET", f"/workflow-runs/{run_id}").json()
    assert "recursion" in rows["error_message"].lower()


@pytest.mark.parametrize("case", MISTYPED_DEFINITION_FIELDS)
def test_a_definition_field_of_another_json_type_is_422_naming_it(api, case):
    mutate, loc = MISTYPED_DEFINITION_FIELDS[case]
    workflow = worked_example()
    mutate(workflow)
    reply = run(api, {"workflow": workflow})
    assert reply.status_code == 422, reply.text
    assert reply.headers["X-Interlude-Error"] == "interlude.workflow_unprocessable"
    assert [p["loc"] for p in reply.json()["detail"]] == [["body", "workflow", *loc]]


# -- POST /workflows/resume/{thread_id} and POST /workflows/cancel/{run_id} -----------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "kind"),
    [
        ("stream", "false", "bool_type"),
        ("stream", 0, "bool_type"),
        ("stream", [], "bool_type"),
        ("workflow_id", 7, "string_type"),
        ("workflow_id", {"id": "w"}, "string_type"),
    ],
)
def test_a_resume_field_of_another_json_type_is_422_and_the_run_still_waits(api, field, value, kind):
    got = run(api, {"workflow": steps(1)})
    run_id = got.json()["run_id"]
    waiting(api, run_id)
    reply = api.call(
        "POST", f"/workflows/resume/{run_id}", {"run_id": run_id, "resume_value": {"ok": True}, field: value}
    )
    [problem] = unprocessable(reply)
    assert (problem["loc"], problem["type"]) == (["body", field], kind)
    assert api.call("GET", f"/workflows/state/{run_id}").json()["next"] == ["ask"]
    answered = api.call("POST", f"/workflows/resume/{run_id}", {"run_id": run_id, "resume_value": 1, "stream": False})
    assert answered.status_code == 200, answered.text
    assert answered.json()["stream"] is False  # as sent (it answered true for any value before)


@pytest.mark.parametrize("value", [5, ["no"], {"why": "x"}, True])
def test_a_cancel_reason_that_is_not_a_string_is_422_and_the_run_goes_on(api, value):
    run_id = run(api, {"workflow": steps(1)}).json()["run_id"]
    [problem] = unprocessable(api.call("POST", f"/workflows/cancel/{run_id}", {"reason": value}))
    assert (problem["loc"], problem["type"]) == (["body", "reason"], "string_type")
    assert api.call("POST", f"/workflows/cancel/{run_id}", {"reason": "done"}).json()["reason"] == "done"


# -- POST /workflows and PUT /workflows/{id} (database mode) --------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "loc", "kind"),
    [
        ("workflow_schema", [], ["workflow_schema"], "dict_type"),
        ("name", 1, ["name"], "string_type"),
        ("description", {"text": "d"}, ["description"], "string_type"),
        ("version", 2, ["version"], "string_type"),
        ("category", ["c"], ["category"], "string_type"),
        ("status", True, ["status"], "string_type"),
        ("visibility", 3, ["visibility"], "string_type"),
        ("tags", "a,b", ["tags"], "list_type"),
        ("tags", ["a", 1], ["tags", 1], "string_type"),
        ("input", [], ["input"], "dict_type"),
        ("config", "x", ["config"], "dict_type"),
    ],
)
def test_a_workflow_field_of_another_json_type_is_422_naming_it_on_create_and_update(api, field, value, loc, kind):
    body = {"workflow_schema": worked_example(), "name": "typed"}
    [problem] = unprocessable(api.call("POST", "/workflows", {**body, field: value}))
    assert (problem["loc"], problem["type"]) == (["body", *loc], kind)
    created = api.call("POST", "/workflows", body)
    assert created.status_code == 201, created.text
    workflow_id = created.json()["id"]
    [problem] = unprocessable(
        api.call("PUT", f"/workflows/{workflow_id}", {field: value}, **{"X-Organization-ID": api.tenant})
    )
    assert problem["loc"] == ["body", *loc]
    assert api.call("GET", f"/workflows/{workflow_id}", **{"X-Organization-ID": api.tenant}).json()["edit_version"] == 1


def test_a_deployed_workflow_s_definition_is_checked_as_an_inline_one(api):
    workflow = worked_example()
    workflow["nodes"][0]["enabled"] = "false"
    reply = api.call("POST", "/workflows", {"workflow_schema": copy.deepcopy(workflow)})
    assert reply.status_code == 422, reply.text
    assert [p["loc"][-1] for p in reply.json()["detail"]] == ["enabled"]


# -- query parameters: text, whose numbers are whole -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "parameter", "value"),
    [
        ("/workflow-runs", "limit", "2.0"),
        ("/workflow-runs", "limit", "true"),
        ("/workflow-runs", "offset", "1.5"),
        ("/workflow-runs", "offset", "1e2"),
        ("/workflows", "page", "1.0"),
        ("/workflows", "page_size", "10.0"),
    ],
)
def test_a_query_number_that_is_not_a_whole_number_is_400_naming_it(api, path, parameter, value):
    reply = api.call("GET", f"{path}?{parameter}={value}")
    assert reply.status_code == 400, reply.text
    assert reply.json()["detail"].startswith(parameter)
