"""The one place a refusal becomes HTTP: its status, its body and its headers, for each face.

Below the API edge a refusal is a DomainError named for what happened (interlude.domain.errors); here each
outcome gets its status, with the few codes whose status differs from their outcome's written out once. The
OpenWOP face answers the envelope `{error, message, details?}`; the ModuleX face answers `{detail}` with the
code in `X-Interlude-Error`. Which face a request belongs to is its route's (wiring.Route.face); the
resolver's handlers in interlude.api.http render what `reply` gives.
"""

from __future__ import annotations

from typing import Any

from interlude.domain.errors import (
    ERROR_CODES,
    Conflict,
    DomainError,
    Expired,
    Forbidden,
    Internal,
    Invalid,
    MethodNotAllowed,
    NotFound,
    RateLimited,
    TooLarge,
    Unauthenticated,
    Unavailable,
    Unprocessable,
    UnsupportedMedia,
)
from interlude.wiring import Face

# RFC 6750 §3: a refused API key names the scheme the caller should use.
BEARER_CHALLENGE = 'Bearer realm="interlude"'
ERROR_CODE_HEADER = "X-Interlude-Error"

OUTCOME_STATUS: dict[type[DomainError], int] = {
    Invalid: 400,
    Unauthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    MethodNotAllowed: 405,
    Conflict: 409,
    Expired: 410,
    TooLarge: 413,
    UnsupportedMedia: 415,
    Unprocessable: 422,
    RateLimited: 429,
    Internal: 500,
    Unavailable: 503,
}

# Codes whose status is not their outcome's. The ModuleX contract answers 400 for a run in the wrong state,
# and hides another organisation's run behind the same 404 as a missing one (no existence leak). A resume or a
# cancel that loses its race to another answer, the deadline or the run's end is told what one arriving just after
# is told (a client cannot tell the two apart): 400, its code saying which it was (docs/adr/0187).
MODULEX_CODE_STATUS: dict[str, int] = {
    "interlude.run_state_invalid": 400,
    "interrupt_already_resolved": 400,
    "run_terminal": 400,
    "id_tenant_mismatch": 404,
}
# The OpenWOP face serves no ModuleX-only code, but the code's status is one wherever it is listed.
OPENWOP_CODE_STATUS: dict[str, int] = {"interlude.run_state_invalid": 400}


def outcome_status(outcome: type[DomainError]) -> int:
    return next(status for cls, status in OUTCOME_STATUS.items() if issubclass(outcome, cls))


def status_for_code(code: str, face: Face = "openwop") -> int:
    """The status a registered code answers with on a face (for the OpenAPI document's error responses)."""
    overrides = MODULEX_CODE_STATUS if face == "modulex" else OPENWOP_CODE_STATUS
    return overrides.get(code) or outcome_status(ERROR_CODES[code])


def status_of(exc: DomainError, face: Face = "openwop") -> int:
    return status_for_code(exc.code, face)


def headers_of(exc: DomainError) -> dict[str, str]:
    """What the refusal's data means in HTTP headers."""
    headers: dict[str, str] = {}
    if exc.code == "unauthenticated":
        headers["WWW-Authenticate"] = BEARER_CHALLENGE
    if exc.retry_after_s is not None:
        headers["Retry-After"] = str(exc.retry_after_s)
    if isinstance(exc, MethodNotAllowed):
        headers["Allow"] = ", ".join(exc.allowed)
    return headers


def envelope(exc: DomainError) -> dict[str, Any]:
    body: dict[str, Any] = {"error": exc.code, "message": exc.message}
    if exc.details is not None:
        body["details"] = exc.details
    return body


def modulex_detail(exc: DomainError) -> Any:
    if isinstance(exc, Unprocessable) and exc.details and exc.details.get("errors"):
        return exc.details["errors"]  # FastAPI-style [{loc, msg, type}]
    return exc.message


def reply(exc: DomainError, face: Face) -> tuple[int, dict[str, Any], dict[str, str]]:
    """(status, body, headers) of a refusal on a face: the OpenWOP envelope, or ModuleX `{detail}`."""
    if face == "modulex":
        return status_of(exc, face), {"detail": modulex_detail(exc)}, {**headers_of(exc), ERROR_CODE_HEADER: exc.code}
    return status_of(exc, face), envelope(exc), headers_of(exc)
