"""The audit checkpoint signing key: one Secrets Manager secret, used for nothing else (OpenWOP requires the audit
key to sign no other surface). Its value is the form Secrets Manager generates at deploy
(infra/interlude_cdk/secrets.py) or the local stack writes: `{"seed": <random text>}`; the Ed25519 key is derived
from the seed (interlude.rules.audit.signing_key). Kept per warm function (adapters/secret_values.py).
"""

from __future__ import annotations

import json
import secrets
from functools import lru_cache
from typing import Any

from botocore.exceptions import ClientError

from interlude import sdk_clients
from interlude.adapters.secret_values import secret_value
from interlude.config import settings
from interlude.rules.audit import signing_key

# Read again after this long: the key is never rotated in place (v2 defines no rotation), so this only bounds how
# long a warm function keeps a value an operator replaced by hand.
MAX_AGE_S = 3600
_DESCRIPTION = "Interlude audit checkpoint signing key (Ed25519 seed; signs audit checkpoints and nothing else)"


def load_signing_key() -> Any:
    """The configured secret's key (kept for MAX_AGE_S, and by the seed's text)."""
    return _key_of(secret_value(settings().audit_key_secret, MAX_AGE_S))


@lru_cache(maxsize=4)
def _key_of(raw: str) -> Any:
    doc = json.loads(raw)
    seed = doc.get("seed") if isinstance(doc, dict) else None
    if not isinstance(seed, str) or len(seed) < 32:
        raise ValueError('the audit key secret must hold {"seed": <at least 32 random characters>}')
    return signing_key(seed.encode("utf-8"))


def ensure_signing_key(secret_name: str, client: Any = None) -> None:
    """Create the secret with a fresh seed when it does not exist yet (the local stack; a deployment's is made by
    CloudFormation)."""
    client = client or sdk_clients.client("secretsmanager")
    try:
        client.describe_secret(SecretId=secret_name)
        return
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
            raise
    try:
        value = json.dumps({"seed": secrets.token_urlsafe(33)}, allow_nan=False)
        client.create_secret(Name=secret_name, Description=_DESCRIPTION, SecretString=value)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ResourceExistsException":
            raise
