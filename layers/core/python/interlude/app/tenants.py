"""Tenant settings (override principals, event retention, limits, ...: replaced by PUT, merged by PATCH) and
credential grants, and the tenant facts they add to a resolver. Rules and their reasons: docs/adr/0007."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlude.app import audit_entries as audit
from interlude.app.tenant_facts import tenant_settings
from interlude.domain.clock import iso
from interlude.domain.errors import Invalid, Unavailable
from interlude.domain.merge_patch import merge_patch
from interlude.domain.models import keeping_unknown
from interlude.domain.models.tenant_requests import CredentialGrantRequest
from interlude.domain.models.tenants import DEFAULT_RETENTION_DAYS, MIN_EFFECT_RETENTION_DAYS, TenantSettings
from interlude.domain.validation import parse
from interlude.store.interactions import SETTINGS_SK, SettingsRead, credential_grant_sk, grant_put, settings_put
from interlude.store.transactions import LostRace

# How often a merge patch is merged again when another change wrote the settings between its read and its write.
PATCH_ATTEMPTS = 5

if TYPE_CHECKING:
    from interlude.app.ports import RetentionRestamps, SearchKeyJobs, TenantLimits, TenantRecords, Transactions
    from interlude.domain.clock import Clock
    from interlude.rules.auth import Principal


class Tenants:
    def __init__(
        self,
        records: TenantRecords,
        writes: Transactions,
        limits: TenantLimits,
        clock: Clock,
        search_keys: SearchKeyJobs | None = None,
        restamps: RetentionRestamps | None = None,
    ) -> None:
        self.records = records
        self.writes = writes
        self.limits = limits
        self.clock = clock
        # Runs created before a key was declared searchable are indexed under it by a job (app/search_keys.py).
        self.search_keys = search_keys
        # A change of retentionDays is given to the runs finished before it by a job (ADR 0118).
        self.restamps = restamps

    def _indexing(self, tenant: str) -> dict[str, Any]:
        progress = self.search_keys.progress(tenant) if self.search_keys is not None else None
        return {"searchIndexing": progress} if progress is not None else {}

    def get_settings(self, principal: Principal) -> dict[str, Any]:
        """The tenant's settings as set, and the limits in force (its own over the host's defaults) with its usage."""
        settings = tenant_settings(self.records, principal.tenant)
        restamp = self.restamps.progress(principal.tenant) if self.restamps is not None else None
        return {
            "tenant": principal.tenant,
            "settings": settings.model_dump(exclude_none=True),
            **self.limits.usage(principal.tenant),
            **self._indexing(principal.tenant),
            **({"retentionRestamp": restamp} if restamp else {}),
        }

    def put_settings(
        self, tenant: str, settings: TenantSettings, by: str, actor: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """PUT: `settings` replace the stored ones whole (a field left out takes its default; the answer's `previous`
        shows what was replaced). `actor`: who changed them (audit.actor); None: `by` through the CLI."""
        return self._write_settings(tenant, settings, tenant_settings(self.records, tenant), by, actor)

    def patch_settings(self, tenant: str, patch: Any, by: str, actor: dict[str, Any] | None = None) -> dict[str, Any]:
        """PATCH: `patch` (a JSON merge patch, RFC 7396) merged onto the stored settings, the result checked as a PUT's
        body is, and written only if nobody changed them in between; if somebody did, merged again onto theirs."""
        if not isinstance(patch, dict):
            raise Invalid("a merge patch of the tenant settings must be a JSON object", {"field": "body"})
        for _ in range(PATCH_ATTEMPTS):
            read = self.records.read_settings(tenant, consistent=True)
            previous = TenantSettings.model_validate(read.settings or {})
            # What this release knows of them, so that the result is checked closed (a field the patch names must be
            # one it knows) while a later release's fields are kept by the write.
            known = TenantSettings.model_validate(read.settings or {}, extra="ignore").model_dump(exclude_none=True)
            settings = parse(TenantSettings, merge_patch(known, patch), "tenant settings")
            try:
                return self._write_settings(tenant, settings, previous, by, actor, over=read)
            except LostRace:
                continue
        raise Unavailable("the tenant's settings kept changing while the patch was merged; retry", retry_after_s=1)

    def _write_settings(
        self,
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
            return {**answer, **self._indexing(tenant)}  # nothing changes: nothing is written, nor audited
        at = iso(self.clock())
        by_whom = actor or {**audit.OPERATOR, "subjectId": by}
        entry = audit.entry(tenant, by_whom, "settings.changed", {"tenant": tenant}, at, {"settings": stored})
        indexing = (
            self.search_keys.declaration(tenant, previous.searchableMetadata, settings.searchableMetadata, at)
            if self.search_keys is not None
            else []
        )
        days = settings.retentionDays or DEFAULT_RETENTION_DAYS
        restamps = self.restamps if days != (previous.retentionDays or DEFAULT_RETENTION_DAYS) else None
        restamping = [("RESTAMP", restamps.starting(tenant, days, at))] if restamps is not None else []
        self.writes.transact([(SETTINGS_SK, settings_put(tenant, stored, at, by, over=over)), *indexing, *restamping], entry)
        self.limits.forget(tenant)  # this instance applies new limits at once; others within their cache time
        if indexing and self.search_keys is not None:
            self.search_keys.start(tenant)
        if restamps is not None:
            restamps.started(tenant, at)
        return {**answer, **self._indexing(tenant)}

    def put_grant(
        self,
        tenant: str,
        provider: str,
        request: CredentialGrantRequest,
        by: str,
        actor: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """`provider` is a checked author id (interlude.domain.ids.check_author_id); `actor` as for put_settings."""
        at = iso(self.clock())
        scopes = sorted(set(request.scopes))
        by_whom = actor or {**audit.OPERATOR, "subjectId": by}
        entry = audit.entry(tenant, by_whom, "credentialGrant.recorded", {"provider": provider}, at, {"scopes": scopes})
        self.writes.transact([(credential_grant_sk(provider), grant_put(tenant, provider, scopes, at, by))], entry)
        return {"tenant": tenant, "provider": provider, "scopes": sorted(set(request.scopes)), "grantedAt": at}

    def effect_retention_days(self, tenant: str) -> int:
        """How many days the tenant keeps an effect record and its ledger entry past their last change."""
        return tenant_settings(self.records, tenant).effectRetentionDays or MIN_EFFECT_RETENTION_DAYS
