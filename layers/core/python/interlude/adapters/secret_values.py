"""A Secrets Manager secret's value as a warm function reads it: fetched with the process's one SDK session
(interlude.sdk_clients) and kept for the age its reader gives, so a warm instance reads each secret at most once per
that age (the token key ring: adapters/keyring_store.py; the audit signing key: adapters/audit_key.py; a tenant's Slack
secrets: adapters/notify/worker.py, adapters/notify/slack_interactivity.py).

Powertools' parameters utility did this before (docs/adr/0163): its Secrets Manager provider makes a boto3 session
and client of its own, so the first read imported boto3 (s3transfer, multiprocessing: what sdk_clients.py keeps out
of every function) and parsed the SDK's data a second time; notify's first message paid about half an `import boto3`
for it, and its import a tenth more (bench/cold_import.py --instructions).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import cache
from typing import Any, cast

from botocore.exceptions import ClientError

from interlude import sdk_clients
from interlude.domain.expiring import ExpiringCache

# The clock a kept value's age is read on (monotonic: a wall clock set back would keep a value too long).
monotonic: Callable[[], float] = time.monotonic
# Secrets kept at most, the least recently read forgotten first: the Slack readers name a secret per tenant, so a
# request naming a made-up tenant costs one read and what an instance keeps stays bounded however many are named.
MAX_KEPT = 1000


@cache
def _kept() -> ExpiringCache[str, str | None]:
    """Secret name -> its value (None: there is no such secret). A cache of its own, so interlude.local's fresh
    instances forget it as they forget every cache; a SnapStart restore through `forget`."""
    return ExpiringCache(MAX_KEPT, lambda: monotonic())


@cache
def _client() -> Any:
    return sdk_clients.client("secretsmanager")


def secret_value(name: str, max_age_s: float, *, force_fetch: bool = False, client: Any = None) -> str:
    """The secret's current value (its SecretString, or its SecretBinary as UTF-8), read again once `max_age_s` has
    passed since it was read, or at once with `force_fetch`. `client`: the Secrets Manager client to read with (the
    session's own unless given)."""
    # Never None: without missing_ok a missing secret raises.
    return cast(str, _value(name, max_age_s, force_fetch, client, missing_ok=False))


def secret_value_if_set(name: str, max_age_s: float, *, client: Any = None) -> str | None:
    """As `secret_value`, None while there is no such secret: that too is kept for `max_age_s`."""
    return _value(name, max_age_s, False, client, missing_ok=True)


def _value(name: str, max_age_s: float, force_fetch: bool, client: Any, *, missing_ok: bool) -> str | None:
    kept = None if force_fetch else _kept().fresh(name)
    # A kept absence answers only a reader that accepts one; any other reads again (and is told it is missing).
    if kept is not None and (missing_ok or kept[0] is not None):
        return kept[0]
    try:
        answer = (client or _client()).get_secret_value(SecretId=name)
    except ClientError as exc:
        if not missing_ok or exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
            raise
        value = None
    else:
        value = answer["SecretString"] if "SecretString" in answer else bytes(answer["SecretBinary"]).decode("utf-8")
    _kept().keep(name, value, max_age_s)
    return None if value is None else str(value)


def forget() -> None:
    """Drop every kept value and the client (an instance restored from a snapshot: interlude.sdk_clients)."""
    _kept.cache_clear()
    _client.cache_clear()
