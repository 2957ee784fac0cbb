"""`{{node_id.field}}` and `{{inputs.x}}` references, resolved against run state.

A string that is exactly one reference takes the referenced value as is (a number stays a number);
references embedded in longer text are rendered as text (JSON for objects). A reference that has no value when
it is rendered (a step not reached yet, a branch not taken, an optional field or input left out) is null as a
whole value and empty text inside longer text: never the raw `{{…}}`, which a person would read. A reference to
a step or field that does not exist at all is refused when the definition is registered (engine/references.py).
Only registration's probe of a gate (a scope holding PROBE) keeps references as written, to check the shape of
what the gate would ask.

Rendering spends from a budgets.Meter before it builds each piece, so a template that multiplies what it
references stops at the budget (BudgetExceeded) instead of building the whole output first.
"""

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from interlude.domain.budgets import Meter

REFERENCE_RE = re.compile(r"\{\{\s*([A-Za-z0-9._~:-]+(?:\.[A-Za-z0-9_~:-]+)*)\s*\}\}")
MISSING = object()
# The key of a scope that probes a node at registration (engine.run.check_config): no run, no values.
PROBE = "$probe"
Lookup = Callable[[str, Mapping[str, Any]], Any]


class Dialect(NamedTuple):
    """How a face writes references, for registration to find and check them (engine/references.py)."""

    pattern: re.Pattern[str]
    # A node id as the author wrote it -> the node's id on the engine.
    to_id: Callable[[str], str]
    # The heads that name the run's inputs.
    input_heads: tuple[str, ...]
    # Whether the fields a reference reads are checked against what its step outputs (a face whose outputs are
    # free-form checks the step only).
    fields_checked: bool = True


OPENWOP = Dialect(REFERENCE_RE, str, ("inputs",))


def walk(value: Any, parts: list[str]) -> Any:
    """Follow field names and list indexes into a value; MISSING where the path leaves it."""
    for part in parts:
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return MISSING
    return value


def lookup(path: str, scope: Mapping[str, Any]) -> Any:
    """Walk `a.b.c` through scope; node ids may contain dots, so try the longest head first."""
    parts = path.split(".")
    for head_len in range(len(parts), 0, -1):
        head = ".".join(parts[:head_len])
        if head in scope:
            found = walk(scope[head], parts[head_len:])
            if found is not MISSING:
                return found
    return MISSING


def as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    # Text a person reads: "zoë", never "zo\u00eb".
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False)


def render(
    template: Any,
    scope: Mapping[str, Any],
    find: Lookup = lookup,
    pattern: re.Pattern[str] = REFERENCE_RE,
    meter: Meter | None = None,
) -> Any:
    """Resolve references in a string, or recursively in lists and objects, within `meter` (a fresh
    budgets.MAX_VALUE_BYTES one if none is given); raises budgets.BudgetExceeded once the result would pass it."""
    meter = meter if meter is not None else Meter()
    if isinstance(template, str):
        probing = bool(scope.get(PROBE))
        whole = pattern.fullmatch(template.strip())
        if whole:
            value = find(whole.group(1), scope)
            if value is MISSING:
                value = template if probing else None
            meter.spend_value(value)
            return value
        # The literal text once (references included, refunded as they are replaced); then each value before
        # its text is made.
        meter.spend(len(template))

        def substitute(m: re.Match[str]) -> str:
            value = find(m.group(1), scope)
            if value is MISSING and probing:
                return m.group(0)
            meter.spent -= len(m.group(0))
            if value is MISSING:
                return ""
            if isinstance(value, str):
                meter.spend(len(value))
            else:
                meter.spend_value(value)
            return as_text(value)

        return pattern.sub(substitute, template)
    if isinstance(template, list):
        meter.spend(2 + len(template))
        return [render(item, scope, find, pattern, meter) for item in template]
    if isinstance(template, dict):
        meter.spend(2 + sum(len(key) + 4 for key in template))
        return {key: render(value, scope, find, pattern, meter) for key, value in template.items()}
    meter.spend_value(template)
    return template


def references(template: Any) -> list[str]:
    if isinstance(template, str):
        return REFERENCE_RE.findall(template)
    if isinstance(template, list):
        return [ref for item in template for ref in references(item)]
    if isinstance(template, dict):
        return [ref for value in template.values() for ref in references(value)]
    return []


def referenced_nodes(
    template: Any, node_ids: set[str], pattern: re.Pattern[str] = REFERENCE_RE, to_id: Callable[[str], str] = str
) -> list[str]:
    """The node each reference in `template` reads, once per reference: the longest head of its path that names
    one of `node_ids` once mapped by `to_id` (node ids may contain dots). Walks without recursion."""
    found: list[str] = []
    stack = [template]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            for path in pattern.findall(item):
                parts = path.split(".")
                heads = (to_id(".".join(parts[:n])) for n in range(len(parts), 0, -1))
                named = next((head for head in heads if head in node_ids), None)
                if named is not None:
                    found.append(named)
    return found
