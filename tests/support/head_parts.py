"""A run head rewritten in place (same version): in format 4 (domain/head_parts.py) as the writer writes it, the large
text of each open gate and the run's large inputs left out of the state, naming the interrupt items and the event
batch that hold them; or whole, as a release before format 4 wrote it."""

from __future__ import annotations

import json
from typing import Any

import boto3

from interlude.domain import head_parts
from interlude.domain.models.run import RunState, state_from_json, state_json
from interlude.store import attributes as a
from interlude.store import head_parts as held
from interlude.store.layout import LAST_EVENT_SK, RUN_SK, event_sk, run_pk


def started_batch(client: Any, table: str, run_id: str) -> int:
    """The last sequence of the event batch that holds the run's run.started event (the key the writer names)."""
    got = client.query(
        TableName=table,
        KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
        ExpressionAttributeValues={":pk": a.s(run_pk(run_id)), ":lo": a.s(event_sk(0)), ":hi": a.s(LAST_EVENT_SK)},
        ConsistentRead=True,
    )
    return next(
        int(item["last"]["N"])
        for item in got["Items"]
        if any(e["type"] == "run.started" for e in a.unpacked(item["events"]))
    )


def head_document(table: str, run_id: str) -> dict[str, Any]:
    """The state document the run's head holds, as stored."""
    head = boto3.client("dynamodb").get_item(TableName=table, Key=a.key(run_pk(run_id), RUN_SK), ConsistentRead=True)
    return dict(json.loads(a.unpacked_json(head["Item"]["state"])))


def write_format_4(table: str, run_id: str) -> dict[str, Any]:
    """Rewrite the run's head as a format-4 head; returns the state document written."""
    client = boto3.client("dynamodb")
    return _rewrite(
        table,
        run_id,
        lambda state: head_parts.lean(state.model_copy(update={"inputsBatch": started_batch(client, table, run_id)})),
    )


def write_whole(table: str, run_id: str) -> dict[str, Any]:
    """Rewrite the run's head holding everything itself, in format 1; returns the state document written."""

    def whole(state: RunState) -> RunState:
        held.complete(boto3.client("dynamodb"), table, [state])
        return state.model_copy(update={"v": 1, "inputsBatch": None})

    return _rewrite(table, run_id, whole)


def _rewrite(table: str, run_id: str, change: Any) -> dict[str, Any]:
    client = boto3.client("dynamodb")
    key = a.key(run_pk(run_id), RUN_SK)
    head = client.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
    document = state_json(change(state_from_json(a.unpacked_json(head["state"]))))
    client.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET #state = :state",
        ConditionExpression="#version = :version",
        ExpressionAttributeNames={"#state": "state", "#version": "version"},
        ExpressionAttributeValues={":state": a.packed_json(document), ":version": head["version"]},
    )
    return dict(json.loads(document))
