"""The tenant's settings, and the tenant-held facts (override principals, credential grants) a decision reads at
decision time: a leaf the services share (app/tenants.py writes them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlude.domain.models.tenants import TenantSettings

if TYPE_CHECKING:
    from interlude.app.ports import TenantRecords
    from interlude.domain.models.run import OpenInterrupt
    from interlude.rules.interrupts.decide import Resolver


def tenant_settings(records: TenantRecords, tenant: str) -> TenantSettings:
    return settings_of(records.get_settings(tenant))


def settings_of(raw: dict[str, Any] | None) -> TenantSettings:
    """The settings a tenant stored (`raw`, None: none)."""
    # A tenant that stored none has every default, which is valid as declared: constructed without validation, so
    # a process need not build the settings' validator for such a tenant (≈ 1.3 ms of a cold request, ADR 0137).
    return TenantSettings.model_validate(raw) if raw else TenantSettings.model_construct()


def with_tenant_facts(records: TenantRecords, tenant: str, interrupt: OpenInterrupt, resolver: Resolver) -> Resolver:
    """Add the tenant-held facts a decision needs, read at decision time: override principals, grants."""
    data = interrupt.payload.get("data") or {}
    if interrupt.kind == "approval" and data.get("overrideBypassesQuorum"):
        settings = tenant_settings(records, tenant)
        resolver = resolver._replace(tenant_override_principals=tuple(settings.overridePrincipals))
    if interrupt.kind == "credential":
        resolver = resolver._replace(granted_scopes=records.get_grant(tenant, data["provider"]))
    return resolver
