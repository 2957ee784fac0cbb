"""Delegated votes on an approval gate (issue 14 item 4), the pure part.

A principal's vote counts once, whoever casts it: the principal, or a delegate. A delegation for one interrupt is
recorded on the gate as a vote record with `action: "delegate"` (it casts nothing); a standing delegation comes
from the directory (an active `outOfOffice.delegate`) and reaches the rules as a `Delegator` the service found.
"""

from typing import TYPE_CHECKING, Any, Literal, NamedTuple

if TYPE_CHECKING:
    from interlude.domain.models.run import OpenInterrupt

# Records on a gate that are no vote of their principal's: `ask` asks a question, `delegate` hands the vote over.
NOT_A_VOTE = ("ask", "delegate")


class Delegator(NamedTuple):
    """A principal whose vote the caller may cast, with the membership recorded for it."""

    principal: str  # issuer|subjectId, as the principal's own vote would be recorded
    subject: dict[str, Any]
    groups: tuple[str, ...]
    roles: tuple[str, ...]
    via: Literal["interrupt", "out-of-office"]


def has_cast(interrupt: "OpenInterrupt", principal: str) -> bool:
    """Whether `principal`'s vote is in, cast by them or for them."""
    return any(v.principal == principal and v.action not in NOT_A_VOTE for v in interrupt.votes)


def has_delegated(interrupt: "OpenInterrupt", principal: str) -> bool:
    return any(v.principal == principal and v.action == "delegate" for v in interrupt.votes)


def delegated_to(interrupt: "OpenInterrupt", subject_id: str | None) -> list[Delegator]:
    """The principals who delegated their vote on this gate to `subject_id`, in the order they did."""
    if subject_id is None:
        return []
    return [
        Delegator(v.principal, v.subject or {}, tuple(v.groups), tuple(v.roles), "interrupt")
        for v in interrupt.votes
        if v.action == "delegate" and v.delegate == subject_id
    ]


def vote_in(interrupt: "OpenInterrupt", subject_id: str) -> bool:
    """Whether the vote of the principal with this subjectId is in, cast by them or for them by a delegate."""
    return any(v.action not in NOT_A_VOTE and (v.subject or {}).get("subjectId") == subject_id for v in interrupt.votes)


def handed_over(interrupt: "OpenInterrupt", subject_id: str) -> bool:
    """Whether the principal with this subjectId handed their vote on this gate to a delegate."""
    return any(v.action == "delegate" and (v.subject or {}).get("subjectId") == subject_id for v in interrupt.votes)


def still_asked(
    interrupt: "OpenInterrupt", subject_id: str, for_self: bool, on_behalf_of: list[str], delegation_allowed: bool = True
) -> bool:
    """Whether a reminder to `subject_id` asks for anything not yet cast: their own vote (when asked for it, and
    neither cast nor handed over; a vote handed over is theirs again where the tenant no longer allows delegation)
    or the vote of someone they stand in for (not cast by anyone)."""
    own_open = not vote_in(interrupt, subject_id) and not (delegation_allowed and handed_over(interrupt, subject_id))
    if for_self and own_open:
        return True
    return any(not vote_in(interrupt, other) for other in on_behalf_of)
