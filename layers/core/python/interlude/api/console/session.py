"""Console sessions: an API key, checked once at sign-in, exchanged for a short-lived signed cookie.

The cookie holds `kid.body.mac`: the body is the key's id, tenant, subject and scopes, when it was issued and
when it ends, and a random nonce; the mac is HMAC-SHA256 under a key derived from the token key ring's secret of
`kid` (the ring in Secrets Manager, interlude.adapters.keyring_store), so rotating the ring keeps sessions and
retiring a kid ends them. The API key itself never leaves the sign-in request. The nonce also names the session's
item in the table (Keys.open_console_session), which sign-out deletes: the cookie proves who signed in, the item
that the session is still open.

Every form carries a CSRF proof: HMAC(key, "csrf|" + the session's nonce) for signed-in forms, and
HMAC(key, "sign-in|" + a random pre-session cookie) for the sign-in form, so a cross-site page can compute
neither. The cookies are HttpOnly and SameSite=Strict (Secure and `__Host-` on https: interlude.api.page.cookies),
which already keeps them off cross-site posts; the proof and the Origin/Sec-Fetch-Site check stand behind that.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from interlude.api.page.cookies import PageCookie

# The whole host's over https (`__Host-`, Path=/: interlude.api.page.cookies), where a path bounds nothing between
# pages of one origin and the host's own prefix keeps a sibling subdomain from planting a session of its choosing.
SESSION = PageCookie("il_console", "/console", host_wide=True)
SIGN_IN = PageCookie("il_console_pre", "/console", host_wide=True)
# A session lasts an hour from sign-in: short, since it stands in for an API key in a browser.
SESSION_TTL_S = 3600
SIGN_IN_COOKIE_MAX_AGE_S = 1800
FIELD = "csrf"
MAX_COOKIE_CHARS = 3000
_KID = re.compile(r"[A-Za-z0-9_~-]{1,128}")
_B64 = re.compile(r"[A-Za-z0-9_-]+")
_HEX = re.compile(r"[0-9a-f]{64}")
_PRE = re.compile(r"[A-Za-z0-9_-]{22,64}")


@dataclass(frozen=True)
class Session:
    key_id: str
    tenant: str
    subject: dict[str, Any]
    scopes: tuple[str, ...]
    issued_at: int
    expires_at: int
    # Binds the forms' CSRF proof to this session.
    nonce: str

    def as_claims(self) -> dict[str, Any]:
        return {
            "k": self.key_id,
            "t": self.tenant,
            "s": self.subject,
            "sc": list(self.scopes),
            "iat": self.issued_at,
            "exp": self.expires_at,
            "n": self.nonce,
        }


def new_session(key_id: str, tenant: str, subject: dict[str, Any], scopes: frozenset[str], now: int) -> Session:
    return Session(key_id, tenant, dict(subject), tuple(sorted(scopes)), now, now + SESSION_TTL_S, secrets.token_urlsafe(16))


def derive_key(kid_secret: bytes) -> bytes:
    # A key of the console's own: nothing it signs can stand in for an interrupt token or an approval page proof.
    return hmac.new(kid_secret, b"interlude.console.v1", hashlib.sha256).digest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def seal(session: Session, kid: str, kid_secret: bytes) -> str:
    body = _b64(json.dumps(session.as_claims(), separators=(",", ":"), sort_keys=True, allow_nan=False).encode())
    mac = hmac.new(derive_key(kid_secret), f"{kid}.{body}".encode(), hashlib.sha256).digest()
    return f"{kid}.{body}.{_b64(mac)}"


def kid_of(cookie: str | None) -> str | None:
    """The kid a cookie names, when it is shaped like a session at all."""
    if not cookie or len(cookie) > MAX_COOKIE_CHARS:
        return None
    kid, _, _ = cookie.partition(".")
    return kid if _KID.fullmatch(kid) else None


def unseal(cookie: str | None, ring_keys: Mapping[str, bytes], now: int) -> Session | None:
    """The session a cookie holds, or None when it is missing, malformed, forged, signed by a kid no longer in
    the ring, or expired."""
    kid = kid_of(cookie)
    if kid is None or cookie is None or kid not in ring_keys:
        return None
    parts = cookie.split(".")
    if len(parts) != 3 or not all(_B64.fullmatch(p) for p in parts[1:]):
        return None
    expected = hmac.new(derive_key(ring_keys[kid]), f"{kid}.{parts[1]}".encode(), hashlib.sha256).digest()
    try:
        if not hmac.compare_digest(expected, _unb64(parts[2])):
            return None
        claims = json.loads(_unb64(parts[1]))
        session = Session(
            key_id=str(claims["k"]),
            tenant=str(claims["t"]),
            subject=dict(claims["s"]),
            scopes=tuple(str(s) for s in claims["sc"]),
            issued_at=int(claims["iat"]),
            expires_at=int(claims["exp"]),
            nonce=str(claims["n"]),
        )
    except (binascii.Error, ValueError, KeyError, TypeError):
        return None
    return session if now < session.expires_at else None


def form_proof(kid_secret: bytes, session: Session) -> str:
    return hmac.new(derive_key(kid_secret), f"csrf|{session.nonce}".encode(), hashlib.sha256).hexdigest()


def form_proof_ok(kid_secret: bytes, session: Session, field: str | None) -> bool:
    if not field or not _HEX.fullmatch(field):
        return False
    return hmac.compare_digest(form_proof(kid_secret, session), field)


def pre_session(existing: str | None) -> str:
    """The sign-in cookie's value: the one the browser holds when well formed, else a new one."""
    return existing if existing and _PRE.fullmatch(existing) else secrets.token_urlsafe(16)


def sign_in_proof(kid: str, kid_secret: bytes, pre: str) -> str:
    """`kid.mac`: the sign-in form's proof, naming the kid whose secret made it."""
    return f"{kid}." + hmac.new(derive_key(kid_secret), f"sign-in|{pre}".encode(), hashlib.sha256).hexdigest()


def sign_in_proof_ok(ring_keys: Mapping[str, bytes], pre: str | None, field: str | None) -> bool:
    if not field or not pre or not _PRE.fullmatch(pre):
        return False
    kid, _, mac = field.partition(".")
    if kid not in ring_keys or not _HEX.fullmatch(mac):
        return False
    return hmac.compare_digest(sign_in_proof(kid, ring_keys[kid], pre), field)
