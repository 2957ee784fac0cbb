"""`interlude workflows validate FILE`: the checks PUT /workflows/{id} (or ModuleX POST /workflows) makes, offline,
refusing with the same codes, messages and details as the API (the host's default quotas apply)."""

from __future__ import annotations

import json
from typing import Any

from interlude.api.errors import status_of
from interlude.app.workflows import check_workflow, stored_form, stored_size
from interlude.cli.client import refusal_line
from interlude.cli.files import face_of
from interlude.config import Settings
from interlude.domain.errors import DomainError
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.domain.validation import parse
from interlude.faces.modulex.workflows import translated
from interlude.rules.limits import Limits, check_definition


def default_limits() -> Limits:
    """The host's default definition quotas (no deployment is asked: a tenant's own may be lower or higher)."""
    defaults = Settings(table_name="", entries_table_name="")
    return Limits(
        requests_per_second=defaults.tenant_requests_per_second,
        open_runs=defaults.tenant_open_runs,
        workflow_versions=defaults.tenant_workflow_versions,
        definition_bytes=defaults.tenant_definition_bytes,
        definition_nodes=defaults.tenant_definition_nodes,
    )


def validate(raw: Any) -> tuple[str, dict[str, Any] | None]:
    """(face, None) for a valid definition; (face, the refusal: error, message, details, line) otherwise."""
    face = face_of(raw)
    try:
        if face == "modulex":
            translated(raw.get("workflow_schema", raw))
        else:
            definition = parse(WorkflowDefinition, raw, "workflow definition")
            check_workflow(definition)
            stored = stored_form(definition, definition.id or "workflow")
            check_definition(stored_size(stored), len(definition.nodes), default_limits())
    except DomainError as refused:
        body: dict[str, Any] = {"error": refused.code, "message": refused.message}
        if refused.details is not None:
            body["details"] = refused.details
        return face, {**body, "line": refusal_line(status_of(refused), json.dumps(body).encode())}
    return face, None
