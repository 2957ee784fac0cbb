"""What the operator surface (the `admin` function, issue 30 item 6) is asked: one closed request per operation, named
by its `operation` (interlude.app.tenant_lifecycle does each)."""


from typing import Literal

from pydantic import Field

from interlude.domain.ids import SUBJECT_ID, TENANT
from interlude.domain.models import Closed
from interlude.wiring import ALL_SCOPES, Scope

MONTH = r"^[0-9]{4}-(0[1-9]|1[0-2])$"


class CreateTenant(Closed):
    operation: Literal["create"]
    tenant: str = Field(pattern=TENANT)
    # Who holds the tenant's first admin key, and what it may do (every scope unless told).
    subjectId: str = Field(default="admin", pattern=SUBJECT_ID)
    scopes: list[Scope] = Field(default_factory=lambda: list(ALL_SCOPES), min_length=1)


class ListTenants(Closed):
    operation: Literal["list"]
    limit: int = Field(default=50, ge=1, le=200)
    # The `after` of the previous page: the page goes on after this tenant.
    after: str | None = Field(default=None, pattern=TENANT)


class SuspendTenant(Closed):
    operation: Literal["suspend"]
    tenant: str = Field(pattern=TENANT)
    reason: str | None = Field(default=None, min_length=1, max_length=500)


class ResumeTenant(Closed):
    operation: Literal["resume"]
    tenant: str = Field(pattern=TENANT)
    # A later call of one resume (the CLI's, while held work remains): it hands back what is still held, and makes no
    # tenant active, so a suspension made since stands.
    handBackOnly: bool = False


class DeleteTenant(Closed):
    operation: Literal["delete"]
    tenant: str = Field(pattern=TENANT)


class TenantUsage(Closed):
    operation: Literal["usage"]
    tenant: str = Field(pattern=TENANT)
    # YYYY-MM; this month when left out.
    month: str | None = Field(default=None, pattern=MONTH)


OPERATIONS: dict[str, type[Closed]] = {
    "create": CreateTenant,
    "list": ListTenants,
    "suspend": SuspendTenant,
    "resume": ResumeTenant,
    "delete": DeleteTenant,
    "usage": TenantUsage,
}
