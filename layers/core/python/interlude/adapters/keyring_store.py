"""The token key ring as one Secrets Manager secret holding `KeyRing.to_json()`.

Readers keep what they read (adapters/secret_values.py), so a warm Lambda fetches the secret at most once per
`max_age_s`; operators rotate and retire with read-modify-write. No secret value is ever logged or put in an error.
"""

from __future__ import annotations

import base64
import json
from functools import lru_cache
from typing import Any

from botocore.exceptions import ClientError

from interlude import sdk_clients
from interlude.adapters.secret_values import secret_value
from interlude.rules.tokens.scheme import KeyRing

DEFAULT_MAX_AGE_S = 60
_DESCRIPTION = "Interlude interrupt resume token key ring (current kid signs, every kid verifies)"


def load_key_ring(secret_name: str, *, max_age_s: int = DEFAULT_MAX_AGE_S, force_fetch: bool = False, client: Any = None) -> KeyRing:
    """The ring as this instance keeps it (read with `client`, the session's Secrets Manager client unless given).

    A rotation elsewhere becomes visible here within `max_age_s`, or at once with `force_fetch`.
    """
    return _parse_ring(secret_value(secret_name, max_age_s, force_fetch=force_fetch, client=client))


def ensure_key_ring(secret_name: str, client: Any = None) -> KeyRing:
    """The stored ring, creating the secret with a freshly generated ring when it does not exist yet."""
    client = client or sdk_clients.client("secretsmanager")
    try:
        return _read(client, secret_name)
    except ClientError as exc:
        if _error_code(exc) != "ResourceNotFoundException":
            raise
    ring = KeyRing.generate()
    try:
        client.create_secret(Name=secret_name, Description=_DESCRIPTION, SecretString=ring.to_json())
    except ClientError as exc:
        # Another starter created it between our read and our create: theirs is the ring.
        if _error_code(exc) != "ResourceExistsException":
            raise
        return _read(client, secret_name)
    return ring


def rotate_key_ring(secret_name: str, client: Any = None) -> KeyRing:
    """Store a ring with a new signing kid; older kids stay so outstanding tokens keep verifying."""
    client = client or sdk_clients.client("secretsmanager")
    ring = _read(client, secret_name).rotated()
    client.put_secret_value(SecretId=secret_name, SecretString=ring.to_json())
    return ring


def retire_key(secret_name: str, kid: str, client: Any = None) -> KeyRing:
    """Store a ring without `kid`, revoking every token signed under it (ValueError for the current kid)."""
    client = client or sdk_clients.client("secretsmanager")
    ring = _read(client, secret_name).retired(kid)
    client.put_secret_value(SecretId=secret_name, SecretString=ring.to_json())
    return ring


def _read(client: Any, secret_name: str) -> KeyRing:
    return _parse_ring(client.get_secret_value(SecretId=secret_name)["SecretString"])


# Parsing is memoised on the exact stored text so a cached secret is not re-decoded on every request.
@lru_cache(maxsize=8)
def _parse_ring(raw: str) -> KeyRing:
    seed = _seed_of(raw)
    if seed is not None:
        return KeyRing(current_kid=SEED_KID, keys={SEED_KID: seed})
    return KeyRing.from_json(raw)


# The form Secrets Manager generates at deploy time (infra/interlude_cdk/secrets.py):
# `{"seed": <44 random alphanumerics>}`.
# Any 44 characters of [A-Za-z0-9] are canonical unpadded base64url of 33 bytes (44 x 6 bits, no spare bits),
# so the generated string is itself the first secret; the first `tokens rotate` writes the full ring form.
SEED_KID = "k0"
SEED_KEY = "seed"
SEED_CHARS = 44


def _seed_of(raw: str) -> bytes | None:
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(doc, dict) or set(doc) != {SEED_KEY} or not isinstance(doc[SEED_KEY], str):
        return None
    seed = doc[SEED_KEY]
    if len(seed) != SEED_CHARS or not seed.isascii() or not seed.isalnum():
        raise ValueError(f"a seeded key ring holds exactly {SEED_CHARS} ASCII letters and digits")
    return base64.urlsafe_b64decode(seed)


def _error_code(exc: ClientError) -> str:
    return exc.response.get("Error", {}).get("Code", "")
