"""The local stack's token key ring and audit signing key: Secrets Manager secrets in moto, generated at first start
(never in the repo)."""

from __future__ import annotations

import boto3

from interlude import wiring
from interlude.adapters.audit_key import ensure_signing_key
from interlude.adapters.keyring_store import ensure_key_ring

LOCAL_KEY_RING_SECRET = "interlude-local/token-keys"
LOCAL_AUDIT_KEY_SECRET = "interlude-local/audit-key"
CACHE_ENV = "INTERLUDE_KEY_RING_CACHE_SECONDS"
# Locally a read costs nothing, so `interlude tokens retire` takes effect within a second.
LOCAL_CACHE_SECONDS = "1"


def prepare_local_key_ring() -> dict[str, str]:
    """Create the ring if it does not exist yet; returns the environment the api function reads it through."""
    ensure_key_ring(LOCAL_KEY_RING_SECRET, client=boto3.client("secretsmanager"))
    # The audit checkpoint key too: a secret of its own (it signs nothing else).
    ensure_signing_key(LOCAL_AUDIT_KEY_SECRET, client=boto3.client("secretsmanager"))
    return {
        wiring.KEY_RING_SECRET.env: LOCAL_KEY_RING_SECRET,
        CACHE_ENV: LOCAL_CACHE_SECONDS,
        wiring.AUDIT_KEY_SECRET.env: LOCAL_AUDIT_KEY_SECRET,
    }
