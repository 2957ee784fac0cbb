"""ModuleX conditionals' expressions: the engine's language (interlude.engine.expressions, where the grammar is)
with names read as ModuleX references read them (`node_id.field`, `input.x`, a bare field of the run input)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from interlude.engine import expressions
from interlude.engine.expressions import ExpressionError as ExpressionError
from interlude.engine.expressions import Node
from interlude.engine.expressions import compare as compare
from interlude.engine.expressions import compile_expression as compile_expression
from interlude.engine.expressions import contains as contains
from interlude.engine.expressions import truthy as truthy
from interlude.faces.modulex.references import lookup


def evaluate(node: Node, scope: Mapping[str, Any]) -> Any:
    return expressions.evaluate(node, scope, lookup)
