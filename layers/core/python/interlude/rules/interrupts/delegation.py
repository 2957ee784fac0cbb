"""Delegated votes on an approval gate (issue 14 item 4), the pure part.

A principal's vote counts once, whoever casts it: the principal, or a delegate. A delegation for one interrupt is
recorded on the gate as a vote record with `action: "delegate"` (it casts nothing); a standing delegation comes
from the directory (an active `outOfOffice.delegate`) and reaches the rules as a `Delegator` the service found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from interlude.domain.models.run import OpenInterrupt

# Records on a gate that are no vote of their principal's: `ask` asks a question, `delegate` hands the vote over.
NOT_A_VOTE = ("ask", "delegate")


@dataclass(frozen=True)
class Delegator:
    """A principal whose vote the caller may cast, with the membership recorded for it."""

    principal: str  # issuer|subjectId, as the principal's own vote would be recorded
    subject: dict[str, Any]
    groups: tuple[str, ...]
    roles: tuple[str, ...]
    via: Literal["interrupt", "out-of-office"]


def has_cast(interrupt: OpenInterrupt, principal: str) -> bool:
    """Whether `principal`'s vote is in, cast by them or for them."""
    return any(v.principal == principal and v.action not in NOT_A_VOTE for v in interrupt.votes)


def has_delegated(interrupt: OpenInterrupt, principal: str) -> bool:
    return any(v.principal == principal and v.action == "delegate" for v in interrupt.votes)


def delegated_to(interrupt: OpenInterrupt, subject_id: str | None) -> list[Delegator]:
    """The principals who delegated their vote on this gate to `subject_id`, in the order they did."""
    if subject_id is None:
        return []
    return [
        Delegator(v.principal, v.subject or {}, tuple(v.groups), tuple(v.roles), "interrupt")
        for v in interrupt.votes
        if v.action == "delegate" and v.delegate == subject_id
    ]
