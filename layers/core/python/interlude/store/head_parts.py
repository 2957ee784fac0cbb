"""The parts a format-4 run head holds elsewhere (domain/head_parts.py), read back: the whole payloads of its gates from
their interrupt items, its inputs from the event batch that holds its run.started event. One strongly consistent
BatchGetItem for every head a read returns (each part was committed with or before the head that names it, and is
never rewritten); a head that holds everything itself reads nothing more."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from interlude import wiring
from interlude.domain import head_parts
from interlude.domain.models.run import RunState
from interlude.store import attributes as a
from interlude.store.layout import event_sk, interrupt_sk, run_pk
from interlude.store.table import batch_get

_PARTS = {"#pk": wiring.PARTITION_KEY, "#sk": wiring.SORT_KEY, "#payload": "payload", "#events": "events"}


def complete(client: Any, table: str, states: Iterable[RunState]) -> None:
    """Put back into each of `states` (in place) what its head holds elsewhere."""
    holding = [(state, *head_parts.held_elsewhere(state)) for state in states]
    holding = [(state, keys, batch) for state, keys, batch in holding if keys or batch is not None]
    if not holding:
        return
    wanted: list[tuple[str, str]] = []
    for state, keys, batch in holding:
        pk = run_pk(state.runId)
        wanted += [(pk, interrupt_sk(k)) for k in keys] + ([(pk, event_sk(batch))] if batch is not None else [])
    found = _read(client, table, list(dict.fromkeys(wanted)))
    for state, keys, batch in holding:
        pk = run_pk(state.runId)
        payloads = {k: a.unpacked(item["payload"]) for k in keys if "payload" in (item := found.get((pk, interrupt_sk(k))) or {})}
        started = None
        if batch is not None and "events" in (item := found.get((pk, event_sk(batch))) or {}):
            started = next((e.get("payload") for e in a.unpacked(item["events"]) if e.get("type") == "run.started"), None)
        head_parts.completed(state, payloads, started)


def _read(client: Any, table: str, keys: list[tuple[str, str]]) -> dict[tuple[str, str], a.Item]:
    items = batch_get(
        client, table, [a.key(pk, sk) for pk, sk in keys],
        ConsistentRead=True, ProjectionExpression=", ".join(_PARTS), ExpressionAttributeNames=_PARTS,
    )
    return {(item[wiring.PARTITION_KEY]["S"], item[wiring.SORT_KEY]["S"]): item for item in items}
