"""Request bodies of the token surfaces (closed: an unknown field is a 400 validation_error)."""


from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from interlude.domain.ids import SUBJECT_ID
from interlude.domain.models import Closed

# A token's lifetime unless the minter asks for less (the token scheme applies it).
DEFAULT_LIFETIME_S = 30 * 60
# A link minted for a named principal (issue 28 item 5): a day unless asked otherwise, never more than a week (a
# tenant may lower that: TenantSettings.maxLinkLifetimeSeconds), never past the gate's own deadline.
DEFAULT_MINTED_LINK_LIFETIME_S = 24 * 3600
MAX_MINTED_LINK_LIFETIME_S = 7 * 24 * 3600


class MintTokenRequest(Closed):
    # resolve: the token may read and decide; inspect: it may only read (a resolve with it is 403).
    intent: Literal["resolve", "inspect"]
    # Only shorter than the default (30 minutes); never past the interrupt's own deadline either way.
    lifetimeSeconds: int | None = Field(default=None, ge=1, le=DEFAULT_LIFETIME_S)


class MintLinkRequest(Closed):
    # The directory principal the link decides as (PUT /principals/{principalId} made them).
    principal: Annotated[str, StringConstraints(pattern=SUBJECT_ID)]
    lifetimeSeconds: int | None = Field(default=None, ge=1, le=MAX_MINTED_LINK_LIFETIME_S)
