"""Tenant settings (override principals, event retention) and credential grants, and the tenant facts they add
to a resolver. Rules and their reasons: docs/decisions.md, "Issue 3"."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from interlude.domain.models.run import OpenInterrupt
from interlude.domain.models.tenants import CredentialGrantRequest, TenantSettings
from interlude.engine.run import iso
from interlude.rules.auth import Principal
from interlude.rules.interrupts.decide import Resolver
from interlude.store.interactions import InteractionStore

if TYPE_CHECKING:
    from interlude.app.service import Service


def tenant_settings(hitl: InteractionStore, tenant: str) -> TenantSettings:
    raw = hitl.get_settings(tenant)
    return TenantSettings.model_validate(raw) if raw else TenantSettings()


def get_settings(service: Service, principal: Principal) -> dict[str, Any]:
    """The tenant's settings as set, and the limits in force (its own over the host's defaults) with its usage."""
    settings = tenant_settings(service.hitl_store, principal.tenant)
    return {
        "tenant": principal.tenant,
        "settings": settings.model_dump(exclude_none=True),
        **service.limiter.usage(principal.tenant),
    }


def put_settings(service: Service, tenant: str, settings: TenantSettings, by: str) -> dict[str, Any]:
    service.hitl_store.put_settings(tenant, settings.model_dump(exclude_none=True), iso(service.clock()), by)
    service.limiter.forget(tenant)  # this instance applies new limits at once; others within their cache time
    return {"tenant": tenant, "settings": settings.model_dump(exclude_none=True)}


def put_grant(service: Service, tenant: str, provider: str, request: CredentialGrantRequest, by: str) -> dict[str, Any]:
    """`provider` is a checked author id (interlude.domain.ids.check_author_id)."""
    at = iso(service.clock())
    service.hitl_store.put_grant(tenant, provider, list(request.scopes), at, by)
    return {"tenant": tenant, "provider": provider, "scopes": sorted(set(request.scopes)), "grantedAt": at}


def with_tenant_facts(hitl: InteractionStore, tenant: str, interrupt: OpenInterrupt, resolver: Resolver) -> Resolver:
    """Add the tenant-held facts a decision needs, read at decision time: override principals, grants."""
    data = interrupt.payload.get("data") or {}
    if interrupt.kind == "approval" and data.get("overrideBypassesQuorum"):
        settings = tenant_settings(hitl, tenant)
        resolver = replace(resolver, tenant_override_principals=tuple(settings.overridePrincipals))
    if interrupt.kind == "credential":
        resolver = replace(resolver, granted_scopes=hitl.get_grant(tenant, data["provider"]))
    return resolver
