"""A Secrets Manager secret's value as a warm function reads it: fetched with the process's one SDK session
(interlude.sdk_clients) and kept for the age its reader gives, so a warm instance reads each secret at most once per
that age (the token key ring: adapters/keyring_store.py; the audit signing key: adapters/audit_key.py).

Powertools' parameters utility did this before (docs/adr/0163): its Secrets Manager provider makes a boto3 session
and client of its own, so the first read imported boto3 (s3transfer, multiprocessing: what sdk_clients.py keeps out
of every function) and parsed the SDK's data a second time; notify's first message paid about half an `import boto3`
for it, and its import a tenth more (bench/cold_import.py --instructions).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import cache
from typing import Any

from interlude import sdk_clients

# The clock a kept value's age is read on (monotonic: a wall clock set back would keep a value too long).
monotonic: Callable[[], float] = time.monotonic


@cache
def _kept() -> dict[str, tuple[float, str]]:
    """Secret name -> (the monotonic time it is kept until, its value). A cache of its own, so interlude.local's fresh
    instances forget it as they forget every cache; a SnapStart restore through `forget`."""
    return {}


@cache
def _client() -> Any:
    return sdk_clients.client("secretsmanager")


def secret_value(name: str, max_age_s: float, *, force_fetch: bool = False, client: Any = None) -> str:
    """The secret's current value (its SecretString, or its SecretBinary as UTF-8), read again once `max_age_s` has
    passed since it was read, or at once with `force_fetch`. `client`: the Secrets Manager client to read with (the
    session's own unless given)."""
    now = monotonic()
    kept = _kept().get(name)
    if kept is not None and not force_fetch and now < kept[0]:
        return kept[1]
    answer = (client or _client()).get_secret_value(SecretId=name)
    value = answer["SecretString"] if "SecretString" in answer else bytes(answer["SecretBinary"]).decode("utf-8")
    _kept()[name] = (now + max_age_s, value)
    return str(value)


def forget() -> None:
    """Drop every kept value and the client (an instance restored from a snapshot: interlude.sdk_clients)."""
    _kept.cache_clear()
    _client.cache_clear()
