"""Interrupt resume tokens (`ow2.hs256.<kid>.<payload>.<mac>`) and their key ring.

The Secrets Manager side lives in `interlude.adapters.keyring_store` and is not imported here, so pure modules
can use tokens without pulling in boto3.
"""

from interlude.rules.tokens.scheme import (
    DEFAULT_LIFETIME_S,
    INTENTS,
    MAX_TOKEN_CHARS,
    TOKEN_ALGS,
    Intent,
    KeyRing,
    TokenClaims,
    TokenError,
    TokenExpired,
    TokenInvalid,
    mint,
    token_lifetime,
    verify,
)

__all__ = [
    "DEFAULT_LIFETIME_S",
    "INTENTS",
    "MAX_TOKEN_CHARS",
    "TOKEN_ALGS",
    "Intent",
    "KeyRing",
    "TokenClaims",
    "TokenError",
    "TokenExpired",
    "TokenInvalid",
    "mint",
    "token_lifetime",
    "verify",
]
