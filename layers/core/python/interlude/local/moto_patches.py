"""moto's DynamoDB made to cost what the touched items cost, for the local stack and in-process tests only.

moto 5.x deep-copies every table a `TransactWriteItems` names once per item (its rollback), its table
Query sorts and reads every item of the table to find one partition, and each page of a Scan sorts the whole table
and walks it up to the page's start: a lifecycle gets slower with every run the table holds, and so does each tick of
the local TTL. The deployed product uses DynamoDB itself and never imports this module.

The patches keep moto's observable behaviour (same checks in the same order, same errors and
CancellationReasons, same stream records): the transaction keeps moto's loop but remembers only the items it
writes (and how long each stream was) to undo them, the Query reads only the partition its key names, and a Scan page
starts at the partition of its ExclusiveStartKey (partitions ordered by their keys' values, as moto compares them)
and sorts only the partitions it reaches.
A transaction entry's condition is evaluated once, before its write (moto evaluated it again inside the write, on
the same item under the same lock), and an update expression is parsed once per distinct text (moto parsed it
twice per request; the parsed tree is only read or deep-copied by moto's validator, never changed).
An update's validation walks its tree with lookups per node class instead of isinstance checks against ABC classes,
and skips the three checks that read only the expression, its names and the table's keys once they passed for the
same three; a condition is lexed once per text and parsed once per (text, the names and values it refers to); an
update's stream old image is the item it replaced, not another copy.
An AttributeValue is written into an answer and read from a request without searching its ten members, an item's
400 KB check keeps a running total, and clauses are found with one class check per node class. A request's nodes are
parsed with one handler lookup per type and its attribute values read directly; a transaction entry looks its item up
once for its condition and its undo, and an item moto's update changes is copied without deepcopy; an update's SET and
ADD size the item's strings and binaries directly; inside a transaction, a whole-attribute SET or a numeric ADD on an
existing item is applied without moto's seven validation walks, which find nothing to refuse in it. No stored item is
changed in place: such a SET or ADD puts a changed copy in its place, and moto's update_item changes a copy put in the
table instead of the stored item, so the undo and a stream record keep the item itself, and a record makes its images
when it is first read.
tests/integration/test_moto_patches.py runs a set of operations with and without the patches and compares every
answer, error, item and stream record.
Callers serialise requests to moto (`moto_server.LockedMotoServer`, or one thread in tests), as moto itself
requires, so undoing in place is as atomic as moto's table swap was.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import re
import weakref
from bisect import bisect_left
from collections import deque
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import datetime
from typing import Any

from moto.core import responses as moto_responses
from moto.core import utils as moto_utils
from moto.core.parse import BaseJSONParser, JSONParser
from moto.core.serialize import DEFAULT_ALIAS_PROVIDERS, BaseJSONSerializer, XFormedAttributePicker
from moto.core.utils import utcnow
from moto.dynamodb import models as dynamodb_models
from moto.dynamodb import responses as dynamodb_responses
from moto.dynamodb.comparisons import ConditionExpressionParser, get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    ItemSizeTooLarge,
    ItemSizeToUpdateTooLarge,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
from moto.dynamodb.models.table import StreamRecord, Table
from moto.dynamodb.models.utilities import bytesize, dynamo_json_dump
from moto.dynamodb.parsing.ast_nodes import (  # type: ignore[attr-defined]
    DepthFirstTraverser,
    Expression,
    Node,
    UpdateExpressionFunction,
)
from moto.dynamodb.parsing.executors import UpdateExpressionExecutor
from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]
from moto.dynamodb.parsing.validators import (
    ActionCountValidator,
    OverlappingPathsValidator,
    UpdateHashRangeKeyValidator,
    Validator,
)
from moto.moto_api._internal import mock_random

from interlude.local import moto_sqs_patches

_original_query = Table.query
_original_scan = Table.scan
_original_all_items = Table.all_items
_QUERY_SIGNATURE = inspect.signature(_original_query)
_SCAN_SIGNATURE = inspect.signature(_original_scan)
# The (table, hash key) a table Query is reading while it runs: `all_items` answers with that partition only.
_partition: ContextVar[tuple[Table, DynamoType | tuple[str, DynamoType]] | None] = ContextVar(
    "moto_query_partition", default=None
)
# The (table, ExclusiveStartKey) a table Scan is reading while it runs: `all_items` answers from that key on.
_scan_from: ContextVar[tuple[Table, dict[str, Any] | None] | None] = ContextVar("moto_scan_from", default=None)
_applied = False


def apply() -> None:
    """Patch moto's DynamoDB, and its SQS (moto_sqs_patches), in this process (idempotent)."""
    global _applied
    if _applied:
        return
    # Replacing methods on moto's classes is the point of this module; mypy forbids assigning to a method.
    DynamoDBBackend.transact_write_items = _transact_write_items  # type: ignore[method-assign]
    DynamoDBBackend.update_item = _update_item  # type: ignore[method-assign]
    Table.query = _query  # type: ignore[method-assign]
    Table.scan = _scan  # type: ignore[method-assign]
    Table.all_items = _all_items  # type: ignore[method-assign]
    UpdateExpressionParser.make = classmethod(_parsed_update_expression)
    DepthFirstTraverser.nodes_to_be_processed = _nodes_to_be_processed
    DepthFirstTraverser.process = _process
    DepthFirstTraverser.traverse_node_recursively = _traverse_node_recursively
    Validator.__init__ = _validator_init  # type: ignore[method-assign]
    Validator.validate = _validate  # type: ignore[method-assign]
    ConditionExpressionParser.parse = _parse_condition  # type: ignore[method-assign]
    UpdateExpressionExecutor.get_specific_execution = _specific_execution  # type: ignore[method-assign]
    dynamodb_models.copy = _CopyWithPriorImage()  # type: ignore[assignment]
    StreamRecord.__init__ = _stream_record_init  # type: ignore[method-assign]
    StreamRecord.to_json = _stream_record_json  # type: ignore[method-assign]
    ConditionExpressionParser._lex_condition_expression = _lex_condition_expression  # type: ignore[method-assign]
    Node.find_clauses = _find_clauses
    BaseJSONSerializer._serialize_type_structure = _serialize_json_structure  # type: ignore[method-assign]
    BaseJSONParser._parse_structure = _parse_json_structure  # type: ignore[method-assign]
    Item.__init__ = _item_init  # type: ignore[method-assign]
    LimitedSizeDict.__setitem__ = _limited_setitem  # type: ignore[method-assign]
    DynamoType.__hash__ = _dynamo_hash  # type: ignore[method-assign]
    DynamoType.__eq__ = _dynamo_eq  # type: ignore[method-assign]
    DynamoType.size = _size  # type: ignore[method-assign]
    dynamodb_responses.dynamo_to_dict = _dynamo_to_dict
    JSONParser._parse_shape = _parse_json_shape  # type: ignore[method-assign]
    JSONParser._parse_map = _parse_json_map  # type: ignore[method-assign]
    moto_utils.unix_time = _unix_time
    # Every request listed its response class's functions (inspect.getmembers, ≈ 2.5 % of a busy local stack's CPU) to
    # check that its action is one of them; a class's functions do not change: listed once per class.
    moto_responses.method_names_from_class = functools.cache(moto_utils.method_names_from_class)
    moto_sqs_patches.apply()
    _applied = True


# moto's unix_time imports and converts the epoch on every call: every stream record's time, every look at an SQS
# message's visibility (≈ 2 % of a busy local stack's CPU). The same arithmetic from the same naive epoch.
_EPOCH = datetime(1970, 1, 1)


def _unix_time(dt: datetime | None = None) -> float:
    delta = (dt or moto_utils.utcnow()) - _EPOCH
    return (delta.days * 86400) + (delta.seconds + (delta.microseconds / 1e6))


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


def _scan(self: Table, *args: Any, **kwargs: Any) -> Any:
    bound = _SCAN_SIGNATURE.bind(self, *args, **kwargs).arguments
    if bound.get("index_name"):
        return _original_scan(self, *args, **kwargs)
    # moto's table path sorts every item of the table by key (DynamoType comparisons), then walks and compares them up
    # to the start key, for each page: a Scan read in pages (the local TTL's) cost the table's size per page.
    token = _scan_from.set((self, bound.get("exclusive_start_key")))
    try:
        return _original_scan(self, *args, **kwargs)
    finally:
        _scan_from.reset(token)


def _cast_value(key: DynamoType) -> Any:
    return key.cast_value


def _items_from(self: Table, start: dict[str, Any] | None) -> Iterator[Item]:
    """The table's items in moto's order (hash key, then range key: DynamoType compares cast values), from the
    partition of `start` on, each partition sorted when the scan reaches it (moto's loop skips the items up to
    `start` itself and stops at its page's end)."""
    hashes = sorted(self.items, key=_cast_value)
    if start is not None and self.hash_key_attr in start:
        first = DynamoType(start[self.hash_key_attr]).cast_value
        hashes = hashes[bisect_left(hashes, first, key=_cast_value) :]
    for hash_key in hashes:
        partition = self.items[hash_key]
        if not self.range_key_attr:
            yield partition  # type: ignore[misc]  # moto types `items` for range tables only
        else:
            yield from sorted(partition.values(), key=lambda item: item.range_key.cast_value)


def _all_items(self: Table) -> list[Item]:
    scan = _scan_from.get()
    if scan is not None and scan[0] is self:
        return _items_from(self, scan[1])  # type: ignore[return-value]  # moto's scan only iterates it
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

    def remember(
        self, table: Table, hash_key: DynamoType, range_key: DynamoType | None, current: Item | None
    ) -> None:
        """Note the item's prior state (`current`, looked up by the entry a moment ago under the same lock). A stored
        Item is never changed in place (a Put or a Delete replaces or drops it; an update puts a changed copy in its
        place: `_top_level_set`, `_update_item`), so the object itself is the prior state."""
        self.items.append((table, hash_key, range_key, current))
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


def _copied_item(item: Item) -> Item:
    """The copy `_update_item` puts in the table for moto to change: what `copy.deepcopy(item)` makes of a stored item,
    without its generic dispatch. A new Item (created through its class, so moto tracks it as it tracks deepcopy's),
    its key values and attributes copied all the way down, values shared inside the item shared in the copy
    (deepcopy's memo), and the attribute dict filled without moto's size check at every attribute (the copy holds
    what the item held, so it is the same size)."""
    copied: Item = _copied(item, {})
    return copied


def _copied(value: Any, memo: dict[int, Any]) -> Any:
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    seen = memo.get(id(value))
    if seen is not None:
        return seen
    if kind is list:
        fresh_list: list[Any] = []
        memo[id(value)] = fresh_list
        fresh_list.extend(_copied(v, memo) for v in value)
        return fresh_list
    if kind is dict:
        fresh_dict: dict[Any, Any] = {}
        memo[id(value)] = fresh_dict
        for k, v in value.items():
            fresh_dict[k] = _copied(v, memo)
        return fresh_dict
    if kind is DynamoType or kind is Item or kind is LimitedSizeDict:
        # Made through the class as deepcopy makes them (copyreg.__newobj__): moto's models track each Item made.
        fresh: Any
        if kind is DynamoType:
            fresh = object.__new__(DynamoType)
        elif kind is Item:
            fresh = Item.__new__(Item)
        else:
            fresh = dict.__new__(LimitedSizeDict)
        memo[id(value)] = fresh
        for name, attribute in value.__dict__.items():
            setattr(fresh, name, _copied(attribute, memo))
        if kind is LimitedSizeDict:
            for k, v in value.items():
                dict.__setitem__(fresh, k, _copied(v, memo))
        return fresh
    return copy.deepcopy(value, memo)


_IMMUTABLE = frozenset({str, bytes, int, float, bool, type(None)})


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

        # What moto's get_item does (the table, then the key's values, then the item), once for the entry and its undo.
        table = self.get_table(table_name)
        hash_key, range_key = self.get_keys_value(table, key)
        current = table.get_item(hash_key, range_key)
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
            undo.remember(table, hash_key, range_key, current)
            _write(self, op_type, op, key, table, current)
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


def _write(
    self: DynamoDBBackend, op_type: str, op: dict[str, Any], key: dict[str, Any], table: Table, current: Item | None
) -> None:
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
    elif current is not None and _top_level_set(self, op, table, current):
        return
    else:
        self.update_item(op["TableName"], key, update_expression=op["UpdateExpression"], **expression)


# -- Whole-attribute SET and numeric ADD inside a transaction -----------------------------------------------------------
# The store closes an interrupt and records a vote with `SET name = :value, ...`, and moves a usage counter with
# `ADD name :number`, on items that exist. moto validates such an update with seven walks of its tree, each of which
# finds nothing to refuse when every target is a top-level attribute named once, not a key of the table or of an index
# (nor an attribute the table defines), every placeholder is given, the item exists and (for ADD) the value and the
# attribute, when present, are numbers; it then sets each attribute in turn (its size checked at each, as here; ADD sets
# the sum moto's DynamoType addition makes, from 0 when the attribute is absent) and records the stream's images. Those
# updates are made here directly; every other update (REMOVE, DELETE, sets, nested paths, functions, SET and ADD
# together, a missing placeholder, a key attribute, a repeated target, a missing item, any other spelling) goes through
# moto.
_TARGET = r"(#[A-Za-z0-9_]+|[A-Za-z][A-Za-z0-9_]*)"
_VALUE = r"(:[A-Za-z0-9_]+)"
_ACTIONS = {"SET": _TARGET + r"\s*=\s*" + _VALUE, "ADD": _TARGET + r"\s+" + _VALUE}
_ONLY = {
    verb: re.compile(r"\s*" + verb + r"\s+" + one + r"(?:\s*,\s*" + one + r")*\s*") for verb, one in _ACTIONS.items()
}
_ONE = {verb: re.compile(one) for verb, one in _ACTIONS.items()}


# What the ADD executor starts from when the attribute is absent (a fresh DynamoType each time in moto; never changed).
_ZERO = DynamoType({"N": "0"})


@functools.lru_cache(maxsize=1024)
def _set_assignments(expression: str) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """The verb and (target, value placeholder) of each action of a `SET a = :x, #b = :y` or `ADD a :x, #b :y` text, in
    order; None for any other."""
    for verb, whole in _ONLY.items():
        if whole.fullmatch(expression) is not None:
            return verb, tuple((m.group(1), m.group(2)) for m in _ONE[verb].finditer(expression[expression.index(verb) + 3 :]))
    return None


def _top_level_set(self: DynamoDBBackend, op: dict[str, Any], table: Table, stored: Item) -> bool:
    """Apply a whole-attribute SET or a numeric ADD to the existing item as moto's update_item would (True), or leave it
    to moto (False). The changed item is a new Item put in the stored one's place (which the undo and earlier stream
    records keep, unchanged)."""
    expression = op["UpdateExpression"]
    parsed = _set_assignments(expression)
    if parsed is None:
        return False
    verb, assignments = parsed
    names = op.get("ExpressionAttributeNames") or {}
    values = op.get("ExpressionAttributeValues") or {}
    targets: list[tuple[str, dict[str, Any]]] = []
    for target, placeholder in assignments:
        name = names.get(target) if target.startswith("#") else target
        if name is None or placeholder not in values:
            return False
        targets.append((name, values[placeholder]))
    written = {name for name, _ in targets}
    protected = {*table.attribute_keys, *table.table_key_attrs, *(d["AttributeName"] for d in table.attr)}
    if len(written) != len(targets) or written & protected:
        return False
    held = stored.attrs
    typed = [(name, DynamoType(value)) for name, value in targets]
    if verb == "ADD" and any(value.type != "N" or (name in held and held[name].type != "N") for name, value in typed):
        return False
    # moto's update_item (Apache-2.0): parse (once per text), then per action the SET executor's `attrs[name] = value`,
    # or the ADD executor's sum (DynamoType.__add__) set the same way, each refused (as an update's) where
    # LimitedSizeDict.__setitem__ refuses it — the item's size as it stands plus the new attribute's, past the limit —
    # then the stream record of (the item before, the item after). The sizes are summed once and kept as a running
    # total; the attributes are set on a shallow copy of the attribute dict (the values are never changed in place).
    UpdateExpressionParser.make(expression)
    attrs = dict.__new__(LimitedSizeDict)
    dict.update(attrs, held)
    total = sum(bytesize(str(name)) + _size(value) for name, value in held.items())
    for name, value in typed:
        if verb == "ADD":
            value = held.get(name, _ZERO) + value
        added = bytesize(name) + _size(value)
        if total + added > _ITEM_SIZE_LIMIT:
            raise ItemSizeToUpdateTooLarge()
        replaced = dict.get(attrs, name)
        if replaced is not None:
            total -= bytesize(name) + _size(replaced)
        total += added
        dict.__setitem__(attrs, name, value)
    changed = _item_like(stored, attrs)
    _place(table, changed)
    if table.stream_shard is not None:
        table.stream_shard.add(stored, changed)
    return True


def _item_like(stored: Item, attrs: LimitedSizeDict) -> Item:
    """A new Item (made through its class: moto tracks every Item made) with the stored one's keys and `attrs`."""
    # BaseModel.__new__ is typed as answering a BaseModel.
    fresh: Any = Item.__new__(Item)
    fresh.hash_key = stored.hash_key
    fresh.range_key = stored.range_key
    fresh.attrs = attrs
    made: Item = fresh
    return made


def _place(table: Table, item: Item) -> None:
    """Put `item` where the stored item of the same key is (the dict keeps its place in the partition's order)."""
    if table.range_key_attr is not None:
        table.items[item.hash_key][item.range_key] = item
    else:
        # moto declares Table.items as hash -> {range -> Item}; a table without a range key holds the Item itself.
        table.items[item.hash_key] = item  # type: ignore[assignment]  # a hash-only table maps to the Item


# -- UpdateItem: the stored item is replaced, not changed --------------------------------------------------------------
# moto's update_item deep-copies the stored item (the stream's old image) and then changes the stored item in place.
# Here the copy is put in the table and changed there instead, and moto's deepcopy of it answers the item it was made
# from: the same two objects with the same contents, their roles swapped. So no stored Item is ever changed after it
# was stored, which lets a transaction's undo and a stream record keep the object itself (`_Undo`, `StreamRecord`).
# Where no item exists moto creates one with put_item and then changes it in place: the stream records made during
# that call take their images at once, as moto's do.
_original_update_item = DynamoDBBackend.update_item
# (the copy put in the table, the stored item it was made from)
_prior_image: ContextVar[tuple[Item, Item] | None] = ContextVar("moto_prior_image", default=None)
# Set while moto may change an item that a stream record made in the same call refers to.
_eager_images: ContextVar[bool] = ContextVar("moto_eager_images", default=False)


def _update_item(self: DynamoDBBackend, table_name: str, key: dict[str, Any], *args: Any, **kwargs: Any) -> Item:
    stored = _stored_for_update(self, table_name, key)
    if stored is None:
        eager = _eager_images.set(True)
        try:
            return _original_update_item(self, table_name, key, *args, **kwargs)
        finally:
            _eager_images.reset(eager)
    table = self.get_table(table_name)
    copied = _copied_item(stored)
    _place(table, copied)
    token = _prior_image.set((copied, stored))
    try:
        return _original_update_item(self, table_name, key, *args, **kwargs)
    finally:
        _prior_image.reset(token)


def _stored_for_update(self: DynamoDBBackend, table_name: str, key: dict[str, Any]) -> Item | None:
    """The item moto's update_item is about to look up (its three ways of reading the key), or None when there is none
    or the lookup fails (moto then raises the failure itself)."""
    try:
        table = self.get_table(table_name)
        if table.hash_key_attr in key and table.range_key_attr in key:
            hash_value, range_value = DynamoType(key[table.hash_key_attr]), DynamoType(key[table.range_key_attr])
        elif table.hash_key_attr in key:
            hash_value, range_value = DynamoType(key[table.hash_key_attr]), None
        else:
            hash_value, range_value = DynamoType(key), None
        return table.get_item(hash_value, range_value)
    except Exception:  # noqa: BLE001 - moto's own update_item raises whatever this lookup met
        return None


class _CopyWithPriorImage:
    """The `copy` module as moto.dynamodb.models sees it: its deepcopy of the item update_item is about to change
    answers the stored item that item was copied from (the old image is only read, for the stream record)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    @staticmethod
    def deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
        shared = _prior_image.get()
        if shared is not None and value is shared[0]:
            return shared[1]
        return copy.deepcopy(value, memo)


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
    node_class = type(node)
    if not _is_node(node_class):
        return node if node is None or node_class is str or node_class is int else copy.deepcopy(node)
    # What copy.copy does for these plain objects (no __copy__, __reduce__ or __slots__), without its dispatch.
    fresh = object.__new__(node_class)
    fresh.__dict__.update(node.__dict__)
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
    self._interlude_source = expression


def _is_node(node_class: type) -> bool:
    # Node's metaclass is ABCMeta, whose isinstance is several times slower than a dict lookup per class.
    known = _NODE_CLASSES.get(node_class)
    if known is None:
        known = _NODE_CLASSES[node_class] = issubclass(node_class, Node)
    return known


_NODE_CLASSES: dict[type, bool] = {}
_DEFAULT_PRE_PROCESSING = DepthFirstTraverser.pre_processing_of_child


def _processor_for(self: Any, node_class: type) -> Any:
    """The method moto's `process` calls for a node of this class (the first class of the processing map the node is
    an instance of), or None when moto would not process it. Which map entry applies is looked up once per
    (processor class, node class): a processor lives for one validation, its map's classes are fixed per class."""
    key = (type(self), node_class)
    try:
        entry = _ENTRY_FOR[key]
    except KeyError:
        entry = _ENTRY_FOR[key] = next((cls for cls in _processing_table(self) if issubclass(node_class, cls)), None)
    return None if entry is None else _processing_table(self)[entry]


_ENTRY_FOR: dict[tuple[type, type], type | None] = {}


def _traverse_node_recursively(self: Any, node: Any, child_id: int = -1) -> Any:
    # moto 5.2's DepthFirstTraverser.traverse_node_recursively (Apache-2.0): the same depth-first walk, processing
    # bottom up and putting each processed node in its parent's place, with the per-node isinstance checks against
    # ABC classes (about half of an update's validation) replaced by lookups per class.
    if not _is_node(type(node)):
        return node
    parent_node = node.parent
    if node.children is not None:
        hook = type(self).pre_processing_of_child is not _DEFAULT_PRE_PROCESSING
        for i, child_node in enumerate(node.children):
            if hook:
                self.pre_processing_of_child(node, i)
            _traverse_node_recursively(self, child_node, i)
    processor = _processor_for(self, type(node))
    if processor is not None:
        node = processor(node)
        node.parent = parent_node
        if parent_node:
            parent_node.children[child_id] = node
    return node


# The checks that read only the expression's tree, its attribute names and the table's key attributes: once they
# passed for a parsed expression with the same names on a table with the same keys, they pass again.
_STATIC_CHECKS = (ActionCountValidator, OverlappingPathsValidator, UpdateHashRangeKeyValidator)
_passed_checks: weakref.WeakKeyDictionary[Any, set[tuple[Any, ...]]] = weakref.WeakKeyDictionary()


def _validate(self: Any) -> Any:
    # moto 5.2's Validator.validate (Apache-2.0): each processor in turn, skipping the leading static checks when
    # they passed before for the same parsed expression (update expressions are parsed once per text, see above).
    source = self.__dict__.get("_interlude_source")
    names = self.expression_attribute_names
    signature = (
        None if names is None else tuple(sorted(names.items())),
        tuple(self.table.table_key_attrs) if getattr(self, "table", None) is not None else None,
    )
    passed = _passed_checks.setdefault(source, set()) if source is not None else None
    skip = passed is not None and signature in passed
    leading = True
    n = self.node_to_validate
    for processor in self.processors:
        static = leading and isinstance(processor, _STATIC_CHECKS)
        if leading and not static:
            leading = False
            if passed is not None:
                passed.add(signature)
        if static and skip:
            continue
        n = processor.traverse(n)
    return n


_original_lex = ConditionExpressionParser._lex_condition_expression


@functools.lru_cache(maxsize=1024)
def _lexed_once(expression: str) -> tuple[Any, ...]:
    return tuple(_original_lex(ConditionExpressionParser(expression, None, None)))


def _lex_condition_expression(self: Any) -> deque[Any]:
    # Lexing reads the text alone (names and values are looked up by the next step); its tokens are immutable
    # named tuples whose (empty) children lists moto never changes. A text that fails to lex raises each time.
    return deque(_lexed_once(self.condition_expression))


def _specific_execution(self: Any, node: Any) -> Any:
    # moto 5.2's UpdateExpressionExecutor.get_specific_execution (Apache-2.0): the first class of its execution map
    # the node is an instance of, looked up once per node class.
    node_class = type(node)
    try:
        return _EXECUTION_FOR[node_class]
    except KeyError:
        found = next((self.execution_map[c] for c in self.execution_map if issubclass(node_class, c)), None)
        _EXECUTION_FOR[node_class] = found
        return found


_EXECUTION_FOR: dict[type, Any] = {}

# -- ConditionExpression parsing ---------------------------------------------------------------------------------
# A transaction entry's condition is parsed by moto's request handler (to check the names it uses) and again by
# the write; a query's filter once per page. The parse of one text depends only on the names and values it refers
# to, so it is kept per (text, those names, those values): the resulting operator tree is only evaluated, never
# changed, by moto.

_original_parse = ConditionExpressionParser.parse
_PARSED_CONDITIONS_MAX = 2048
_parsed_conditions: dict[tuple[Any, ...], tuple[Any, list[str], list[str]]] = {}


@functools.lru_cache(maxsize=1024)
def _referenced(expression: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The name (#…) and value (:…) placeholders a condition text refers to, or None when it does not lex: read from
    the text alone, once per text."""
    try:
        tokens = _lexed_once(expression)
    except Exception:  # noqa: BLE001 - moto's own parse raises the error the caller must see
        return None
    names: list[str] = []
    values: list[str] = []
    for token in tokens:
        for element in token.text.replace("[", ".[").split("."):
            if element.startswith("#"):
                names.append(element)
            elif element.startswith(":"):
                values.append(element)
    return tuple(names), tuple(values)


def _condition_key(self: Any) -> tuple[Any, ...] | None:
    expression = self.condition_expression
    referenced = _referenced(expression)
    if referenced is None:
        return None
    names, values = referenced
    given_names = self.expression_attribute_names or {}
    given_values = self.expression_attribute_values or {}
    if any(n not in given_names for n in names) or any(v not in given_values for v in values):
        return None  # moto's parse refuses it; let it, every time
    return (
        expression,
        tuple((n, given_names[n]) for n in names),
        tuple((v, _value_key(given_values[v])) for v in values),
    )


def _value_key(value: Any) -> tuple[str, Any]:
    """A value's part of a parsed condition's key: equal for equal values, different for different ones. A one-member
    AttributeValue of a string or bytes (every value the store sends but sets, lists and maps) is its (member, value);
    anything else its sorted JSON, under a tag no member name takes (json.dumps with its own encoder per call was most
    of the key's cost)."""
    if type(value) is dict and len(value) == 1:
        ((member, raw),) = value.items()
        if type(member) is str and (type(raw) is str or type(raw) is bytes):
            return (member, raw)
    return ("", json.dumps(value, sort_keys=True, default=repr))


def _parse_condition(self: Any) -> Any:
    if not self.condition_expression:
        return _original_parse(self)
    key = _condition_key(self)
    if key is None:
        return _original_parse(self)
    cached = _parsed_conditions.get(key)
    if cached is None:
        op = _original_parse(self)
        if len(_parsed_conditions) >= _PARSED_CONDITIONS_MAX:
            _parsed_conditions.clear()
        _parsed_conditions[key] = (op, list(self.expr_attr_names_found), list(self.expr_attr_values_found))
        return op
    op, names_found, values_found = cached
    self.expr_attr_names_found.extend(names_found)
    self.expr_attr_values_found.extend(values_found)
    return op


# -- Stream records ------------------------------------------------------------------------------------------------
# moto writes each record's images (`Item.to_json()` of the old and the new item) and serialises them once more, only
# to count its SizeBytes, as it makes the record; most records are never read (only the local pump and the tests'
# stream readers read them). A record keeps the two Items instead and makes its images, then counts its size, when it
# is first read: no stored Item is changed after it was stored (`_update_item`, `_top_level_set`), so the images are
# the ones moto would have made. Records made while moto changes an item in place (an update creating its item) take
# their images at once.


def _stream_record_init(
    self: Any, table: Table, stream_type: str, event_name: str, old: Item | None, new: Item | None, seq: int
) -> None:
    # moto 5.2's StreamRecord.__init__ (Apache-2.0), its images and SizeBytes made by _stream_record_json.
    rec = old if old is not None else new
    keys = {table.hash_key_attr: rec.hash_key.to_json()}  # type: ignore[union-attr]
    if table.range_key_attr is not None and rec is not None:
        keys[table.range_key_attr] = rec.range_key.to_json()  # type: ignore[union-attr]
    self.record = {
        "eventID": mock_random.uuid4().hex,
        "eventName": event_name,
        "eventSource": "aws:dynamodb",
        "eventVersion": "1.0",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "StreamViewType": stream_type,
            "ApproximateCreationDateTime": utcnow(),
            "SequenceNumber": str(seq),
            "SizeBytes": 1,
            "Keys": keys,
        },
    }
    self._interlude_images = (stream_type, old, new)
    if _eager_images.get():
        _stream_record_images(self)


def _stream_record_images(self: Any) -> None:
    images: tuple[str, Item | None, Item | None] | None = self.__dict__.get("_interlude_images")
    if images is None:
        return
    stream_type, old, new = images
    part = self.record["dynamodb"]
    if stream_type in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES") and new is not None:
        part["NewImage"] = new.to_json()["Attributes"]
    if stream_type in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES") and old is not None:
        part["OldImage"] = old.to_json()["Attributes"]
    # What moto counted at creation: the record's "dynamodb" part with SizeBytes still 1.
    part["SizeBytes"] = len(dynamo_json_dump(part))
    self._interlude_images = None


def _stream_record_json(self: Any) -> dict[str, Any]:
    _stream_record_images(self)
    record: dict[str, Any] = self.record
    return record


# -- Clause lookups ---------------------------------------------------------------------------------------------------
# moto's request handler looks for the name placeholders of every update in a transaction (find_clauses on the parsed
# tree) and its executor for the actions of each; the walk asked isinstance of ABC classes at every node. The same
# walk, with the two subclass questions answered once per node class.


def _find_clauses(self: Any, clause_types: Any) -> list[Any]:
    # moto 5.2's Node.find_clauses (Apache-2.0).
    clauses: list[Any] = []
    for child in self.children or []:
        child_class = type(child)
        if child_class in clause_types:
            clauses.append(child)
        elif _descends(child_class):
            clauses.extend(child.find_clauses(clause_types))
    return clauses


def _descends(node_class: type) -> bool:
    """isinstance(child, Expression) or isinstance(child, UpdateExpressionFunction), per class."""
    known = _DESCENDS.get(node_class)
    if known is None:
        known = _DESCENDS[node_class] = issubclass(node_class, (Expression, UpdateExpressionFunction))
    return known


_DESCENDS: dict[type, bool] = {}

# -- Attribute values in answers --------------------------------------------------------------------------------------
# moto's JSON serializer writes a structure member by member: for each of the shape's members it asks its attribute
# picker every alias of the member's name (the shape's name, snake case, prefixes) against the value. An
# AttributeValue has ten members and holds one, so each attribute of each item answered (a BatchGetItem's run head,
# every item of a Query page) cost ten such searches. For a plain dict whose keys are all member names, with moto's
# default picker and no response transformer, every alias of a member other than its own name is a key the dict does
# not hold (lower case, or a shape name such as ListAttributeValue), so the search finds exactly `value.get(member)`:
# the members are written in the shape's order from that, as moto's loop writes them.


def _serialize_json_structure(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
    members = shape.members
    picker = self._value_picker
    if (
        shape.name != "AttributeValue"
        or shape.is_document_type
        or type(value) is not dict
        or type(picker) is not XFormedAttributePicker
        or picker.alias_providers is not DEFAULT_ALIAS_PROVIDERS
        or picker.response_transformers
        or not value.keys() <= members.keys()
    ):
        _original_json_structure(self, serialized, value, shape, key)
        return
    # moto 5.2's ResponseSerializer._serialize_type_structure (Apache-2.0) with the picker's search replaced by get.
    wrapper: Any = self.MAP_TYPE() if key else serialized
    for member_key, member_shape in members.items():
        member_shape.parent = shape
        member_value = value.get(member_key)
        if member_value is not None:
            self._serialize(wrapper, member_value, member_shape, member_key)
    if key:
        self._default_serialize(serialized, wrapper, shape, key)


_original_json_structure = BaseJSONSerializer._serialize_type_structure

# -- Attribute values in requests -------------------------------------------------------------------------------------
# moto's JSON request parser reads a structure by asking the value for each of its shape's members under the member's
# wire name; an AttributeValue has ten members, no wire name of its own for any of them, and holds one. A value with one
# key is read from that key alone: the other nine lookups find nothing, and a key that is no member is ignored by both.


def _parse_json_structure(self: Any, shape: Any, value: Any) -> Any:
    if shape.name != "AttributeValue" or shape.is_document_type or type(value) is not dict or len(value) != 1:
        return _original_json_parse_structure(self, shape, value)
    members = shape.members
    if not _unrenamed(shape):
        return _original_json_parse_structure(self, shape, value)
    # moto 5.2's BaseJSONParser._parse_structure (Apache-2.0) for a one-key value.
    final_parsed = self.MAP_TYPE()
    ((name, raw_value),) = value.items()
    if raw_value is not None and name in members:
        final_parsed[name] = self._parse_shape(members[name], raw_value)
    return final_parsed


def _unrenamed(shape: Any) -> bool:
    """Whether every member of the shape is read under its own name (none has a serialization name of its own); kept
    on the shape, which botocore never changes once built."""
    known: bool | None = shape.__dict__.get("_interlude_unrenamed")
    if known is None:
        known = all(m.serialization.get("name", n) == n for n, m in shape.members.items())
        shape.__dict__["_interlude_unrenamed"] = known
    return known


_original_json_parse_structure = BaseJSONParser._parse_structure

# -- Items as they are built ------------------------------------------------------------------------------------------
# moto builds an item attribute by attribute into a dict that, at each one, sums the size of every attribute already in
# it (its 400 KB check): a put of n attributes sized n(n+1)/2 of them. Sizes only add up, so a running total reaches the
# limit at the same attribute moto's sums do, and the item is refused there, before the next attribute is typed, as
# moto refuses it.


def _item_init(self: Any, hash_key: DynamoType, range_key: DynamoType | None, attrs: dict[str, Any]) -> None:
    # moto 5.2's Item.__init__ (Apache-2.0) with LimitedSizeDict's per-attribute sum kept as a running total.
    self.hash_key = hash_key
    self.range_key = range_key
    self.attrs = LimitedSizeDict()
    total = 0
    for key, value in attrs.items():
        typed = DynamoType(value)
        total += bytesize(key) + _size(typed)
        if total > _ITEM_SIZE_LIMIT:
            raise ItemSizeTooLarge
        dict.__setitem__(self.attrs, key, typed)


# moto's own figure, between DynamoDB's documented 400 KB and what it accepts in practice.
_ITEM_SIZE_LIMIT = 405000

# -- Requests, node by node ------------------------------------------------------------------------------------------------
# moto's JSON request parser (the one DynamoDB's requests go through) picks a handler for every node of the request by
# formatting its type name and looking it up on the parser (`getattr(self, f"_parse_{type}", self._default_handle)`), and
# reads each attribute value of an item, a key or an expression's values through two more of those dispatches: a
# transaction of seven items is about 170 nodes. The handler is looked up once per (parser class, type name), and a map
# of attribute values is read value by value: a one-key value whose member is a string or a boolean is that value (the
# JSON parser has no handler for either and hands them back unchanged), a blob is decoded by the parser's blob parser,
# as moto does; anything else (lists, maps, sets, a value with several keys or none) goes through moto's own parse.


def _parse_json_shape(self: Any, shape: Any, node: Any) -> Any:
    # moto 5.2's RequestParser._parse_shape (Apache-2.0), its handler looked up once per (parser class, type name).
    key = (type(self), shape.type_name)
    handler = _SHAPE_HANDLERS.get(key)
    if handler is None:
        handler = _SHAPE_HANDLERS[key] = getattr(type(self), f"_parse_{shape.type_name}", type(self)._default_handle)
    return handler(self, shape, node)


_SHAPE_HANDLERS: dict[tuple[type, str], Any] = {}
_original_parse_map = JSONParser._parse_map
# The JSON parser hands strings and booleans back as they came (no handler of its own for either type).
_PLAIN_TYPES = frozenset(t for t in ("string", "boolean") if not hasattr(JSONParser, f"_parse_{t}"))


def _parse_json_map(self: Any, shape: Any, value: Any) -> Any:
    value_shape = shape.value
    if (
        type(self) is not JSONParser
        or type(value) is not dict
        or shape.key.type_name not in _PLAIN_TYPES
        or value_shape.name != "AttributeValue"
        or value_shape.is_document_type
        or not _unrenamed(value_shape)
    ):
        return _original_parse_map(self, shape, value)
    # moto 5.2's RequestParser._parse_map (Apache-2.0): keys are strings, handed back unchanged.
    parsed = self.MAP_TYPE()
    members = value_shape.members
    for key, raw in value.items():
        parsed[key] = _attribute_value(self, value_shape, members, raw)
    return parsed


def _attribute_value(self: Any, shape: Any, members: Any, value: Any) -> Any:
    if type(value) is dict and len(value) == 1:
        ((name, raw),) = value.items()
        member = members.get(name)
        if member is not None and raw is not None:
            kind = member.type_name
            if kind in _PLAIN_TYPES:
                parsed = self.MAP_TYPE()
                parsed[name] = raw
                return parsed
            if kind == "blob":
                parsed = self.MAP_TYPE()
                parsed[name] = self._blob_parser(raw)
                return parsed
    return self._parse_shape(shape, value)


# -- Attributes set on a stored item ----------------------------------------------------------------------------------------
# An update's SET and ADD go through moto's LimitedSizeDict, which sums the size of every attribute the item holds before
# each one (its 400 KB check) with DynamoType.size(): four type questions per attribute before a string's or a binary's
# size is its length. The same sum, with those two types sized directly; DynamoType.size itself does the same (a
# BatchGetItem sizes each item it answers twice, a put sizes its keys, a map sizes each of its values).
_original_dynamo_size = DynamoType.size


def _size(self: DynamoType) -> int:
    """DynamoType.size(): strings and binaries (neither a number, a set, a list, a map nor a boolean) are their bytes."""
    # moto 5.2's DynamoType.size (Apache-2.0) for those two types; every other type goes through it.
    kind, raw = self.type, self.value
    if kind == "S" or kind == "B":
        if type(raw) is str:
            return len(raw.encode("utf-8"))
        if type(raw) is bytes:
            return len(raw)
    return _original_dynamo_size(self)


def _limited_setitem(self: Any, key: str, value: Any) -> None:
    # moto 5.2's LimitedSizeDict.__setitem__ (Apache-2.0), summing with _size.
    current = 0
    for name in list(self.keys()):
        current += bytesize(str(name))
    for held in list(self.values()):
        current += _size(held) if type(held) is DynamoType else bytesize(str(held))
    new = bytesize(key) + (_size(value) if type(value) is DynamoType else bytesize(str(value)))
    if current + new > _ITEM_SIZE_LIMIT:
        raise ItemSizeTooLarge
    dict.__setitem__(self, key, value)


# -- Answers made plain -----------------------------------------------------------------------------------------------------
# moto's DynamoDB answers pass through dynamo_to_dict, which asks each node of the answer (every attribute of every item a
# BatchGetItem or a Query returns, down to each string) whether it is a datetime, a DynamoType, has a to_json, a dict or a
# list. Plain values, dicts (an item's attribute dict among them), lists and the DynamoTypes of every type but binaries
# are made here by their exact type, with what moto makes of them; everything else goes through moto's own.
_original_dynamo_to_dict = dynamodb_responses.dynamo_to_dict
_PLAIN_VALUES = frozenset({str, int, float, bool, type(None)})


def _dynamo_to_dict(obj: Any) -> Any:
    # moto 5.2's moto.dynamodb.models.utilities.dynamo_to_dict (Apache-2.0), dispatched by exact type.
    kind = type(obj)
    if kind in _PLAIN_VALUES:
        return obj
    if kind is dict or kind is LimitedSizeDict:
        return {k: _dynamo_to_dict(v) for k, v in obj.items()}
    if kind is list:
        return [_dynamo_to_dict(v) for v in obj]
    if kind is DynamoType and obj.type != "B" and obj.type != "BS":
        return {obj.type: _dynamo_to_dict(obj.value)}
    return _original_dynamo_to_dict(obj)


# -- Keys compared -----------------------------------------------------------------------------------------------------------
# Every item lookup hashes its key values and compares them with the stored ones through DynamoType.cast_value, which asks
# five type questions before handing a string or a binary back as it is (about a hundred times per resolve). Strings
# and binaries are hashed and compared by (type, value) directly, which is what cast_value makes of them; every other
# type goes through moto's own methods.
_original_dynamo_hash = DynamoType.__hash__
_original_dynamo_eq = DynamoType.__eq__


def _dynamo_hash(self: DynamoType) -> int:
    # moto 5.2's DynamoType.__hash__ (Apache-2.0): hash((type, cast_value)).
    kind = self.type
    if kind == "S" or kind == "B":
        return hash((kind, self.value))
    return _original_dynamo_hash(self)


def _dynamo_eq(self: DynamoType, other: Any) -> bool:
    # moto 5.2's DynamoType.__eq__ (Apache-2.0): same type and equal cast_value.
    kind = self.type
    if (kind == "S" or kind == "B") and type(other) is DynamoType:
        return kind == other.type and self.value == other.value
    return _original_dynamo_eq(self, other)
