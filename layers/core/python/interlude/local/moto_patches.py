"""moto's DynamoDB made to cost what the touched items cost, for the local stack and in-process tests only.

moto 5.x deep-copies every table a `TransactWriteItems` names once per item (its rollback), and its table
Query sorts and reads every item of the table to find one partition: a lifecycle gets slower with every run
the table holds. The deployed product uses DynamoDB itself and never imports this module.

Both patches keep moto's observable behaviour (same checks in the same order, same errors and
CancellationReasons, same stream records): the transaction keeps moto's loop but remembers only the items it
writes (and how long each stream was) to undo them, and the Query reads only the partition its key names.
A transaction entry's condition is evaluated once, before its write (moto evaluated it again inside the write, on
the same item under the same lock), and an update expression is parsed once per distinct text (moto parsed it
twice per request; the parsed tree is only read or deep-copied by moto's validator, never changed).
Callers serialise requests to moto (`moto_server.LockedMotoServer`, or one thread in tests), as moto itself
requires, so undoing in place is as atomic as moto's table swap was.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table
from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser, Node  # type: ignore[attr-defined]
from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]
from moto.dynamodb.parsing.validators import Validator

_original_query = Table.query
_original_all_items = Table.all_items
_QUERY_SIGNATURE = inspect.signature(_original_query)
# The (table, hash key) a table Query is reading while it runs: `all_items` answers with that partition only.
_partition: ContextVar[tuple[Table, DynamoType | tuple[str, DynamoType]] | None] = ContextVar(
    "moto_query_partition", default=None
)
_applied = False


def apply() -> None:
    """Patch moto's DynamoDB in this process (idempotent)."""
    global _applied
    if _applied:
        return
    # Replacing methods on moto's classes is the point of this module; mypy forbids assigning to a method.
    DynamoDBBackend.transact_write_items = _transact_write_items  # type: ignore[method-assign]
    Table.query = _query  # type: ignore[method-assign]
    Table.all_items = _all_items  # type: ignore[method-assign]
    UpdateExpressionParser.make = classmethod(_parsed_update_expression)
    DepthFirstTraverser.nodes_to_be_processed = _nodes_to_be_processed
    DepthFirstTraverser.process = _process
    Validator.__init__ = _validator_init  # type: ignore[method-assign]
    _applied = True


_original_make = UpdateExpressionParser.make


@functools.lru_cache(maxsize=1024)
def _parsed_once(expression: str) -> Any:
    return _original_make(expression)


def _parsed_update_expression(_cls: type, expression: str) -> Any:
    # A text that fails to parse raises each time (lru_cache keeps only results).
    return _parsed_once(expression)


# -- Query ------------------------------------------------------------------------------------------


def _query(self: Table, *args: Any, **kwargs: Any) -> Any:
    bound = _QUERY_SIGNATURE.bind(self, *args, **kwargs).arguments
    hash_key = bound.get("hash_key")
    index_name = bound.get("index_name")
    if hash_key is None:
        return _original_query(self, *args, **kwargs)
    scope: DynamoType | tuple[str, DynamoType] = hash_key
    if index_name:
        # moto's index path examines every item of the table for the index's hash key; hand it only the items
        # that carry that key with this value (a cheap look at one attribute each), as the index itself would.
        attr = _index_hash_attribute(self, index_name, bound.get("hash_key_conditions"))
        if attr is None:
            return _original_query(self, *args, **kwargs)
        scope = (attr, hash_key)
    # moto's table path is `[i for i in self.all_items() if i.hash_key == hash_key]`, then sorted by range key.
    token = _partition.set((self, scope))
    try:
        return _original_query(self, *args, **kwargs)
    finally:
        _partition.reset(token)


def _index_hash_attribute(self: Table, index_name: str, conditions: list[tuple[str, DynamoType]] | None) -> str | None:
    """The one hash attribute of the named index, or None (an unknown index, or a multi-attribute key: moto's own
    path answers those)."""
    index = next((i for i in self.all_indexes() if i.name == index_name), None)
    hashes = [k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH"] if index is not None else []
    if len(hashes) != 1 or (conditions and len(conditions) > 1):
        return None
    return str(hashes[0])


def _unsorted_items(self: Table) -> Iterator[Item]:
    for partition in self.items.values():
        if self.range_key_attr:
            yield from partition.values()
        else:
            yield partition  # type: ignore[misc]  # moto types `items` for range tables only


def _all_items(self: Table) -> list[Item]:
    scope = _partition.get()
    if scope is None or scope[0] is not self:
        return _original_all_items(self)
    if isinstance(scope[1], tuple):
        # moto's all_items sorts the whole table by key (most of an index query's cost); the index path sorts what
        # it keeps by the index's own keys anyway, so the items carrying the value are handed over unsorted.
        attr, value = scope[1]
        return [item for item in _unsorted_items(self) if (got := item.attrs.get(attr)) is not None and got == value]
    partition = self.items.get(scope[1])
    if partition is None:
        return []
    if not self.range_key_attr:
        return [partition]  # type: ignore[list-item]  # moto types `items` for range tables only
    return sorted(partition.values(), key=lambda item: item.range_key)


# -- TransactWriteItems -----------------------------------------------------------------------------


class _Undo:
    """The prior state of each item a transaction writes, and each touched stream's length, to put back."""

    def __init__(self, backend: DynamoDBBackend) -> None:
        self.backend = backend
        self.items: list[tuple[Table, DynamoType, DynamoType | None, Item | None]] = []
        self.streams: dict[int, tuple[Table, int]] = {}

    def remember(self, table_name: str, key: dict[str, Any], op_type: str) -> None:
        table = self.backend.get_table(table_name)
        hash_key, range_key = self.backend.get_keys_value(table, key)
        current = table.get_item(hash_key, range_key)
        # Update changes the stored Item in place; Put and Delete replace or drop it, so the object itself is
        # the prior state.
        prior = copy.deepcopy(current) if op_type == "Update" and current is not None else current
        self.items.append((table, hash_key, range_key, prior))
        if table.stream_shard is not None and id(table) not in self.streams:
            self.streams[id(table)] = (table, len(table.stream_shard.items))

    def rollback(self) -> None:
        for table, hash_key, range_key, prior in reversed(self.items):
            if range_key is not None:
                if prior is None:
                    table.items[hash_key].pop(range_key, None)
                else:
                    table.items[hash_key][range_key] = prior
            elif prior is None:
                table.items.pop(hash_key, None)
            else:
                # moto declares Table.items as hash -> {range -> Item}; a table without a range key holds the Item
                # itself (moto's own put_item ignores the same error).
                table.items[hash_key] = prior  # type: ignore[assignment]  # a hash-only table maps to the Item
        for table, length in self.streams.values():
            if table.stream_shard is not None:
                del table.stream_shard.items[length:]


def _transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    # moto 5.2's DynamoDBBackend.transact_write_items (Apache-2.0), with its per-item table deep copy replaced
    # by _Undo. A request mixing operations in one entry is refused before anything is written (moto raised
    # it mid-way, without rolling back the entries before it).
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    if any(len(entry) > 1 for entry in transact_items):
        raise TransactWriteSingleOpException
    undo = _Undo(self)
    targets: set[tuple[str, str]] = set()
    errors: list[tuple[str, str, dict[str, Any] | None] | tuple[None, None, None]] = []
    for entry in transact_items:
        try:
            errors.append(_transact_entry(self, entry, targets, undo))
        except (MultipleTransactionsException, MockValidationException):
            undo.rollback()
            raise
    if any(code is not None for code, _, _ in errors):
        undo.rollback()
        raise TransactionCanceledException(errors)


def _transact_entry(
    self: DynamoDBBackend, entry: dict[str, Any], targets: set[tuple[str, str]], undo: _Undo
) -> tuple[str, str, dict[str, Any] | None] | tuple[None, None, None]:
    """Check and apply one entry; its cancellation reason, or (None, None, None). Validation errors propagate."""
    original_item: dict[str, Any] | None = None
    try:
        op_type, op = next(iter(entry.items()))
        if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
            raise ValueError("Unsupported transaction operation")
        table_name = op["TableName"]
        key = _entry_key(self, op_type, op)
        target = (str(table_name), str(dict(sorted(key.items()))))
        if target in targets:
            raise MultipleTransactionsException()
        targets.add(target)

        current = self.get_item(table_name, key)
        condition_expression = op.get("ConditionExpression")
        if condition_expression is not None:
            condition_op = get_filter_expression(
                condition_expression, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
            )
            if not condition_op.expr(current):
                if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                    original_item = current.to_json()["Attributes"]
                raise ConditionalCheckFailed(item=original_item)

        if op_type != "ConditionCheck":
            undo.remember(table_name, key, op_type)
            _write(self, op_type, op, key)
        return (None, None, None)
    except (MultipleTransactionsException, MockValidationException):
        raise
    except ConditionalCheckFailed as e:
        return ("ConditionalCheckFailed", str(e.message), original_item)
    except Exception as e:  # noqa: BLE001 - moto reports any other failure as that entry's reason
        return (type(e).__name__, str(e), original_item)


def _entry_key(self: DynamoDBBackend, op_type: str, op: dict[str, Any]) -> dict[str, Any]:
    if op_type != "Put":
        return op["Key"]
    attrs = op["Item"]
    table = self.get_table(op["TableName"])
    key = {table.hash_key_attr: attrs[table.hash_key_attr]}
    if table.range_key_attr is not None:
        key[table.range_key_attr] = attrs[table.range_key_attr]
    return key


def _write(self: DynamoDBBackend, op_type: str, op: dict[str, Any], key: dict[str, Any]) -> None:
    # The entry's condition held on this item a moment ago, under the lock: moto's write would only evaluate it again.
    expression: dict[str, Any] = {
        "condition_expression": None,
        "expression_attribute_names": op.get("ExpressionAttributeNames"),
        "expression_attribute_values": op.get("ExpressionAttributeValues"),
    }
    if op_type == "Put":
        self.put_item(op["TableName"], op["Item"], **expression)
    elif op_type == "Delete":
        self.delete_item(op["TableName"], key, **expression)
    else:
        self.update_item(op["TableName"], key, update_expression=op["UpdateExpression"], **expression)


# -- UpdateExpression validation ----------------------------------------------------------------------
# moto validates an update expression by walking a copy of its parsed tree with ten processors. Each processor
# rebuilt its {node class: method} table for every node it visited (twice), and the tree was copied with
# copy.deepcopy: about 80 % of an UpdateItem's time in moto. The table is built once per processor (a processor
# lives for one validation), and the tree is copied node by node, which is what deepcopy did for it (a parsed
# tree's nodes hold only children, a parent and their class name; its leaves are strings and ints).


def _processing_table(self: Any) -> dict[type, Any]:
    table: dict[type, Any] | None = self.__dict__.get("_interlude_table")
    if table is None:
        table = self.__dict__["_interlude_table"] = self._processing_map()
    return table


def _nodes_to_be_processed(self: Any) -> tuple[type, ...]:
    types: tuple[type, ...] | None = self.__dict__.get("_interlude_types")
    if types is None:
        types = self.__dict__["_interlude_types"] = tuple(_processing_table(self))
    return types


def _process(self: Any, node: Any) -> Any:
    for node_class, processor in _processing_table(self).items():
        if isinstance(node, node_class):
            return processor(node)
    return None


def _copied_tree(node: Any, parent: Any = None) -> Any:
    if not isinstance(node, Node):
        return node if node is None or isinstance(node, (str, int)) else copy.deepcopy(node)
    fresh = copy.copy(node)
    fresh.parent = parent
    if node.children is not None:
        fresh.children = [_copied_tree(child, fresh) for child in node.children]
    return fresh


def _validator_init(
    self: Any,
    expression: Any,
    expression_attribute_names: Any,
    expression_attribute_values: Any,
    item: Any,
    table: Any,
) -> None:
    # moto 5.2's Validator.__init__ (Apache-2.0), copying the tree with _copied_tree instead of copy.deepcopy.
    self.expression_attribute_names = expression_attribute_names
    self.expression_attribute_values = expression_attribute_values
    self.item = item
    self.table = table
    self.processors = self.get_ast_processors()
    self.node_to_validate = _copied_tree(expression)
