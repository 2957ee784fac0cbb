"""Request bodies of the approver inbox, external events, tenant settings and credential grants (closed)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints

from interlude.domain.models import Closed

DEFAULT_EVENT_RETENTION_HOURS = 24
MAX_EVENT_RETENTION_HOURS = 14 * 24

PrincipalRef = Annotated[str, StringConstraints(min_length=1, max_length=512, pattern=r"^[^\s]+$")]
ScopeName = Annotated[str, StringConstraints(min_length=1, max_length=256)]


class TenantSettings(Closed):
    # Principals that release an approval gate alone where the gate sets overrideBypassesQuorum: a subjectId,
    # or `issuer|subjectId` to pin the issuer. Gates may name more in their own config.overridePrincipals.
    overridePrincipals: list[PrincipalRef] = Field(default_factory=list, max_length=100)
    # How long an external event that matched no waiting interrupt is kept for one raised later.
    eventRetentionHours: int = Field(default=DEFAULT_EVENT_RETENTION_HOURS, ge=1, le=MAX_EVENT_RETENTION_HOURS)


class PostEventRequest(Closed):
    eventType: str = Field(min_length=1, max_length=256)
    # Matched exactly (as a JSON value) against the correlation of waiting external-event interrupts.
    correlation: dict[str, Any]
    payload: Any = None


class CredentialGrantRequest(Closed):
    # That the tenant holds a grant for these scopes; the material itself stays with the provider/vault.
    scopes: list[ScopeName] = Field(min_length=1, max_length=100)
