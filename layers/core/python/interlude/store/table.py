"""A handle on the table: its name and the DynamoDB client every store on it shares."""

from __future__ import annotations

from typing import Any

import boto3

from interlude.store import item_formats


class Table:
    def __init__(self, table_name: str, client: Any = None) -> None:
        self.table = table_name
        self.client = client or boto3.client("dynamodb")
        # Every answer of this client (the other stores share it) is refused if it holds an item too new to read.
        item_formats.watch(self.client)
