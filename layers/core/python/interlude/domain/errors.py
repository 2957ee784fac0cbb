"""The one registry of error codes this host returns, and the exception that carries them.

Statuses follow the OpenWOP v2 error registry (shared/reference/openwop-notes.md §1.9). Every code
listed here is returned somewhere and has a test; nothing outside this table may invent a status.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ERROR_STATUS: dict[str, int] = {
    "validation_error": 400,
    "idempotency_key_invalid": 400,
    "unsupported_stream_mode": 400,
    "unauthenticated": 401,
    "interrupt_token_invalid": 401,
    "forbidden": 403,
    "id_tenant_mismatch": 403,
    "not_found": 404,
    "interlude.method_not_allowed": 405,
    "interrupt_already_resolved": 409,
    "run_terminal": 409,
    "idempotency_key_mismatch": 409,
    "idempotency_in_flight": 409,
    "interlude.vote_already_cast": 409,
    # ModuleX face (interlude.api.modulex): a run that is not in a state the operation needs (400 there), and a
    # ModuleX definition that cannot run (422, FastAPI-style detail list).
    "interlude.run_state_invalid": 400,
    "interlude.workflow_unprocessable": 422,
    "interrupt_expired": 410,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "internal_error": 500,
    "runner_unavailable": 503,
}

# Codes a run or node fails with (the `error` of node.failed / run.failed); besides validation_error, none
# answers a request.
RUN_ERROR_CODES = frozenset(
    {
        "approval_rejected",
        "interrupt_timeout",
        "run_timeout",
        "loop_limit_exceeded",
        "recursion_limit_exceeded",
        "connector_auth_declined",
        "validation_error",
        # A node's output, a gate's data or the run's state would pass its budget (interlude/budgets.py).
        "interlude.budget_exceeded",
        # A node's own code failed (a bug, or an expression Python cannot evaluate), or what followed a decision
        # could not be built: the node or run fails rather than the request (engine/run.py, service.py).
        "interlude.node_error",
    }
)


def run_error(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `error` a node or run fails with: never retryable, since every cause is decided, not transient."""
    if code not in RUN_ERROR_CODES:
        raise ValueError(f"unregistered run error code {code!r}")
    error: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        error["details"] = details
    error["retryable"] = False
    return error


@dataclass
class ApiError(Exception):
    """A refusal that maps to an HTTP status through ERROR_STATUS."""

    code: str
    message: str
    details: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.code not in ERROR_STATUS:
            raise ValueError(f"unregistered error code {self.code!r}")
        super().__init__(self.message)

    @property
    def status(self) -> int:
        return ERROR_STATUS[self.code]

    def envelope(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.details is not None:
            body["details"] = self.details
        return body
