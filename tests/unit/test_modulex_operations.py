"""The steps of the ModuleX run, resume and cancel operations (interlude.faces.modulex.operations): each refusal, in the order
ModuleX gives them, and what a request that passes yields. Pure: no store, no HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from interlude.domain.errors import Conflict, Invalid, NotFound, Unprocessable
from interlude.domain.models.run import OpenInterrupt, RunState
from interlude.domain.models.workflow import WorkflowDefinition, under_request
from interlude.faces.modulex.definition import content_id, translate
from interlude.faces.modulex.operations import (
    cancel_reason,
    flag,
    resume_body,
    resumed_source,
    run_body,
    run_configurable,
    waiting_interrupt,
)
from tests.support.modulex_example import worked_example


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "the body must be a JSON object"),
        ({"workflow_id": "a", "system_workflow": "s"}, "system workflows are not served by this host"),
        ({}, "give exactly one of workflow_id and workflow"),
        ({"workflow_id": "a", "workflow": {}}, "give exactly one of workflow_id and workflow"),
        # The first refusal wins: the shape before the fields' types.
        ({"workflow_id": 7, "workflow": {}, "stream": "no"}, "give exactly one of workflow_id and workflow"),
    ],
)
def test_a_run_request_of_the_wrong_shape_is_refused_with_its_reason(body: Any, message: str) -> None:
    with pytest.raises(Invalid) as refused:
        run_body(body)
    assert refused.value.message == message


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"workflow_id": "a", "extra": 1, "more": 2}, ["extra", "more"]),
        ({"extra": 1}, ["extra"]),  # named before the workflow it leaves out
        ({"workflow": {}, "workflow_id": "a", "stream": "no", "inptu": {}}, ["inptu"]),  # before the shape and types
    ],
)
def test_a_run_body_field_the_contract_does_not_give_is_422_naming_it(body: dict[str, Any], named: list[str]) -> None:
    with pytest.raises(Unprocessable) as refused:
        run_body(body)
    problems = refused.value.details["errors"]
    assert [(p["loc"], p["type"]) for p in problems] == [(["body", name], "extra_forbidden") for name in named]
    assert problems[0]["msg"].startswith(f"{named[0]}: not a field of a run body, which holds ")
    assert "workflow_id" in problems[0]["msg"]


@pytest.mark.parametrize(
    ("fields", "loc", "kind"),
    [
        ({"input": []}, ["input"], "dict_type"),
        ({"config": "x"}, ["config"], "dict_type"),
        ({"config": 0}, ["config"], "dict_type"),  # not "no config"
        ({"config": False}, ["config"], "dict_type"),
        ({"stream": "false"}, ["stream"], "bool_type"),  # not true, as bool("false") is
        ({"stream": 0}, ["stream"], "bool_type"),
        ({"ephemeral": "true"}, ["ephemeral"], "bool_type"),
        ({"ephemeral": []}, ["ephemeral"], "bool_type"),
        ({"is_private": 1}, ["is_private"], "bool_type"),
        ({"is_private": {}}, ["is_private"], "bool_type"),
        ({"attribution_workflow_id": {"id": "w"}}, ["attribution_workflow_id"], "string_type"),
        ({"config": {"recursion_limit": "7"}}, ["config", "recursion_limit"], "int_type"),
        ({"config": {"recursion_limit": "7.0"}}, ["config", "recursion_limit"], "int_type"),
        ({"config": {"recursion_limit": True}}, ["config", "recursion_limit"], "int_type"),  # not 1
        ({"config": {"recursion_limit": 7.5}}, ["config", "recursion_limit"], "int_type"),
        ({"config": {"recursion_limit": 0}}, ["config", "recursion_limit"], "int_type"),  # not "no limit"
        ({"config": {"recursion_limit": -3}}, ["config", "recursion_limit"], "int_type"),
    ],
)
def test_a_run_request_field_of_another_json_type_is_refused_naming_it(
    fields: dict[str, Any], loc: list[str], kind: str
) -> None:
    with pytest.raises(Unprocessable) as refused:
        run_body({"workflow_id": "a", **fields})
    assert refused.value.code == "interlude.field_unprocessable"
    [problem] = refused.value.details["errors"]
    assert (problem["loc"], problem["type"]) == (["body", *loc], kind)
    assert problem["msg"].startswith(".".join(loc) + " must be")


def test_every_field_of_another_type_is_named_at_once() -> None:
    with pytest.raises(Unprocessable) as refused:
        run_body({"workflow_id": 7, "stream": "yes", "config": {"recursion_limit": "9"}})
    assert [p["loc"] for p in refused.value.details["errors"]] == [
        ["body", "workflow_id"],
        ["body", "stream"],
        ["body", "config", "recursion_limit"],
    ]


def test_a_run_request_yields_its_input_and_config_with_defaults() -> None:
    assert run_body({"workflow_id": "a"}) == ({}, {})
    assert run_body({"workflow_id": "a", "input": None, "config": None, "stream": None}) == ({}, {})
    assert run_body({"workflow": {}, "input": {"x": 1}, "config": {"k": 2}}) == ({"x": 1}, {"k": 2})
    assert run_body({"workflow_id": "a", "input": {}, "config": {}, "stream": False, "ephemeral": True}) == ({}, {})
    assert run_body({"workflow_id": "a", "config": {"recursion_limit": 3.0}}) == ({}, {"recursion_limit": 3.0})


@pytest.mark.parametrize(
    ("config", "configurable"),
    [
        ({"recursion_limit": 7}, {"version": 1, "run": {"recursionLimit": 7}}),
        ({"recursion_limit": 7.0}, {"version": 1, "run": {"recursionLimit": 7}}),
        ({}, None),  # the workflow's own, if it has one, is taken where the run is created
    ],
)
def test_a_run_request_s_recursion_limit_is_its_configurable(
    config: dict[str, Any], configurable: dict[str, Any] | None
) -> None:
    assert run_configurable(config) == ({"configurable": configurable} if configurable else {})


@pytest.mark.parametrize(("limit", "options"), [({"recursion_limit": 5}, {"recursionLimit": 5}), ({}, {})])
def test_a_modulex_definition_gives_its_runs_its_own_recursion_limit(limit: dict[str, Any], options: dict[str, Any]):
    raw = {"nodes": [{"id": "a", "type": "transformer", "x": 0, "y": 0, "transformer_config": {}}], "config": limit}
    assert WorkflowDefinition.model_validate(translate(raw)).own_run_options() == options
    openwop = WorkflowDefinition.model_validate({"nodes": [{"id": "a", "typeId": "core.noop"}]})
    assert openwop.own_run_options() == {}


@pytest.mark.parametrize(
    ("configurable", "own", "merged"),
    [
        (None, {"recursionLimit": 5}, {"version": 1, "run": {"recursionLimit": 5}}),
        (
            {"version": 1, "run": {"recursionLimit": 9}},
            {"recursionLimit": 5},
            {"version": 1, "run": {"recursionLimit": 9}},
        ),
        (
            {"version": 1, "run": {"runTimeoutMs": 10}, "ai": {"model": "m"}},
            {"recursionLimit": 5},
            {"version": 1, "run": {"recursionLimit": 5, "runTimeoutMs": 10}, "ai": {"model": "m"}},
        ),
        ({"version": 1}, {}, {"version": 1}),
        (None, {}, None),
    ],
)
def test_the_request_s_run_options_win_over_the_workflow_s_own(
    configurable: dict[str, Any] | None, own: dict[str, Any], merged: dict[str, Any] | None
) -> None:
    assert under_request(configurable, own) == merged


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("x", "the body must be a JSON object with run_id and resume_value"),
        ({}, "missing required field(s): run_id, resume_value"),
        ({"run_id": "r"}, "missing required field(s): resume_value"),
        ({"run_id": "r", "resume_value": 1, "workflow_id": "a", "workflow": {}}, "workflow_id and workflow are mutually exclusive"),
    ],
)
def test_a_resume_request_of_the_wrong_shape_is_refused_with_its_reason(body: Any, message: str) -> None:
    with pytest.raises(Invalid) as refused:
        resume_body(body)
    assert refused.value.message == message


@pytest.mark.parametrize(
    ("fields", "loc", "kind"),
    [
        ({"stream": "false"}, "stream", "bool_type"),
        ({"stream": 1}, "stream", "bool_type"),
        ({"stream": {}}, "stream", "bool_type"),
        ({"workflow_id": 7}, "workflow_id", "string_type"),
        ({"workflow_id": ["w"]}, "workflow_id", "string_type"),
    ],
)
def test_a_resume_field_of_another_json_type_is_refused_naming_it(fields: dict[str, Any], loc: str, kind: str) -> None:
    with pytest.raises(Unprocessable) as refused:
        resume_body({"run_id": 5, "resume_value": 1, **fields})  # before the run_id that names no run
    [problem] = refused.value.details["errors"]
    assert (problem["loc"], problem["type"]) == (["body", loc], kind)


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"run_id": "r", "resume_value": 1, "comand": "go"}, ["comand"]),
        ({"run_id": "r", "reume": 1}, ["reume"]),  # before the resume_value it misspells is found missing
        ({"reume": 1, "stream": "no", "runId": "r"}, ["reume", "runId"]),  # before the types and the missing run_id
    ],
)
def test_a_resume_field_the_contract_does_not_give_is_refused_naming_it_first(
    body: dict[str, Any], named: list[str]
) -> None:
    with pytest.raises(Unprocessable) as refused:
        resume_body(body)
    problems = refused.value.details["errors"]
    assert [(p["loc"], p["type"]) for p in problems] == [(["body", name], "extra_forbidden") for name in named]
    assert problems[0]["msg"] == (
        f"{named[0]}: not a field of a resume body, which holds run_id, resume_value, workflow_id, workflow and stream"
    )


def test_a_resume_names_its_run_and_a_run_id_that_is_not_a_string_names_none() -> None:
    assert resume_body({"run_id": "demo~2Fabc", "resume_value": False}) == "demo~2Fabc"
    with pytest.raises(NotFound):
        resume_body({"run_id": 5, "resume_value": 1})


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"reason": "done", "extra": 1}, ["extra"]),
        ({"reasn": "done"}, ["reasn"]),  # the reason misspelt: it was dropped, and the run cancelled without it
        ({"reason": 5, "why": "x", "run_id": "r"}, ["run_id", "why"]),  # before the reason's type
    ],
)
def test_a_cancel_field_the_contract_does_not_give_is_refused_naming_it(body: dict[str, Any], named: list[str]) -> None:
    with pytest.raises(Unprocessable) as refused:
        cancel_reason(body)
    problems = refused.value.details["errors"]
    assert [(p["loc"], p["type"]) for p in problems] == [(["body", name], "extra_forbidden") for name in named]
    assert problems[0]["msg"] == f"{named[0]}: not a field of a cancel body, which holds reason"


@pytest.mark.parametrize(("body", "reason"), [(None, None), ({}, None), ({"reason": None}, None), ({"reason": "x"}, "x")])
def test_a_cancel_body_is_optional_and_holds_its_reason(body: Any, reason: str | None) -> None:
    assert cancel_reason(body) == reason


def run_state(workflow_id: str, interrupts: tuple[str, ...] = ("gate",), status: str = "waiting-approval") -> RunState:
    return RunState.model_validate(
        {
            "runId": "t1/runrunrunrunrunrun01",
            "tenant": "t1",
            "workflowId": workflow_id,
            "workflowVersion": 1,
            "owner": {},
            "createdAt": "2026-12-01T12:00:00Z",
            "status": status,
            "interrupts": {
                n: OpenInterrupt(
                    nodeId=n, key=n, interruptId=f"i-{n}", kind="approval", visit=1, payload={}, raisedAt="2026-12-01T12:00:00Z"
                )
                for n in interrupts
            },
        }
    )


def test_a_resume_says_where_the_workflow_came_from_and_refuses_another_workflow() -> None:
    inline = worked_example()
    inline_id = content_id(translate(inline))
    assert resumed_source({}, run_state("deployed")) == "database"
    assert resumed_source({"workflow_id": "deployed"}, run_state("deployed")) == "database"
    assert resumed_source({"workflow": inline}, run_state(inline_id)) == "request"
    with pytest.raises(Invalid, match="not started from workflow 'other'"):
        resumed_source({"workflow_id": "other"}, run_state("deployed"))
    with pytest.raises(Invalid, match="different workflow definition"):
        resumed_source({"workflow": inline}, run_state("deployed"))
    with pytest.raises(Unprocessable):
        resumed_source({"workflow": {"nodes": "not a list"}}, run_state("deployed"))


def test_a_resume_needs_exactly_one_open_interrupt() -> None:
    assert waiting_interrupt(run_state("w")) == "gate"
    for state in (run_state("w", ()), run_state("w", ("gate",), status="cancelled"), run_state("w", ("a", "b"))):
        with pytest.raises(Conflict) as refused:
            waiting_interrupt(state)
        assert refused.value.code == "interlude.run_state_invalid"


def test_a_boolean_left_out_or_null_is_its_default_and_a_boolean_sent_is_itself() -> None:
    assert [flag({}, "stream", True), flag({"stream": None}, "stream", True)] == [True, True]
    assert [flag({"stream": False}, "stream", True), flag({"ephemeral": True}, "ephemeral", False)] == [False, True]
