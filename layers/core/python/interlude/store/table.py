"""A handle on the tables: their names and the DynamoDB client every store on them shares."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from botocore.config import Config
from botocore.exceptions import ClientError

from interlude import sdk_clients
from interlude.config.runtime import runtime_settings
from interlude.domain.errors import Unavailable
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
        refuse_throttled(self.client)

    def table_named(self, where: str) -> str:
        """The name of table `where` (store/layout.py: FIRST, or SECOND)."""
        return self.entries_table if where == SECOND else self.table


THROTTLED_HANDLER_ID = "interlude-refuse-throttled"


def refuse_throttled(client: Any) -> None:
    """Make a request DynamoDB still throttles once the SDK's retries are spent an `Unavailable` refusal (a `503
    runner_unavailable` with `Retry-After` at the API; a record that goes again in a worker) rather than an error of
    this host. Registering twice changes nothing."""
    events = getattr(getattr(client, "meta", None), "events", None)
    if events is not None:
        events.register("after-call.dynamodb", _refused_if_throttled, unique_id=THROTTLED_HANDLER_ID)


def _refused_if_throttled(http_response: Any, parsed: dict[str, Any], **_: Any) -> None:
    # DynamoDB refuses for want of capacity: a provisioned table's or index's units, an on-demand table's sudden peak
    # or hot partition, the account's request rate (sdk_clients.throttled_answer).
    if http_response.status_code >= 300 and sdk_clients.throttled_answer(parsed):
        raise throttled()


def throttled() -> Unavailable:
    return Unavailable("the deployment's tables are busy (DynamoDB throttled the request); retry", retry_after_s=1)


# BatchGetItem reads at most this many keys per call, BatchWriteItem writes this many requests.
BATCH_GET_MAX = 100
BATCH_WRITE_MAX = 25
# A batch call DynamoDB answers with unprocessed keys or items (what it throttled) is sent again for them, this many
# times at most, after 10 ms doubling (≈ 1.3 s in all); then the request is refused as throttled.
UNPROCESSED_ATTEMPTS = 8


def batch_get_answers(client: Any, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The answers of one BatchGetItem `request` and of its unprocessed keys asked again."""
    for attempt in range(UNPROCESSED_ATTEMPTS):
        if attempt:
            time.sleep(0.01 * 2 ** (attempt - 1))
        answer = client.batch_get_item(RequestItems=request)
        yield answer
        request = answer.get("UnprocessedKeys") or {}
        if not request:
            return
    raise throttled()


def batch_write_all(client: Any, request: dict[str, Any]) -> None:
    """One BatchWriteItem `request`, its unprocessed items sent again."""
    for attempt in range(UNPROCESSED_ATTEMPTS):
        if attempt:
            time.sleep(0.01 * 2 ** (attempt - 1))
        request = client.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
        if not request:
            return
    raise throttled()


def conditionally(write: Callable[..., dict[str, Any]], /, **request: Any) -> dict[str, Any] | None:
    """The answer of one conditional write (`write(**request)`: the client's PutItem, UpdateItem or DeleteItem), or
    None when its condition failed, so nothing was written; any other error is raised."""
    try:
        return write(**request)
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
            raise
        return None




def batch_get(client: Any, table: str, keys: list[dict[str, Any]], **read: Any) -> Iterator[dict[str, Any]]:
    """The items of `keys` that exist, 100 keys a BatchGetItem, unprocessed keys asked again; `read` adds the
    request's own options (ConsistentRead, ProjectionExpression, ExpressionAttributeNames)."""
    for start in range(0, len(keys), BATCH_GET_MAX):
        request: dict[str, Any] = {table: {"Keys": keys[start : start + BATCH_GET_MAX], **read}}
        for got in batch_get_answers(client, request):
            yield from got.get("Responses", {}).get(table) or ()
