"""Edge conditions (OpenWOP's `EdgeCondition`): whether an edge carries its source's outcome to its target. Pure.

An edge with a `condition` counts its source for its target only when the condition holds for the outcome the
source settled with (completed or failed); otherwise the source counts as skipped there, exactly as a routing
node's branch not taken (engine/run.py, `routes_of`), and the trigger rules decide the rest. So an approval gate
sends `refine` back to the step that drafts (`action == 'refine'`), lets `accept` and `edit-accept` go on, and a
rejection (a failed gate, over an `any_failed` edge) to whoever handles it, each by its own edge.

What a condition reads, its *context*: the source's output fields by name (an approval's `action`, `decision`,
`comment`, `decidedBy`, `reason`, `refineFeedback`, `editedArtifactData`: domain/outcomes.py; a transform's own
fields), `output` (the whole output, also when it is not an object: `output.total` reaches a field named like the
two reserved words) and `status` (`completed` or `failed`).

Types (`type`; absent with an `expression`: `expression`):
* `equals` / `notEquals`: the value at the path `left` is (is not) `right`, as JSON values (true is not 1; a path
  that leads nowhere is null);
* `contains`: the value at `left` is a string holding the string `right`, a list holding an element equal to it, or
  an object with that key;
* `truthy` / `falsy`: the value at `left` is truthy (falsy) as JavaScript says (RFC 0134): false, null, a path that
  leads nowhere, 0, NaN and "" are falsy, everything else, [] and {} too, truthy; `right` is ignored;
* `expression`: `expression`, in the language of engine/expressions.py (its grammar is there), is true;
* `regex` is refused at registration: Python's regular expressions backtrack, and some patterns take time
  exponential in the text they read, so no bound on a condition's cost would hold (use `contains`, `equals` or an
  expression).

Checked at registration (`problems`): a type the condition can be evaluated by, its operands, an expression that
parses, and every name it reads (`left`'s head, an expression's names) one the source can output, when its node
type says what it outputs (engine/nodetypes.py, NodeType.fields). Cost: one lookup of a path of at most 256
characters, or one expression within engine/expressions.py's bounds.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

from interlude.domain.budgets import BudgetExceeded
from interlude.domain.models.workflow import EdgeCondition
from interlude.domain.templates import MISSING, lookup
from interlude.engine.expressions import (
    ExpressionError,
    Node,
    compare,
    compile_expression,
    contains,
    evaluate,
    names_in,
)
from interlude.engine.expressions import truthy as expression_truthy

RESERVED = ("output", "status")
KINDS = ("expression", "equals", "notEquals", "contains", "truthy", "falsy")


def condition_context(status: str, output: Any) -> dict[str, Any]:
    fields = dict(output) if isinstance(output, Mapping) else {}
    return {**fields, "output": output, "status": status}


@functools.lru_cache(maxsize=512)
def _compiled(text: str) -> Node:
    return compile_expression(text)


def js_truthy(value: Any) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, int | float):
        return value != 0 and not (isinstance(value, float) and math.isnan(value))
    if isinstance(value, str):
        return value != ""
    return True


def holds(condition: EdgeCondition, context: Mapping[str, Any]) -> bool:
    """Whether `condition` holds for a source's outcome (`context`: condition_context). Never raises: a registered
    condition is well formed, and one whose evaluation would pass the value budget does not hold."""
    kind = condition.kind
    if kind == "expression":
        try:
            return expression_truthy(evaluate(_compiled(condition.expression or ""), context))
        except (BudgetExceeded, ExpressionError):
            return False
    found = lookup(condition.left or "", context)
    value = None if found is MISSING else found
    if kind in ("equals", "notEquals"):
        return bool(compare("==", value, condition.right)) == (kind == "equals")
    if kind == "contains":
        return contains(value, condition.right)
    if kind in ("truthy", "falsy"):
        return js_truthy(value) == (kind == "truthy")
    return False  # regex, or no type: refused at registration


def problems(condition: EdgeCondition, fields: frozenset[str] | None, source: str) -> list[tuple[str, str]]:
    """(path under the condition, message) for what keeps `condition` from being evaluated, or reads what its source
    `source` (whose output `fields`, None: not known before it runs) cannot hold."""
    kind = condition.kind
    if kind == "regex":
        return [
            (
                "type",
                "regex conditions are not offered by this host: Python's regular expressions can take time "
                "exponential in the text they read, so a condition's cost could not be bounded; use contains, equals "
                "or an expression",
            )
        ]
    if kind is None:
        return [("type", f"a condition needs a type ({', '.join(KINDS)}), or an expression")]
    if kind == "expression":
        if condition.expression is None:
            return [("expression", "type expression needs an expression")]
        try:
            names = names_in(_compiled(condition.expression))
        except ExpressionError as exc:
            return [("expression", f"the expression does not parse: {exc}")]
        return [("expression", message) for name in names if (message := _unknown(name, fields, source))]
    if condition.left is None:
        return [("left", f"type {kind} needs left, the path of what it tests (e.g. action)")]
    message = _unknown(condition.left, fields, source)
    return [("left", message)] if message else []


def _unknown(path: str, fields: frozenset[str] | None, source: str) -> str | None:
    """Why `path` reads nothing `source` can output (None: it may)."""
    parts = path.split(".")
    if parts[0] in RESERVED:
        if parts[0] == "status" or len(parts) == 1:
            return None
        parts = parts[1:]
    if fields is None or any(".".join(parts[:n]) in fields for n in range(len(parts), 0, -1)):
        return None
    known = ", ".join(sorted(fields)) or "nothing"
    return f"reads {parts[0]!r}, which step {source!r} does not output (it outputs: {known}; also output, status)"
