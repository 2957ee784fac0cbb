"""Per-tenant limits in force: the tenant's settings over the host's defaults (cached briefly per process), the
request-rate admission, and the tenant's usage. Rules: interlude/rules/limits.py; counters: interlude/store/limits.py.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from interlude.app.tenant_facts import settings_of, tenant_settings
from interlude.config import settings
from interlude.domain.expiring import ExpiringCache
from interlude.domain.models.tenants import DEFAULT_RETENTION_DAYS, TenantSettings
from interlude.rules import limits as rules

if TYPE_CHECKING:
    from interlude.app.ports import RequestCounters, TenantRecords
    from interlude.domain.clock import Clock
    from interlude.rules.auth import Principal

# A change to a tenant's limits reaches every warm instance within this time (the instance that made it: at once).
LIMITS_CACHE_SECONDS = 10.0
LIMITS_CACHE_SIZE = 1024
# A lease of request allowance is at most this fraction of the tenant's per-second limit (docs/adr/0034, "The
# request counter is leased"): what instances hold unused when the window fills is what a tenant can be refused early.
LEASE_LIMIT_DIVISOR = 4


def host_defaults() -> rules.Limits:
    cfg = settings()
    return rules.Limits(
        requests_per_second=cfg.tenant_requests_per_second,
        open_runs=cfg.tenant_open_runs,
        workflow_versions=cfg.tenant_workflow_versions,
        definition_bytes=cfg.tenant_definition_bytes,
        definition_nodes=cfg.tenant_definition_nodes,
    )


@dataclass
class Lease:
    """One warm instance's allowance for one tenant: counted on the shared counter before it is used, in the window it
    is in and, counted ahead, in the next ones up to `until`."""

    window: int
    previous: int  # requests this instance admitted in the window just before (0 if none)
    left: int = 0
    used: int = 0
    full: bool = False  # a lease did not fit: the rest of this window is counted one request at a time
    until: int = 0  # the last window counted ahead, `ahead` requests in each
    ahead: int = 0
    # The span in which counting ahead did not fit (a later window past its share counted ahead): its windows are
    # counted one at a time.
    crowded_span: int = -1


def lease_size(limit: int, pace: int) -> int:
    """How many requests to count at once: this instance's pace (its admissions in the previous window, or so far
    in this one), at most a quarter of the limit, at least one."""
    return max(1, min(pace, limit // LEASE_LIMIT_DIVISOR))


class RequestLeases:
    """The request counter, counted ahead in leases (one UpdateItem of k per k requests of a busy instance), each
    counted in the instance's window and the next ones of its span at once (rules/limits.AHEAD_WINDOWS, docs/adr/0174):
    a quiet instance writes once for its requests of the next seconds, not once each.

    Nothing is admitted that the shared counter has not counted, so a tenant never passes its limit; the cost is
    the other way: a request is refused when the window's count is full even if other instances hold leased
    allowance they will not use (each at most its lease, so at most a quarter of the limit per instance; what was
    counted ahead, at most rules/limits.AHEAD_SHARE of the window whatever the instances)."""

    def __init__(self, size: int = LIMITS_CACHE_SIZE) -> None:
        self._held: OrderedDict[str, Lease] = OrderedDict()
        self._size = size

    def admit(self, counters: RequestCounters, tenant: str, window: rules.Window, limit: int) -> rules.Admission:
        lease = self._held.get(tenant)
        if lease is None or lease.window != window.start:
            lease = self._enter(tenant, lease, window)
        if lease.left == 0:
            size = 1 if lease.full else lease_size(limit, max(lease.previous, lease.used))
            # A window not counted yet is counted with the next ones its span holds; one counted ahead, topped up
            # alone; where a later window had no room, each alone for the rest of the span.
            windows = 1 if lease.full or lease.until >= window.start or lease.crowded_span == window.span else rules.AHEAD_WINDOWS
            counted = counters.count_request(tenant, window, limit, size, windows)
            if counted is None and window.ahead(windows) > 1:
                lease.crowded_span = window.span
                windows = 1
                counted = counters.count_request(tenant, window, limit, size)
            if counted is None and size > 1:
                lease.full = True  # the last of the window's allowance is counted one request at a time
                size = 1
                counted = counters.count_request(tenant, window, limit, size)
            if counted is None:
                return rules.admission(None, limit, window)
            if (counted_in := window.ahead(windows)) > 1:
                lease.until = window.start + (counted_in - 1) * rules.WINDOW_SECONDS
                lease.ahead = size
            lease.left = size
        lease.left -= 1
        lease.used += 1
        return rules.Admission(allowed=True, limit=limit)

    def _enter(self, tenant: str, lease: Lease | None, window: rules.Window) -> Lease:
        """The instance's lease for the tenant's new window: what it counted ahead in it (if it did) to use first."""
        before = lease.used if lease is not None and lease.window == window.start - rules.WINDOW_SECONDS else 0
        entered = Lease(window=window.start, previous=before)
        if lease is not None:
            entered.crowded_span = lease.crowded_span
            if lease.window < window.start <= lease.until:
                entered.until, entered.ahead, entered.left = lease.until, lease.ahead, lease.ahead
        self._held[tenant] = entered
        self._held.move_to_end(tenant)
        if len(self._held) > self._size:
            self._held.popitem(last=False)
        return entered


class TenantLimiter:
    """The limits in force per tenant (cached briefly) and the request counter, for the API's admission, a run's
    start and a definition's registration."""

    def __init__(
        self, records: TenantRecords, counters: RequestCounters, clock: Clock, defaults: rules.Limits | None = None
    ) -> None:
        self.records = records
        self.counters = counters
        self.clock = clock
        self._defaults = defaults
        # tenant -> (its limits in force, the settings they were read from); on this module's `time` at each use, as
        # the key cache
        self._cache: ExpiringCache[str, tuple[rules.Limits, TenantSettings]] = ExpiringCache(
            LIMITS_CACHE_SIZE, lambda: time.monotonic()
        )
        self.leases = RequestLeases()

    @property
    def defaults(self) -> rules.Limits:
        if self._defaults is None:
            self._defaults = host_defaults()
        return self._defaults

    def limits(self, tenant: str) -> rules.Limits:
        return self._in_force(tenant)[0]

    def retention_days(self, tenant: str) -> int:
        """How long the tenant keeps a finished run (issue 30 item 4), read with its limits."""
        return self._in_force(tenant)[0].retention_days

    def settings(self, tenant: str) -> TenantSettings:
        """The settings the tenant's limits in force were read from: as new as they are (LIMITS_CACHE_SECONDS), for
        what may lag a change of them as long (the notifications of a gate: their delegates and reminders)."""
        return self._in_force(tenant)[1]

    def _in_force(self, tenant: str) -> tuple[rules.Limits, TenantSettings]:
        if (hit := self._cache.fresh(tenant)) is not None:
            return hit[0]
        return self._keep(tenant, tenant_settings(self.records, tenant))

    def knows(self, tenant: str) -> bool:
        """Whether the tenant's limits in force are cached now (its next admission reads no settings)."""
        return self._cache.fresh(tenant) is not None

    def remember(self, tenant: str, settings: dict[str, Any] | None) -> None:
        """Take the tenant's settings as just read elsewhere (`settings`, None: none stored) as its limits in force."""
        self._keep(tenant, settings_of(settings))

    def _keep(self, tenant: str, own: TenantSettings) -> tuple[rules.Limits, TenantSettings]:
        found = (
            rules.effective(own.limits, self.defaults)._replace(
                searchable_metadata=tuple(own.searchableMetadata),
                search_titles=bool(own.searchTitles),
                retention_days=own.retentionDays or DEFAULT_RETENTION_DAYS,
            ),
            own,
        )
        return self._cache.keep(tenant, found, LIMITS_CACHE_SECONDS)

    def forget(self, tenant: str) -> None:
        self._cache.forget(tenant)

    def admit(self, principal: Principal) -> rules.Admission:
        """Count one authenticated request against its tenant's rate; refused past the limit of its window."""
        return self.admit_tenant(principal.tenant)

    def admit_tenant(self, tenant: str) -> rules.Admission:
        """Count one request the tenant is proved to have sent (an API key's, or a Slack click signed with its signing
        secret) against its rate."""
        limit = self.limits(tenant).requests_per_second
        window = rules.window_of(self.clock().timestamp())
        return self.leases.admit(self.counters, tenant, window, limit)

    def usage(self, tenant: str) -> dict[str, Any]:
        limits = self.limits(tenant)
        used = self.counters.usage(tenant)
        return {
            "limits": {
                "requestsPerSecond": limits.requests_per_second,
                "openRuns": limits.open_runs,
                "workflowVersions": limits.workflow_versions,
                "definitionBytes": limits.definition_bytes,
                "definitionNodes": limits.definition_nodes,
            },
            "usage": used,
        }
