"""A ModuleX workflow's create or update body (interlude.faces.modulex.workflows): each refusal's text, in the
order they are tried (the ModuleX `{detail}` answer is the message), and the fields a body that passes yields."""

from __future__ import annotations

from typing import Any

import pytest

from interlude.domain.errors import Invalid
from interlude.faces.modulex.workflows import _checked

_LONG = "x" * 257


@pytest.mark.parametrize(
    ("body", "creating", "message"),
    [
        ([], True, "the body must be a JSON object"),
        ("x", False, "the body must be a JSON object"),
        ({"extra": 1, "more": 2}, False, "unknown fields: ['extra', 'more']"),
        ({"extra": 1}, True, "unknown fields: ['extra']"),  # before the missing schema
        ({}, True, "workflow_schema is required (a ModuleX workflow definition)"),
        ({"workflow_schema": []}, True, "workflow_schema is required (a ModuleX workflow definition)"),
        ({"workflow_schema": []}, False, "workflow_schema must be a JSON object"),
        ({"name": 1}, False, "name must be a string of at most 256 characters"),
        ({"description": _LONG}, False, "description must be a string of at most 256 characters"),
        ({"visibility": 3}, False, "visibility must be a string of at most 256 characters"),
        ({"visibility": "everyone"}, False, "visibility must be one of ['private', 'organization', 'public', 'system']"),
        ({"tags": "a"}, False, "tags must be a list of at most 50 strings"),
        ({"tags": ["a"] * 51}, False, "tags must be a list of at most 50 strings"),
        ({"tags": ["a", 1]}, False, "tags must be a list of at most 50 strings"),
        ({"input": []}, False, "input must be a JSON object"),
        ({"config": "x"}, False, "config must be a JSON object"),
        # The first refusal wins, in this order: strings, visibility, tags, objects.
        ({"version": 2, "visibility": "x", "tags": 1, "input": 1}, False, "version must be a string of at most 256 characters"),
        ({"visibility": "x", "tags": 1, "input": 1}, False, "visibility must be one of ['private', 'organization', 'public', 'system']"),
        ({"tags": 1, "input": 1}, False, "tags must be a list of at most 50 strings"),
    ],
)
def test_a_workflow_body_of_the_wrong_shape_is_refused_with_its_reason(body: Any, creating: bool, message: str) -> None:
    with pytest.raises(Invalid) as refused:
        _checked(body, creating)
    assert refused.value.message == message


def test_a_workflow_body_yields_its_writable_fields() -> None:
    body = {"id": "w", "organization_id": "o", "name": "N", "description": None, "tags": ["a"], "workflow_schema": {}}
    assert _checked(body, creating=True) == {"name": "N", "tags": ["a"], "workflow_schema": {}}
    assert _checked({"tags": ["a"] * 50, "visibility": "public"}, creating=False) == {"tags": ["a"] * 50, "visibility": "public"}
