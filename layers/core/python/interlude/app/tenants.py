"""Tenant settings (override principals, event retention, limits, ...: replaced by PUT, merged by PATCH) and
credential grants, and the tenant facts they add to a resolver. Rules and their reasons: docs/decisions.md, "Issue 3"."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from interlude.app import audit
from interlude.domain.clock import iso
from interlude.domain.errors import Invalid, Unavailable
from interlude.domain.merge_patch import merge_patch
from interlude.domain.models import keeping_unknown
from interlude.domain.models.run import OpenInterrupt
from interlude.domain.models.tenants import CredentialGrantRequest, TenantSettings
from interlude.domain.validation import parse
from interlude.store.interactions import (
    SETTINGS_SK,
    InteractionStore,
    SettingsRead,
    credential_grant_sk,
    grant_put,
    settings_put,
)
from interlude.store.transactions import LostRace

# How often a merge patch is merged again when another change wrote the settings between its read and its write.
PATCH_ATTEMPTS = 5

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
    """PUT: `settings` replace the stored ones whole (a field left out takes its default; the answer's `previous`
    shows what was replaced). `actor`: who changed them (audit.actor); None: `by` through the CLI."""
    return _write_settings(service, tenant, settings, tenant_settings(service.hitl_store, tenant), by, actor)


def patch_settings(service: Service, tenant: str, patch: Any, by: str, actor: dict[str, Any] | None = None) -> dict[str, Any]:
    """PATCH: `patch` (a JSON merge patch, RFC 7396) merged onto the stored settings, the result checked as a PUT's
    body is, and written only if nobody changed them in between; if somebody did, merged again onto theirs."""
    if not isinstance(patch, dict):
        raise Invalid("a merge patch of the tenant settings must be a JSON object", {"field": "body"})
    for _ in range(PATCH_ATTEMPTS):
        read = service.hitl_store.read_settings(tenant, consistent=True)
        previous = TenantSettings.model_validate(read.settings or {})
        # What this release knows of them, so that the result is checked closed (a field the patch names must be
        # one it knows) while a later release's fields are kept by the write.
        known = TenantSettings.model_validate(read.settings or {}, extra="ignore").model_dump(exclude_none=True)
        settings = parse(TenantSettings, merge_patch(known, patch), "tenant settings")
        try:
            return _write_settings(service, tenant, settings, previous, by, actor, over=read)
        except LostRace:
            continue
    raise Unavailable("the tenant's settings kept changing while the patch was merged; retry", retry_after_s=1)


def _write_settings(
    service: Service,
    tenant: str,
    settings: TenantSettings,
    previous: TenantSettings,
    by: str,
    actor: dict[str, Any] | None,
    over: SettingsRead | None = None,
) -> dict[str, Any]:
    answer = {"tenant": tenant, "settings": settings.model_dump(exclude_none=True), "previous": previous.model_dump(exclude_none=True)}
    stored = keeping_unknown(settings, previous).model_dump(exclude_none=True)
    if stored == previous.model_dump(exclude_none=True):
        return answer  # nothing changes: nothing is written, and the audit log records no change
    at = iso(service.clock())
    entry = audit.entry(tenant, actor or {**audit.OPERATOR, "subjectId": by}, "settings.changed", {"tenant": tenant}, at, {"settings": stored})
    service.store.transact([(SETTINGS_SK, settings_put(tenant, stored, at, by, over=over))], entry)
    service.limiter.forget(tenant)  # this instance applies new limits at once; others within their cache time
    return answer


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
