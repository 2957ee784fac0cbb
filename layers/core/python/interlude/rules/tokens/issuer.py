"""Mint a resume token for an open interrupt: lifetime capped by the interrupt's deadline (pure)."""

from __future__ import annotations

from interlude.domain.models.run import OpenInterrupt
from interlude.domain.token_lifetimes import DEFAULT_LIFETIME_S
from interlude.rules.tokens.scheme import Intent, KeyRing, TokenClaims, mint, token_lifetime


def interrupt_token(
    ring: KeyRing,
    run_id: str,
    interrupt: OpenInterrupt,
    now: float,
    intent: Intent = "resolve",
    requested_s: int | None = None,
    minter: str | None = None,
    principal: str | None = None,
    default_s: int = DEFAULT_LIFETIME_S,
) -> tuple[str, int]:
    """(token, expiresAt epoch seconds). `minter` is the API key id the token acts for (None: the host);
    `principal` the directory principal of a personal link, which lives `default_s` (issue 14)."""
    expires_at = token_lifetime(now, interrupt.deadline, requested_s, default_s)
    claims = TokenClaims(
        interrupt_id=interrupt.interruptId,
        run_id=run_id,
        node_id=interrupt.nodeId,
        expires_at=expires_at,
        intent=intent,
        minter=minter,
        principal=principal,
    )
    return mint(claims, ring), expires_at
