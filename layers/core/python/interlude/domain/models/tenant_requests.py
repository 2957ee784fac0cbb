"""Request bodies of the tenant surfaces (closed: an unknown field is a 400 validation_error): apart from the
settings' stored model (interlude.domain.models.tenants), which every API request reads, so only the routes that take
them build them (ADR 0137)."""


from typing import Annotated, Any

from pydantic import Field, StringConstraints

from interlude.domain.models import Closed, merge_patch_of
from interlude.domain.models.tenants import TenantSettings

ScopeName = Annotated[str, StringConstraints(min_length=1, max_length=256)]

# PATCH /tenant/settings: only the fields to change; null takes a field back to its default.
TenantSettingsPatch = merge_patch_of(TenantSettings)


class PostEventRequest(Closed):
    eventType: str = Field(min_length=1, max_length=256)
    # Matched exactly (as a JSON value) against the correlation of waiting external-event interrupts.
    correlation: dict[str, Any]
    payload: Any = None


class CredentialGrantRequest(Closed):
    # That the tenant holds a grant for these scopes; the material itself stays with the provider/vault.
    scopes: list[ScopeName] = Field(min_length=1, max_length=100)
