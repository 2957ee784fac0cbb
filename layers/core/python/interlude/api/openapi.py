"""This API's OpenAPI document, generated from wiring.ROUTES and the request models."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from interlude import __version__, wiring
from interlude.api.idempotency import KEY_RE as IDEMPOTENCY_KEY_RE
from interlude.domain.errors import ERROR_STATUS
from interlude.domain.models.requests import (
    CancelRunRequest,
    CreateKeyRequest,
    CreateRunRequest,
    ResolveInterruptRequest,
)
from interlude.domain.models.tenants import CredentialGrantRequest, PostEventRequest, TenantSettings
from interlude.domain.models.tokens import MintTokenRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.faces.modulex.operations import ModulexCancelRequest, ModulexResumeRequest, ModulexRunRequest

REQUEST_BODIES = {
    "createRun": CreateRunRequest,
    "resolveInterruptByRun": ResolveInterruptRequest,
    "cancelRun": CancelRunRequest,
    "createKey": CreateKeyRequest,
    "putWorkflow": WorkflowDefinition,
    "resolveInterruptByToken": ResolveInterruptRequest,
    "mintInterruptToken": MintTokenRequest,
    "postEvent": PostEventRequest,
    "putTenantSettings": TenantSettings,
    "putCredentialGrant": CredentialGrantRequest,
    "modulexRun": ModulexRunRequest,
    "modulexResume": ModulexResumeRequest,
    "modulexCancel": ModulexCancelRequest,
}


@cache
def document() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {
        "Error": {
            "type": "object",
            "required": ["error", "message"],
            "additionalProperties": False,
            "properties": {
                "error": {"type": "string", "enum": sorted(ERROR_STATUS)},
                "message": {"type": "string", "minLength": 1},
                "details": {"type": "object"},
            },
        }
    }
    for route in wiring.ROUTES:
        op: dict[str, Any] = {
            "operationId": route.operation,
            "summary": route.summary,
            "security": [{"bearer": [route.scope]}] if route.scope else [],
            "parameters": [
                {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                for name in re.findall(r"{(\w+)}", route.path)
            ],
            "responses": {
                "default": {
                    "description": "Error",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                }
            },
        }
        if route.mutating:
            op["parameters"].append(
                {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string", "pattern": f"^{IDEMPOTENCY_KEY_RE.pattern}$"},
                }
            )
        model = REQUEST_BODIES.get(route.operation)
        if model is not None:
            name = model.__name__
            schemas[name] = model.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(schemas[name].pop("$defs", {}))
            op["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}},
            }
        paths.setdefault(route.path, {})[route.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "Interlude", "version": __version__},
        "paths": paths,
        "components": {"schemas": schemas, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }
