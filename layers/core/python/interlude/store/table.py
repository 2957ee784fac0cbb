"""A handle on the tables: their names and the DynamoDB client every store on them shares."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from botocore.config import Config
from botocore.exceptions import ClientError

from interlude import sdk_clients
from interlude.config.runtime import runtime_settings
from interlude.store import item_formats
from interlude.store.layout import SECOND


def dynamodb_client() -> Any:
    """The DynamoDB client the functions use. botocore's check of each request against the service's model is left
    to DynamoDB, which makes it again on arrival and refuses a malformed request with a ValidationException: on
    the client it is per parameter of every request, about a tenth of a resolve's instructions (docs/adr/0124).
    The suite turns it on (INTERLUDE_VALIDATE_REQUESTS): moto checks less than DynamoDB."""
    return sdk_clients.client("dynamodb", config=Config(parameter_validation=runtime_settings().validate_requests))


class Table:
    """The deployment's two tables (wiring.TABLES): `table`, and `entries_table`, the second, where the items a run's
    transaction condition never reads are kept (docs/adr/0161). Both names are required: a deployment must never
    write the second table's items to the first for want of its name."""

    def __init__(self, table_name: str, entries_table_name: str, client: Any = None) -> None:
        if not isinstance(entries_table_name, str) or not entries_table_name:
            raise TypeError(f"the second table's name is required, not {entries_table_name!r}")
        self.table = table_name
        self.entries_table = entries_table_name
        self.client = client or dynamodb_client()
        # Every answer of this client (the other stores share it) is refused if it holds an item too new to read.
        item_formats.watch(self.client)

    def table_named(self, where: str) -> str:
        """The name of table `where` (store/layout.py: FIRST, or SECOND)."""
        return self.entries_table if where == SECOND else self.table


def conditionally(write: Callable[..., dict[str, Any]], /, **request: Any) -> dict[str, Any] | None:
    """The answer of one conditional write (`write(**request)`: the client's PutItem, UpdateItem or DeleteItem), or
    None when its condition failed, so nothing was written; any other error is raised."""
    try:
        return write(**request)
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
            raise
        return None


# BatchGetItem reads at most this many keys per call.
BATCH_GET_MAX = 100


def batch_get(client: Any, table: str, keys: list[dict[str, Any]], **read: Any) -> Iterator[dict[str, Any]]:
    """The items of `keys` that exist, 100 keys a BatchGetItem, unprocessed keys asked again; `read` adds the
    request's own options (ConsistentRead, ProjectionExpression, ExpressionAttributeNames)."""
    for start in range(0, len(keys), BATCH_GET_MAX):
        request: dict[str, Any] = {table: {"Keys": keys[start : start + BATCH_GET_MAX], **read}}
        while request:
            got = client.batch_get_item(RequestItems=request)
            yield from got.get("Responses", {}).get(table) or ()
            request = got.get("UnprocessedKeys") or {}
