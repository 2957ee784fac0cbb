"""Claiming, releasing and assigning an open gate (issue 29 item 3): who works it now. Pure.

A claim takes an unclaimed gate for the caller; releasing gives it back (its holder, or whoever assigned it);
assigning hands it to a named person, or to nobody, whoever holds it. None of it changes who may decide the gate:
the caller must be one who may (`decide.eligible`, checked by the service), and the gate stays open to everyone it
was open to. It narrows who is reminded (the notify worker reminds the assignee only).
"""

from __future__ import annotations

from typing import Literal

from interlude.domain.errors import Conflict
from interlude.domain.models.run import OpenInterrupt

GATE_CLAIMED = "interlude.gate_claimed"
Move = Literal["claim", "release", "assign"]


def next_assignee(interrupt: OpenInterrupt, move: Move, caller: str, named: str | None = None) -> str | None:
    """Who works the gate after `caller` (a subject id) makes `move` (`named`: whom an assign names; None: nobody).
    409 interlude.gate_claimed: a claim of a gate another holds, a release of one the caller neither holds nor
    assigned."""
    held = interrupt.assignee
    if move == "claim":
        if held not in (None, caller):
            raise Conflict(f"{held} works this gate already", {"assignee": held}, code=GATE_CLAIMED)
        return caller
    if move == "release":
        if held is not None and caller not in (held, interrupt.assignedBy):
            raise Conflict(f"{held} works this gate; only they or whoever assigned it may release it", {"assignee": held}, code=GATE_CLAIMED)
        return None
    return named
