"""Egress guard: decides whether Interlude may send a request to a URL, and to which addresses.

This is the product's own security boundary (design §7; OpenWOP webhooks.md §Egress). The same check runs when a
run is created with a ``callbackUrl`` and again before every delivery attempt, and the delivery client then dials
only the addresses this check admitted, so a DNS answer that changes between the check and the connection
(rebinding) cannot redirect the request.

The host is read the way a WHATWG URL parser and ``getaddrinfo`` would read it (percent-decoding, IDNA mapping,
decimal/octal/hex and short IPv4 forms, trailing dot), so no spelling of a denied address gets through as an
unrecognised host name. A host name passes only if every address it resolves to is globally reachable; addresses
that embed an IPv4 address (mapped, compatible, NAT64, 6to4) are judged by the address they embed.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote_to_bytes

Resolver = Callable[[str, int], list[str]]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

MAX_URL_LENGTH = 2048
_DEFAULT_PORTS = {"https": 443, "http": 80}

# Names that reach the host itself, the local network or a cloud metadata service. The resolved-address check
# catches most of them too; refusing the name gives a clear answer at registration, before any lookup.
_DENIED_HOST_NAMES = frozenset(
    {
        "localhost",
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.tencentyun.com",
        "metadata.packet.net",
        "metadata.platformequinix.com",
    }
)
_DENIED_HOST_SUFFIXES = (".localhost", ".local", ".internal", ".localdomain", ".home.arpa")
_LOOPBACK_HOST_NAMES = ("localhost",)
_LOOPBACK_HOST_SUFFIXES = (".localhost",)

_LABEL = re.compile(r"[a-z0-9_-]{1,63}")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")

# Ranges ipaddress does not already mark as non-global on every supported Python (3.11's is_global lets
# multicast, 100.64/10 edge cases, fec0::/10, 3fff::/20 and 5f00::/16 through), plus public addresses that are
# nonetheless platform services.
_EXTRA_DENIED_V4 = tuple(
    ipaddress.IPv4Network(net)
    for net in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "255.255.255.255/32",
        "168.63.129.16/32",  # Azure WireServer / host agent: a public address no range rule catches.
    )
)
_EXTRA_DENIED_V6 = tuple(
    ipaddress.IPv6Network(net)
    for net in (
        "::/128",
        "::1/128",
        "64:ff9b:1::/48",  # local-use NAT64 (RFC 8215): translated by a private translator.
        "100::/64",
        "2001::/23",  # IETF protocol assignments, including Teredo 2001::/32.
        "2001:db8::/32",
        "3fff::/20",
        "5f00::/16",
        "fc00::/7",  # ULA, including the AWS IMDS address fd00:ec2::254.
        "fe80::/10",
        "fec0::/10",
        "ff00::/8",
    )
)
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


# The reason of a host name that did not resolve: the one refusal the next attempt may not repeat.
UNRESOLVED = "unresolvable"

# How long a host name's lookup may take. getaddrinfo has no limit of its own: the system resolver's tries and timeouts
# come to 10 s and more for a name whose servers never answer (a tenant can own such a name), and the API request or
# the delivery waiting on it holds its function that long.
LOOKUP_TIMEOUT_S = 3.0


class EgressRefused(Exception):
    """A URL Interlude will not send to.

    ``reason`` is a short machine class: ``malformed``, ``scheme``, ``userinfo``, ``host_name``, ``port``,
    ``address_not_global`` or ``unresolvable``. ``address`` names the refused address for operators' logs; the
    message shown to a tenant never contains a resolved address, so the guard does not reveal internal DNS.
    """

    def __init__(self, reason: str, message: str, *, address: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.address = address


@dataclass(frozen=True)
class CheckedTarget:
    """A destination that passed the guard.

    ``host`` is the normalised host (lower case, IDNA ASCII, no trailing dot; an IP literal in canonical form and
    without brackets): the name TLS verifies and the Host header carries. ``addresses`` are the checked IP
    addresses, in resolver order; a connection may go to these and nowhere else.
    """

    scheme: str
    host: str
    port: int
    path_and_query: str
    addresses: tuple[str, ...]


def check_url(url: str, *, resolve: Resolver | None = None, allow_loopback: bool = False) -> CheckedTarget:
    """Admit ``url`` as a callback destination or raise EgressRefused.

    ``resolve(host, port)`` returns the IP address strings of a host name; the default uses getaddrinfo.
    ``allow_loopback`` is for the local development stack only: it admits ``http://`` and loopback destinations
    (127.0.0.0/8, ::1, ``localhost``) and still refuses every other non-global address.
    """
    scheme, authority, path_and_query = _split_url(url, allow_loopback=allow_loopback)
    host_text, port = _split_authority(authority, default_port=_DEFAULT_PORTS[scheme])
    literal, host = _normalise_host(host_text)
    if literal is not None:
        _refuse_if_denied(literal, allow_loopback=allow_loopback)
        return CheckedTarget(scheme, address_text(literal), port, path_and_query, (address_text(literal),))

    _refuse_denied_name(host, allow_loopback=allow_loopback)
    addresses = _resolve_addresses(host, port, resolve or resolve_host)
    for address in addresses:
        _refuse_if_denied(address, allow_loopback=allow_loopback)
    return CheckedTarget(scheme, host, port, path_and_query, tuple(map(address_text, addresses)))


class _NeedsLookup(Exception):
    pass


def _no_lookup(host: str, port: int) -> list[str]:
    raise _NeedsLookup(host)


def refusal_without_lookup(url: str, *, allow_loopback: bool = False) -> EgressRefused | None:
    """Why the guard refuses `url` before any DNS lookup (its scheme, its form, an IP literal, a local name), or None:
    a URL whose host name must be resolved to be judged is judged when it is sent to."""
    try:
        check_url(url, resolve=_no_lookup, allow_loopback=allow_loopback)
    except _NeedsLookup:
        return None
    except EgressRefused as refused:
        return refused
    return None


def resolve_host(host: str, port: int) -> list[str]:
    """The default resolver: every TCP address getaddrinfo returns for ``host``; TimeoutError when it has not answered
    within LOOKUP_TIMEOUT_S (the lookup goes on in its daemon thread until the system resolver gives up, and nothing
    waits for it)."""
    answers: list[list[Any] | OSError | UnicodeError] = []

    def look_up() -> None:
        try:
            answers.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except (OSError, UnicodeError) as exc:
            answers.append(exc)

    lookup = threading.Thread(target=look_up, name="dns-lookup", daemon=True)
    lookup.start()
    lookup.join(LOOKUP_TIMEOUT_S)
    if not answers:
        raise TimeoutError(f"no answer for {host!r} within {LOOKUP_TIMEOUT_S:g} s")
    answer = answers[0]
    if isinstance(answer, BaseException):
        raise answer
    return [str(info[4][0]) for info in answer]


def is_denied_address(address: IPAddress, *, allow_loopback: bool = False) -> bool:
    """True when ``address`` is not globally reachable, judging embedded IPv4 by the address it embeds."""
    judged = judged_address(address)
    if allow_loopback and judged.is_loopback:
        return False
    if isinstance(judged, ipaddress.IPv4Address):
        extra: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network] = _EXTRA_DENIED_V4
    else:
        extra = _EXTRA_DENIED_V6
    return (
        not judged.is_global
        or judged.is_private
        or judged.is_multicast
        or judged.is_reserved
        or judged.is_loopback
        or judged.is_link_local
        or judged.is_unspecified
        or any(judged in net for net in extra)
    )


def address_text(address: IPAddress) -> str:
    """The address as RFC 5952 writes it, on every Python: an IPv4-mapped one ends in its dotted IPv4 address.

    Python's ipaddress writes ::ffff:93.184.215.14 so from 3.13 on, but ::ffff:5db8:d70e before; the functions run
    3.14 and the suite also 3.11, and a callback's checked host and addresses must not depend on which.
    """
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return str(address) if mapped is None else f"::ffff:{mapped}"


def judged_address(address: IPAddress) -> IPAddress:
    """The address a connection to ``address`` really reaches, for IPv6 forms that carry an IPv4 address.

    IPv4-mapped (::ffff:0:0/96), IPv4-compatible (::/96), NAT64 (64:ff9b::/96) and 6to4 (2002::/16) are judged
    by the embedded IPv4 address, so those prefixes are neither denied wholesale nor a way around the IPv4 rules.
    (From Python 3.13 ipaddress's own properties of a mapped address follow the embedded one; before, they judge
    the IPv6 address. Judging the embedded address here gives one verdict on every Python.)
    """
    if isinstance(address, ipaddress.IPv4Address):
        return address
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    # :: and ::1 are the IPv6 unspecified and loopback addresses, not IPv4-compatible ones.
    if (address in _IPV4_COMPATIBLE and int(address) > 1) or address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    return address


def _split_url(url: str, *, allow_loopback: bool) -> tuple[str, str, str]:
    _check_url_text(url)
    scheme, rest = _split_scheme(url, allow_loopback=allow_loopback)
    end = min((i for i in (rest.find(ch) for ch in "/?#") if i >= 0), default=len(rest))
    authority, remainder = rest[:end], rest[end:].partition("#")[0]
    if "@" in authority:
        raise EgressRefused("userinfo", "URL must not contain credentials (user@host)")
    if not remainder.startswith("/"):
        remainder = "/" + remainder
    # The request line must be ASCII; percent-encode the rest as a browser would.
    path_and_query = "".join(ch if ord(ch) < 0x80 else quote(ch, safe="") for ch in remainder)
    return scheme, authority, path_and_query


def _check_url_text(url: str) -> None:
    if not isinstance(url, str) or not url:
        raise EgressRefused("malformed", "URL must be a non-empty string")
    if len(url) > MAX_URL_LENGTH:
        raise EgressRefused("malformed", f"URL is longer than {MAX_URL_LENGTH} characters")
    # WHATWG parsers strip or reinterpret whitespace, control characters and backslashes while other parsers
    # keep them; refusing them removes the parser differentials that SSRF payloads rely on.
    if any(ord(ch) <= 0x20 or ord(ch) == 0x7F or ch == "\\" for ch in url):
        raise EgressRefused("malformed", "URL contains whitespace, control characters or a backslash")


def _split_scheme(url: str, *, allow_loopback: bool) -> tuple[str, str]:
    """The lower-cased scheme and what follows its `//`."""
    scheme, colon, rest = url.partition(":")
    if not colon or not _SCHEME.fullmatch(scheme):
        raise EgressRefused("scheme", "URL has no scheme")
    scheme = scheme.lower()
    allowed = ("https", "http") if allow_loopback else ("https",)
    if scheme not in allowed:
        raise EgressRefused("scheme", "URL must use https://")
    if not rest.startswith("//") or rest.startswith("///"):
        raise EgressRefused("host_name", "URL has no host")
    return scheme, rest[2:]


def _split_authority(authority: str, *, default_port: int) -> tuple[str, int]:
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise EgressRefused("host_name", "URL has an unterminated IPv6 literal")
        host_text, after = authority[: end + 1], authority[end + 1 :]
        if after and not after.startswith(":"):
            raise EgressRefused("host_name", "URL has characters after its IPv6 literal")
        port_text = after[1:] if after else ""
    else:
        host_text, _, port_text = authority.partition(":")
    if not host_text:
        raise EgressRefused("host_name", "URL has an empty host")
    if not port_text:
        return host_text, default_port
    if not port_text.isascii() or not port_text.isdigit():
        raise EgressRefused("port", "URL port is not a number")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise EgressRefused("port", "URL port is out of range")
    return host_text, port


def _normalise_host(host_text: str) -> tuple[IPAddress | None, str]:
    """Return (IP literal, "") for an address host or (None, normalised name) for a domain."""
    if host_text.startswith("["):
        return _ipv6_literal(host_text[1:-1]), ""
    host = _ascii_host(host_text)
    if _ends_in_number(host):
        # WHATWG treats such a host as IPv4 (and getaddrinfo reads the same forms numerically); a host that
        # looks numeric but is no valid address is refused rather than sent to DNS.
        value = _parse_ipv4(host)
        if value is None:
            raise EgressRefused("host_name", "URL host looks like an IPv4 address but is not a valid one")
        return ipaddress.IPv4Address(value), ""

    labels = host.split(".")
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        raise EgressRefused("host_name", "URL host is not a valid domain name")
    return None, host


def _ipv6_literal(inner: str) -> ipaddress.IPv6Address:
    # Zone identifiers are link-local by definition and WHATWG refuses them.
    if "%" in inner:
        raise EgressRefused("host_name", "IPv6 literal must not carry a zone identifier")
    try:
        return ipaddress.IPv6Address(inner)
    except ValueError:
        raise EgressRefused("host_name", "URL host is not a valid IPv6 literal") from None


def _ascii_host(host_text: str) -> str:
    """The host percent-decoded, IDNA-encoded, lower-cased and without its trailing dot."""
    try:
        decoded = unquote_to_bytes(host_text).decode("utf-8")
    except UnicodeDecodeError:
        raise EgressRefused("host_name", "URL host is not valid UTF-8 after percent-decoding") from None
    if any(ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in decoded):
        raise EgressRefused("host_name", "URL host contains control characters")
    try:
        # The IDNA codec applies nameprep (NFKC and case folding) and treats ideographic full stops as dots,
        # so lookalike spellings of a name or of a dotted address collapse to their ASCII form.
        ascii_host = decoded if decoded.isascii() else decoded.encode("idna").decode("ascii")
    except UnicodeError:
        raise EgressRefused("host_name", "URL host is not a valid internationalised domain name") from None
    host = ascii_host.lower()
    return host[:-1] if host.endswith(".") else host


def _ends_in_number(host: str) -> bool:
    parts = host.split(".")
    last = parts[-1]
    if last and last.isascii() and last.isdigit():
        return True
    return _parse_ipv4_number(last) is not None


def _parse_ipv4_number(text: str) -> int | None:
    if not text:
        return None
    radix = 10
    if text[:2] in ("0x", "0X"):
        text, radix = text[2:], 16
    elif len(text) > 1 and text[0] == "0":
        text, radix = text[1:], 8
    if not text:
        return 0
    digits = "0123456789abcdef"[:radix]
    if not all(ch in digits for ch in text.lower()):
        return None
    return int(text, radix)


def _parse_ipv4(host: str) -> int | None:
    """WHATWG IPv4 parser: 1-4 parts, each decimal, octal (leading 0) or hex (0x); the last fills the rest."""
    parts = host.split(".")
    if len(parts) > 4:
        return None
    numbers = [_parse_ipv4_number(part) for part in parts]
    if any(number is None for number in numbers):
        return None
    values = [number for number in numbers if number is not None]
    if any(value > 255 for value in values[:-1]) or values[-1] >= 256 ** (5 - len(values)):
        return None
    return values[-1] + sum(value * 256 ** (3 - index) for index, value in enumerate(values[:-1]))


def _refuse_denied_name(host: str, *, allow_loopback: bool) -> None:
    if allow_loopback and (host in _LOOPBACK_HOST_NAMES or host.endswith(_LOOPBACK_HOST_SUFFIXES)):
        return
    if host in _DENIED_HOST_NAMES or host.endswith(_DENIED_HOST_SUFFIXES):
        raise EgressRefused("host_name", f"host {host!r} is local or a cloud metadata service")
    # A single-label name is completed from the resolver's search list, i.e. it names something on the local
    # network (`metadata`, `kubernetes`, ...); a public callback always has a dotted name.
    if "." not in host:
        raise EgressRefused("host_name", f"host {host!r} is not a fully qualified domain name")


def _resolve_addresses(host: str, port: int, resolve: Resolver) -> list[IPAddress]:
    try:
        answers = resolve(host, port)
    except (OSError, UnicodeError) as exc:
        raise EgressRefused(UNRESOLVED, f"host {host!r} could not be resolved") from exc
    addresses: list[IPAddress] = []
    for answer in answers:
        try:
            address = ipaddress.ip_address(answer)
        except ValueError:
            raise EgressRefused(UNRESOLVED, f"host {host!r} resolved to something that is not an address") from None
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise EgressRefused(UNRESOLVED, f"host {host!r} has no addresses")
    return addresses


def _refuse_if_denied(address: IPAddress, *, allow_loopback: bool) -> None:
    if is_denied_address(address, allow_loopback=allow_loopback):
        raise EgressRefused(
            "address_not_global",
            "URL host is, or resolves to, an address that is not publicly reachable",
            address=address_text(address),
        )
