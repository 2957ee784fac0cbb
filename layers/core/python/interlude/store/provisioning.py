"""The table created exactly as wiring declares it, for the local stack and the tests (the CDK stack declares it for
AWS: infra/interlude_cdk). No function imports this."""

from __future__ import annotations

from typing import Any

from interlude import wiring


def create_table(client: Any, name: str) -> None:
    client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": t} for n, t in wiring.key_attributes()],
        KeySchema=[
            {"AttributeName": wiring.PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": wiring.SORT_KEY, "KeyType": "RANGE"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": gsi.name,
                "KeySchema": [
                    {"AttributeName": gsi.partition_key, "KeyType": "HASH"},
                    {"AttributeName": gsi.sort_key, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
            for gsi in wiring.GLOBAL_INDEXES
        ],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": wiring.STREAM_VIEW},
    )
    client.get_waiter("table_exists").wait(TableName=name)
    client.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": wiring.TTL_ATTRIBUTE}
    )
