"""Refusals named for what happened, the one registry of their OpenWOP codes, and the codes a run fails with.

Every layer raises these; none of them knows HTTP. The API edge (interlude.api.errors) is the one place that
turns an outcome into a status, an envelope and headers, once per face. Every code registered here is
returned somewhere and has a test.
"""

from __future__ import annotations

from typing import Any, ClassVar


class DomainError(Exception):
    """A refusal: its class says what happened, `code` is the OpenWOP error code the caller sees."""

    # The code a refusal of this outcome carries unless it names another (None: every raise names its code).
    default_code: ClassVar[str | None] = None

    def __init__(
        self,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        code: str | None = None,
        retry_after_s: int | None = None,
    ) -> None:
        code = code or self.default_code
        if code is None or not issubclass(type(self), ERROR_CODES.get(code, ())):
            raise ValueError(f"error code {code!r} is not registered for {type(self).__name__}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details
        # When a retry may succeed, in seconds (only for refusals that pass with time).
        self.retry_after_s = retry_after_s

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r}, {self.details!r})"


class Invalid(DomainError):
    """The request itself is wrong: correcting it is the way forward."""

    default_code = "validation_error"


class Unauthenticated(DomainError):
    """No credential, or one that is not accepted."""

    default_code = "unauthenticated"


class Forbidden(DomainError):
    """The caller is known but may not do this."""

    default_code = "forbidden"


class NotFound(DomainError):
    default_code = "not_found"


class MethodNotAllowed(DomainError):
    """The resource exists but does not answer this method; `allowed` lists the methods it does answer."""

    default_code = "interlude.method_not_allowed"

    def __init__(self, message: str, allowed: list[str]) -> None:
        super().__init__(message, {"allowed": allowed})
        self.allowed = allowed


class Conflict(DomainError):
    """The request is well formed but the state it acts on has moved on (or is still moving)."""


class Expired(DomainError):
    default_code = "interrupt_expired"


class TooLarge(DomainError):
    default_code = "payload_too_large"


class UnsupportedMedia(DomainError):
    default_code = "unsupported_media_type"


class Unprocessable(DomainError):
    """Well-formed input describing something that cannot run (a ModuleX definition)."""

    default_code = "interlude.workflow_unprocessable"


class Unavailable(DomainError):
    """Transiently unable to answer; `retry_after_s` says when to try again."""

    default_code = "runner_unavailable"


class RateLimited(DomainError):
    """The caller's tenant sent more requests than its rate allows; `retry_after_s` says when the next window opens."""

    default_code = "rate_limited"


class Internal(DomainError):
    """A failure of this host, never of the request."""

    default_code = "internal_error"


# The one registry of error codes a request can be refused with, each with its outcome.
ERROR_CODES: dict[str, type[DomainError]] = {
    "validation_error": Invalid,
    "idempotency_key_invalid": Invalid,
    "unsupported_stream_mode": Invalid,
    "unauthenticated": Unauthenticated,
    "interrupt_token_invalid": Unauthenticated,
    # POST /slack/{tenant}/interactions (issue 28 item 6): not signed by Slack with the tenant's signing secret, signed
    # more than 5 minutes from now, or the tenant has set no signing secret (`details.reason` says which).
    "interlude.slack_signature_invalid": Unauthenticated,
    "forbidden": Forbidden,
    # The id names another tenant's resource: the caller may not see it (OpenWOP: 403; ModuleX hides it as 404).
    "id_tenant_mismatch": Forbidden,
    # POST /runs:bulk-cancel: an id of a run the caller may not see, in that id's own result entry.
    "run_forbidden": Forbidden,
    # A tenant's quota (open runs, stored workflow versions, definition size or nodes) would be passed:
    # `details.quota` names it. Not retryable by waiting, so not 429 (clients retry 429 on their own).
    "interlude.quota_exceeded": Forbidden,
    "not_found": NotFound,
    "interlude.method_not_allowed": MethodNotAllowed,
    "interrupt_already_resolved": Conflict,
    "run_terminal": Conflict,
    "idempotency_key_mismatch": Conflict,
    "idempotency_in_flight": Conflict,
    "interlude.vote_already_cast": Conflict,
    # ModuleX face: the run is not in a state the operation needs (interrupted to resume, live to cancel).
    "interlude.run_state_invalid": Conflict,
    # ModuleX face: a definition that cannot run (FastAPI-style detail list in details.errors).
    "interlude.workflow_unprocessable": Unprocessable,
    # ModuleX face: a body field whose value its type in the contract does not admit (a JSON type other than its own:
    # the string "false" for a boolean; a recursion_limit that is not a positive integer), FastAPI's 422, naming the
    # field in details.errors (the same detail list).
    "interlude.field_unprocessable": Unprocessable,
    "interrupt_expired": Expired,
    "payload_too_large": TooLarge,
    "unsupported_media_type": UnsupportedMedia,
    "internal_error": Internal,
    # A stored item in a format newer than this release reads (domain/formats.py): a later release wrote it.
    "interlude.item_too_new": Internal,
    # A gate's item in format 12 (store/gate_payloads.py) that its workflow version does not read back: the version's
    # node was changed by hand since, or is gone. Never read as another payload (zlib checks the dictionary).
    "interlude.gate_payload_unreadable": Internal,
    "runner_unavailable": Unavailable,
    # The tenant's request rate passed its limit (OpenWOP's code; always with Retry-After).
    "rate_limited": RateLimited,
    # A webhook subscription's url the egress guard refuses at registration (OpenWOP webhooks.md §SSRF).
    "webhook_url_rejected": Invalid,
    # The tenant's settings do not allow approvers to delegate their vote (issue 14 item 4).
    "interlude.delegation_not_allowed": Forbidden,
    # Issue 29 item 3: a claim of a gate another person works, or a release by someone who neither holds nor assigned it.
    "interlude.gate_claimed": Conflict,
    # Task workers (issue 15 item 2): a task token that is not one Interlude issued (malformed), and one that no
    # longer holds its task (completed or failed already, its lease lapsed and the task went back or on, the run
    # no longer waits on it): a second completion answers this.
    "interlude.task_token_invalid": Invalid,
    "interlude.task_not_claimed": Conflict,
    # A webhook secret rotation while the previous rotation's overlap lasts (at most two live secrets).
    "interlude.rotation_in_overlap": Conflict,
    # Replays of what failed (issue 30 item 5): a unit that is not dead-lettered (delivered, sent, or replayed
    # already), one replayed the most times a unit is, a recovery past its limit (narrow the window) or while another
    # of the same scope runs, and a run whose failed action cannot be taken again from where it failed.
    "interlude.not_dead_lettered": Conflict,
    "interlude.replay_limit_reached": Conflict,
    "interlude.recovery_too_large": Invalid,
    "interlude.recovery_running": Conflict,
    "interlude.action_not_retryable": Conflict,
    # Forks (issue 29 item 2, interlude.app.forks): a fork point past the source's event log (OpenWOP's code); an
    # operation the run's status does not allow (a redrive of a run that did not fail: OpenWOP's code); a run forked
    # the most times one run is.
    "fork_point_invalid": Unprocessable,
    "run_state_conflict": Conflict,
    "interlude.fork_limit_reached": Conflict,
    # Issue 30 item 6: the tenant of the key, console session or link is suspended (or being deleted) by the operator;
    # nothing it asked for was done. OpenWOP registers no such code, so it carries the vendor prefix.
    "interlude.tenant_suspended": Forbidden,
    # The operator surface (interlude.app.tenant_lifecycle, the `admin` function): a tenant made twice; one deleted
    # that is not suspended first; one being deleted, which nothing but the deletion may change any more.
    "interlude.tenant_exists": Conflict,
    "interlude.tenant_not_suspended": Conflict,
    "interlude.tenant_deleting": Conflict,
}

# Codes a run or node fails with (the `error` of node.failed / run.failed); besides validation_error, none
# answers a request.
RUN_ERROR_CODES = frozenset(
    {
        "approval_rejected",
        "interlude.interrupt_timeout",
        "run_timeout",
        "loop_limit_exceeded",
        "recursion_limit_exceeded",
        "connector_auth_declined",
        "validation_error",
        # A node's output, a gate's data or the run's state would pass its budget (domain/budgets.py).
        "interlude.budget_exceeded",
        # A node's own code failed (a bug, or an expression Python cannot evaluate), or what followed a decision
        # could not be built: the node or run fails rather than the request (engine/run.py, app/runs.py).
        "interlude.node_error",
        # A core.http action (interlude.adapters.actions): the egress guard refused its URL; its auth secret could
        # not be read; it was answered with a status it does not expect, or its attempts ran out.
        "interlude.egress_denied",
        "interlude.secret_unavailable",
        "interlude.http_failed",
        # A core.subWorkflow (engine/subworkflows.py): the child could not start (no such workflow, bad inputs, or
        # the depth or children-per-run limit), failed, or was cancelled on its own.
        "interlude.subworkflow_unavailable",
        "interlude.subworkflow_limit_exceeded",
        "interlude.subworkflow_failed",
        "interlude.subworkflow_cancelled",
        # A core.subWorkflow's outputMapping names a path its finished child's outputs do not have.
        "interlude.subworkflow_output_missing",
        # A task node (engine/tasks.py): its worker failed it (not retryable, or its attempts ran out), or its last
        # attempt's heartbeat or timeout lapsed (details.reason: heartbeat | timeout).
        "interlude.task_failed",
        "interlude.task_timeout",
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
