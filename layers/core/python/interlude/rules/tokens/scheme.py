"""OpenWOP v2 interrupt resume tokens: `ow2.hs256.<kid>.<payload>.<mac>`, minted and verified against a key ring.

Only this host mints and verifies these tokens, so the payload layout is ours (identity.md §4 leaves it
host-internal). Everything a caller sends is hostile: decoding is strict so that exactly one string verifies
for a given set of claims, the MAC is checked before the payload is parsed, and no input string can make
`verify` raise anything but TokenInvalid or TokenExpired.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, get_args

from interlude.domain.errors import DomainError, Expired, Unauthenticated
from interlude.domain.token_lifetimes import DEFAULT_LIFETIME_S

Intent = Literal["resolve", "inspect"]
INTENTS: frozenset[str] = frozenset(get_args(Intent))

TOKEN_PREFIX = "ow2"
TOKEN_ALG = "hs256"
# What the discovery facet advertises as `interrupt.tokenAlgs[]`.
TOKEN_ALGS: tuple[str, ...] = (TOKEN_ALG,)
MAX_TOKEN_CHARS = 2048
CLAIMS_VERSION = 1
MIN_SECRET_BYTES = 32

_MAC_BYTES = hashlib.sha256().digest_size
# The OpenWOP `keyId` grammar, which is what a presented kid must match.
_KID = re.compile(r"[A-Za-z0-9._~-]{1,128}")
# Kids this host puts in its ring: the keyId grammar without '.', because '.' separates the token's segments
# and a dotted kid would make the segment count ambiguous.
_RING_KID = re.compile(r"[A-Za-z0-9_~-]{1,128}")
_B64URL = re.compile(r"[A-Za-z0-9_-]+")
_CLAIM_KEYS = frozenset({"i", "r", "n", "e", "t", "v"})
# Optional: the API key id of the principal that minted the token (who a token resolution is made for).
_MINTER_CLAIM = "k"
_MINTER = re.compile(r"[A-Za-z0-9_-]{1,64}")
# Optional: the directory principal a personal link was minted for (issue 14): the vote is that principal's.
_PRINCIPAL_CLAIM = "p"
_PRINCIPAL = re.compile(r"[^\s/]{1,256}")


class TokenError(DomainError):
    """A token refused; `reason` is for logs only and never names the token or a secret."""

    public_message = "interrupt token not accepted"

    def __init__(self, reason: str) -> None:
        super().__init__(self.public_message)
        self.reason = reason


class TokenInvalid(TokenError, Unauthenticated):
    """interrupt_token_invalid: malformed, unadvertised alg, unheld kid, bad MAC or bad claims."""

    default_code = "interrupt_token_invalid"


class TokenExpired(TokenError, Expired):
    """interrupt_expired: an authentic token past its expiry; `claims` say which interrupt it named."""

    default_code = "interrupt_expired"
    public_message = "interrupt token expired"

    def __init__(self, claims: TokenClaims) -> None:
        super().__init__("expired")
        self.claims = claims


@dataclass(frozen=True)
class TokenClaims:
    interrupt_id: str
    run_id: str
    node_id: str
    # Epoch seconds; the token is refused from this second on.
    expires_at: int
    intent: Intent
    # The API key id that minted the token, or None for a token minted by the host itself.
    minter: str | None = None
    # The tenant's directory principal a personal link names (None: a token acting for its minter, or the host).
    principal: str | None = None

    def __post_init__(self) -> None:
        for name in ("interrupt_id", "run_id", "node_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{name} must be a non-empty string")
        # bool is an int subclass; True is not an expiry.
        if type(self.expires_at) is not int or self.expires_at < 0:
            raise ValueError("expires_at must be a non-negative int (epoch seconds)")
        if self.intent not in INTENTS:
            raise ValueError(f"intent must be one of {sorted(INTENTS)}")
        if self.minter is not None and (not isinstance(self.minter, str) or not _MINTER.fullmatch(self.minter)):
            raise ValueError(f"minter must match {_MINTER.pattern}")
        if self.principal is not None and (
            not isinstance(self.principal, str) or not _PRINCIPAL.fullmatch(self.principal) or self.minter is not None
        ):
            raise ValueError(f"principal must match {_PRINCIPAL.pattern}, and a personal link has no minter")

    @property
    def decides(self) -> bool:
        """Whether the token may resolve: a `resolve` token acting for someone, the key that minted it or a personal
        link's principal. One naming neither (what callback notices carried before issue 26, S3) only shows."""
        return self.intent == "resolve" and (self.minter is not None or self.principal is not None)

    def _wire(self) -> dict[str, Any]:
        wire = {
            "i": self.interrupt_id,
            "r": self.run_id,
            "n": self.node_id,
            "e": self.expires_at,
            "t": self.intent,
            "v": CLAIMS_VERSION,
        }
        if self.minter is not None:
            wire[_MINTER_CLAIM] = self.minter
        if self.principal is not None:
            wire[_PRINCIPAL_CLAIM] = self.principal
        return wire


@dataclass(frozen=True)
class KeyRing:
    """Token secrets by kid: the current kid signs, every kid held verifies; removing a kid revokes its tokens."""

    current_kid: str
    # Secrets stay out of repr so a logged ring leaks nothing.
    keys: Mapping[str, bytes] = field(repr=False, hash=False)
    # Fields of the stored ring this release does not know (a later release's), written back as read.
    unknown: Mapping[str, Any] = field(default_factory=dict, repr=False, hash=False, compare=False)

    def __post_init__(self) -> None:
        keys = dict(self.keys)
        for kid, secret in keys.items():
            if not isinstance(kid, str) or not _RING_KID.fullmatch(kid):
                raise ValueError(f"kid {kid!r} must match {_RING_KID.pattern}")
            if not isinstance(secret, bytes) or len(secret) < MIN_SECRET_BYTES:
                raise ValueError(f"secret for kid {kid!r} must be at least {MIN_SECRET_BYTES} bytes")
        if self.current_kid not in keys:
            raise ValueError(f"current kid {self.current_kid!r} is not in the ring")
        object.__setattr__(self, "keys", MappingProxyType(keys))

    def __repr__(self) -> str:
        return f"KeyRing(current_kid={self.current_kid!r}, kids={sorted(self.keys)!r})"

    @classmethod
    def generate(cls, kid: str | None = None) -> KeyRing:
        kid = kid if kid is not None else _new_kid()
        return cls(current_kid=kid, keys={kid: secrets.token_bytes(MIN_SECRET_BYTES)})

    def rotated(self) -> KeyRing:
        """A ring whose new random kid signs from now on; older kids keep verifying outstanding tokens."""
        kid = _new_kid()
        while kid in self.keys:
            kid = _new_kid()
        return KeyRing(current_kid=kid, keys={**self.keys, kid: secrets.token_bytes(MIN_SECRET_BYTES)}, unknown=self.unknown)

    def retired(self, kid: str) -> KeyRing:
        """A ring without `kid`: every token signed under it stops verifying."""
        if kid == self.current_kid:
            raise ValueError(f"kid {kid!r} is the current signing kid; rotate before retiring it")
        if kid not in self.keys:
            raise ValueError(f"kid {kid!r} is not in the ring")
        kept = {k: s for k, s in self.keys.items() if k != kid}
        return KeyRing(current_kid=self.current_kid, keys=kept, unknown=self.unknown)

    def to_json(self) -> str:
        return json.dumps(
            {
                **self.unknown,
                "version": 1,
                "current": self.current_kid,
                "keys": {kid: _b64url_encode(secret) for kid, secret in self.keys.items()},
            },
            sort_keys=True,
            separators=(",", ":"),
            allow_nan=False,
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> KeyRing:
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise ValueError("key ring is not valid JSON") from exc
        if not isinstance(doc, dict) or not {"version", "current", "keys"} <= set(doc):
            raise ValueError("key ring must be {version: 1, current, keys}")
        if doc["version"] != 1:
            raise ValueError(f"key ring is in format {doc['version']!r}, newer than this release reads (1)")
        if not isinstance(doc["current"], str) or not isinstance(doc["keys"], dict):
            raise ValueError("key ring current must be a string and keys an object")
        keys: dict[str, bytes] = {}
        for kid, encoded in doc["keys"].items():
            secret = _b64url_decode_canonical(encoded) if isinstance(encoded, str) else None
            if secret is None:
                raise ValueError(f"secret for kid {kid!r} is not canonical unpadded base64url")
            keys[kid] = secret
        unknown = {name: value for name, value in doc.items() if name not in ("version", "current", "keys")}
        return cls(current_kid=doc["current"], keys=keys, unknown=unknown)


def mint(claims: TokenClaims, ring: KeyRing) -> str:
    kid = ring.current_kid
    payload = _b64url_encode(_canonical_json(claims._wire()))
    mac = _b64url_encode(_mac(ring.keys[kid], kid, payload))
    token = f"{TOKEN_PREFIX}.{TOKEN_ALG}.{kid}.{payload}.{mac}"
    if len(token) > MAX_TOKEN_CHARS:
        # verify would refuse it, so never hand it out.
        raise ValueError(f"claims too long: token would exceed {MAX_TOKEN_CHARS} characters")
    return token


def verify(token: str, ring: KeyRing, *, now: float) -> TokenClaims:
    if not isinstance(token, str):
        raise TokenInvalid("not_a_string")
    if len(token) > MAX_TOKEN_CHARS:
        raise TokenInvalid("oversize")
    # Non-ASCII is refused before anything compares it: compare_digest raises TypeError on non-ASCII str.
    if not token.isascii():
        raise TokenInvalid("non_ascii")
    segments = token.split(".")
    if len(segments) != 5:
        raise TokenInvalid("segment_count")
    prefix, alg, kid, payload, mac = segments
    if prefix != TOKEN_PREFIX:
        raise TokenInvalid("prefix")
    # Exact match against the one advertised alg; never derived from or normalised from the token.
    if alg != TOKEN_ALG:
        raise TokenInvalid("alg")
    if not _KID.fullmatch(kid):
        raise TokenInvalid("kid_grammar")
    secret = ring.keys.get(kid)
    if secret is None:
        raise TokenInvalid("kid_unknown")
    payload_bytes = _b64url_decode_canonical(payload)
    presented_mac = _b64url_decode_canonical(mac)
    if payload_bytes is None or presented_mac is None:
        raise TokenInvalid("encoding")
    if not hmac.compare_digest(_mac(secret, kid, payload), presented_mac):
        raise TokenInvalid("mac")
    claims = _parse_claims(payload_bytes)
    if now >= claims.expires_at:
        raise TokenExpired(claims)
    return claims


def token_lifetime(
    now: float,
    interrupt_deadline: float | None,
    requested_s: int | None = None,
    default_s: int = DEFAULT_LIFETIME_S,
) -> int:
    """The expiry (epoch seconds) for a new token: the default lifetime, or a shorter requested one, and never
    past the interrupt's own deadline. A deadline already passed yields an expiry already passed."""
    if default_s <= 0:
        raise ValueError("default_s must be positive")
    lifetime = default_s
    if requested_s is not None:
        if requested_s <= 0:
            raise ValueError("requested_s must be positive")
        lifetime = min(requested_s, default_s)
    # Rounding down keeps the integer expiry inside both bounds.
    expires_at = math.floor(now + lifetime)
    if interrupt_deadline is not None:
        expires_at = min(expires_at, math.floor(interrupt_deadline))
    return expires_at


def _parse_claims(raw: bytes) -> TokenClaims:
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise TokenInvalid("payload_json") from exc
    if not isinstance(doc, dict) or set(doc) - {_MINTER_CLAIM, _PRINCIPAL_CLAIM} != _CLAIM_KEYS:
        raise TokenInvalid("claims_shape")
    if type(doc["v"]) is not int or doc["v"] != CLAIMS_VERSION:
        raise TokenInvalid("claims_version")
    try:
        claims = TokenClaims(
            interrupt_id=doc["i"],
            run_id=doc["r"],
            node_id=doc["n"],
            expires_at=doc["e"],
            intent=doc["t"],
            minter=doc.get(_MINTER_CLAIM),
            principal=doc.get(_PRINCIPAL_CLAIM),
        )
    except ValueError as exc:
        raise TokenInvalid("claims_types") from exc
    # One byte layout per set of claims, as for the base64 around it.
    if _canonical_json(claims._wire()) != raw:
        raise TokenInvalid("claims_not_canonical")
    return claims


def _mac(secret: bytes, kid: str, payload: str) -> bytes:
    # Everything before the MAC is signed, the version prefix included, so no segment can be swapped.
    return hmac.new(secret, f"{TOKEN_PREFIX}.{TOKEN_ALG}.{kid}.{payload}".encode("ascii"), hashlib.sha256).digest()


def _canonical_json(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode("ascii")


def _b64url_encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64url_decode_canonical(segment: str) -> bytes | None:
    """The bytes of an unpadded base64url segment, or None unless re-encoding them gives the segment back.

    The stdlib decoder is lenient (padding, stray characters and unused trailing bits all decode), which would
    let many strings carry one valid MAC.
    """
    if not _B64URL.fullmatch(segment) or len(segment) % 4 == 1:
        return None
    try:
        raw = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    except (binascii.Error, ValueError):
        return None
    if _b64url_encode(raw) != segment:
        return None
    return raw


def _new_kid() -> str:
    # Date-prefixed so an operator can tell older kids from newer ones at a glance.
    return f"k{time.strftime('%Y%m%d', time.gmtime())}-{secrets.token_hex(4)}"
