"""A run's event batches rewritten in place: in format 9 (domain/head_parts.py lean_events) as the writer writes them,
each event that repeats an opened gate's large text left without it, naming the interrupt item that holds it; or
whole, as a release before format 9 wrote them. An audit draft a batch carries is deflated again against its new
events (store/audit.py draft_attributes), as the writer deflates it against what it stores."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3

from interlude.domain import formats, head_parts
from interlude.domain.models.run import OpenInterrupt
from interlude.store import attributes as a
from interlude.store import audit as audit_log
from interlude.store import head_parts as held
from interlude.store.layout import INTERRUPT_SK_PREFIX, LAST_EVENT_SK, event_sk, run_pk


def event_batches(table: str, run_id: str) -> list[a.Item]:
    """The run's event batch items, as stored, oldest first."""
    got = boto3.client("dynamodb").query(
        TableName=table,
        KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
        ExpressionAttributeValues={":pk": a.s(run_pk(run_id)), ":lo": a.s(event_sk(0)), ":hi": a.s(LAST_EVENT_SK)},
        ConsistentRead=True,
    )
    return list(got["Items"])


def write_lean(table: str, run_id: str) -> int:
    """Rewrite the run's batches in format 9 where they repeat a large gate text its interrupt items hold; how many."""
    client = boto3.client("dynamodb")
    got = client.query(
        TableName=table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
        ExpressionAttributeValues={":pk": a.s(run_pk(run_id)), ":prefix": a.s(INTERRUPT_SK_PREFIX)},
        ConsistentRead=True,
    )
    gates = [
        OpenInterrupt(
            nodeId=i["nodeId"]["S"],
            key=i["sk"]["S"].removeprefix(INTERRUPT_SK_PREFIX),
            interruptId=i["interruptId"]["S"],
            kind=i["kind"]["S"],
            visit=0,
            payload=a.unpacked(i["payload"]),
            raisedAt=i["raisedAt"]["S"],
        )
        for i in got["Items"]
    ]
    return _rewrite(table, run_id, lambda events: head_parts.lean_events(events, gates), formats.GATE_TEXT_OFF_EVENTS)


def write_whole(table: str, run_id: str) -> int:
    """Rewrite the run's format-9 batches whole, as a release before format 9 wrote them; how many."""
    client = boto3.client("dynamodb")

    def whole(events: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        if not head_parts.events_held(events):
            return None
        return held.filled_events(client, table, run_id, events)

    return _rewrite(table, run_id, whole, None)


def _rewrite(
    table: str, run_id: str, change: Callable[[list[dict[str, Any]]], list[dict[str, Any]] | None], written_in: int | None
) -> int:
    client = boto3.client("dynamodb")
    rewritten = 0
    for item in event_batches(table, run_id):
        events = change(a.unpacked(item["events"]))
        if events is None:
            continue
        draft = audit_log.carried_draft(item)
        raw = a.compact(events)
        item = {**item, "events": a.packed_json(raw)}
        item.pop(formats.FORMAT_FIELD, None)
        if draft is not None:
            item.update(audit_log.draft_attributes(draft, raw))
        if written_in is not None:
            item[formats.FORMAT_FIELD] = a.n(written_in)
        client.put_item(TableName=table, Item=item)
        rewritten += 1
    return rewritten
