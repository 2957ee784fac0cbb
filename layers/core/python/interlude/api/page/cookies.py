"""The cookies the pages set (the console's session and sign-in cookies, the approval page's form proof): their names,
scope and attributes, by how the deployment is served.

Over https a cookie's name takes the strongest prefix its scope allows (RFC 6265bis, "Cookie Name Prefixes"), which a
browser enforces whoever sets it: `__Host-` for a cookie the whole host shares (Secure, Path=/, no Domain: no other
host, a sibling subdomain included, can set, overwrite or shadow it), `__Secure-` for one kept to a path (Secure: no
page served over plain http can set it). A browser refuses both from plain http, which the local stack serves on
loopback: there the names stay unprefixed, Secure is left off, and each cookie keeps the path it always had.

Every release before 0.12.0 set these cookies unprefixed over https too. After an upgrade a browser may still send
one (`earlier`): see docs/adr/0189 for what each becomes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_lambda_powertools.shared.cookies import Cookie, SameSite

HOST_PREFIX = "__Host-"
SECURE_PREFIX = "__Secure-"


@dataclass(frozen=True)
class PageCookie:
    # The name without a prefix: the local stack's, and what every release before 0.12.0 set.
    base: str
    # Its path over plain http, and every earlier release's.
    path: str
    # Over https: the whole host's (`__Host-`, at Path=/), or kept to `path` (`__Secure-`).
    host_wide: bool

    def name(self, https: bool) -> str:
        if not https:
            return self.base
        return (HOST_PREFIX if self.host_wide else SECURE_PREFIX) + self.base

    def scope(self, https: bool) -> str:
        return "/" if https and self.host_wide else self.path

    def made(self, value: str, max_age_s: int, https: bool) -> Cookie:
        """The cookie holding `value` for `max_age_s` (0: the cookie ended), HttpOnly and SameSite=Strict."""
        return Cookie(
            name=self.name(https),
            value=value,
            path=self.scope(https),
            secure=https,
            http_only=True,
            max_age=max_age_s,
            same_site=SameSite.STRICT_MODE,
        )

    def held(self, cookies: Mapping[str, str], https: bool) -> str | None:
        """Its value as this release set it."""
        return cookies.get(self.name(https))

    def earlier(self, cookies: Mapping[str, str], https: bool) -> str | None:
        """The value an earlier release set under the unprefixed name, when the browser still sends it over https."""
        return cookies.get(self.base) if https else None

    def held_or_earlier(self, cookies: Mapping[str, str], https: bool) -> str | None:
        """Its value as this release set it, else as an earlier one did: for a form's proof cookie, whose page an
        earlier release may have rendered before the upgrade (what this release renders carries the value over)."""
        return self.held(cookies, https) or self.earlier(cookies, https)

    def earlier_ended(self) -> Cookie:
        """The unprefixed cookie an earlier release set over https, ended where it was set."""
        return Cookie(
            name=self.base,
            value="",
            path=self.path,
            secure=True,
            http_only=True,
            max_age=0,
            same_site=SameSite.STRICT_MODE,
        )


def parse_cookies(header_values: list[str]) -> dict[str, str]:
    """name → value from Cookie header values (or API Gateway's `cookies` list); the first of a name wins."""
    out: dict[str, str] = {}
    for value in header_values:
        for part in value.split(";"):
            name, sep, val = part.strip().partition("=")
            if sep and name and name not in out:
                out[name] = val.strip()
    return out
