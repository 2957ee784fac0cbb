"""A ModuleX body's fields read as the contract types them, never by Python's truthiness or conversions.

The contract's SDKs send JSON: `stream` is a boolean, `input` an object, `reason` a string. A value of another JSON
type is refused with FastAPI's answer, `422` whose `detail` is a list of `{loc, msg, type}` naming the field (each
message names it too: modulex-python joins the messages), and never read as something else: `bool("false")` is True,
`bool(0)` False, and neither is what the client said. `null` is a field left out, as everywhere on this face.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Strict
from pydantic_core import PydanticCustomError

from interlude.domain.errors import Unprocessable

JsonType = Literal["boolean", "string", "object", "array", "integer", "number"]
# How FastAPI (pydantic) names each refusal in `detail[].type`.
PYDANTIC_TYPE: dict[JsonType, str] = {
    "boolean": "bool_type",
    "string": "string_type",
    "object": "dict_type",
    "array": "list_type",
    "integer": "int_type",
    "number": "float_type",
}
CODE = "interlude.field_unprocessable"


def is_json(value: Any, kind: JsonType) -> bool:
    """Whether `value` (as strict JSON parses it) is of the JSON type `kind`. A JSON integer is a number without a
    fraction (`3.0` is one, as JSON Schema counts it); a boolean is neither a number nor an integer."""
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if isinstance(value, bool):
        return False
    if kind == "number":
        return isinstance(value, int | float)
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def problem(loc: Sequence[str | int], msg: str, kind: str) -> dict[str, Any]:
    """One FastAPI-style detail item; `loc` starts at the body."""
    return {"loc": ["body", *loc], "msg": msg, "type": kind}


def mistyped(loc: Sequence[str | int], kind: JsonType, value: Any) -> dict[str, Any]:
    name = ".".join(str(part) for part in loc)
    msg = f"{name} must be a JSON {kind}"
    if kind == "boolean":
        msg += f", true or false{' (not a string)' if isinstance(value, str) else ''}"
    return problem(loc, msg, PYDANTIC_TYPE[kind])


def refused(problems: list[dict[str, Any]]) -> Unprocessable:
    return Unprocessable("; ".join(p["msg"] for p in problems), {"errors": problems}, code=CODE)


def typing_problems(body: Mapping[str, Any], types: Mapping[str, JsonType]) -> list[dict[str, Any]]:
    """A detail item for each field of `body` that `types` names and whose value (not null) is of another JSON type,
    in the order `types` lists them."""
    return [
        mistyped([name], kind, body[name])
        for name, kind in types.items()
        if body.get(name) is not None and not is_json(body[name], kind)
    ]


def unknown_problems(body: Mapping[str, Any], fields: Sequence[str], what: str) -> list[dict[str, Any]]:
    """A detail item (pydantic's `extra_forbidden`) for each field of `body` not among `fields`, naming the fields the
    body may hold (`what`: the body's name): a misspelt field is told, never read as one left out."""
    holds = f"{', '.join(fields[:-1])} and {fields[-1]}" if len(fields) > 1 else fields[0]
    return [
        problem([name], f"{name}: not a field of {what}, which holds {holds}", "extra_forbidden")
        for name in sorted(set(body) - set(fields))
    ]


def check_types(body: Mapping[str, Any], types: Mapping[str, JsonType]) -> None:
    """Refuse (422, every such field named) a body one of whose fields is not of the JSON type `types` gives it."""
    problems = typing_problems(body, types)
    if problems:
        raise refused(problems)


def _integer(value: Any) -> Any:
    if not is_json(value, "integer"):
        raise PydanticCustomError("int_type", "Input should be a valid integer (a JSON number without a fraction)")
    return int(value)


# A definition's fields as the contract types them, for its pydantic models: pydantic's lax mode would read `"7.0"`
# or `true` as the integer 7 or 1, `"3"` as the number 3.0, `"no"` or `0` as false.
JsonInteger = Annotated[int, BeforeValidator(_integer)]
JsonNumber = Annotated[float, Strict()]
JsonBoolean = Annotated[bool, Strict()]
