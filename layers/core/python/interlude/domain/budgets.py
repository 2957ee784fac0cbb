"""How large what a run builds may grow, measured while it is built, never after.

Templates can multiply: a transform whose output repeats the previous one ten times grows tenfold per node.
Every renderer spends from a Meter before it builds a piece, so a value stops growing the moment it would pass
its budget, and the node fails with `interlude.budget_exceeded` instead of the process running out of memory.

Sizes are compact-JSON bytes (what the store serialises before deflating), so a bound holds whatever the
compression ratio: a run head under MAX_STATE_BYTES fits DynamoDB's 400 KB item uncompressed, and the
snapshot `GET /runs/{id}` answers stays far under the 6 MB a Lambda answer may carry.
"""

from __future__ import annotations

import json
from typing import Any

from interlude.domain.errors import TooLarge

# One node's output, one gate's rendered interrupt data, one resume value.
MAX_VALUE_BYTES = 64 * 1024
# Nesting of any such value: the request bodies' own limit (api/http.py), so every stored value re-parses.
MAX_VALUE_DEPTH = 64
# A run's state document (inputs, every node's output, open interrupts): the run head item.
MAX_STATE_BYTES = 256 * 1024
# A run's inputs, part of its state (refused at createRun with 413).
MAX_INPUTS_BYTES = 128 * 1024
# Numbers a run keeps as their callers wrote them (RunState.writtenNumbers), and the longest spelling kept (docs/adr/0119).
MAX_WRITTEN_NUMBERS = 64
MAX_WRITTEN_NUMBER_CHARS = 40
# Output and interrupt bytes one transition records before it leaves the rest of the queue to dispatch (as the
# step budget does), so one event-log item stays small; a single node may pass it by at most its own output.
TRANSITION_SOFT_BYTES = 128 * 1024
# One answer that lists what a run accumulated (the events poll): a page, far under the 6 MB Lambda limit.
MAX_ANSWER_BYTES = 4 * 1024 * 1024
# One transition is one TransactWriteItems, which DynamoDB refuses past 100 items. A wait (an open interrupt or a
# pending action: task, core.http, sub-workflow) costs at most two items when a transition opens or closes it (the
# interrupt and an external-event gate's waiter or a conversation's claim; a task's item), and the rest of any
# transition at most seven (run head, event batch, open-runs counter, Idempotency-Key record, audit entry, audit
# head, pending-checkpoint marker; inbox, ready and run-listing entries are written outside it), so a transition
# may touch 46 waits. TRANSITION_MAX_WAITS keeps three items spare; the engine stops running nodes there and leaves
# the rest of the queue to dispatch (as the step budget does).
TRANSACT_MAX_ITEMS = 100
# What the store's refusal as TooLarge names (its `details`) when a change would pass one stored item's size (DynamoDB's
# 400 KB) or one transaction's items; a run whose next step passes either fails with interlude.budget_exceeded.
ITEM_BUDGET: dict[str, Any] = {"budget": "one stored item", "limit": 400_000, "unit": "bytes"}
TRANSACTION_BUDGET: dict[str, Any] = {"budget": "one transaction", "limit": TRANSACT_MAX_ITEMS, "unit": "items"}
ITEMS_PER_WAIT = 2
TRANSITION_MAX_WAITS = 45
# Waits one run holds open at once: a node that would open one more fails with interlude.budget_exceeded. Ending
# the run closes every one of them in one transaction (a cancel must always be possible), and a transition that
# closes some may open others, so this stays below TRANSITION_MAX_WAITS.
MAX_OPEN_WAITS = 40
OPEN_WAITS_BUDGET = "waits open at once in one run"
# Digits of an integer Python can still print (sys.get_int_max_str_digits() defaults to 4300).
MAX_INT_DIGITS = 4000
# Reminders of a gate (issue 14): at most this many, each between 1 s and 30 days after the gate asks. Here, not in
# domain/models/tenants.py (which re-exports them): the node types bound a gate's own reminders with them, and a run
# that moves need not build the tenant settings' models.
MAX_REMINDERS = 5
MAX_REMINDER_MS = 30 * 24 * 3600 * 1000
# Run search (issue 29 item 1, rules/run_search.py): metadata keys a tenant may declare searchable, each indexed on
# every run that holds it (one write per key per run), and what such a key is.
MAX_SEARCHABLE_KEYS = 10
SEARCHABLE_KEY = r"^[A-Za-z0-9_-]{1,64}$"


class BudgetExceeded(Exception):
    def __init__(self, what: str, limit: int, unit: str = "bytes") -> None:
        self.what = what
        self.limit = limit
        self.unit = unit
        super().__init__(f"{what} would pass its budget of {limit} {unit}")

    @property
    def details(self) -> dict[str, Any]:
        return {"budget": self.what, "limit": self.limit, "unit": self.unit}


# What json.dumps(a string) returns (ensure_ascii, the default), without building an encoder per call.
_quoted = json.encoder.encode_basestring_ascii


def _scalar_size(value: Any) -> int:
    if isinstance(value, str):
        return len(_quoted(value))
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    if isinstance(value, int):
        if value.bit_length() > MAX_INT_DIGITS * 3:  # about 0.3 digits per bit: cheap, before printing
            raise BudgetExceeded("a number", MAX_INT_DIGITS, "digits")
        return len(str(value))
    if isinstance(value, float):
        return len(repr(value))
    return len(_quoted(str(value)))


def json_size(value: Any, limit: int = MAX_VALUE_BYTES, what: str = "the value", depth: int = MAX_VALUE_DEPTH) -> int:
    """Compact-JSON size of `value`, walked without recursion; BudgetExceeded as soon as it passes `limit` bytes
    or nests deeper than `depth` (shared sub-values are counted each time they would be printed)."""
    size = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        # A plain string or None, the commonest leaves, measured as the general path below measures them, without its
        # type tests and call: a resolve measures three values (docs/adr/0162).
        if type(item) is str:
            if len(item) + size > limit:
                raise BudgetExceeded(what, limit)
            size += len(_quoted(item))
        elif item is None:
            size += 4
        elif isinstance(item, dict):
            if level >= depth:
                raise BudgetExceeded(f"{what} (nesting)", depth, "levels")
            size += 2 + max(len(item) - 1, 0)
            for key, sub in item.items():
                size += len(_quoted(str(key))) + 1  # _scalar_size of a string
                stack.append((sub, level + 1))
        elif isinstance(item, list | tuple):
            if level >= depth:
                raise BudgetExceeded(f"{what} (nesting)", depth, "levels")
            size += 2 + max(len(item) - 1, 0)
            stack.extend((sub, level + 1) for sub in item)
        elif isinstance(item, str) and len(item) + size > limit:
            raise BudgetExceeded(what, limit)
        else:
            size += _scalar_size(item)
        if size > limit:
            raise BudgetExceeded(what, limit)
    return size


def within_budget(value: Any, limit: int, what: str) -> None:
    """TooLarge (413) for a value a caller sends that could not be stored as part of a run."""
    try:
        json_size(value, limit, what)
    except BudgetExceeded as exc:
        raise TooLarge(str(exc), {"limit": limit, "unit": exc.unit}) from None


class Meter:
    """Bytes one value has cost so far; `spend` refuses the piece that would pass the limit, before it is built."""

    def __init__(self, limit: int = MAX_VALUE_BYTES, what: str = "the node's output") -> None:
        self.limit = limit
        self.what = what
        self.spent = 0

    @property
    def remaining(self) -> int:
        return self.limit - self.spent

    def spend(self, size: int) -> None:
        self.spent += size
        if self.spent > self.limit:
            raise BudgetExceeded(self.what, self.limit)

    def spend_value(self, value: Any) -> None:
        self.spend(json_size(value, self.remaining, self.what))


def first_page(items: list[Any], limit: int = MAX_ANSWER_BYTES) -> list[Any]:
    """The longest prefix of `items` whose JSON fits `limit` (never empty when `items` is not): the rest is the
    next page, which the caller asks for after the last item it got."""
    spent = 0
    for count, item in enumerate(items):
        try:
            spent += json_size(item, limit, "an answer", depth=1 << 20) + 1
        except BudgetExceeded:
            return items[: max(count, 1)]
        if spent > limit:
            return items[: max(count, 1)]
    return items


def answer_bytes(items: list[Any]) -> int:
    """What `items` weigh in an answer, as first_page counts them."""
    return sum(json_size(item, 1 << 62, "an answer", depth=1 << 20) + 1 for item in items)


def last_page(items: list[Any], limit: int = MAX_ANSWER_BYTES) -> list[Any]:
    """The longest suffix of `items` whose JSON fits `limit` (never empty when `items` is not): the newest of them, for
    a reader who cannot ask for the next page (first_page's mirror)."""
    return first_page(items[::-1], limit)[::-1]
