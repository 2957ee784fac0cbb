"""Tenant settings (override principals, event retention) and credential grants, and the tenant facts they add
to a resolver. Rules and their reasons: docs/decisions.md, "Issue 3"."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from interlude.app import audit
from interlude.domain.clock import iso
from interlude.domain.models import keeping_unknown
from interlude.domain.models.run import OpenInterrupt
from interlude.domain.models.tenants import CredentialGrantRequest, TenantSettings
from interlude.store.interactions import SETTINGS_SK, InteractionStore, credential_grant_sk, grant_put, settings_put

if TYPE_CHECKING:
    from interlude.app.service import Service
    from interlude.rules.auth import Principal
    from interlude.rules.interrupts.decide import Resolver


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


def put_settings(
    service: Service, tenant: str, settings: TenantSettings, by: str, actor: dict[str, Any] | None = None
) -> dict[str, Any]:
    """`actor`: who changed them (audit.actor); None: `by` through the CLI."""
    at = iso(service.clock())
    stored = keeping_unknown(settings, tenant_settings(service.hitl_store, tenant)).model_dump(exclude_none=True)
    entry = audit.entry(tenant, actor or {**audit.OPERATOR, "subjectId": by}, "settings.changed", {"tenant": tenant}, at, {"settings": stored})
    service.store.transact([(SETTINGS_SK, settings_put(tenant, stored, at, by))], entry)
    service.limiter.forget(tenant)  # this instance applies new limits at once; others within their cache time
    return {"tenant": tenant, "settings": settings.model_dump(exclude_none=True)}


def put_grant(
    service: Service,
    tenant: str,
    provider: str,
    request: CredentialGrantRequest,
    by: str,
    actor: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`provider` is a checked author id (interlude.domain.ids.check_author_id); `actor` as for put_settings."""
    at = iso(service.clock())
    scopes = sorted(set(request.scopes))
    entry = audit.entry(
        tenant, actor or {**audit.OPERATOR, "subjectId": by}, "credentialGrant.recorded", {"provider": provider}, at, {"scopes": scopes}
    )
    service.store.transact([(credential_grant_sk(provider), grant_put(tenant, provider, scopes, at, by))], entry)
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
