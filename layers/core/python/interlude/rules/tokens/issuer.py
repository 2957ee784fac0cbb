"""Mint a resume token for an open interrupt: lifetime capped by the interrupt's deadline (pure)."""

from __future__ import annotations

from interlude.domain.models.run import OpenInterrupt
from interlude.rules.tokens.scheme import Intent, KeyRing, TokenClaims, mint, token_lifetime


def interrupt_token(
    ring: KeyRing,
    run_id: str,
    interrupt: OpenInterrupt,
    now: float,
    intent: Intent = "resolve",
    requested_s: int | None = None,
    minter: str | None = None,
) -> tuple[str, int]:
    """(token, expiresAt epoch seconds). `minter` is the API key id the token acts for (None: the host)."""
    expires_at = token_lifetime(now, interrupt.deadline, requested_s)
    claims = TokenClaims(
        interrupt_id=interrupt.interruptId,
        run_id=run_id,
        node_id=interrupt.nodeId,
        expires_at=expires_at,
        intent=intent,
        minter=minter,
    )
    return mint(claims, ring), expires_at
