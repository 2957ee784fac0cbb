"""The parts a format-4 run head holds elsewhere (domain/head_parts.py), read back: the whole payloads of its gates from
their interrupt items, its inputs from the event batch that holds its run.started event. One eventually consistent
BatchGetItem for every head a read returns, each part checked against its digest (each was committed with or before the
head that names it, and is never rewritten), a strongly consistent one more only for parts it missed; a head that holds
everything itself reads nothing more. And the gate payloads format-9 event batches
hold elsewhere (`filled_events`), from their interrupt items, for every read of stored events."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from interlude import wiring
from interlude.domain import head_parts
from interlude.domain.errors import Internal
from interlude.domain.models.run import RunState
from interlude.store import attributes as a
from interlude.store import gate_payloads
from interlude.store.layout import event_sk, interrupt_sk, run_pk
from interlude.store.table import batch_get

# With what a format-12 interrupt item's payload is put back from (store/gate_payloads.py).
_PARTS = {"#pk": wiring.PARTITION_KEY, "#sk": wiring.SORT_KEY, "#payload": gate_payloads.PAYLOAD, "#events": "events"}
_PARTS.update({f"#f{i}": name for i, name in enumerate(gate_payloads.FILL_NEEDS)})


def complete(
    client: Any,
    table: str,
    states: Iterable[RunState],
    held: Mapping[tuple[str, str], a.Item] | None = None,
    inputs: bool = True,
) -> None:
    """Put back into each of `states` (in place) what its head holds elsewhere. `held`: items the caller already read
    strongly consistently, by (pk, sk), taken from there instead of read again (dispatch's outbox batch often holds
    the very event batch a new run's inputs are in). With `inputs` False, inputs are put back only from `held`: a head
    whose batch is not there keeps them in it (`inputsDigest` set), for its reader to complete when it needs them.

    The rest is read eventually consistently, at half the units: each part is checked against the digest its head
    holds (domain/head_parts.completed), so a read that is behind can only miss it, never hand on another one (a part
    is written with or before its head and never rewritten). A head whose parts were missed is completed from a
    strongly consistent read of them, and refused (Internal) only if that misses them too."""
    held = held or {}
    holding = [(state, *head_parts.held_elsewhere(state)) for state in states]
    if not inputs:
        holding = [(s, keys, b if b is not None and (run_pk(s.runId), event_sk(b)) in held else None) for s, keys, b in holding]
    holding = [(state, keys, batch) for state, keys, batch in holding if keys or batch is not None]
    if not holding:
        return
    wanted = [(state, _parts_of(state.runId, keys, batch)) for state, keys, batch in holding]
    found = {key: held[key] for _, parts in wanted for key in parts if key in held}
    gate_payloads.fill(client, table, found.values())
    found.update(_read(client, table, [k for k in dict.fromkeys(k for _, parts in wanted for k in parts) if k not in found], False))
    missed = []
    for state, parts in wanted:
        try:
            _completed(state, found, inputs)
        except Internal:
            missed.append((state, parts))
    if missed:
        found.update(_read(client, table, [k for k in dict.fromkeys(k for _, parts in missed for k in parts) if k not in held]))
        for state, _ in missed:
            _completed(state, found, inputs)


def _parts_of(run_id: str, keys: list[str], batch: int | None) -> list[tuple[str, str]]:
    pk = run_pk(run_id)
    return [(pk, interrupt_sk(k)) for k in keys] + ([(pk, event_sk(batch))] if batch is not None else [])


def _completed(state: RunState, found: Mapping[tuple[str, str], a.Item], inputs: bool = True) -> None:
    """Put back into `state` (in place) its parts from `found` (Internal where one is missing or not the one named: the
    parts that matched before it are put back, so a second call completes the rest; `inputs`: as `complete` takes it)."""
    keys, batch = head_parts.held_elsewhere(state)
    pk = run_pk(state.runId)
    payloads = {k: a.unpacked(item["payload"]) for k in keys if "payload" in (item := found.get((pk, interrupt_sk(k))) or {})}
    started = None
    if batch is not None and "events" in (item := found.get((pk, event_sk(batch))) or {}):
        started = next((e.get("payload") for e in a.unpacked(item["events"]) if e.get("type") == "run.started"), None)
    head_parts.completed(state, payloads, started, inputs)


def filled_events(
    client: Any, table: str, run_id: str, events: list[dict[str, Any]], holder: RunState | None = None
) -> list[dict[str, Any]]:
    """`events` (stored events of run `run_id`, in place) with the gate payloads format-9 events hold elsewhere put back
    (domain/head_parts.py events_filled; `holder`: the run's head as the caller read it, see `event_payloads`)."""
    payloads = event_payloads(client, table, [(run_id, events)], {run_id: holder} if holder is not None else {})
    return head_parts.events_filled(run_id, events, payloads[run_id]) if payloads else events


def event_payloads(
    client: Any, table: str, runs: Iterable[tuple[str, list[dict[str, Any]]]], holders: Mapping[str, RunState]
) -> dict[str, dict[str, Any]]:
    """By run, the gate payloads (by interrupt key) that the format-9 events of `runs` ((run id, stored events)) hold
    elsewhere; a run whose events hold everything themselves is left out. Taken from `holders` (heads as their caller
    read them whole: an open gate's payload is the one its events name) where they match, else from their interrupt
    items, in one strongly consistent BatchGetItem for all of `runs` (none when the heads held them all)."""
    payloads: dict[str, dict[str, Any]] = {}
    wanted: list[tuple[str, str]] = []
    for run_id, events in runs:
        named = {held["key"]: held["digest"] for e in events if (held := e.get(head_parts.EVENT_PAYLOAD_HELD))}
        if not named:
            continue
        holder = holders.get(run_id)
        open_gates = [i for i in holder.interrupts.values() if i.payloadDigest is None] if holder is not None else []
        have = payloads.setdefault(run_id, {})
        have.update({i.key: i.payload for i in open_gates if i.key not in have and named.get(i.key) == head_parts.digest(i.payload)})
        wanted += [(run_id, key) for key in named if key not in have and (run_id, key) not in wanted]
    if wanted:
        found = _read(client, table, list(dict.fromkeys((run_pk(r), interrupt_sk(k)) for r, k in wanted)))
        for run_id, key in wanted:
            if "payload" in (item := found.get((run_pk(run_id), interrupt_sk(key))) or {}):
                payloads[run_id][key] = a.unpacked(item["payload"])
    return payloads


def _read(client: Any, table: str, keys: list[tuple[str, str]], consistent: bool = True) -> dict[tuple[str, str], a.Item]:
    if not keys:
        return {}
    items = batch_get(
        client, table, [a.key(pk, sk) for pk, sk in keys],
        ConsistentRead=consistent, ProjectionExpression=", ".join(_PARTS), ExpressionAttributeNames=_PARTS,
    )
    found = {(item[wiring.PARTITION_KEY]["S"], item[wiring.SORT_KEY]["S"]): item for item in items}
    gate_payloads.fill(client, table, found.values())
    return found
