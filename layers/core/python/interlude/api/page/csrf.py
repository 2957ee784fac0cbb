"""Cross-site protection for the approval page's form: a signed double submit.

The browser holds a random secret in a SameSite=Strict, HttpOnly cookie (one per token, reused across renders
so two tabs of one link both work); each form carries HMAC(key, token | that secret) in a hidden field, with
the key derived from the secret of the token's own kid. A cross-site page can neither read nor set the cookie
(and a SameSite=Strict cookie is not sent with a cross-site POST at all), and without the key it cannot
compute the field for any cookie value.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from interlude.api.page.cookies import PageCookie

FIELD = "csrf"
COOKIE_PREFIX = "il_csrf_"
COOKIE_MAX_AGE_S = 3600
_SECRET = re.compile(r"[A-Za-z0-9_-]{22,64}")
_HEX = re.compile(r"[0-9a-f]{64}")


def browser_secret(existing: str | None) -> str:
    """The cookie's value: the one the browser already holds for this token when well formed, else a new one."""
    if existing and _SECRET.fullmatch(existing):
        return existing
    return secrets.token_urlsafe(16)


def derive_key(kid_secret: bytes) -> bytes:
    # A key of its own, so a value computed here can never stand in for a token MAC.
    return hmac.new(kid_secret, b"interlude.csrf.v1", hashlib.sha256).digest()


def cookie_of(token: str) -> PageCookie:
    """The token's own cookie, kept to the approval links' path (`__Secure-` over https: interlude.api.page.cookies):
    one for every link a browser opens, so the whole host sharing them would send them all with every request."""
    name = COOKIE_PREFIX + hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()[:16]
    return PageCookie(name, "/interrupts/", host_wide=False)


def field_value(key: bytes, token: str, browser: str) -> str:
    return hmac.new(key, f"{token}|{browser}".encode("utf-8", "replace"), hashlib.sha256).hexdigest()


def check(key: bytes, token: str, field: str | None, browser: str | None) -> bool:
    if not field or not browser or not _HEX.fullmatch(field) or not _SECRET.fullmatch(browser):
        return False
    return hmac.compare_digest(field_value(key, token, browser), field)


def cross_site(origin: str | None, sec_fetch_site: str | None, own_origin: str) -> bool:
    """True when the browser says the request came from another site.

    `Sec-Fetch-Site` is authoritative where sent. `Origin: null` is what a browser sends on a POST from a page
    served with Referrer-Policy: no-referrer (ours), so only a concrete, different origin counts against it.
    """
    if sec_fetch_site is not None and sec_fetch_site.strip().lower() not in ("same-origin", "none"):
        return True
    if not origin:
        return False
    return origin.strip() != "null" and origin.strip().rstrip("/") != own_origin.rstrip("/")
