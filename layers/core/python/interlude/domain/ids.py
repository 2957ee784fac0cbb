"""Identifier grammars, minting, and the tenant-bound wire form (OpenWOP ids.schema.json, RFC 0184)."""

from __future__ import annotations

import binascii
import hashlib
import re
import secrets
from urllib.parse import unquote

from interlude.domain.errors import Invalid

# The grammars as the schemas publish them, `^...$`: for pydantic's `pattern` (pydantic-core's regex, in which `$` ends
# the text) and the OpenAPI document. Python's `$` also matches before a trailing newline, so Python code matches
# through `whole(...)`, never these strings.
TENANT = r"^[A-Za-z0-9._~-]{1,128}$"
TENANT_BOUND = r"^(anon:)?[A-Za-z0-9._~-]{1,128}/[A-Za-z0-9._~-]{16,128}$"
AUTHOR_ID = r"^[A-Za-z0-9._~:-]{1,128}$"  # nodeId, workflowId
# OpenWOP's subjectId (no whitespace, no `/`), and here no control character either: a NUL or an escape in a
# principal's name would reach pages, mails and logs.
SUBJECT_ID = r"^[^\s/\x00-\x1f\x7f-\x9f]{1,256}$"


def whole(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """`pattern` compiled to match whole strings only, whichever method is called (`match` as `fullmatch`): `\\Z`
    ends the text, where `$` also matches before a final newline."""
    return re.compile(f"(?:{pattern})\\Z", flags)


TENANT_RE = whole(TENANT)
TENANT_BOUND_RE = whole(TENANT_BOUND)
AUTHOR_ID_RE = whole(AUTHOR_ID)
# Inline ModuleX definitions are stored under `modulex-inline-<content hash>` (faces/modulex/definition.content_id):
# no author registers a workflow under it, so such a workflow id always names an inline (ad hoc) definition.
INLINE_WORKFLOW_PREFIX = "modulex-inline-"
# Where a definition the ModuleX face translated keeps what the face knows of it (faces/modulex/definition.py): under
# "nodes", each engine node id's ModuleX id, type and name as the author wrote them.
MODULEX_METADATA = "interlude.modulex"
# The `customKind` of the `custom` interrupt a ModuleX `interrupt` node raises (faces/modulex/nodes.py).
MODULEX_INTERRUPT_KIND = "modulex.interrupt"
SUBJECT_ID_RE = whole(SUBJECT_ID)
_WIRE_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_TILDE_RE = re.compile(r"~([0-9A-Fa-f]{2})")


def workflow_display_name(name: str | None, workflow_id: str) -> str | None:
    """What a person calls a workflow: its definition's name, else its id (None for an unnamed inline ModuleX
    definition, whose id is a content hash no one chose)."""
    if name:
        return name
    return None if workflow_id.startswith(INLINE_WORKFLOW_PREFIX) else workflow_id


def mint_opaque() -> str:
    # 144 random bits, base64url without '~' (a minted tenant-bound id never contains '~').
    return secrets.token_urlsafe(18)


def derive_opaque(*parts: str) -> str:
    """A deterministic opaque segment: replaying the same step derives the same id."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    # base64url of 18 bytes (24 characters, never padded), as base64.urlsafe_b64encode makes it without its two Python
    # frames: a transition derives one id per event (five in a resolve; docs/adr/0162).
    return binascii.b2a_base64(digest[:18], newline=False).translate(_URLSAFE).decode()


_URLSAFE = bytes.maketrans(b"+/", b"-_")


# Secrets Manager names allow [A-Za-z0-9/_+=.@-]; an id segment uses [A-Za-z0-9._~-]. Of those only '~' is not
# allowed, and '+' is in no id: mapping one to the other keeps distinct ids distinct (two tenants never share a
# secret) and leaves every name without '~' as it was.
_SECRET_NAME_SEGMENT = str.maketrans("~", "+")
_ID_SEGMENT_RE = re.compile(r"[A-Za-z0-9._~-]{1,128}")


def secret_name(prefix: str, *segments: str) -> str:
    """A Secrets Manager secret's name: `prefix`, then the ids (a tenant, then an opaque id or a secret's own name)
    '/'-separated, each with '~' written '+'."""
    for segment in segments:
        if not _ID_SEGMENT_RE.fullmatch(segment):
            raise ValueError("a secret name is made of ids: [A-Za-z0-9._~-]{1,128} each")
    return prefix + "/".join(segment.translate(_SECRET_NAME_SEGMENT) for segment in segments)


def tenant_bound(tenant: str, opaque: str) -> str:
    return f"{tenant}/{opaque}"


def tenant_of(bound_id: str) -> str:
    return bound_id.split("/", 1)[0]


def to_wire(bound_id: str) -> str:
    """Project a tenant-bound id into one path segment: bytes outside [A-Za-z0-9._-] become ~XX."""
    return "".join(chr(b) if b in _WIRE_SAFE else f"~{b:02X}" for b in bound_id.encode())


def from_wire(segment: str, *, what: str = "runId") -> str:
    """Accept `acme~2Fr-9f3c`, `acme%2Fr-9f3c` (or a path already decoded) and return `acme/r-9f3c`."""
    text = unquote(segment)
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "~":
            m = _TILDE_RE.match(text, i)
            if not m:
                raise Invalid(f"{what} has a '~' not followed by two hex digits", {"field": what})
            out.append(chr(int(m.group(1), 16)))
            i += 3
            continue
        out.append(ch)
        i += 1
    value = "".join(out)
    if not TENANT_BOUND_RE.fullmatch(value):
        raise Invalid(f"{what} is not a tenant-bound id (tenant/opaque)", {"field": what})
    return value


def check_author_id(value: str, what: str) -> str:
    if not isinstance(value, str) or not AUTHOR_ID_RE.fullmatch(value):
        raise Invalid(f"{what} must match {AUTHOR_ID}", {"field": what})
    return value


def principal_subject(principal: str) -> str:
    """A vote's principal (`{issuer}|{subjectId}`, rules/interrupts/decide.Resolver.principal) as its subject id."""
    return principal.rsplit("|", 1)[-1]
