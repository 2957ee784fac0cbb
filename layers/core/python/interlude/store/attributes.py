"""DynamoDB attribute values, written by hand for the low-level client (no Decimal round trips)."""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Mapping
from typing import Any

from interlude import wiring

Item = dict[str, dict[str, Any]]


def s(value: str) -> dict[str, str]:
    return {"S": value}


def n(value: int | float) -> dict[str, str]:
    return {"N": str(value)}


def integer(item: Mapping[str, Any], name: str) -> int | None:
    """A low-level item's whole-number attribute; None where it has none."""
    value = item.get(name)
    return int(value["N"]) if value and "N" in value else None


def key(pk: str, sk: str) -> Item:
    """An item's primary key: its partition and sort key, as the table declares them."""
    return {wiring.PARTITION_KEY: s(pk), wiring.SORT_KEY: s(sk)}


# What json.dumps(value, separators=(",", ":"), allow_nan=False) makes, without an encoder per call. Keys stay in the
# order they were written: a definition's, an artifact's and a form's fields are read back in their author's order
# (issue 28; items written sorted before that read back sorted).
_COMPACT = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def as_json(value: Any) -> dict[str, str]:
    return {"S": _COMPACT.encode(value)}


def plain(item: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A low-level item as plain Python: numbers become int or float, packed documents are unpacked."""
    out: dict[str, Any] = {}
    for name, typed in item.items():
        ((kind, value),) = typed.items()
        if kind == "N":
            out[name] = int(value) if value.lstrip("-").isdigit() else float(value)
        elif kind == "B":
            out[name] = unpacked(typed)
        else:
            out[name] = value
    return out


def packed(value: Any) -> dict[str, bytes]:
    """Compact JSON, deflated, as a binary attribute: the large documents (run state, event batches,
    interrupt payloads) shrink about threefold, and DynamoDB bills writes per started kilobyte, twice
    inside a transaction."""
    return packed_json(compact(value))


def compact(value: Any) -> bytes:
    """The compact JSON `packed` deflates."""
    return _COMPACT.encode(value).encode()


def packed_against(value: Any, dictionary: bytes) -> dict[str, str]:
    """Compact JSON deflated against `dictionary` (zlib's preset dictionary): what the value repeats of it costs a few
    bytes (an audit draft against the events it records: ≈ 140 B instead of ≈ 350). A string (base64), not a binary
    attribute: every binary attribute reads as `packed` alone (`plain`), which this is not. Read with
    `unpacked_against` and the same dictionary."""
    return {"S": base64.b64encode(deflated(compact(value), dictionary)).decode("ascii")}


def unpacked_against(attribute: Mapping[str, Any], dictionary: bytes) -> Any:
    inflater = zlib.decompressobj(zdict=dictionary)
    raw = base64.b64decode(attribute["S"])
    return json.loads(inflater.decompress(raw) + inflater.flush())


def packed_json(raw: bytes) -> dict[str, bytes]:
    """`packed` for a document already serialised (the run state: domain/models/run.state_json)."""
    return {"B": deflated(raw)}


# zlib's memory level for a document of up to _SMALL_DOCUMENT bytes (a hash table of 8 K entries, 16 KB, where the
# default level 8 clears 64 KB before every document), with the default's output on such documents (the run state,
# event batches, inbox keys; 4 and 5 lose a byte or two on 1 % of them); larger ones keep the default (docs/adr/0138).
_SMALL_DOCUMENT = 4096
_SMALL_MEM_LEVEL = 6


def deflated(raw: bytes, dictionary: bytes | None = None) -> bytes:
    """`raw` deflated at level 6 in a zlib stream (what zlib.decompress reads) whose window is fitted to what it can
    refer back to, the document and `dictionary`, up to zlib's 32 KB: zlib clears and fills its window and hash table
    before every document, which cost more than deflating a document of a kilobyte (docs/adr/0138)."""
    reach = len(raw) + (len(dictionary) if dictionary else 0)
    window = min(zlib.MAX_WBITS, max(9, reach.bit_length() + 1))
    memory = _SMALL_MEM_LEVEL if reach <= _SMALL_DOCUMENT else zlib.DEF_MEM_LEVEL
    if dictionary:
        packer = zlib.compressobj(6, zlib.DEFLATED, window, memory, zdict=dictionary)
    else:
        packer = zlib.compressobj(6, zlib.DEFLATED, window, memory)
    return packer.compress(raw) + packer.flush()


def unpacked_json(attribute: Mapping[str, Any]) -> bytes | str:
    """A `packed` attribute's JSON text (bytes from boto3, base64 text in a Lambda stream event, or a JSON string),
    not parsed (for a parser of the caller's choosing)."""
    if "S" in attribute:
        return str(attribute["S"])
    raw = attribute["B"]
    if isinstance(raw, str):
        raw = base64.b64decode(raw)
    return zlib.decompress(raw)


def unpacked(attribute: Mapping[str, Any]) -> Any:
    """Read a `packed` attribute (bytes from boto3, base64 text in a Lambda stream event) or a JSON string."""
    return json.loads(unpacked_json(attribute))


def billed_size(item: Mapping[str, Mapping[str, Any]]) -> int:
    """`item`'s size as DynamoDB bills a write of it: each attribute's name and value (a number by its digits, two to a
    byte, plus one; a map's and a list's 3 bytes and 1 per element besides their contents)."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def billed_units(size: int) -> int:
    """The units a plain write of an item of `size` bytes costs (one per started KB, at least one)."""
    return max(1, -(-size // 1024))


def _value_size(value: Mapping[str, Any]) -> int:
    ((kind, v),) = value.items()
    if kind == "S":
        return len(v.encode("utf-8", "surrogatepass"))
    if kind == "B":
        return len(v)
    if kind == "N":
        digits = v.lstrip("-").replace(".", "").lstrip("0").split("e")[0].split("E")[0]
        return (len(digits) + 1) // 2 + 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + _value_size(x) + 1 for k, x in v.items())
    if kind == "L":
        return 3 + sum(_value_size(x) + 1 for x in v)
    if kind in ("SS", "NS", "BS"):
        return sum(len(x) if isinstance(x, bytes) else len(str(x).encode()) for x in v)
    return 1  # BOOL, NULL


def only_transaction_conflicts(exc: Exception) -> bool:
    """Whether a cancelled TransactWriteItems met only other transactions under way on its items: nothing was written,
    and the same transaction may be tried again as it is."""
    response = getattr(exc, "response", None) or {}
    codes = {r.get("Code") for r in response.get("CancellationReasons") or []} - {"None", None}
    return (response.get("Error") or {}).get("Code") == "TransactionCanceledException" and codes == {"TransactionConflict"}


def first_condition_failed(exc: Exception) -> bool:
    """Whether a cancelled TransactWriteItems failed on its first item's condition (its caller's check of what it
    read): nothing was written, and the caller's view is stale."""
    response = getattr(exc, "response", None) or {}
    reasons = response.get("CancellationReasons") or []
    return bool(reasons) and reasons[0].get("Code") == "ConditionalCheckFailed"
