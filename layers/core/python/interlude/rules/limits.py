"""Per-tenant limits, decided without I/O: which limits apply, which request window a moment falls in, whether a
definition fits. The store keeps the counters (interlude/store/limits.py); the API edge turns a refusal into
`429` + `Retry-After` (rate) or `403 interlude.quota_exceeded` (quotas). Reasons: docs/adr/0017.
"""

import math
from typing import TYPE_CHECKING, NamedTuple

from interlude.domain.errors import Forbidden

if TYPE_CHECKING:  # annotations only: the store imports this module, and a cold start need not build the models
    from interlude.domain.models.tenants import TenantLimits

# Requests are counted in fixed windows of this many seconds; one counter item per tenant holds a span's windows, each
# its own count (store/limits.py), so one write can count a lease in several of them (docs/adr/0174).
WINDOW_SECONDS = 1
SPAN_SECONDS = 60
# How many windows, this one included, a warm instance counts its lease in at once (app/limits.py): what it may hold
# unused in each is a lease, as in one window, and a quiet instance writes once for its next requests, not each.
AHEAD_WINDOWS = 15
# Leases counted ahead take at most this share of a later window's limit (a count ahead past it is refused whole): the
# rest is left to the requests that window will bring, so instances that counted ahead and then had no request in it
# (however many) never hold a tenant's whole second (docs/adr/0174).
AHEAD_SHARE = 0.5
# A span's counter is kept this long after it closes (DynamoDB TTL sweeps it), long enough to read in a bench.
WINDOW_TTL_SECONDS = 3600


class Limits(NamedTuple):
    """The limits in force for one tenant: its own settings over the host's defaults."""

    requests_per_second: int
    open_runs: int
    workflow_versions: int
    definition_bytes: int
    definition_nodes: int
    # Not a limit but read with them, as briefly cached: the metadata keys the tenant declared searchable (issue 29).
    searchable_metadata: tuple[str, ...] = ()
    # Read with them too (issue 31): whether the tenant indexes its runs' title words, and its retentionDays.
    search_titles: bool = False
    retention_days: int = 90  # domain.models.tenants.DEFAULT_RETENTION_DAYS (not imported: a cold start builds no models)


def effective(own: "TenantLimits", defaults: Limits) -> Limits:
    return Limits(
        requests_per_second=own.requestsPerSecond or defaults.requests_per_second,
        open_runs=own.openRuns or defaults.open_runs,
        workflow_versions=own.workflowVersions or defaults.workflow_versions,
        definition_bytes=own.definitionBytes or defaults.definition_bytes,
        definition_nodes=own.definitionNodes or defaults.definition_nodes,
    )


class Window(NamedTuple):
    """The fixed window a request falls in: its start (epoch seconds), when the next one opens, and when its span's
    counter may go."""

    start: int
    retry_after_s: int
    expires_at: int

    @property
    def span(self) -> int:
        """The start of the span whose counter item holds this window's count."""
        return span_of(self.start)

    def ahead(self, windows: int) -> int:
        """How many windows from this one, itself included, up to `windows`, its span still holds."""
        return max(1, min(windows, (self.span + SPAN_SECONDS - self.start) // WINDOW_SECONDS))


def span_of(start: int) -> int:
    """The start of the span that holds the window starting at `start`."""
    return start // SPAN_SECONDS * SPAN_SECONDS


def window_of(now_epoch: float) -> Window:
    start = int(now_epoch // WINDOW_SECONDS) * WINDOW_SECONDS
    # Retry-After is whole seconds (RFC 9110), at least 1: the next window has opened by then.
    retry_after = max(1, math.ceil(start + WINDOW_SECONDS - now_epoch))
    return Window(start=start, retry_after_s=retry_after, expires_at=span_of(start) + SPAN_SECONDS + WINDOW_TTL_SECONDS)


class Admission(NamedTuple):
    """Whether one request may proceed; a refused one says when to retry."""

    allowed: bool
    limit: int
    retry_after_s: int = 0


def admission(count_after: int | None, limit: int, window: Window) -> Admission:
    """`count_after`: the window's count including this request, or None when the store refused to count past the
    limit (its conditional update failed)."""
    if count_after is None or count_after > limit:
        return Admission(allowed=False, limit=limit, retry_after_s=window.retry_after_s)
    return Admission(allowed=True, limit=limit)


QUOTA_EXCEEDED = "interlude.quota_exceeded"


def quota_exceeded(quota: str, limit: int, message: str, **details: object) -> Forbidden:
    return Forbidden(message, {"quota": quota, "limit": limit, **details}, code=QUOTA_EXCEEDED)


def check_definition(size_bytes: int, nodes: int, limits: Limits) -> None:
    """Refuse a definition over the tenant's size or node quota, before anything is stored."""
    if size_bytes > limits.definition_bytes:
        raise quota_exceeded(
            "definitionBytes",
            limits.definition_bytes,
            f"the definition is {size_bytes} bytes; this tenant's limit is {limits.definition_bytes}",
            size=size_bytes,
        )
    if nodes > limits.definition_nodes:
        raise quota_exceeded(
            "definitionNodes",
            limits.definition_nodes,
            f"the definition has {nodes} nodes; this tenant's limit is {limits.definition_nodes}",
            nodes=nodes,
        )
