"""Standard Webhooks signing with per-tenant secrets kept in Secrets Manager.

Each tenant has one secret, `{prefix}{tenant}`, holding JSON `{"current": "whsec_…", "previous": [{"secret":
"whsec_…", "until": <epoch s>}]}`. It is created with a fresh 32-byte secret the first time a notice for that
tenant is signed. A rotation makes a new `current` and keeps the old one in `previous` for a grace period;
meanwhile every delivery carries one `v1,…` signature per live secret (space-separated, as the spec allows), so
receivers can switch secrets without missing a notice. Secret values are never logged or put in an error.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError
from standardwebhooks import Webhook

from interlude.domain.expiring import ExpiringCache
from interlude.domain.ids import secret_name

SECRET_BYTES = 32
DEFAULT_GRACE_S = 24 * 3600
CACHE_SECONDS = 60.0
# Tenants whose secrets a warm worker keeps, the least recently used forgotten first.
MAX_CACHED_TENANTS = 4096
_DESCRIPTION = "Interlude callback signing secret of one tenant (Standard Webhooks whsec_; current + previous)"


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def live_secrets(value: dict[str, Any], now: float) -> list[str]:
    """The current secret first, then every previous one still inside its grace period."""
    return [value["current"], *(p["secret"] for p in value.get("previous", []) if float(p["until"]) > now)]


def signature_header(signing_secrets: list[str], msg_id: str, timestamp: int, body: str) -> str:
    moment = datetime.fromtimestamp(timestamp, UTC)
    return " ".join(Webhook(s).sign(msg_id=msg_id, timestamp=moment, data=body) for s in signing_secrets)


def webhook_headers(signing_secrets: list[str], msg_id: str, timestamp: int, body: str) -> dict[str, str]:
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature_header(signing_secrets, msg_id, timestamp, body),
    }


def _error_code(exc: ClientError) -> str:
    return exc.response.get("Error", {}).get("Code", "")


def read_secret(client: Any, name: str) -> dict[str, Any] | None:
    try:
        raw = client.get_secret_value(SecretId=name)["SecretString"]
    except ClientError as exc:
        if _error_code(exc) == "ResourceNotFoundException":
            return None
        raise
    return json.loads(raw)


def ensure_secret(
    client: Any, name: str, kms_key_id: str | None = None, tags: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The tenant's stored secret, created on first use (a concurrent creator's secret wins).

    A created secret is encrypted under `kms_key_id` (None: Secrets Manager's AWS-managed key) and carries `tags`
    (the deployment's: it is no resource of the stack, so a teardown finds it by them)."""
    found = read_secret(client, name)
    if found is not None:
        return found
    value = {"current": new_secret(), "previous": []}
    options: dict[str, Any] = {}
    if kms_key_id:
        options["KmsKeyId"] = kms_key_id
    if tags:
        options["Tags"] = [{"Key": key, "Value": tag} for key, tag in tags.items()]
    try:
        client.create_secret(
            Name=name, Description=_DESCRIPTION, SecretString=json.dumps(value, allow_nan=False), **options
        )
    except ClientError as exc:
        if _error_code(exc) != "ResourceExistsException":
            raise
        stored = read_secret(client, name)
        assert stored is not None
        return stored
    return value


def rotate_secret(
    client: Any,
    name: str,
    grace_s: float = DEFAULT_GRACE_S,
    now: float | None = None,
    kms_key_id: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A new current secret; the old one keeps signing (second signature) for `grace_s` seconds."""
    now = time.time() if now is None else now
    value = ensure_secret(client, name, kms_key_id, tags)
    previous = [p for p in value.get("previous", []) if float(p["until"]) > now]
    previous.insert(0, {"secret": value["current"], "until": int(now + grace_s)})
    rotated = {"current": new_secret(), "previous": previous}
    client.put_secret_value(SecretId=name, SecretString=json.dumps(rotated, allow_nan=False))
    return rotated


class SecretCache:
    """Per-process cache of tenants' secrets: a warm worker reads Secrets Manager at most once a minute each."""

    def __init__(
        self,
        client: Any,
        prefix: str,
        max_age_s: float = CACHE_SECONDS,
        *,
        kms_key_id: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.max_age_s = max_age_s
        self.kms_key_id = kms_key_id
        self.tags = dict(tags or {})
        self._cache: ExpiringCache[str, dict[str, Any]] = ExpiringCache(MAX_CACHED_TENANTS, time.monotonic)

    def signing_secrets(self, tenant: str, now: float | None = None) -> list[str]:
        now = time.time() if now is None else now
        value = self._cache.fresh_or_read(
            tenant,
            lambda: ensure_secret(self.client, secret_name(self.prefix, tenant), self.kms_key_id, self.tags),
            self.max_age_s,
        )
        return live_secrets(value, now)
