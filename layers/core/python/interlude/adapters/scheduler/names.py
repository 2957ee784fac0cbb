"""Deterministic schedule names and `at()` expressions. Pure."""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime

from interlude.domain.ids import tenant_of
from interlude.engine.deadlines import Deadline

# Scheduler names: 1..64 of [0-9a-zA-Z-_.]; ClientToken: 1..64 of [a-zA-Z0-9-_]. "il-<12 hex>-<p>-<40 hex>" (58)
# fits both.
NAME_PREFIX = "il"
TENANT_TAG_HEX = 12


def tenant_prefix(tenant: str) -> str:
    """What every schedule of a tenant's runs is named with first (a hash of the tenant: names allow no tenant id's
    every character), so a tenant's deletion finds them all by one ListSchedules NamePrefix (issue 30 item 6). Other
    tenants may share it (48 bits): a schedule found by it is the tenant's only if its input names one of its runs."""
    return f"{NAME_PREFIX}-{hashlib.sha256(tenant.encode()).hexdigest()[:TENANT_TAG_HEX]}-"


def schedule_name(run_id: str, deadline: Deadline) -> str:
    """One name per deadline occurrence: the same interrupt (or delay visit, or run) always maps to it,
    so creating it twice is a ConflictException, and deleting it needs nothing but the occurrence."""
    return f"{tenant_prefix(tenant_of(run_id))}{occurrence(deadline, run_id)}"


# The names of the releases before 0.2.0: "il-<p>-<40 hex>", no tenant (issue 30: a schedule made then may still wait).
# Their second part is one letter, where a name of now has 12 hex digits: neither is ever the other.
LEGACY_PREFIXES = tuple(f"{NAME_PREFIX}-{letter}-" for letter in "idrmt")


def legacy_schedule_name(run_id: str, deadline: Deadline) -> str:
    """The name a release before 0.2.0 gave the same occurrence (its schedule is deleted under it: Scheduler.delete)."""
    return f"{NAME_PREFIX}-{occurrence(deadline, run_id)}"


def occurrence(deadline: Deadline, run_id: str) -> str:
    """`<p>-<40 hex>`: the deadline's purpose letter and its occurrence's digest."""
    if deadline.purpose == "interrupt":
        identity = f"interrupt\x1f{deadline.interrupt_id}"
    elif deadline.purpose == "reminder":
        identity = f"reminder\x1f{deadline.interrupt_id}\x1f{deadline.visit}"
    elif deadline.purpose == "task":
        # Several checks of one claim (its heartbeats outrun the last): the due time is part of the occurrence.
        identity = f"task\x1f{deadline.interrupt_id}\x1f{deadline.visit}\x1f{deadline.due}"
    elif deadline.purpose == "delay":
        identity = f"delay\x1f{run_id}\x1f{deadline.node_id}\x1f{deadline.visit}"
    else:
        identity = f"run\x1f{run_id}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:40]
    letter = "m" if deadline.purpose == "reminder" else deadline.purpose[0]
    return f"{letter}-{digest}"


def handed_back_name(tenant: str, held_id: str) -> str:
    """The schedule a suspended tenant's deferred deadline is handed back to the scheduler under, at its resume: one per
    deferral (`held_id` names it), so handing it back twice is a ConflictException."""
    return f"{tenant_prefix(tenant)}h-{hashlib.sha256(held_id.encode()).hexdigest()[:40]}"


# A bucket schedule's name (ADR 0132): one per second and shard of the due index, shared by every tenant. Its second part
# is neither a tenant's 12 hex digits nor a legacy name's one letter, so no tenant's deletion lists it.
BUCKET_PREFIX = f"{NAME_PREFIX}-due-"


def bucket_schedule_name(second: int, shard: int) -> str:
    """The schedule of the deadlines due in `second` listed in `shard` (interlude.store.due_index): creating it twice
    is a ConflictException."""
    return f"{BUCKET_PREFIX}{second}-{shard:02d}"


def at_expression(due_epoch: float) -> str:
    """`at(yyyy-mm-ddThh:mm:ss)` in UTC, rounded up to the second so it never fires before the deadline."""
    moment = datetime.fromtimestamp(math.ceil(due_epoch), UTC)
    return f"at({moment.strftime('%Y-%m-%dT%H:%M:%S')})"


def parse_at(expression: str) -> float | None:
    """Epoch seconds of an `at(...)` expression (UTC), or None for any other expression."""
    if not (expression.startswith("at(") and expression.endswith(")")):
        return None
    try:
        return datetime.strptime(expression[3:-1], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None
