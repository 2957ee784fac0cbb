"""Whether a tenant may act now (issue 30 item 6): its status in the operator's registry (interlude.store.tenants),
asked by every surface a tenant reaches (the API's keys, the console's sessions, signed links) before anything is done,
and by every worker before it acts for a tenant (a queue's message, a deadline's schedule).

A status read is trusted for `cache_seconds` on this instance (config: tenant_status_cache_seconds), so a suspension
reaches every instance within that time. A tenant with no record is active while it holds an API key (one from before
the registry that its migration has not listed yet); one that holds none is a deleted tenant whose tombstone expired
(wiring.TENANT_TOMBSTONE_S), and is taken as deleted (docs/adr/0195). A worker handed work for a tenant that is not
active reads the status again, consistently, and either acts after all (resumed meanwhile), keeps the work for the
tenant's resume (suspended: `held`), or drops it (being deleted, or deleted: nothing of the tenant is kept). The
upkeep of a tenant's data (the migrations queue's jobs, the daily sweep, a migration) asks `keeps_data`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Literal, Protocol

from interlude.config import settings
from interlude.domain.clock import Clock, iso
from interlude.domain.errors import Forbidden
from interlude.domain.expiring import ExpiringCache
from interlude.store.table import Table
from interlude.store.tenants import ACTIVE, DELETED, DELETING, SUSPENDED, TenantRecords

SUSPENDED_CODE = "interlude.tenant_suspended"
# Tenants whose status an instance keeps (the least recently asked go first).
CACHE_SIZE = 4096
Admission = Literal["act", "held", "dropped"]


class TenantStatuses(Protocol):
    """The registry's side the gate needs (interlude.store.tenants.TenantRecords)."""

    def status(self, tenant: str, consistent: bool = False) -> str | None: ...

    def holds_keys(self, tenant: str) -> bool: ...

    def status_and_settings(self, tenant: str) -> tuple[str | None, dict[str, Any] | None]: ...

    def hold(self, tenant: str, destination: str, work_id: str, body: dict[str, Any], at: str) -> bool: ...


def refusal(tenant: str, status: str) -> Forbidden:
    message = (
        "this tenant is suspended by the operator of this service: nothing was done"
        if status == SUSPENDED
        else "this tenant is being deleted by the operator of this service: nothing was done"
    )
    return Forbidden(message, {"tenant": tenant}, code=SUSPENDED_CODE)


class TenantStanding:
    def __init__(
        self,
        statuses: TenantStatuses,
        clock: Clock,
        cache_seconds: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.statuses = statuses
        self.clock = clock
        self.cache_seconds = cache_seconds
        self._known: ExpiringCache[str, str] = ExpiringCache(CACHE_SIZE, monotonic)
        # The registry's statuses as recorded (None: no record), for `keeps_data`.
        self._recorded: ExpiringCache[str, str | None] = ExpiringCache(CACHE_SIZE, monotonic)

    def status(self, tenant: str) -> str:
        if (known := self._known.fresh(tenant)) is not None:
            return known[0]
        return self._read(tenant, consistent=False)

    def knows(self, tenant: str) -> bool:
        """Whether a status of `tenant` is trusted now (its next `status` reads nothing)."""
        return self._known.fresh(tenant) is not None

    def require_active(self, tenant: str) -> None:
        """Refuse (403 interlude.tenant_suspended) a request of a tenant that is suspended or being deleted."""
        status = self.status(tenant)
        if status != ACTIVE:
            raise refusal(tenant, status)

    def admit(self, tenant: str, destination: str, work_id: str, body: dict[str, Any]) -> Admission:
        """What a worker does with work for `tenant`: `act` on it; or it was `held` for the tenant's resume (handed
        back to `destination` then, interlude.app.tenant_lifecycle.resume); or `dropped` (the tenant is going)."""
        if self.status(tenant) == ACTIVE:
            return "act"
        for _ in range(3):
            status = self._read(tenant, consistent=True)
            if status == ACTIVE:
                return "act"
            if status != SUSPENDED:
                return "dropped"
            if self.statuses.hold(tenant, destination, work_id, body, iso(self.clock())):
                return "held"
            # The status changed between the read and the hold (a resume or a deletion began): read it again.
        raise RuntimeError(f"the status of tenant {tenant!r} kept changing; the work is tried again later")

    def keeps_data(self, tenant: str) -> bool:
        """Whether the upkeep of `tenant`'s data goes on (its runs' retention, its search index, a migration of its
        items): while it is active or suspended (a suspended tenant's data stays right: its runs expire when its
        retention says, it is resumed with its index whole), not once its record says it is being deleted or deleted
        (whatever the upkeep wrote could outlive the deletion: docs/adr/0201). The record alone is asked: a tenant
        without one is one from before the registry (the migrations that list its keys and register it may not have
        run yet) or one whose tombstone expired, whose items went with it."""
        recorded = self._recorded.fresh_or_read(tenant, lambda: self.statuses.status(tenant), self.cache_seconds)
        return recorded not in (DELETING, DELETED)

    def forget(self, tenant: str) -> None:
        self._known.forget(tenant)

    def _read(self, tenant: str, consistent: bool) -> str:
        read = self.statuses.status(tenant, consistent=consistent)
        if read is None:
            # Work for a tenant that has no record and no key (its dead letters redriven after its tombstone expired)
            # is a deleted tenant's, and nothing is done for it.
            read = ACTIVE if self.statuses.holds_keys(tenant) else DELETED
        return self._known.keep(tenant, read, self.cache_seconds)

    def remember(self, tenant: str, read: str | None) -> str:
        """Trust `read`, the registry's status of `tenant` as a request read it with the key it came with, for
        cache_seconds (None: no record, and that key shows the tenant holds one: active)."""
        return self._known.keep(tenant, read or ACTIVE, self.cache_seconds)


def standing_of(table: Table, clock: Clock) -> TenantStanding:
    """The gate over `store`'s registry, trusting a status for the deployment's tenant_status_cache_seconds."""
    return TenantStanding(TenantRecords(table), clock, settings().tenant_status_cache_seconds)
