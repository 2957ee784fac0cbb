"""The migrate function's queue (wiring's `migrations`): each message is a turn of the table's migrations to take
(interlude.migrations), queued by a deploy or by the turn before, whose time ran out."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from interlude import sdk_clients
from interlude.config.queues import queue_settings

TURN = {"v": 1, "kind": "migrations-turn"}


@cache
def _sqs() -> Any:
    return sdk_clients.client("sqs")


def queue_turn(delay_s: int = 0) -> None:
    """Queue a turn, taken after `delay_s` (at most 900: SQS's longest delay)."""
    _sqs().send_message(
        QueueUrl=queue_settings().migrations_url,
        MessageBody=json.dumps(TURN, separators=(",", ":"), allow_nan=False),
        DelaySeconds=min(delay_s, 900),
    )


# Issue 30 item 4: a turn of a run's retention (interlude.app.retention), queued by dispatch when the turn it took
# did not finish the run (issue 31) or the run moved meanwhile, and by a turn out of time for the next (`after`: the
# last key it retained).
RUN_RETENTION = "run-retention"


def queue_run_retention(run_id: str, after: str | None = None) -> None:
    body = {"v": 1, "kind": RUN_RETENTION, "runId": run_id, **({"after": after} if after is not None else {})}
    _sqs().send_message(QueueUrl=queue_settings().migrations_url, MessageBody=json.dumps(body, separators=(",", ":"), allow_nan=False))


# Issue 29 item 1: a turn of a tenant's search-keys job (interlude.app.search_keys), queued by the settings change that
# declares keys searchable, and by a turn for the next (at once, or once the declaration has settled).
SEARCH_KEYS = "search-keys"


def queue_search_keys(tenant: str, delay_s: int = 0) -> None:
    body = {"v": 1, "kind": SEARCH_KEYS, "tenant": tenant}
    _sqs().send_message(
        QueueUrl=queue_settings().migrations_url,
        MessageBody=json.dumps(body, separators=(",", ":"), allow_nan=False),
        DelaySeconds=min(delay_s, 900),
    )


# Issue 30 (ADR 0118): a turn of the retention sweep (interlude.migrations.sweeps), queued by the timeouts function on
# the deployment's daily schedule (`start`: a pass done already starts over) and by a turn out of time for the next.
RETENTION_SWEEP = "retention-sweep"


def queue_retention_sweep(start: bool = False) -> None:
    body = {"v": 1, "kind": RETENTION_SWEEP, "start": start}
    _sqs().send_message(QueueUrl=queue_settings().migrations_url, MessageBody=json.dumps(body, separators=(",", ":"), allow_nan=False))


# Issue 30 (ADR 0118): a turn of a tenant's re-stamp job (interlude.app.retention.Restamp), queued by the settings change
# that starts it and by a turn out of time for the next. `generation`: the change it is for (a later one replaces it).
RETENTION_RESTAMP = "retention-restamp"


def queue_retention_restamp(tenant: str, generation: str) -> None:
    body = {"v": 1, "kind": RETENTION_RESTAMP, "tenant": tenant, "generation": generation}
    _sqs().send_message(QueueUrl=queue_settings().migrations_url, MessageBody=json.dumps(body, separators=(",", ":"), allow_nan=False))
