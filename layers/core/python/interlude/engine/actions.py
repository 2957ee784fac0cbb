"""Nodes whose work is done outside the run, exactly once: `core.http` (issue 15). Pure: builds the request only.

A visit of an action node renders its request from the run's scope and leaves the node `running` with a
PendingAction in the run state; the `interlude.action-requested` event it emits is the outbox's cue to queue it
(interlude.adapters.actions), and the worker's outcome completes or fails the node (engine.run.finish_action).

The effect's identity (OpenWOP idempotency Layer 2) is fixed here, once per effect:
* `effectKey` set (a template naming the business operation, e.g. "refund-{{inputs.orderId}}"): keying
  `business-identity`; the id derives from the tenant and the rendered key alone, so every run, visit and
  redelivery naming the same operation reaches the same effect record and it is performed once;
* otherwise `activity-recipe`: derived from (run, node, visit).
The Idempotency-Key the provider receives is the id's opaque part: stable across attempts and redeliveries.

Limits (documented in the README): URL 2048 characters; at most MAX_HEADERS headers, names of at most 64
token characters, values of at most MAX_HEADER_VALUE characters; at most MAX_SECRET_HEADERS headers from
Secrets Manager; a JSON body of at most MAX_BODY_BYTES; a response budget of at most MAX_RESPONSE_BUDGET_BYTES;
an effect key of at most MAX_EFFECT_KEY characters; 1..MAX_ATTEMPTS attempts of at most MAX_TIMEOUT_MS each.
"""


import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator

from interlude import wiring
from interlude.domain.budgets import BudgetExceeded, Meter, json_size
from interlude.domain.ids import derive_opaque, tenant_bound, tenant_of
from interlude.domain.models import FrozenStored, new_list
from interlude.domain.templates import render
from interlude.engine.effect_names import ACTION_REQUESTED as ACTION_REQUESTED
from interlude.engine.nodetypes import ActionSpec, Keying, NodeType

MAX_URL_LENGTH = 2048
MAX_HEADERS = 20
MAX_HEADER_VALUE = 2048
MAX_SECRET_HEADERS = 5
MAX_BODY_BYTES = 32 * 1024
DEFAULT_RESPONSE_BUDGET_BYTES = 16 * 1024
# Half a node output's budget (domain.budgets.MAX_VALUE_BYTES): the response becomes the node's output.
MAX_RESPONSE_BUDGET_BYTES = 32 * 1024
MAX_EFFECT_KEY = 256
DEFAULT_TIMEOUT_MS = 15_000
MAX_TIMEOUT_MS = 30_000
DEFAULT_ATTEMPTS = 5
MAX_ATTEMPTS = wiring.ACTION_MAX_ATTEMPTS

HEADER_NAME_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")
SECRET_REF_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
# What a header value may hold (RFC 9110 section 5.5): visible ASCII, spaces and tabs, and Latin-1's printable upper
# half (obs-text, which the HTTP client sends as single octets). Not CR or LF, which would start a header of the
# tenant's own, nor other control characters (C1's too), which receivers read differently, nor what Latin-1 cannot
# write, which no request carries.
HEADER_VALUE_RE = re.compile(r"[\t\x20-\x7e\xa0-\xff]*")
# Set by the worker or by the connection itself; a definition may not set them.
RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "expect",
        "proxy-authorization",
        "proxy-connection",
        "idempotency-key",
    }
)


def _header_names(names: Mapping[str, Any], what: str) -> None:
    for name in names:
        if not HEADER_NAME_RE.fullmatch(name):
            raise ValueError(f"{what}: {name!r} is not a header name (at most 64 token characters)")
        if name.lower() in RESERVED_HEADERS:
            raise ValueError(f"{what}: {name!r} is set by Interlude and cannot be configured")


class HttpConfig(FrozenStored):
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    # A template: `https://api.example.com/refunds/{{inputs.orderId}}`.
    url: str = Field(min_length=1, max_length=MAX_URL_LENGTH)
    headers: dict[str, str] = Field(default_factory=dict, max_length=MAX_HEADERS)
    # Header name -> the name of a tenant secret in Secrets Manager (`{prefix}{tenant}/{name}`): the value is read
    # by the worker at the moment of the call and never enters a definition, an event, the run state or a log.
    secretHeaders: dict[str, str] = Field(default_factory=dict, max_length=MAX_SECRET_HEADERS)
    # Any JSON value whose string leaves are templates; sent as application/json. None: no body.
    body: Any = None
    # The statuses that count as success; empty: any 2xx.
    expectStatuses: list[int] = Field(default_factory=new_list, max_length=20)
    responseBudgetBytes: int = Field(default=DEFAULT_RESPONSE_BUDGET_BYTES, ge=0, le=MAX_RESPONSE_BUDGET_BYTES)
    # The business identity of the effect (a template); None: keyed by the activity recipe (run, node, visit).
    effectKey: str | None = Field(default=None, min_length=1, max_length=MAX_EFFECT_KEY)
    timeoutMs: int = Field(default=DEFAULT_TIMEOUT_MS, ge=1000, le=MAX_TIMEOUT_MS)
    maxAttempts: int = Field(default=DEFAULT_ATTEMPTS, ge=1, le=MAX_ATTEMPTS)

    @field_validator("headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        _header_names(value, "headers")
        return value

    @field_validator("secretHeaders")
    @classmethod
    def _secret_headers(cls, value: dict[str, str]) -> dict[str, str]:
        _header_names(value, "secretHeaders")
        for ref in value.values():
            if not SECRET_REF_RE.fullmatch(ref):
                raise ValueError(f"secretHeaders: {ref!r} is not a secret name (1-128 of A-Z a-z 0-9 _ . -)")
        return value

    @field_validator("expectStatuses")
    @classmethod
    def _statuses(cls, value: list[int]) -> list[int]:
        if any(not 100 <= status <= 599 for status in value):
            raise ValueError("expectStatuses holds HTTP statuses (100-599)")
        return value


def effect_identity(run_id: str, node_id: str, visit: int, business_key: str | None) -> tuple[str, Keying]:
    tenant = tenant_of(run_id)
    if business_key is not None:
        return tenant_bound(tenant, derive_opaque("effect", "http", business_key)), "business-identity"
    return tenant_bound(tenant, derive_opaque("effect", run_id, node_id, str(visit))), "activity-recipe"


def provider_key(effect_id: str) -> str:
    """The Idempotency-Key sent with every attempt of the effect: its id's opaque part."""
    return effect_id.split("/", 1)[1]


def _text(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} must render to text, got {type(value).__name__}")
    if len(value) > limit or any(c in value for c in "\r\n\x00"):
        raise ValueError(f"{what} must render to at most {limit} characters on one line")
    return value


def is_header_value(value: str) -> bool:
    return HEADER_VALUE_RE.fullmatch(value) is not None


def _header_value(name: str, value: Any) -> str:
    text = _text(value, f"header {name}", MAX_HEADER_VALUE)
    if not is_header_value(text):
        raise ValueError(f"header {name} must render to visible characters, spaces and tabs (Latin-1)")
    return text


def _http(node_id: str, cfg: HttpConfig, scope: Mapping[str, Any]) -> ActionSpec | str:
    """The request a visit sends; a message (the node fails with validation_error) when it cannot be built."""
    run = scope.get("$run") or {}
    meter = Meter(what="the request")
    try:
        url = _text(render(cfg.url, scope, meter=meter), "url", MAX_URL_LENGTH)
        headers = {name: _header_value(name, render(value, scope, meter=meter)) for name, value in cfg.headers.items()}
        business = None
        if cfg.effectKey is not None:
            business = _text(render(cfg.effectKey, scope, meter=meter), "effectKey", MAX_EFFECT_KEY)
        request: dict[str, Any] = {
            "method": cfg.method,
            "url": url,
            "headers": headers,
            "secretHeaders": dict(cfg.secretHeaders),
            "expectStatuses": list(cfg.expectStatuses),
            "responseBudgetBytes": cfg.responseBudgetBytes,
            "timeoutMs": cfg.timeoutMs,
            "maxAttempts": cfg.maxAttempts,
        }
        if cfg.body is not None:
            body = render(cfg.body, scope, meter=meter)
            json_size(body, MAX_BODY_BYTES, "the request body")
            request["body"] = json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except BudgetExceeded as exc:
        return f"node {node_id!r}: {exc}"
    except ValueError as exc:
        return f"node {node_id!r}: {exc}"
    effect_id, keying = effect_identity(run.get("runId", "probe/probe"), node_id, int(run.get("visit", 1)), business)
    return ActionSpec("http", effect_id, keying, request)


ACTION_TYPES: tuple[NodeType, ...] = (NodeType("core.http", HttpConfig, act=_http),)
