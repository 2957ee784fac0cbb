"""The tables created exactly as wiring declares them, for the local stack and the tests (the CDK stack declares them
for AWS: infra/interlude_cdk). No function imports this."""

from __future__ import annotations

from typing import Any

from interlude import wiring


def create_table(client: Any, name: str, spec: wiring.TableSpec = wiring.TABLE) -> None:
    indexes = {}
    if spec.global_indexes:
        indexes["GlobalSecondaryIndexes"] = [
            {
                "IndexName": gsi.name,
                "KeySchema": [
                    {"AttributeName": gsi.partition_key, "KeyType": "HASH"},
                    {"AttributeName": gsi.sort_key, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
            for gsi in spec.global_indexes
        ]
    stream = {}
    if spec.stream_view is not None:
        stream["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": spec.stream_view}
    client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": t} for n, t in wiring.key_attributes(spec)],
        KeySchema=[
            {"AttributeName": wiring.PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": wiring.SORT_KEY, "KeyType": "RANGE"},
        ],
        **indexes,
        **stream,
    )
    client.get_waiter("table_exists").wait(TableName=name)
    client.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": wiring.TTL_ATTRIBUTE}
    )


def entries_table_beside(name: str) -> str:
    """The second table's name where the local stack, the tests and the benches name it after the first."""
    return f"{name}-entries"


def create_tables(client: Any, name: str, entries_name: str | None = None) -> tuple[str, str]:
    """Both tables of a deployment (wiring.TABLES), named `name` and `entries_name` (else entries_table_beside(name)):
    their names."""
    entries_name = entries_name or entries_table_beside(name)
    create_table(client, name, wiring.TABLE)
    create_table(client, entries_name, wiring.ENTRIES_TABLE)
    return name, entries_name
