"""This API's OpenAPI document, generated from wiring.ROUTES as interlude.api.contract reads each route: its request
model, its success bodies (models, or the vendored OpenWOP schemas for the run snapshot and events), its parameters,
and every error it may answer by status (OpenWOP: the envelope with the codes of that status; ModuleX: `{detail}`
with the code in X-Interlude-Error)."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from pydantic import BaseModel

from interlude import __version__, wiring
from interlude.api import contract
from interlude.api.idempotency import KEY_RE as IDEMPOTENCY_KEY_RE
from interlude.domain import schemas as openwop
from interlude.domain.errors import ERROR_CODES
from interlude.domain.models.responses import COMPONENT_MARKER
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.wiring import HTML, JSON, MERGE_PATCH

REF = "#/components/schemas/{model}"
# The vendored OpenWOP schemas the document carries, by component name.
OPENWOP_COMPONENTS = {"RunSnapshot": "run-snapshot.schema.json", "RunEvent": "run-event.schema.json"}
# A vendored schema refers to siblings by file name; one the repository does not vendor is read as "any".
MAX_INLINE_DEPTH = 40
ERROR = {
    "type": "object",
    "required": ["error", "message"],
    "additionalProperties": False,
    "properties": {
        "error": {"type": "string", "enum": sorted(ERROR_CODES)},
        "message": {"type": "string", "minLength": 1},
        "details": {"type": "object"},
    },
}
MODULEX_ERROR = {
    "type": "object",
    "required": ["detail"],
    "additionalProperties": False,
    "properties": {
        "detail": {
            "description": "A message, or FastAPI-style [{loc, msg, type}] for a definition that cannot run",
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}],
        }
    },
}


def inlined(name: str) -> dict[str, Any]:
    """A vendored OpenWOP schema with every $ref replaced by what it names: self-contained, for a component."""
    return _inline(openwop.load(name), name, 0)


def _inline(node: Any, base: str, depth: int) -> Any:
    if isinstance(node, list):
        return [_inline(item, base, depth) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target, base_of_target = _target(node["$ref"], base)
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if target is None or depth > MAX_INLINE_DEPTH:
            return _inline(siblings, base, depth)
        return _inline({**target, **siblings}, base_of_target, depth + 1)
    return {k: _inline(v, base, depth) for k, v in node.items() if k not in ("$id", "$schema", "$defs", "$comment")}


def _target(ref: str, base: str) -> tuple[dict[str, Any] | None, str]:
    file, _, pointer = ref.partition("#")
    file = file or base
    if file not in openwop.SCHEMA_FILES:
        return None, base
    node: Any = openwop.load(file)
    for part in [p for p in pointer.split("/") if p]:
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node, file


class Components:
    def __init__(self) -> None:
        self.schemas: dict[str, Any] = {"Error": ERROR, "ModulexError": MODULEX_ERROR}
        for name, file in OPENWOP_COMPONENTS.items():
            self.schemas[name] = inlined(file)
        # Answers refer to the definition by name (interlude.domain.models.responses.WorkflowDocument).
        self.ref(WorkflowDefinition, "validation")

    def ref(self, model: type[BaseModel], mode: str) -> dict[str, Any]:
        name = model.__name__
        if name not in self.schemas:
            schema = model.model_json_schema(ref_template=REF, mode=mode)  # type: ignore[arg-type]
            self.schemas.update(_components_referenced(schema.pop("$defs", {})))
            self.schemas[name] = _components_referenced(schema)
        return {"$ref": REF.format(model=name)}


def _components_referenced(node: Any) -> Any:
    """A model's schema with each component marker (interlude.domain.models.responses.component) as a $ref."""
    if isinstance(node, list):
        return [_components_referenced(item) for item in node]
    if not isinstance(node, dict):
        return node
    if COMPONENT_MARKER in node:
        return {"$ref": REF.format(model=node[COMPONENT_MARKER])}
    return {k: _components_referenced(v) for k, v in node.items()}


def parameters(route: wiring.Route) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
        for name in re.findall(r"{(\w+)}", route.path)
    ]
    for param in contract.params(route):
        found.append({"name": param.name, "in": param.where, "required": False, "schema": param.schema})
        if param.description:
            found[-1]["description"] = param.description
    if route.mutating:
        pattern = f"^{IDEMPOTENCY_KEY_RE.pattern}$"
        found.append(
            {"name": "Idempotency-Key", "in": "header", "required": False, "schema": {"type": "string", "pattern": pattern}}
        )
    return found


def request_body(route: wiring.Route, components: Components) -> dict[str, Any] | None:
    if route.request is None:
        return None
    schema = {"schema": components.ref(contract.model(route.request), "validation")}
    content: dict[str, Any] = {MERGE_PATCH: schema, JSON: schema} if route.method == "PATCH" else {JSON: schema}
    if route.form:
        content[contract.FORM] = {"schema": {"type": "object", "additionalProperties": {"type": "string"}}}
    return {"required": not route.optional_body, "content": content}


def success(answer: wiring.Answer, route: wiring.Route, components: Components) -> dict[str, Any]:
    out: dict[str, Any] = {"description": answer.description}
    if answer.one_of:
        schema: dict[str, Any] | None = {
            "oneOf": [components.ref(contract.model(m), "serialization") for m in answer.one_of]
        }
    elif answer.model is not None:
        schema = components.ref(contract.model(answer.model), "serialization")
    else:
        schema = answer.schema
    content = {media: {"schema": schema} for media in answer.media}
    if route.html_errors:
        content[HTML] = {"schema": contract.PAGE}
    if content:
        out["content"] = content
    if answer.headers:
        out["headers"] = {h: {"schema": {"type": "string"}} for h in answer.headers}
    return out


def refusal(route: wiring.Route, status: int, codes: list[str]) -> dict[str, Any]:
    described = f"Refused: {', '.join(codes)}"
    if contract.is_modulex(route):
        return {
            "description": described,
            "content": {JSON: {"schema": {"$ref": REF.format(model="ModulexError")}}},
            "headers": {
                "X-Interlude-Error": {"description": "The OpenWOP code", "schema": {"type": "string", "enum": codes}}
            },
        }
    envelope = {"allOf": [{"$ref": REF.format(model="Error")}, {"properties": {"error": {"enum": codes}}}]}
    content: dict[str, Any] = {JSON: {"schema": envelope}}
    if route.html_errors:
        content[HTML] = {"schema": contract.PAGE}
    return {"description": described, "content": content}


def operation(route: wiring.Route, components: Components) -> dict[str, Any]:
    responses: dict[str, Any] = {str(a.status): success(a, route, components) for a in route.answers}
    for status, codes in contract.error_statuses(route).items():
        responses[str(status)] = refusal(route, status, codes)
    doc: dict[str, Any] = {
        "operationId": route.operation,
        "summary": route.summary,
        "security": [{"bearer": [route.scope]}] if route.scope else [],
        "parameters": parameters(route),
        "responses": responses,
    }
    body = request_body(route, components)
    if body is not None:
        doc["requestBody"] = body
    return doc


@cache
def document() -> dict[str, Any]:
    components = Components()
    paths: dict[str, Any] = {}
    for route in wiring.ROUTES:
        paths.setdefault(route.path, {})[route.method.lower()] = operation(route, components)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Interlude", "version": __version__},
        "paths": paths,
        "components": {
            "schemas": components.schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
