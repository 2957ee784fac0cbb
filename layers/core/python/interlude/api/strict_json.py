"""Strict JSON decoding for everything a caller sends (RFC 8259 as interoperable parsers read it, I-JSON's
number range): what Python's `json` admits but JavaScript or Go refuse never gets past the edge.

Refused, each naming the field (a `/`-joined path into the document, `body` for the whole):
* `NaN`, `Infinity`, `-Infinity` (not JSON at all) and numbers outside an IEEE 754 double (`1e400`, a 400-digit
  integer), which Python would read as `inf` or keep as a big integer that no JSON peer can represent;
* an object naming a key twice (which value wins differs between parsers);
* nesting deeper than `max_depth` and strings that are not valid Unicode (a lone surrogate escaped as `\\ud800`),
  which nothing downstream can store.
"""

import json
import math
import sys
from typing import Any, NamedTuple

# The largest magnitude a JSON number may have: what an IEEE 754 double holds (RFC 7493 I-JSON, section 2.2).
MAX_NUMBER = sys.float_info.max
# Deep enough for any real document; shallow enough that copying and serialising never recurses out.
MAX_DEPTH = 64


class StrictJsonError(ValueError):
    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class _BadNumber(NamedTuple):
    text: str


class _DuplicateKeys(dict[str, Any]):
    """An object that named `key` twice (kept as a value so the walk can say where)."""

    key: str = ""


def _number(text: str) -> Any:
    value = float(text)
    return value if math.isfinite(value) else _BadNumber(text)


def _integer(text: str) -> Any:
    # Longer than any double's integer part: refused without converting (a 5000-digit integer costs time).
    if len(text.lstrip("-")) > 309:
        return _BadNumber(text[:24] + "…")
    value = int(text)
    return value if abs(value) <= MAX_NUMBER else _BadNumber(text[:24] + "…")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for key, item in pairs:
        if key in value:
            duplicate = _DuplicateKeys(pairs)
            duplicate.key = key
            return duplicate
        value[key] = item
    return value


def _where(path: list[str]) -> str:
    return "/".join(path) or "body"


def _check(value: Any, path: list[str], max_depth: int) -> None:
    if len(path) > max_depth:
        raise StrictJsonError(f"the body nests deeper than {max_depth} levels", _where(path))
    if isinstance(value, str):
        _check_text(value, path)
    elif isinstance(value, _BadNumber):
        raise StrictJsonError(
            f"{_where(path)}: {value.text} is not a JSON number a peer can read (finite, within ±{MAX_NUMBER:.6g})",
            _where(path),
        )
    elif isinstance(value, _DuplicateKeys):
        raise StrictJsonError(f"{_where(path)}: the key {value.key!r} appears more than once", _where(path))
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_text(key, [*path, key])
            _check(item, [*path, key], max_depth)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check(item, [*path, str(index)], max_depth)


def _check_text(text: str, path: list[str]) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        where = _where([p.encode("utf-8", "backslashreplace").decode() for p in path])
        raise StrictJsonError(f"{where}: a string that is not valid Unicode", where) from None


def loads(raw: str, max_depth: int = MAX_DEPTH) -> Any:
    """`raw` as a JSON value, or StrictJsonError naming what is wrong and where."""
    try:
        value = json.loads(
            raw, parse_constant=_BadNumber, parse_float=_number, parse_int=_integer, object_pairs_hook=_object
        )
    except RecursionError:
        raise StrictJsonError(f"the body nests deeper than {max_depth} levels", "body") from None
    except ValueError as exc:
        raise StrictJsonError(f"the body is not valid JSON: {exc}", "body") from None
    _check(value, [], max_depth)
    return value
