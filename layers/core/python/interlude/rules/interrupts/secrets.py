"""No interrupt accepts credential material: a resume value (or an external event's body) that looks like a
secret is refused before anything is decided or stored.

The rule is deliberately blunt, because a gate is the wrong place for a secret whatever its kind: a value is
refused when, anywhere inside it, an object key names a credential (`password`, `access_token`,
`client_secret`, `apiKey`, `privateKey`, `authorization`, ...) or a string has the shape of one (a bearer
header, a JWT, a PEM private key, an Interlude API key, or a well-known provider token prefix such as
`ghp_`, `xoxb-`, `sk-`, `AKIA`, `ya29.`). A credential is granted out of band (`PUT
/tenant/credential-grants/{provider}` records that a grant exists, never the material itself).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

_KEY_RE = re.compile(
    r"^(password|passwd|passphrase|secret|client[-_]?secret|api[-_]?key|access[-_]?token|refresh[-_]?token|"
    r"id[-_]?token|bearer[-_]?token|auth[-_]?token|session[-_]?token|private[-_]?key|authorization|"
    r"credentials?|cookie|set[-_]?cookie|otp|totp[-_]?secret|aws[-_]?secret[-_]?access[-_]?key)$",
    re.IGNORECASE,
)
# The shapes of a credential in a string, each with its flags. Compiled the first time a string long enough to hold
# one is checked: a resume value of short strings (an approval's `{"action": "accept"}`) compiles none of them, which
# the first decision of every new instance did (ADR 0151).
VALUE_PATTERNS: tuple[tuple[str, int], ...] = (
    (r"^\s*(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}\s*$", re.IGNORECASE),
    (r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*", 0),  # JWT
    (r"-----BEGIN [A-Z ]*PRIVATE KEY-----", 0),
    (r"\bil_[0-9a-f]{16}_[A-Za-z0-9_-]{43}\b", 0),  # an Interlude API key
    (r"\b(ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}", 0),
    (r"\bxox[abposr]-[A-Za-z0-9-]{10,}", 0),
    (r"\bsk-[A-Za-z0-9_-]{20,}", 0),
    (r"\b(AKIA|ASIA)[0-9A-Z]{16}\b", 0),
    (r"\bya29\.[A-Za-z0-9_-]{20,}", 0),
)
# The fewest characters any of them matches ("basic" and a space before an 8-character token); a shorter string holds
# none (tests/unit/test_interrupt_rules.py checks it against the patterns).
SHORTEST_MATCH = 14
MAX_DEPTH = 64


def credential_material(value: Any, path: str = "") -> str | None:
    """The JSON-pointer-ish path of the first thing that looks like a credential, else None."""
    return _walk(value, path, 0)


def _walk(value: Any, path: str, depth: int) -> str | None:
    if depth > MAX_DEPTH:
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}/{key}"
            if isinstance(key, str) and _KEY_RE.match(key) and item not in (None, "", False):
                return here
            found = _walk(item, here, depth + 1)
            if found is not None:
                return found
        return None
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = _walk(item, f"{path}/{i}", depth + 1)
            if found is not None:
                return found
        return None
    if isinstance(value, str) and len(value) >= SHORTEST_MATCH and any(r.search(value) for r in _value_res()):
        return path or "/"
    return None


@cache
def _value_res() -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(pattern, flags) for pattern, flags in VALUE_PATTERNS)
