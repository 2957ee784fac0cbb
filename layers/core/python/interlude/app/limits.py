"""Per-tenant limits in force: the tenant's settings over the host's defaults (cached briefly per process), the
request-rate admission, and the tenant's usage. Rules: interlude/rules/limits.py; counters: interlude/store/limits.py.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from functools import cached_property
from typing import TYPE_CHECKING, Any

from interlude.app.tenants import tenant_settings
from interlude.config import settings
from interlude.rules import limits as rules
from interlude.rules.auth import Principal
from interlude.store.limits import LimitStore

if TYPE_CHECKING:
    from interlude.app.service import Service

# A change to a tenant's limits reaches every warm instance within this time (the instance that made it: at once).
LIMITS_CACHE_SECONDS = 10.0
LIMITS_CACHE_SIZE = 1024


def host_defaults() -> rules.Limits:
    cfg = settings()
    return rules.Limits(
        requests_per_second=cfg.tenant_requests_per_second,
        open_runs=cfg.tenant_open_runs,
        workflow_versions=cfg.tenant_workflow_versions,
        definition_bytes=cfg.tenant_definition_bytes,
        definition_nodes=cfg.tenant_definition_nodes,
    )


class TenantLimiter:
    """One per Service: the limits cache and the request counter."""

    def __init__(self, service: Service, defaults: rules.Limits | None = None) -> None:
        self.service = service
        self._defaults = defaults
        self._cache: OrderedDict[str, tuple[float, rules.Limits]] = OrderedDict()

    @cached_property
    def counters(self) -> LimitStore:
        return LimitStore(self.service.store.table, self.service.store.client)

    @property
    def defaults(self) -> rules.Limits:
        if self._defaults is None:
            self._defaults = host_defaults()
        return self._defaults

    def limits(self, tenant: str) -> rules.Limits:
        hit = self._cache.get(tenant)
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        own = tenant_settings(self.service.hitl_store, tenant).limits
        limits = rules.effective(own, self.defaults)
        self._cache[tenant] = (time.monotonic() + LIMITS_CACHE_SECONDS, limits)
        self._cache.move_to_end(tenant)
        if len(self._cache) > LIMITS_CACHE_SIZE:
            self._cache.popitem(last=False)
        return limits

    def forget(self, tenant: str) -> None:
        self._cache.pop(tenant, None)

    def admit(self, principal: Principal) -> rules.Admission:
        """Count one authenticated request against its tenant's rate; refused past the limit of its window."""
        limit = self.limits(principal.tenant).requests_per_second
        window = rules.window_of(self.service.clock().timestamp())
        return rules.admission(self.counters.count_request(principal.tenant, window, limit), limit, window)

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
