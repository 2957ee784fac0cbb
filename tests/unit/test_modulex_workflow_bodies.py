"""A ModuleX workflow's create or update body (interlude.faces.modulex.workflows): each refusal's text, in the
order they are tried (the ModuleX `{detail}` answer is the message), and the fields a body that passes yields."""

from __future__ import annotations

from typing import Any

import pytest

from interlude.domain.errors import Invalid, Unprocessable
from interlude.faces.modulex.workflows import _checked

_LONG = "x" * 257


@pytest.mark.parametrize(
    ("body", "creating", "message"),
    [
        ([], True, "the body must be a JSON object"),
        ("x", False, "the body must be a JSON object"),
        ({}, True, "workflow_schema is required (a ModuleX workflow definition)"),
        ({"workflow_schema": None}, True, "workflow_schema is required (a ModuleX workflow definition)"),
        ({"description": _LONG}, False, "description must be a string of at most 256 characters"),
        ({"visibility": "everyone"}, False, "visibility must be one of ['private', 'organization', 'public', 'system']"),
        ({"tags": ["a"] * 51}, False, "tags must be a list of at most 50 strings"),
        # The first refusal wins, in this order: lengths, visibility, tags (each field's type before any of them).
        ({"version": _LONG, "visibility": "x", "tags": ["a"] * 51}, False, "version must be a string of at most 256 characters"),
        ({"visibility": "x", "tags": ["a"] * 51}, False, "visibility must be one of ['private', 'organization', 'public', 'system']"),
    ],
)
def test_a_workflow_body_of_the_wrong_shape_is_refused_with_its_reason(body: Any, creating: bool, message: str) -> None:
    with pytest.raises(Invalid) as refused:
        _checked(body, creating)
    assert refused.value.message == message


@pytest.mark.parametrize(
    ("body", "creating", "loc", "kind"),
    [
        ({"workflow_schema": []}, True, ["workflow_schema"], "dict_type"),
        ({"workflow_schema": "x"}, False, ["workflow_schema"], "dict_type"),
        ({"name": 1}, False, ["name"], "string_type"),
        ({"description": {"text": "d"}}, False, ["description"], "string_type"),
        ({"version": 2}, False, ["version"], "string_type"),
        ({"category": ["c"]}, False, ["category"], "string_type"),
        ({"status": True}, False, ["status"], "string_type"),
        ({"visibility": 3}, False, ["visibility"], "string_type"),
        ({"tags": "a"}, False, ["tags"], "list_type"),
        ({"tags": ["a", 1]}, False, ["tags", 1], "string_type"),
        ({"input": []}, False, ["input"], "dict_type"),
        ({"config": "x"}, False, ["config"], "dict_type"),
    ],
)
def test_a_workflow_body_field_of_another_json_type_is_refused_naming_it(
    body: Any, creating: bool, loc: list[Any], kind: str
) -> None:
    with pytest.raises(Unprocessable) as refused:
        _checked(body, creating)
    assert refused.value.code == "interlude.field_unprocessable"
    [problem] = refused.value.details["errors"]
    assert (problem["loc"], problem["type"]) == (["body", *loc], kind)


@pytest.mark.parametrize("creating", [True, False])
def test_a_workflow_body_field_the_contract_does_not_give_is_422_naming_it(creating: bool) -> None:
    with pytest.raises(Unprocessable) as refused:
        _checked({"naem": "N", "extra": 1}, creating)  # named before the schema a creation leaves out
    problems = refused.value.details["errors"]
    assert [(p["loc"], p["type"]) for p in problems] == [
        (["body", "extra"], "extra_forbidden"),
        (["body", "naem"], "extra_forbidden"),
    ]
    assert problems[1]["msg"].startswith("naem: not a field of a workflow body, which holds name, description")


def test_every_field_of_another_type_is_named_before_any_limit() -> None:
    with pytest.raises(Unprocessable) as refused:
        _checked({"version": 2, "visibility": "x", "tags": 1, "input": 1, "name": "n" * 300}, creating=False)
    assert [p["loc"] for p in refused.value.details["errors"]] == [["body", "version"], ["body", "tags"], ["body", "input"]]


def test_a_workflow_body_yields_its_writable_fields() -> None:
    body = {"id": "w", "organization_id": "o", "name": "N", "description": None, "tags": ["a"], "workflow_schema": {}}
    assert _checked(body, creating=True) == {"name": "N", "tags": ["a"], "workflow_schema": {}}
    assert _checked({"tags": ["a"] * 50, "visibility": "public"}, creating=False) == {"tags": ["a"] * 50, "visibility": "public"}
