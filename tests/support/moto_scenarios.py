"""DynamoDB and SQS operations whose answers moto_patches must not change, run in a fresh interpreter with or without
them.

`python -m tests.support.moto_scenarios [--patched]` prints, as JSON, every answer (or error: code, message,
cancellation reasons), then the table and the stream records the operations left. Each operation runs twice, on
keys of its own, so the second pass meets whatever the patches remember from the first (parsed expressions, checks
that passed, parsed conditions). tests/integration/test_moto_patches.py compares the two outputs.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

for name, value in {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
}.items():
    os.environ[name] = value

import boto3  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402
from moto import mock_aws  # noqa: E402

TABLE = "scenarios"
FLAT = "flat"
# A table whose stream keeps old and new images (the product's keeps new images only).
IMAGES = "images"


def s(value: str) -> dict[str, str]:
    return {"S": value}


def n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def item(pk: str, sk: str, **attrs: Any) -> dict[str, Any]:
    return {"pk": s(pk), "sk": s(sk), **attrs}


def update(pk: str, sk: str, expression: str, **extra: Any) -> tuple[str, dict[str, Any]]:
    return "update_item", {
        "TableName": TABLE,
        "Key": {"pk": s(pk), "sk": s(sk)},
        "UpdateExpression": expression,
        **extra,
    }


def transact(*entries: dict[str, Any], **extra: Any) -> tuple[str, dict[str, Any]]:
    return "transact_write_items", {"TransactItems": list(entries), **extra}


def t_update(pk: str, sk: str, expression: str, **extra: Any) -> dict[str, Any]:
    return {"Update": {"TableName": TABLE, "Key": {"pk": s(pk), "sk": s(sk)}, "UpdateExpression": expression, **extra}}


def t_put(attrs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"Put": {"TableName": TABLE, "Item": attrs, **extra}}


def t_check(pk: str, sk: str, condition: str, **extra: Any) -> dict[str, Any]:
    return {
        "ConditionCheck": {
            "TableName": TABLE,
            "Key": {"pk": s(pk), "sk": s(sk)},
            "ConditionExpression": condition,
            **extra,
        }
    }


def operations(p: str) -> list[tuple[str, dict[str, Any]]]:
    """One pass of operations; `p` prefixes every partition key so passes do not meet."""
    run = f"{p}#run"
    doc = {
        "M": {
            "a": {"M": {"b": n(1), "tags": {"L": [s("x"), s("y"), s("z")]}}},
            "name": s("alpha"),
        }
    }
    all_old = {"ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
    typed = f"{p}#types"
    every_type = item(
        typed,
        "ALL",
        text=s("ünïcode"),
        number=n(-12),
        decimal={"N": "3.25"},
        blob={"B": b"\x00\xffpacked"},
        strings={"SS": ["a", "b"]},
        numbers={"NS": ["1", "2.5"]},
        blobs={"BS": [b"\x01", b"\x02"]},
        nothing={"NULL": True},
        bool={"BOOL": True},
        nested={"M": {"list": {"L": [s("x"), {"B": b"\x03"}, {"M": {}}, {"L": []}, {"NS": ["7"]}]}, "empty": {"M": {}}}},
    )

    # A transition's items, as the store writes them: built afresh for each transaction that uses them.
    def head_bump() -> dict[str, Any]:
        return t_update(
            run,
            "RUN",
            "SET version = :n",
            ConditionExpression="version = :seen",
            ExpressionAttributeValues={":n": n(50), ":seen": n(3)},
            **all_old,
        )

    def event_put() -> dict[str, Any]:
        return t_put(item(run, "E#1", events=s("batch")), ConditionExpression="attribute_not_exists(sk)", **all_old)

    def gate_close(expected: str) -> dict[str, Any]:
        return t_update(
            run,
            "I#gate",
            "SET #st = :done",
            ConditionExpression="#st = :open",
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues={":done": s("again"), ":open": s(expected)},
            **all_old,
        )

    def release() -> dict[str, Any]:
        return t_update(
            p,
            "USAGE",
            "ADD #c :minus",
            ExpressionAttributeNames={"#c": "c"},
            ExpressionAttributeValues={":minus": n(-1)},
        )

    return [
        ("put_item", {"TableName": TABLE, "Item": item(run, "RUN", version=n(1), state=s("waiting"), doc=doc)}),
        (
            "put_item",
            {
                "TableName": TABLE,
                "Item": item(run, "I#gate", status=s("open"), votes={"L": []}, gsi1pk=s("in"), gsi1sk=s("1")),
            },
        ),
        ("put_item", {"TableName": TABLE, "Item": item(p, "USAGE", c=n(3), tags={"SS": ["a"]})}),
        # conditions: a failed one answers the item with ALL_OLD, a put refused on an existing key
        ("put_item", {"TableName": TABLE, "Item": item(run, "RUN"), "ConditionExpression": "attribute_not_exists(pk)"}),
        (
            "put_item",
            {
                "TableName": TABLE,
                "Item": item(run, "RUN", version=n(9)),
                "ConditionExpression": "version = :v",
                "ExpressionAttributeValues": {":v": n(5)},
                **all_old,
            },
        ),
        # the same condition text with other values passes, then fails again
        *[
            update(
                run,
                "RUN",
                "SET version = :next",
                ConditionExpression="version = :seen",
                ExpressionAttributeValues={":next": n(v + 1), ":seen": n(seen)},
                ReturnValues="ALL_NEW",
            )
            for v, seen in ((1, 1), (2, 2), (3, 1))
        ],
        # ExpressionAttributeNames: the same text with other names
        update(
            run,
            "I#gate",
            "SET #a = :v",
            ExpressionAttributeNames={"#a": "status"},
            ExpressionAttributeValues={":v": s("closing")},
        ),
        update(
            run,
            "I#gate",
            "SET #a = :v",
            ExpressionAttributeNames={"#a": "note"},
            ExpressionAttributeValues={":v": s("hi")},
            ReturnValues="UPDATED_OLD",
        ),
        # the same text is a duplicate path under one set of names and fine under another
        update(
            run,
            "I#gate",
            "SET #a = :v, #b = :w",
            ExpressionAttributeNames={"#a": "x", "#b": "x"},
            ExpressionAttributeValues={":v": n(1), ":w": n(2)},
        ),
        update(
            run,
            "I#gate",
            "SET #a = :v, #b = :w",
            ExpressionAttributeNames={"#a": "x", "#b": "y"},
            ExpressionAttributeValues={":v": n(1), ":w": n(2)},
        ),
        update(
            run,
            "I#gate",
            "SET #a = :v, #b = :w",
            ExpressionAttributeNames={"#a": "x", "#b": "x"},
            ExpressionAttributeValues={":v": n(1), ":w": n(2)},
        ),
        # a key attribute may not be updated, on either table, whichever key it is
        update(
            run,
            "I#gate",
            "SET #k = :v",
            ExpressionAttributeNames={"#k": "sk"},
            ExpressionAttributeValues={":v": s("other")},
        ),
        update(
            run,
            "I#gate",
            "SET #k = :v",
            ExpressionAttributeNames={"#k": "id"},
            ExpressionAttributeValues={":v": s("fine here")},
        ),
        (
            "update_item",
            {
                "TableName": FLAT,
                "Key": {"id": s(p)},
                "UpdateExpression": "SET #k = :v",
                "ExpressionAttributeNames": {"#k": "sk"},
                "ExpressionAttributeValues": {":v": s("fine here")},
            },
        ),
        (
            "update_item",
            {
                "TableName": FLAT,
                "Key": {"id": s(p)},
                "UpdateExpression": "SET #k = :v",
                "ExpressionAttributeNames": {"#k": "id"},
                "ExpressionAttributeValues": {":v": s("refused")},
            },
        ),
        # ADD on a counter (and on a missing one), on a set; ADD on a string is refused
        update(
            p,
            "USAGE",
            "ADD #c :one",
            ExpressionAttributeNames={"#c": "c"},
            ExpressionAttributeValues={":one": n(1)},
            ReturnValues="UPDATED_NEW",
        ),
        update(
            p,
            "USAGE",
            "ADD #c :one",
            ExpressionAttributeNames={"#c": "d"},
            ExpressionAttributeValues={":one": n(-1)},
            ReturnValues="ALL_NEW",
        ),
        update(p, "USAGE", "ADD tags :t", ExpressionAttributeValues={":t": {"SS": ["b", "a"]}}, ReturnValues="ALL_NEW"),
        update(
            run,
            "RUN",
            "ADD #st :one",
            ExpressionAttributeNames={"#st": "state"},
            ExpressionAttributeValues={":one": n(1)},
        ),
        update(p, "USAGE", "DELETE tags :t", ExpressionAttributeValues={":t": {"SS": ["a"]}}, ReturnValues="ALL_NEW"),
        # arithmetic, if_not_exists, list_append (and on a missing list), nested paths and indexes, REMOVE
        update(
            p,
            "USAGE",
            "SET c = c + :k, e = if_not_exists(e, :zero) - :k",
            ExpressionAttributeValues={":k": n(2), ":zero": n(0)},
            ReturnValues="ALL_NEW",
        ),
        update(
            run,
            "I#gate",
            "SET votes = list_append(votes, :v)",
            ExpressionAttributeValues={":v": {"L": [s("ann")]}},
            ReturnValues="ALL_NEW",
        ),
        update(
            run,
            "I#gate",
            "SET votes = list_append(:v, votes)",
            ExpressionAttributeValues={":v": {"L": [s("bob")]}},
            ReturnValues="UPDATED_NEW",
        ),
        update(
            run, "I#gate", "SET absent = list_append(absent, :v)", ExpressionAttributeValues={":v": {"L": [s("x")]}}
        ),
        update(
            run,
            "I#gate",
            "SET votes = list_append(#st, :v)",
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues={":v": {"L": [s("x")]}},
        ),
        update(
            run,
            "RUN",
            "SET doc.a.b = doc.a.b + :one, doc.a.tags[1] = :t, #d.#n = :name",
            ExpressionAttributeNames={"#d": "doc", "#n": "name"},
            ExpressionAttributeValues={":one": n(1), ":t": s("Y"), ":name": s("beta")},
            ReturnValues="UPDATED_NEW",
        ),
        update(run, "RUN", "REMOVE doc.a.tags[0], doc.a.tags[2]", ReturnValues="ALL_NEW"),
        update(run, "RUN", "SET doc.nope.deeper = :v", ExpressionAttributeValues={":v": n(1)}),
        update(
            run,
            "I#gate",
            "SET #st = :done, resolution = :r REMOVE gsi1pk, gsi1sk",
            ExpressionAttributeNames={"#st": "status"},
            ExpressionAttributeValues={":done": s("resolved"), ":r": {"M": {"action": s("accept")}}},
            ReturnValues="ALL_OLD",
        ),
        # an update creating its item; one on a missing attribute path
        update(
            run,
            "I#new",
            "SET a = :a, b = if_not_exists(b, :a)",
            ExpressionAttributeValues={":a": s("made")},
            ReturnValues="ALL_NEW",
        ),
        update(run, "I#new2", "SET a = b", ReturnValues="ALL_NEW"),
        # expressions refused: two SET clauses, overlapping paths, undefined names and values, a reserved word, bad syntax
        update(run, "RUN", "SET a = :v SET b = :v", ExpressionAttributeValues={":v": n(1)}),
        update(run, "RUN", "SET doc.a = :v, doc.a.b = :v", ExpressionAttributeValues={":v": n(1)}),
        update(run, "RUN", "SET #undefined = :v", ExpressionAttributeValues={":v": n(1)}),
        update(run, "RUN", "SET a = :undefined", ExpressionAttributeValues={":v": n(1)}),
        update(run, "RUN", "SET status = :v", ExpressionAttributeValues={":v": n(1)}),
        update(run, "RUN", "SET a = = :v", ExpressionAttributeValues={":v": n(1)}),
        (
            "put_item",
            {
                "TableName": TABLE,
                "Item": item(run, "E#2"),
                "ConditionExpression": "status = :v",
                "ExpressionAttributeValues": {":v": n(1)},
            },
        ),
        (
            "put_item",
            {
                "TableName": TABLE,
                "Item": item(run, "E#2"),
                "ConditionExpression": "a = :missing",
                "ExpressionAttributeValues": {":v": n(1)},
            },
        ),
        (
            "put_item",
            {
                "TableName": TABLE,
                "Item": item(run, "E#2"),
                "ConditionExpression": "a === :v",
                "ExpressionAttributeValues": {":v": n(1)},
            },
        ),
        # functions in conditions: size, begins_with, contains, attribute_type, NOT / AND / OR / BETWEEN / IN
        *[
            update(
                run,
                "RUN",
                "SET checked = :c",
                ConditionExpression=cond,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={":c": s(cond), **values},
                **all_old,
            )
            for cond, names, values in (
                ("size(#d.#n) = :five", {"#d": "doc", "#n": "name"}, {":five": n(4)}),
                ("size(#d.#n) = :five", {"#d": "doc", "#n": "name"}, {":five": n(5)}),
                ("begins_with(#st, :w)", {"#st": "state"}, {":w": s("wait")}),
                ("begins_with(#st, :w)", {"#st": "state"}, {":w": s("done")}),
                ("contains(doc.a.tags, :t) AND attribute_type(version, :ty)", {}, {":t": s("Y"), ":ty": s("N")}),
                (
                    "NOT (version BETWEEN :lo AND :hi) OR version IN (:a, :b)",
                    {},
                    {":lo": n(1), ":hi": n(2), ":a": n(7), ":b": n(8)},
                ),
                ("attribute_exists(#x) OR size(doc.a.tags) > :z", {"#x": "nothing"}, {":z": n(0)}),
            )
        ],
        # transactions: a cancelled one with reasons and ALL_OLD images, a passing one, idempotency tokens
        transact(
            head_bump(),
            event_put(),
            gate_close(expected="open"),
            release(),
            t_check(
                run,
                "I#new",
                "attribute_exists(a) AND #a = :made",
                ExpressionAttributeNames={"#a": "a"},
                ExpressionAttributeValues={":made": s("made")},
            ),
        ),
        transact(
            head_bump(),
            event_put(),
            gate_close(expected="resolved"),
            release(),
            t_update(
                run,
                "I#audit",
                "SET seq = :seq, pendingSince = if_not_exists(pendingSince, :now)",
                ConditionExpression="attribute_not_exists(seq)",
                ExpressionAttributeValues={":seq": n(1), ":now": n(7)},
            ),
            ClientRequestToken=f"{p}-token-0123456789",
        ),
        transact(
            head_bump(),
            ClientRequestToken=f"{p}-token-0123456789",
        ),
        transact(
            t_update(
                run,
                "I#audit",
                "SET seq = :seq, pendingSince = if_not_exists(pendingSince, :now)",
                ConditionExpression="attribute_not_exists(seq)",
                ExpressionAttributeValues={":seq": n(2), ":now": n(8)},
                **all_old,
            ),
            t_update(run, "I#gate", "SET a = :v SET b = :v", ExpressionAttributeValues={":v": n(1)}),
        ),
        transact(t_update(run, "RUN", "SET doc.a = :v, doc.a.b = :v", ExpressionAttributeValues={":v": n(1)})),
        transact(
            t_update(
                run,
                "RUN",
                "ADD #st :one",
                ExpressionAttributeNames={"#st": "state"},
                ExpressionAttributeValues={":one": n(1)},
            )
        ),
        # reads: a query with a filter (same text, other values), a scan filter, a get
        *[
            (
                "query",
                {
                    "TableName": TABLE,
                    "KeyConditionExpression": "pk = :pk",
                    "FilterExpression": "begins_with(sk, :pre) AND size(sk) > :z",
                    "ExpressionAttributeValues": {":pk": s(run), ":pre": s(pre), ":z": n(1)},
                },
            )
            for pre in ("I#", "E#", "R")
        ],
        (
            "scan",
            {
                "TableName": TABLE,
                "FilterExpression": "attribute_exists(votes) AND contains(votes, :who)",
                "ExpressionAttributeValues": {":who": s("ann")},
            },
        ),
        (
            "get_item",
            {
                "TableName": TABLE,
                "Key": {"pk": s(run), "sk": s("RUN")},
                "ProjectionExpression": "doc.a, #v",
                "ExpressionAttributeNames": {"#v": "version"},
            },
        ),
        # answers carrying items of every attribute type (moto_patches writes an AttributeValue without its alias
        # search): a get, a consistent batch get with a missing key, a query, a put's old image, a cancelled
        # transaction's reason
        ("put_item", {"TableName": TABLE, "Item": every_type}),
        ("get_item", {"TableName": TABLE, "Key": {"pk": s(typed), "sk": s("ALL")}}),
        (
            "batch_get_item",
            {
                "RequestItems": {
                    TABLE: {
                        "Keys": [{"pk": s(typed), "sk": s("ALL")}, {"pk": s(typed), "sk": s("NONE")}, {"pk": s(run), "sk": s("RUN")}],
                        "ConsistentRead": True,
                    }
                }
            },
        ),
        ("query", {"TableName": TABLE, "KeyConditionExpression": "pk = :pk", "ExpressionAttributeValues": {":pk": s(typed)}}),
        ("put_item", {"TableName": TABLE, "Item": {**every_type, "bool": {"BOOL": False}}, "ReturnValues": "ALL_OLD"}),
        transact(t_put(item(typed, "ALL"), ConditionExpression="attribute_not_exists(sk)", **all_old)),
        # items at and past moto's size limit, whole or summed over attributes (moto_patches keeps a running total)
        ("put_item", {"TableName": TABLE, "Item": item(typed, "BIG", a=s("x" * 200_000), b=s("y" * 204_950))}),
        ("put_item", {"TableName": TABLE, "Item": item(typed, "HUGE", a=s("x" * 200_000), b=s("y" * 205_000), c=n(1))}),
        ("put_item", {"TableName": TABLE, "Item": item(typed, "WHOLE", a={"B": b"z" * 405_001})}),
        transact(t_put(item(typed, "HUGE", a=s("x" * 300_000), b={"L": [s("y" * 60_000), s("z" * 60_000)]}))),
        # updates that take an item to moto's size limit and past it, counted in bytes (two per "é"); BIG holds
        # 404,970 bytes in the first pass and 404,971 in the second (moto_patches sizes strings and binaries directly)
        update(typed, "BIG", "SET c = :v", ExpressionAttributeValues={":v": s("é" * 14)}),
        update(typed, "BIG", "SET d = :v", ExpressionAttributeValues={":v": s("é")}),
        update(typed, "BIG", "SET c = :v", ExpressionAttributeValues={":v": {"B": b"\x00" * 30}}),
        transact(t_update(typed, "BIG", "SET e = :v", ExpressionAttributeValues={":v": s("é" * 15)})),
        # a transaction's update reaching into nested maps, lists and sets of the item holding every type, then an entry
        # that fails: the item comes back as it was (moto_patches copies it for the undo without deepcopy); and the
        # same update succeeding, whose stream record's old image is that copy
        transact(
            t_update(
                typed,
                "ALL",
                "SET nested.#l[2].k = :b, nested.#l[1] = :blob, #t = :t ADD strings :ss, numbers :one REMOVE nested.#e",
                ExpressionAttributeNames={"#l": "list", "#e": "empty", "#t": "text"},
                ExpressionAttributeValues={
                    ":b": {"M": {"deep": {"L": [{"B": b"\x04"}, {"BOOL": False}, {"NULL": True}]}}},
                    ":blob": {"B": b"\x05\x06"},
                    ":t": s("changed"),
                    ":ss": {"SS": ["c"]},
                    ":one": {"NS": ["9"]},
                },
            ),
            t_check(typed, "NONE", "attribute_exists(pk)", **all_old),
        ),
        transact(
            t_update(
                typed,
                "ALL",
                "SET nested.#l = list_append(nested.#l, :more), #b = :blob ADD numbers :one",
                ExpressionAttributeNames={"#l": "list", "#b": "blob"},
                ExpressionAttributeValues={":more": {"L": [{"BS": [b"\x07"]}, n(3)]}, ":blob": {"B": b"\x08"}, ":one": {"NS": ["9"]}},
            ),
        ),
        ("get_item", {"TableName": TABLE, "Key": {"pk": s(typed), "sk": s("ALL")}, "ConsistentRead": True}),
        # whole-attribute SETs in transactions (moto_patches applies them itself) and the ones it leaves to moto: a key
        # attribute, an index key set empty, a target named twice, a missing placeholder, a missing item, lower case
        transact(
            t_update(
                typed,
                "ALL",
                "SET #t = :t, plain = :m,bool=:b",
                ExpressionAttributeNames={"#t": "text"},
                ExpressionAttributeValues={
                    ":t": s("set whole"),
                    ":m": {"M": {"l": {"L": [{"B": b"\x09"}, n(1)]}, "s": {"SS": ["q"]}}},
                    ":b": {"BOOL": False},
                },
            ),
            t_check(typed, "ALL", "attribute_exists(pk)"),
        ),
        transact(t_update(typed, "ALL", "SET sk = :v", ExpressionAttributeValues={":v": s("moved")})),
        transact(
            t_update(
                typed, "ALL", "SET #g = :v", ExpressionAttributeNames={"#g": "gsi1pk"}, ExpressionAttributeValues={":v": s("")}
            )
        ),
        transact(t_update(typed, "ALL", "SET gsi1sk = :v", ExpressionAttributeValues={":v": n(1)})),
        transact(t_update(typed, "ALL", "SET a = :v, a = :w", ExpressionAttributeValues={":v": n(1), ":w": n(2)})),
        transact(t_update(typed, "ALL", "SET a = :w", ExpressionAttributeValues={":v": n(1)})),
        transact(t_update(typed, "FRESH", "SET a = :v", ExpressionAttributeValues={":v": n(1)})),
        transact(t_update(typed, "ALL", "set lower = :v", ExpressionAttributeValues={":v": n(1)})),
        # the second assignment passes the size limit: the whole request is refused and the first undone
        transact(
            t_update(typed, "BIG", "SET f = :a, g = :b", ExpressionAttributeValues={":a": s("é"), ":b": s("x" * 40)}),
            t_put(item(typed, "AFTER"), ConditionExpression="attribute_not_exists(sk)"),
        ),
        ("get_item", {"TableName": TABLE, "Key": {"pk": s(typed), "sk": s("BIG")}, "ProjectionExpression": "c, d, f, g"}),
        # numeric ADDs in transactions (moto_patches applies them itself): to a number, to an absent attribute, decimals,
        # several at once; and the ones it leaves to moto: to a string, of a string, a number that is not one
        transact(
            t_update(
                typed,
                "ALL",
                "ADD #n :a, fresh :b, #d :c",
                ExpressionAttributeNames={"#n": "number", "#d": "decimal"},
                ExpressionAttributeValues={":a": n(5), ":b": {"N": "-0.50"}, ":c": {"N": "100"}},
            )
        ),
        transact(t_update(typed, "ALL", "ADD #d :c", ExpressionAttributeNames={"#d": "decimal"}, ExpressionAttributeValues={":c": {"N": "0.75"}})),
        transact(t_update(typed, "ALL", "ADD #t :a", ExpressionAttributeNames={"#t": "text"}, ExpressionAttributeValues={":a": n(1)})),
        transact(t_update(typed, "ALL", "ADD extra :a", ExpressionAttributeValues={":a": s("x")})),
        transact(t_update(typed, "ALL", "ADD odd :a", ExpressionAttributeValues={":a": {"N": "one"}})),
        ("get_item", {"TableName": TABLE, "Key": {"pk": s(typed), "sk": s("ALL")}, "ProjectionExpression": "#n, fresh, #d, odd, extra", "ExpressionAttributeNames": {"#n": "number", "#d": "decimal"}}),
    ]


def answer(client: Any, method: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    try:
        got = getattr(client, method)(**kwargs)
    except ClientError as error:
        body = error.response
        return {
            "error": body["Error"].get("Code"),
            "message": body["Error"].get("Message"),
            "reasons": body.get("CancellationReasons"),
        }
    except Exception as error:  # noqa: BLE001 - moto raises some refusals in-process (e.g. KeyError); compared too
        return {"raised": type(error).__name__, "message": str(error)}
    got.pop("ResponseMetadata", None)
    return {"ok": got}


def image_operations(p: str) -> list[tuple[str, dict[str, Any]]]:
    """Updates in transactions on a table whose stream records carry the old image too."""
    key = {"id": s(f"{p}#img")}
    return [
        ("put_item", {"TableName": IMAGES, "Item": {**key, "st": s("open"), "m": {"M": {"a": {"L": [n(1)]}}}, "b": {"B": b"\x01"}}}),
        (
            "transact_write_items",
            {
                "TransactItems": [
                    {
                        "Update": {
                            "TableName": IMAGES,
                            "Key": key,
                            "UpdateExpression": "SET #st = :done, note = :note",
                            "ConditionExpression": "#st = :open",
                            "ExpressionAttributeNames": {"#st": "st"},
                            "ExpressionAttributeValues": {":done": s("done"), ":note": {"B": b"\x02"}, ":open": s("open")},
                        }
                    }
                ]
            },
        ),
        (
            "transact_write_items",
            {
                "TransactItems": [
                    {
                        "Update": {
                            "TableName": IMAGES,
                            "Key": key,
                            "UpdateExpression": "SET m.a = list_append(m.a, :more) ADD c :one",
                            "ExpressionAttributeValues": {":more": {"L": [n(2)]}, ":one": n(1)},
                        }
                    }
                ]
            },
        ),
    ]


def later_change_operations(p: str) -> list[tuple[str, dict[str, Any]]]:
    """Items changed after a stream record names them: a put, then an update changing a nested value in place, a
    transaction's whole-attribute SET and numeric ADD, another nested update, an update creating its item, and a
    transaction cancelled after its SET; the records are read only at the end, so each image must be the item as it
    was when the record was made."""
    key = {"id": s(f"{p}#later")}
    created = {"id": s(f"{p}#created")}

    def t_images_update(expression: str, values: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {"Update": {"TableName": IMAGES, "Key": key, "UpdateExpression": expression,
                           "ExpressionAttributeValues": values, **extra}}

    return [
        ("put_item", {"TableName": IMAGES, "Item": {**key, "st": s("open"), "c": n(1), "m": {"M": {"a": {"L": [n(1)]}}}}}),
        ("update_item", {"TableName": IMAGES, "Key": key, "UpdateExpression": "SET m.a = list_append(m.a, :more)",
                         "ExpressionAttributeValues": {":more": {"L": [n(2)]}}}),
        ("transact_write_items", {"TransactItems": [t_images_update("SET st = :st, note = :note",
                                                                    {":st": s("closed"), ":note": s("x")})]}),
        ("transact_write_items", {"TransactItems": [t_images_update("ADD c :one", {":one": n(1)})]}),
        ("update_item", {"TableName": IMAGES, "Key": key, "UpdateExpression": "SET m.b = :b ADD c :one",
                         "ExpressionAttributeValues": {":b": s("nested"), ":one": n(1)}}),
        ("update_item", {"TableName": IMAGES, "Key": created, "UpdateExpression": "SET m = :m, st = :st",
                         "ExpressionAttributeValues": {":m": {"M": {"a": n(1)}}, ":st": s("new")}}),
        ("update_item", {"TableName": IMAGES, "Key": created, "UpdateExpression": "SET m.a = :two",
                         "ExpressionAttributeValues": {":two": n(2)}}),
        (
            "transact_write_items",
            {
                "TransactItems": [
                    t_images_update("SET st = :st", {":st": s("reopened")}),
                    {"ConditionCheck": {"TableName": IMAGES, "Key": created, "ConditionExpression": "st = :old",
                                        "ExpressionAttributeValues": {":old": s("old")}}},
                ]
            },
        ),
        ("get_item", {"TableName": IMAGES, "Key": key}),
        # The size limit counts the attribute being replaced until it is replaced: the same large value again is
        # refused, a small one then leaves room for another large attribute.
        ("put_item", {"TableName": IMAGES, "Item": {**created, "big": s("b" * 250_000)}}),
        ("transact_write_items", {"TransactItems": [{"Update": {
            "TableName": IMAGES, "Key": created, "UpdateExpression": "SET big = :big",
            "ExpressionAttributeValues": {":big": s("c" * 250_000)}}}]}),
        ("transact_write_items", {"TransactItems": [{"Update": {
            "TableName": IMAGES, "Key": created, "UpdateExpression": "SET big = :small, spare = :big",
            "ExpressionAttributeValues": {":small": s("s"), ":big": s("c" * 250_000)}}}]}),
        ("update_item", {"TableName": IMAGES, "Key": key, "UpdateExpression": "SET m.a[0] = :zero",
                         "ExpressionAttributeValues": {":zero": n(0)}, "ReturnValues": "ALL_OLD"}),
    ]


def stream_records(client: Any, table: str = TABLE) -> list[dict[str, Any]]:
    streams = boto3.client("dynamodbstreams")
    arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")[
        "ShardIterator"
    ]
    records = []
    while iterator:
        got = streams.get_records(ShardIterator=iterator, Limit=1000)
        if not got["Records"]:
            break
        records += got["Records"]
        iterator = got.get("NextShardIterator")
    for record in records:
        record.pop("eventID", None)
        # The creation time, and the record's size, which moto counts with the time's text in it (whose length varies).
        record["dynamodb"].pop("ApproximateCreationDateTime", None)
        record["dynamodb"].pop("SizeBytes", None)
    return records


def sizes_as_counted(table: str = TABLE) -> list[bool]:
    """Whether each record's SizeBytes is what moto counts when it makes the record (its "dynamodb" part serialised
    with SizeBytes 1); compared apart from the records, whose creation times differ between runs."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.utilities import dynamo_json_dump

    shard = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_table(table).stream_shard
    counted = []
    for record in shard.items:
        part = record.to_json()["dynamodb"]
        counted.append(part["SizeBytes"] == len(dynamo_json_dump({**part, "SizeBytes": 1})))
    return counted


QUEUE_TIMES = ("SentTimestamp", "ApproximateFirstReceiveTimestamp", "CreatedTimestamp", "LastModifiedTimestamp")


class SqsAnswers:
    """Answers of SQS calls, each message id and receipt handle named by when it first appeared (moto draws them at
    random) and the clock's times left out."""

    def __init__(self) -> None:
        self.client = boto3.client("sqs")
        self.names: dict[str, str] = {}
        self.answers: list[Any] = []

    def call(self, method: str, **kwargs: Any) -> dict[str, Any]:
        got = answer(self.client, method, kwargs)
        self.answers.append(self._named(got))
        return got.get("ok", {})

    def _named(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self._name(v) if k in ("MessageId", "ReceiptHandle") else self._named(v)
                    for k, v in value.items() if k not in QUEUE_TIMES}
        if isinstance(value, list):
            return [self._named(v) for v in value]
        return value

    def _name(self, value: str) -> str:
        return self.names.setdefault(value, f"#{len(self.names)}")


def sqs_scenario() -> list[Any]:
    """Sends, receives (some past the redrive policy's count), visibility changes and deletes, with valid, earlier,
    deleted and unknown receipt handles, and the queue's attributes between them."""
    sqs = SqsAnswers()
    dlq = sqs.call("create_queue", QueueName="scenario-dlq")["QueueUrl"]
    dlq_arn = sqs.client.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2})
    url = sqs.call("create_queue", QueueName="scenario", Attributes={"VisibilityTimeout": "30", "RedrivePolicy": redrive})[
        "QueueUrl"
    ]
    sqs.call("create_queue", QueueName="scenario", Attributes={"VisibilityTimeout": "31"})
    entries = [{"Id": str(i), "MessageBody": f"m{i}", "MessageGroupId": f"g{i % 3}"} for i in range(8)]
    sqs.call("send_message_batch", QueueUrl=url, Entries=entries)
    sqs.call("send_message", QueueUrl=url, MessageBody="later", DelaySeconds=600)
    everything = ["MessageGroupId", "ApproximateReceiveCount", "SenderId"]
    for names in (["All"], ["MessageRetentionPeriod", "RedrivePolicy"], ["ApproximateNumberOfMessages"], ["Nope"]):
        sqs.call("get_queue_attributes", QueueUrl=url, AttributeNames=names)
    first = sqs.call("receive_message", QueueUrl=url, MaxNumberOfMessages=3, MessageSystemAttributeNames=everything)
    handles = [m["ReceiptHandle"] for m in first["Messages"]]
    again = sqs.call("receive_message", QueueUrl=url, MaxNumberOfMessages=2, VisibilityTimeout=0)
    sqs.call("receive_message", QueueUrl=url, MaxNumberOfMessages=2, VisibilityTimeout=0)  # the same two again
    earlier = [m["ReceiptHandle"] for m in again["Messages"]]
    sqs.call("get_queue_attributes", QueueUrl=url, AttributeNames=["All"])
    sqs.call("change_message_visibility", QueueUrl=url, ReceiptHandle=handles[0], VisibilityTimeout=0)
    sqs.call("change_message_visibility", QueueUrl=url, ReceiptHandle=earlier[0], VisibilityTimeout=0)
    sqs.call("change_message_visibility", QueueUrl=url, ReceiptHandle=handles[1], VisibilityTimeout=43201)
    sqs.call("change_message_visibility", QueueUrl=url, ReceiptHandle="unknown", VisibilityTimeout=0)
    batch = [{"Id": "a", "ReceiptHandle": handles[1], "VisibilityTimeout": 0}, {"Id": "b", "ReceiptHandle": "x", "VisibilityTimeout": 0}]
    sqs.call("change_message_visibility_batch", QueueUrl=url, Entries=batch)
    sqs.call("delete_message", QueueUrl=url, ReceiptHandle=handles[2])
    sqs.call("delete_message", QueueUrl=url, ReceiptHandle=handles[2])  # deleted already: accepted again
    sqs.call("delete_message", QueueUrl=url, ReceiptHandle=earlier[1])  # an earlier handle of a message received since
    sqs.call("delete_message", QueueUrl=url, ReceiptHandle="unknown")
    # the message received twice goes to the dead letters instead
    rest = sqs.call("receive_message", QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=everything)
    entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(rest["Messages"])]
    sqs.call("delete_message_batch", QueueUrl=url, Entries=[*entries, {"Id": "gone", "ReceiptHandle": "unknown"}])
    sqs.call("receive_message", QueueUrl=dlq, MaxNumberOfMessages=10, MessageSystemAttributeNames=everything)
    for queue in (url, dlq):
        sqs.call("get_queue_attributes", QueueUrl=queue, AttributeNames=["All"])
    return sqs.answers


def paged_scans(client: Any, table: str) -> list[Any]:
    """The table scanned in pages of a few items (each page's answer, its LastEvaluatedKey the next one's start), with
    and without a filter and a projection, and a page starting at a key no item has."""
    pages: list[Any] = []
    for extra in ({"Limit": 3}, {"Limit": 4, "FilterExpression": "attribute_exists(events)", "ProjectionExpression": "pk, sk"}):
        start: dict[str, Any] | None = None
        while True:
            got = answer(client, "scan", {"TableName": table, **extra, **({"ExclusiveStartKey": start} if start else {})})
            pages.append(got)
            start = got.get("ok", {}).get("LastEvaluatedKey")
            if not start:
                break
    absent = {"pk": s("first#m"), "sk": s("zz")} if table == TABLE else {"id": s("first#m")}
    pages.append(answer(client, "scan", {"TableName": table, "Limit": 5, "ExclusiveStartKey": absent}))
    return pages


def scenarios() -> dict[str, Any]:
    with mock_aws():
        client = boto3.client("dynamodb")
        from interlude.store.provisioning import create_table

        create_table(client, TABLE)
        client.create_table(
            TableName=FLAT,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        )
        client.create_table(
            TableName=IMAGES,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        answers = [answer(client, method, kwargs) for p in ("first", "second") for method, kwargs in operations(p)]
        answers += [answer(client, method, kwargs) for p in ("first", "second") for method, kwargs in image_operations(p)]
        answers += [
            answer(client, method, kwargs) for p in ("first", "second") for method, kwargs in later_change_operations(p)
        ]
        table = sorted(client.scan(TableName=TABLE)["Items"], key=lambda i: (i["pk"]["S"], i["sk"]["S"]))
        flat = sorted(client.scan(TableName=FLAT)["Items"], key=lambda i: i["id"]["S"])
        return {
            "answers": answers,
            "table": table,
            "flat": flat,
            "stream": stream_records(client),
            "images stream": stream_records(client, IMAGES),
            "sizes counted as at creation": sizes_as_counted(),
            "images sizes counted as at creation": sizes_as_counted(IMAGES),
            "sqs": sqs_scenario(),
            "paged scans": paged_scans(client, TABLE) + paged_scans(client, FLAT),
        }


if __name__ == "__main__":
    if "--patched" in sys.argv:
        from interlude.local import moto_patches

        moto_patches.apply()
    json.dump(scenarios(), sys.stdout, default=repr, sort_keys=True)
