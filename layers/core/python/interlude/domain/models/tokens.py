"""Request bodies of the token surfaces (closed: an unknown field is a 400 validation_error)."""


from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from interlude.domain.ids import SUBJECT_ID
from interlude.domain.models import Closed
from interlude.domain.token_lifetimes import DEFAULT_LIFETIME_S, MAX_MINTED_LINK_LIFETIME_S


class MintTokenRequest(Closed):
    # resolve: the token may read and decide; inspect: it may only read (a resolve with it is 403).
    intent: Literal["resolve", "inspect"]
    # Only shorter than the default (30 minutes); never past the interrupt's own deadline either way.
    lifetimeSeconds: int | None = Field(default=None, ge=1, le=DEFAULT_LIFETIME_S)


class MintLinkRequest(Closed):
    # The directory principal the link decides as (PUT /principals/{principalId} made them).
    principal: Annotated[str, StringConstraints(pattern=SUBJECT_ID)]
    lifetimeSeconds: int | None = Field(default=None, ge=1, le=MAX_MINTED_LINK_LIFETIME_S)
