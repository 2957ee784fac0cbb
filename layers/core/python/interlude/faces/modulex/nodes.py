"""What the ModuleX node types Interlude runs do, as pure functions over run state.

The engine registers them (engine/nodetypes.py) as `modulex.interrupt`, `modulex.conditional` and
`modulex.transformer`; interlude.faces.modulex.definition translates a ModuleX definition onto them. Config
references keep their ModuleX spelling (`{{node_draft.subject}}`, `{{input.request}}`).
"""


import copy
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Literal, get_args

from pydantic import Field

from interlude.domain.budgets import Meter
from interlude.domain.ids import MODULEX_INTERRUPT_KIND
from interlude.domain.models import FieldLabels, FrozenStored, new_list
from interlude.domain.templates import referenced_nodes
from interlude.faces.modulex.expressions import ExpressionError, compare, compile_expression, contains, evaluate, truthy
from interlude.faces.modulex.references import MISSING, REFERENCE, engine_id, lookup, render

END = "__end__"
END_TARGETS = frozenset({"__end__", "END", "end"})
CUSTOM_KIND = MODULEX_INTERRUPT_KIND


# -- interrupt -------------------------------------------------------------------------------------


class InterruptConfig(FrozenStored):
    message: str = ""  # may be empty (InterruptNodeConfig.message has no minimum length)
    resume_schema: dict[str, Any] | None = None
    examples: Any = None
    data_keys: list[str] = Field(default_factory=new_list)  # deprecated: state keys snapshotted into `data`
    # Interlude's own: what a person reads for each field of its form and its data (a gate's fieldLabels).
    field_labels: FieldLabels = Field(default_factory=dict)
    # Interlude's own: whom the interrupt asks ({subjects, groups, roles}), notified as an approval's recipients are.
    audience: dict[str, list[str]] | None = None


def interrupt_data(node_id: str, cfg: InterruptConfig, scope: Mapping[str, Any]) -> dict[str, Any]:
    """The `custom` interrupt data: message resolved now, schema and examples verbatim (never enforced)."""
    meter = Meter(what="the interrupt's data")
    snapshot: dict[str, Any] = {}
    for key in cfg.data_keys:
        value = lookup(key, scope)
        if value is not MISSING:
            meter.spend_value(value)  # before copying it
            snapshot[key] = copy.deepcopy(value)
    payload: dict[str, Any] = {"message": render(cfg.message, scope, meter), "data": snapshot}
    if cfg.resume_schema is not None:
        payload["resume_schema"] = cfg.resume_schema
    if cfg.examples is not None:
        payload["examples"] = cfg.examples
    return {"customKind": CUSTOM_KIND, "payload": payload}


# -- conditional -----------------------------------------------------------------------------------

OPERATORS = {
    "equals": "==",
    "eq": "==",
    "==": "==",
    "not_equals": "!=",
    "neq": "!=",
    "!=": "!=",
    "greater_than": ">",
    "gt": ">",
    ">": ">",
    "less_than": "<",
    "lt": "<",
    "<": "<",
    "greater_than_or_equal": ">=",
    "greater_than_or_equals": ">=",
    "gte": ">=",
    ">=": ">=",
    "less_than_or_equal": "<=",
    "less_than_or_equals": "<=",
    "lte": "<=",
    "<=": "<=",
    "contains": "contains",
    "not_contains": "not_contains",
    "starts_with": "starts_with",
    "ends_with": "ends_with",
    "in": "in",
    "not_in": "not_in",
    "is_empty": "is_empty",
    "is_not_empty": "is_not_empty",
    "is_true": "is_true",
    "is_false": "is_false",
    "exists": "exists",
    "not_exists": "not_exists",
}


class Branch(FrozenStored):
    id: str | None = None
    name: str | None = None
    # Either a structured test (source / operator / value) ...
    source: str | None = None
    operator: str | None = None
    value: Any = None
    # ... or an expression string (the expression language of interlude.engine.expressions).
    condition: str | None = None
    target: str

    @property
    def label(self) -> str:
        return self.name or self.id or self.target


class ConditionalConfig(FrozenStored):
    condition_type: Literal["expression"] = "expression"
    expression_branches: list[Branch] = Field(default_factory=new_list)
    # `expression` evaluates to a route name; `routes` maps it to a node.
    expression: str | None = None
    routes: dict[str, str] = Field(default_factory=dict)
    default_target: str | None = None

    def targets(self) -> list[str]:
        found = [b.target for b in self.expression_branches] + list(self.routes.values())
        if self.default_target:
            found.append(self.default_target)
        return list(dict.fromkeys(found))


def check_conditional(cfg: ConditionalConfig) -> list[str]:
    """Problems a definition would only show at run time: bad expressions, unknown operators, no routes."""
    problems: list[str] = []
    if not cfg.expression_branches and not cfg.expression and not cfg.default_target:
        problems.append("a conditional needs expression_branches, an expression with routes, or a default_target")
    for i, branch in enumerate(cfg.expression_branches):
        if branch.condition is not None:
            try:
                compile_expression(branch.condition)
            except ExpressionError as exc:
                problems.append(f"expression_branches[{i}].condition: {exc}")
        elif branch.source is None:
            problems.append(f"expression_branches[{i}] needs `condition`, or `source` with an `operator`")
        elif (branch.operator if branch.operator is not None else "equals") not in OPERATORS:
            problems.append(f"expression_branches[{i}].operator {branch.operator!r} is not one of {sorted(OPERATORS)}")
    if cfg.expression is not None:
        try:
            compile_expression(cfg.expression)
        except ExpressionError as exc:
            problems.append(f"expression: {exc}")
        if not cfg.routes:
            problems.append("`expression` needs `routes` mapping its results to nodes")
    return problems


def _both_str(left: Any, right: Any) -> bool:
    return isinstance(left, str) and isinstance(right, str)


def _compared(op: str, left: Any, right: Any) -> bool:
    return truthy(compare(op, left, right))


def _empty(value: Any) -> bool:
    return value is None or value in ("", [], {})


# What each operator (as OPERATORS names it) says of the branch's source (left) and value (right).
_TESTS: dict[str, Callable[[Any, Any], bool]] = {
    **{op: partial(_compared, op) for op in ("==", "!=", "<", "<=", ">", ">=")},
    "contains": lambda left, right: contains(left, right),
    "not_contains": lambda left, right: not contains(left, right),
    "in": lambda left, right: contains(right, left),
    "not_in": lambda left, right: not contains(right, left),
    "starts_with": lambda left, right: _both_str(left, right) and left.startswith(right),
    "ends_with": lambda left, right: _both_str(left, right) and left.endswith(right),
    "is_empty": lambda left, right: _empty(left),
    "is_not_empty": lambda left, right: not _empty(left),
    "is_true": lambda left, right: left is True,
    "is_false": lambda left, right: left is False,
    "exists": lambda left, right: left is not None,
    "not_exists": lambda left, right: left is None,
}


def _test(op: str, left: Any, right: Any) -> bool:
    test = _TESTS.get(op)
    return test(left, right) if test is not None else False


def branch_taken(branch: Branch, scope: Mapping[str, Any]) -> bool:
    if branch.condition is not None:
        return truthy(evaluate(compile_expression(branch.condition), scope))
    source = branch.source or ""
    # `source` is a reference; a bare path (`node_approval.approved`) is read as one too.
    left = render(source if "{{" in source else "{{" + source + "}}", scope)
    right = render(branch.value, scope)
    return _test(OPERATORS[branch.operator or "equals"], left, right)


def choose(cfg: ConditionalConfig, scope: Mapping[str, Any]) -> dict[str, Any]:
    """Branches top to bottom, then `expression`/`routes`, then `default_target`; the output names the pick."""
    for branch in cfg.expression_branches:
        if branch_taken(branch, scope):
            return {"branch": branch.label, "target": branch.target}
    if cfg.expression is not None:
        result = evaluate(compile_expression(cfg.expression), scope)
        key = result if isinstance(result, str) else None
        if key is None and isinstance(result, bool):
            key = "true" if result else "false"
        if key is not None and key in cfg.routes:
            return {"branch": key, "target": cfg.routes[key]}
    if cfg.default_target:
        return {"branch": "default", "target": cfg.default_target}
    return {"branch": None, "target": None}


def route(cfg: ConditionalConfig, output: Mapping[str, Any]) -> list[str]:
    """Engine ids of the nodes the run continues to; [] ends this path."""
    target = output.get("target")
    if not isinstance(target, str) or target in END_TARGETS:
        return []
    return [engine_id(target)]


# -- transformer -----------------------------------------------------------------------------------

OperationType = Literal[
    "template",
    "set",
    "get",
    "pick",
    "omit",
    "rename",
    "uppercase",
    "lowercase",
    "trim",
    "default",
    "join",
    "split",
]


class Operation(FrozenStored):
    type: OperationType
    field: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)


class TransformerConfig(FrozenStored):
    # A reference (`{{node_x}}`, `{{input}}`) whose value the operations start from; omitted: the run input.
    source: str | None = None
    operations: list[Operation] = Field(default_factory=new_list)


def check_transformer(cfg: TransformerConfig) -> list[str]:
    problems = []
    for i, op in enumerate(cfg.operations):
        needs_field = op.type in ("set", "get", "rename")
        if needs_field and not op.field:
            problems.append(f"operations[{i}] ({op.type}) needs `field`")
        if op.type == "template" and not isinstance(op.params.get("template"), str):
            problems.append(f"operations[{i}] (template) needs params.template (a string)")
        fields = op.params.get("fields")
        if op.type in ("pick", "omit") and not (isinstance(fields, list) and all(isinstance(f, str) for f in fields)):
            problems.append(f"operations[{i}] ({op.type}) needs params.fields (a list of strings)")
        if op.type == "rename" and not isinstance(op.params.get("to"), str):
            problems.append(f"operations[{i}] (rename) needs params.to (a string)")
        separator = op.params.get("separator")
        # Written into the text as it is (join), or cutting it (split, which cannot cut at nothing).
        if op.type == "join" and separator is not None and not isinstance(separator, str):
            problems.append(f"operations[{i}] (join): params.separator must be a string")
        if op.type == "split" and separator is not None and not (isinstance(separator, str) and separator):
            problems.append(f"operations[{i}] (split): params.separator must be a string of at least one character")
    return problems


def _on_field(value: Any, field: str | None, fn: Any) -> Any:
    if field is None:
        return fn(value)
    if isinstance(value, dict):
        return {**value, field: fn(value.get(field))}
    return value


def reads(cfg: TransformerConfig, node_ids: set[str]) -> list[str]:
    """The engine id of the node each reference of the transformer reads, once per reference."""
    templates = [cfg.source, [op.params for op in cfg.operations]]
    return referenced_nodes(templates, node_ids, REFERENCE, engine_id)


# Each operation: (the value so far, the operation, the run scope, the render budget) -> the new value.
_Apply = Callable[[Any, Operation, Mapping[str, Any], Meter], Any]


def _template(value: Any, op: Operation, scope: Mapping[str, Any], meter: Meter) -> Any:
    return render(op.params["template"], scope, meter)


def _set(value: Any, op: Operation, scope: Mapping[str, Any], meter: Meter) -> Any:
    return {**(value if isinstance(value, dict) else {}), op.field: render(op.params.get("value"), scope, meter)}


def _get(value: Any, op: Operation, scope: Mapping[str, Any], meter: Meter) -> Any:
    for part in (op.field or "").split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _pick(value: Any, op: Operation, scope: Mapping[str, Any], meter: Meter) -> Any:
    return {k: value[k] for k in op.params["fields"] if isinstance(value, dict) and k in value}


def _omit(value: Any, op: Operation, scope: Mapping[str, Any], meter: Meter) -> Any:
    if not isinstance(value, dict):
        return value
    return {k: v for k, v in value.items() if k not in op.params["fields"]}


def _rename(value: Any, op: Operation, scope: Mapping[str, Any], meter: Meter) -> Any:
    if not isinstance(value, dict) or op.field not in value:
        return value
    return {(op.params["to"] if k == op.field else k): v for k, v in value.items()}


def _on_strings(fn: Callable[[str], str]) -> _Apply:
    def apply(value: Any, op: Operation, scope: Mapping[str, Any], meter: Meter) -> Any:
        return _on_field(value, op.field, lambda v: fn(v) if isinstance(v, str) else v)

    return apply


def _default(value: Any, op: Operation, scope: Mapping[str, Any], meter: Meter) -> Any:
    fallback = render(op.params.get("value"), scope, meter)
    return _on_field(value, op.field, lambda v: fallback if v is None else v)


def _join(value: Any, op: Operation, scope: Mapping[str, Any], meter: Meter) -> Any:
    sep = str(op.params.get("separator", ", "))
    return _on_field(value, op.field, lambda v: sep.join(map(str, v)) if isinstance(v, list) else v)


def _split(value: Any, op: Operation, scope: Mapping[str, Any], meter: Meter) -> Any:
    sep = str(op.params.get("separator", ","))
    return _on_field(value, op.field, lambda v: v.split(sep) if isinstance(v, str) else v)


OPERATIONS: dict[OperationType, _Apply] = {
    "template": _template,
    "set": _set,
    "get": _get,
    "pick": _pick,
    "omit": _omit,
    "rename": _rename,
    "uppercase": _on_strings(str.upper),
    "lowercase": _on_strings(str.lower),
    "trim": _on_strings(str.strip),
    "default": _default,
    "join": _join,
    "split": _split,
}
assert set(OPERATIONS) == set(get_args(OperationType))


def transform(cfg: TransformerConfig, scope: Mapping[str, Any]) -> Any:
    # One budget for everything the operations render; the engine measures the result as any output.
    meter = Meter()
    if cfg.source is None:
        value: Any = copy.deepcopy(dict(scope.get("inputs") or {}))
    else:
        value = copy.deepcopy(render(cfg.source, scope, meter))
    for op in cfg.operations:
        value = OPERATIONS[op.type](value, op, scope, meter)
    return value
