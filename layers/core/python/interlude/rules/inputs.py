"""A run's inputs against the variables its workflow declares (createRun): required ones present, each value of
its declared `type` and valid against its `schema`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from interlude.domain import schemas
from interlude.domain.models.workflow import Variable


def missing(variables: Sequence[Variable], inputs: Mapping[str, Any]) -> list[str]:
    return [v.name for v in variables if v.required and v.defaultValue is None and v.name not in inputs]


def problems(variables: Sequence[Variable], inputs: Mapping[str, Any]) -> list[dict[str, str]]:
    """Every declared input present in `inputs` that its type or schema refuses, as {path, message} (path: inputs/<name>/<where inside the value>)."""
    from jsonschema import Draft202012Validator  # first use only (cold starts)

    found: list[dict[str, str]] = []
    for variable in variables:
        if variable.name not in inputs:
            continue
        schema: dict[str, Any] = dict(variable.json_schema or {})
        if variable.type is not None:
            schema = {"allOf": [{"type": variable.type}, schema]} if schema else {"type": variable.type}
        if not schema:
            continue
        validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
        for problem in schemas.errors_of(validator, inputs[variable.name]):
            where = problem.get("path", "")
            found.append({"path": f"inputs/{variable.name}{'/' + where if where else ''}", "message": problem["message"]})
    return found


def schema_of(variables: Sequence[Variable]) -> dict[str, Any]:
    """The declared inputs as one object schema (each its type, schema, description and default; required where
    createRun requires it): what the console's Start run form asks."""
    properties: dict[str, Any] = {}
    for variable in variables:
        prop: dict[str, Any] = dict(variable.json_schema or {})
        if variable.type is not None:
            prop["type"] = variable.type
        if variable.description and "description" not in prop:
            prop["description"] = variable.description
        if variable.defaultValue is not None:
            prop["default"] = variable.defaultValue
        properties[variable.name] = prop
    return {"type": "object", "properties": properties, "required": [v.name for v in variables if v.required and v.defaultValue is None]}
