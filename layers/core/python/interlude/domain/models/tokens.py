"""Request bodies of the token surfaces (closed: an unknown field is a 400 validation_error)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from interlude.domain.models import Closed

# A token's lifetime unless the minter asks for less (the token scheme applies it).
DEFAULT_LIFETIME_S = 30 * 60


class MintTokenRequest(Closed):
    # resolve: the token may read and decide; inspect: it may only read (a resolve with it is 403).
    intent: Literal["resolve", "inspect"]
    # Only shorter than the default (30 minutes); never past the interrupt's own deadline either way.
    lifetimeSeconds: int | None = Field(default=None, ge=1, le=DEFAULT_LIFETIME_S)
