"""A small, safe expression language: edge conditions (engine/conditions.py) and ModuleX conditional nodes
(faces/modulex/nodes.py). No eval, no attribute access, no calls beyond a fixed list of pure functions.

    action == 'refine' and refineFeedback.scope != 'items'
    {{node_approval.approved}} == true and len(node_draft) > 0
    node_order.amount >= 100 or input.priority in ['high', 'urgent']

Grammar (loosest first):

    expression := or
    or         := and (("or" | "||") and)*
    and        := not (("and" | "&&") not)*
    not        := ("not" | "!") not | comparison
    comparison := sum (("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not in") sum)?
    sum        := product (("+" | "-") product)*
    product    := unary (("*" | "/" | "%") unary)*
    unary      := "-" unary | primary
    primary    := number | string | "true" | "false" | "null" | "[" (expression ("," expression)*)? "]"
                | name | "{{" name "}}" | function "(" arguments ")" | "(" expression ")"
    name       := word ("." word)*       (a word: letters, digits, "_" and "-", not starting with a digit)

Literals: numbers, 'strings' / "strings" (backslash escapes the next character), true/false/null (also
True/False/None), [lists]. Names are paths into the scope the caller gives (`find`: an edge condition's source
outcome, a ModuleX run's state); a name that does not resolve is null. Functions: len lower upper trim str int
float bool contains startswith endswith.

Values: `==`/`!=` compare JSON values (true is not 1); `<` `<=` `>` `>=` order two numbers or two strings; `in`
tests an element of a list, a substring of a string or a key of an object; `+` adds numbers or joins strings,
`- * / %` are arithmetic. Truth (for `and`, `or`, `not` and a condition's result): false, null, 0, "", [] and {}
are false, everything else true.

`compile_expression` parses once (at registration, so a syntax error refuses the workflow); `evaluate` never
raises for data reasons: a comparison, arithmetic or function that makes no sense for the values yields null,
and a condition that is not true does not hold.

Bounded cost: an expression is at most MAX_LENGTH characters and nests at most MAX_DEPTH levels (brackets, lists,
calls, prefix operators), far below Python's own recursion limit (a run of `a + b + c …` or `a or b or …` is one
node evaluated in a loop, not a chain); it is evaluated once, node by node, with no loops; a string it joins stays
within budgets.MAX_VALUE_BYTES and a number within MAX_INT_DIGITS digits (a longer one is null). The only run-time
failure is budgets.BudgetExceeded, from joining strings past MAX_VALUE_BYTES.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from interlude.domain.budgets import MAX_INT_DIGITS, MAX_VALUE_BYTES, BudgetExceeded
from interlude.domain.templates import MISSING, Lookup, lookup

MAX_LENGTH = 2000
# Parsing takes about eight Python frames per level, evaluating two or three: 40 levels stay under 350 frames.
MAX_DEPTH = 40


class ExpressionError(ValueError):
    pass


_TOKEN = re.compile(
    r"""\s*(?:
      (?P<ref>\{\{\s*[^{}\s]+\s*\}\})
    | (?P<num>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
    | (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
    | (?P<op>==|!=|<=|>=|&&|\|\||[<>!+\-*/%(),\[\]])
    | (?P<name>[A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_\-]+)*)
    )""",
    re.VERBOSE,
)

_KEYWORDS = {"and", "or", "not", "in", "true", "false", "null", "True", "False", "None"}
_CONSTANTS = {"true": True, "True": True, "false": False, "False": False, "null": None, "None": None}


def _len(x: Any) -> Any:
    return len(x) if isinstance(x, str | list | dict) else None


def _str(x: Any) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    return "null" if x is None else str(x)


def _num(kind: type) -> Callable[[Any], Any]:
    def convert(x: Any) -> Any:
        try:
            value = kind(x) if not isinstance(x, bool | type(None)) else None
            # float("nan"), float("inf"), float("1e999"): not a number JSON can carry.
            return value if _finite(value) else None
        except (TypeError, ValueError, OverflowError):
            return None

    return convert


FUNCTIONS: dict[str, tuple[int, Callable[..., Any]]] = {
    "len": (1, _len),
    "lower": (1, lambda x: x.lower() if isinstance(x, str) else None),
    "upper": (1, lambda x: x.upper() if isinstance(x, str) else None),
    "trim": (1, lambda x: x.strip() if isinstance(x, str) else None),
    "str": (1, _str),
    "int": (1, _num(int)),
    "float": (1, _num(float)),
    "bool": (1, lambda x: bool(x)),
    "contains": (2, lambda a, b: contains(a, b)),
    "startswith": (2, lambda a, b: a.startswith(b) if isinstance(a, str) and isinstance(b, str) else False),
    "endswith": (2, lambda a, b: a.endswith(b) if isinstance(a, str) and isinstance(b, str) else False),
}


def contains(container: Any, item: Any) -> bool:
    if isinstance(container, str):
        return isinstance(item, str) and item in container
    if isinstance(container, list | dict):
        try:
            return item in container
        except TypeError:
            return False
    return False


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ExpressionError(f"unexpected character at {pos}: {text[pos : pos + 10]!r}")
        kind = m.lastgroup or ""
        value = m.group(kind)
        if kind == "name" and value in _KEYWORDS:
            kind = "kw"
        out.append((kind, value))
        pos = m.end()
    return out


Node = tuple[Any, ...]


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.depth = 0

    def peek(self, offset: int = 0) -> tuple[str, str] | None:
        j = self.i + offset
        return self.toks[j] if j < len(self.toks) else None

    def take(self, kind: str | None = None, value: str | None = None) -> tuple[str, str] | None:
        tok = self.peek()
        if tok and (kind is None or tok[0] == kind) and (value is None or tok[1] == value):
            self.i += 1
            return tok
        return None

    def expect(self, kind: str, value: str) -> None:
        if not self.take(kind, value):
            got = self.peek()
            raise ExpressionError(f"expected {value!r}, got {got[1]!r}" if got else f"expected {value!r} at end")

    def parse(self) -> Node:
        node = self.or_()
        if (extra := self.peek()) is not None:
            raise ExpressionError(f"unexpected {extra[1]!r}")
        return node

    def nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExpressionError("expression nests too deeply")

    def or_(self) -> Node:
        operands = [self.and_()]
        while self.take("kw", "or") or self.take("op", "||"):
            operands.append(self.and_())
        return operands[0] if len(operands) == 1 else ("or", operands)

    def and_(self) -> Node:
        operands = [self.not_()]
        while self.take("kw", "and") or self.take("op", "&&"):
            operands.append(self.not_())
        return operands[0] if len(operands) == 1 else ("and", operands)

    def not_(self) -> Node:
        if self.take("kw", "not") or self.take("op", "!"):
            self.nest()
            node = ("not", self.not_())
            self.depth -= 1
            return node
        return self.cmp()

    def cmp(self) -> Node:
        left = self.add()
        tok = self.peek()
        if tok and tok[0] == "op" and tok[1] in ("==", "!=", "<", "<=", ">", ">="):
            self.i += 1
            return ("cmp", tok[1], left, self.add())
        if self.take("kw", "in"):
            return ("in", left, self.add())
        if tok == ("kw", "not") and self.peek(1) == ("kw", "in"):
            self.i += 2
            return ("not", ("in", left, self.add()))
        return left

    def add(self) -> Node:
        first = self.mul()
        rest: list[tuple[str, Node]] = []
        while (tok := self.peek()) and tok[0] == "op" and tok[1] in "+-" and len(tok[1]) == 1:
            self.i += 1
            rest.append((tok[1], self.mul()))
        return ("arith", first, rest) if rest else first

    def mul(self) -> Node:
        first = self.unary()
        rest: list[tuple[str, Node]] = []
        while (tok := self.peek()) and tok[0] == "op" and tok[1] in ("*", "/", "%"):
            self.i += 1
            rest.append((tok[1], self.unary()))
        return ("arith", first, rest) if rest else first

    def unary(self) -> Node:
        if self.take("op", "-"):
            self.nest()
            node = ("neg", self.unary())
            self.depth -= 1
            return node
        return self.primary()

    def primary(self) -> Node:
        tok = self.take()
        if tok is None:
            raise ExpressionError("unexpected end of expression")
        kind, value = tok
        literal = _literal(kind, value)
        if literal is not None:
            return literal
        if kind == "op" and value == "(":
            self.nest()
            node = self.or_()
            self.expect("op", ")")
            self.depth -= 1
            return node
        if kind == "op" and value == "[":
            return ("list", self.items("]"))
        if kind == "name":
            return self.call(value) if self.take("op", "(") else ("ref", value)
        raise ExpressionError(f"unexpected {value!r}")

    def items(self, closing: str) -> list[Node]:
        """Comma-separated expressions up to `closing` (after its opening bracket): a list or a call's arguments,
        each a nesting level."""
        self.nest()
        items: list[Node] = []
        if not self.take("op", closing):
            items.append(self.or_())
            while self.take("op", ","):
                items.append(self.or_())
            self.expect("op", closing)
        self.depth -= 1
        return items

    def call(self, name: str) -> Node:
        if name not in FUNCTIONS:
            raise ExpressionError(f"unknown function {name!r}; known: {sorted(FUNCTIONS)}")
        args = self.items(")")
        arity = FUNCTIONS[name][0]
        if len(args) != arity:
            raise ExpressionError(f"{name}() takes {arity} argument(s)")
        return ("call", name, args)


def _literal(kind: str, value: str) -> Node | None:
    """The node of a token that stands for itself: a number, a string, a constant, a {{reference}}."""
    if kind == "num":
        number = float(value) if any(c in value for c in ".eE") else int(value)
        if not _finite(number):
            raise ExpressionError(f"{value} is not a finite number")
        return ("lit", number)
    if kind == "str":
        return ("lit", re.sub(r"\\(.)", r"\1", value[1:-1]))
    if kind == "kw" and value in _CONSTANTS:
        return ("lit", _CONSTANTS[value])
    if kind == "ref":
        return ("ref", value[2:-2].strip())
    return None


def compile_expression(text: str) -> Node:
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError("the expression is empty")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"the expression is longer than {MAX_LENGTH} characters")
    return _Parser(text).parse()


def compare(op: str, a: Any, b: Any) -> Any:
    if op in ("==", "!="):
        # Strict about booleans: true is not 1.
        if isinstance(a, bool) or isinstance(b, bool):
            equal = isinstance(a, bool) and isinstance(b, bool) and a == b
        else:
            equal = a == b
        return equal if op == "==" else not equal
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
    if not numeric and not (isinstance(a, str) and isinstance(b, str)):
        return None
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _arith(op: str, a: Any, b: Any) -> Any:
    if op == "+" and isinstance(a, str) and isinstance(b, str):
        if len(a) + len(b) > MAX_VALUE_BYTES:
            raise BudgetExceeded("a string the expression joins", MAX_VALUE_BYTES)
        return a + b
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b)):
        return None
    try:
        result = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b, "%": lambda: a % b}[
            op
        ]()
    except (ZeroDivisionError, OverflowError):
        return None
    # Numbers past what Python prints (and JSON carries) make no sense here either.
    if isinstance(result, int) and result.bit_length() > MAX_INT_DIGITS * 3:
        return None
    return result if _finite(result) else None


def _finite(number: Any) -> bool:
    """A number JSON can carry: float arithmetic overflows to inf (and inf - inf is nan) without raising."""
    return not isinstance(number, float) or math.isfinite(number)


def _call(name: str, args: list[Any]) -> Any:
    try:
        return FUNCTIONS[name][1](*args)
    except (TypeError, ValueError, OverflowError):  # e.g. str() of an integer Python will not print
        return None


# A name's value (None: it does not resolve).
Names = Callable[[str], Any]


def evaluate(node: Node, scope: Mapping[str, Any], find: Lookup = lookup) -> Any:
    """The value of a compiled expression, its names looked up in `scope` by `find` (templates.lookup's paths)."""

    def name(path: str) -> Any:
        value = find(path, scope)
        return None if value is MISSING else value

    return _value(node, name)


def _value(node: Node, names: Names) -> Any:
    evaluator = _EVALUATORS.get(node[0])
    if evaluator is None:  # pragma: no cover - the parser builds only the kinds in the table
        raise ExpressionError(f"unknown node {node[0]!r}")
    return evaluator(node, names)


def names_in(node: Node) -> list[str]:
    """Every name the expression reads, in order (a registration checks them against what the scope can hold)."""
    found: list[str] = []
    stack: list[Any] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, tuple) and item and item[0] == "ref":
            found.append(item[1])
        elif isinstance(item, tuple | list):
            stack.extend(reversed([part for part in item if isinstance(part, tuple | list)]))
    return found


def _any_true(node: Node, names: Names) -> bool:
    return any(truthy(_value(operand, names)) for operand in node[1])


def _all_true(node: Node, names: Names) -> bool:
    return all(truthy(_value(operand, names)) for operand in node[1])


def _arith_chain(node: Node, names: Names) -> Any:
    value = _value(node[1], names)
    for op, operand in node[2]:
        value = _arith(op, value, _value(operand, names))
    return value


def _negate(node: Node, names: Names) -> Any:
    value = _value(node[1], names)
    return -value if isinstance(value, int | float) and not isinstance(value, bool) else None


# One evaluator per node kind the parser builds.
_EVALUATORS: dict[str, Callable[[Node, Names], Any]] = {
    "lit": lambda node, names: node[1],
    "ref": lambda node, names: names(node[1]),
    "list": lambda node, names: [_value(item, names) for item in node[1]],
    "or": _any_true,
    "and": _all_true,
    "not": lambda node, names: not truthy(_value(node[1], names)),
    "cmp": lambda node, names: compare(node[1], _value(node[2], names), _value(node[3], names)),
    "in": lambda node, names: contains(_value(node[2], names), _value(node[1], names)),
    "arith": _arith_chain,
    "neg": _negate,
    "call": lambda node, names: _call(node[1], [_value(arg, names) for arg in node[2]]),
}


def truthy(value: Any) -> bool:
    return bool(value)
