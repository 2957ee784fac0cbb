"""Who works an open gate (issue 29 item 3): the rules of claiming, releasing and assigning, and who is reminded."""

from __future__ import annotations

import pytest

from interlude.adapters.notify.messages import reminds
from interlude.domain.errors import Conflict
from interlude.domain.models.run import OpenInterrupt, Vote
from interlude.rules.interrupts.claims import next_assignee
from interlude.store import run_items
from interlude.store.run_items import ENTRIES_UNEXPIRING, entries_unexpiring


def gate(assignee: str | None = None, assigned_by: str | None = None) -> OpenInterrupt:
    return OpenInterrupt(
        nodeId="gate",
        key="k",
        interruptId="i",
        kind="approval",
        visit=1,
        payload={},
        raisedAt="t",
        assignee=assignee,
        assignedBy=assigned_by,
    )


def test_a_gate_nobody_works_is_claimed_by_whoever_asks_first():
    assert next_assignee(gate(), "claim", "ana") == "ana"
    assert next_assignee(gate("ana", "ana"), "claim", "ana") == "ana"
    with pytest.raises(Conflict) as taken:
        next_assignee(gate("ana", "ana"), "claim", "bo")
    assert (taken.value.code, taken.value.details) == ("interlude.gate_claimed", {"assignee": "ana"})


def test_only_its_holder_or_whoever_assigned_it_releases_a_gate():
    assert next_assignee(gate("bo", "ana"), "release", "bo") is None
    assert next_assignee(gate("bo", "ana"), "release", "ana") is None
    assert next_assignee(gate(), "release", "cy") is None
    with pytest.raises(Conflict):
        next_assignee(gate("bo", "ana"), "release", "cy")


def test_an_assignment_hands_the_gate_to_whom_it_names_whoever_holds_it():
    assert next_assignee(gate("bo", "bo"), "assign", "ana", "cy") == "cy"
    assert next_assignee(gate("bo", "bo"), "assign", "ana", None) is None


def test_a_worked_gate_reminds_its_assignee_alone():
    assert reminds(gate(), "ana")
    assert reminds(gate("ana", "bo"), "ana")
    assert not reminds(gate("ana", "bo"), "bo")


def test_an_open_gate_stored_before_claims_reads_as_nobody_working_it():
    stored = {
        "nodeId": "gate",
        "key": "k",
        "interruptId": "i",
        "kind": "approval",
        "visit": 1,
        "payload": {},
        "raisedAt": "t",
    }
    assert OpenInterrupt.model_validate(stored).assignee is None
    assert "assignee" not in OpenInterrupt.model_validate(stored).model_dump()


def test_a_claimed_gates_item_says_its_inbox_entries_carry_no_expiry_until_a_vote_is_added():
    """docs/adr/0154: the claim's transaction puts every entry of the gate again without an expiry, and records on the
    gate's item how many votes it held then; a vote or a delegation since (which may put a delegate's entries with an
    expiry, by any release) makes the daily sweep write them all again."""
    claimed = gate("ana", "ana")
    update = run_items.interrupt_votes("pk", claimed, entries_unexpiring=True)
    item = {"votes": update["ExpressionAttributeValues"][":votes"], ENTRIES_UNEXPIRING: update["ExpressionAttributeValues"][":votes_held"]}
    assert f"{ENTRIES_UNEXPIRING} = :votes_held" in update["UpdateExpression"]
    assert entries_unexpiring(item)
    claimed.votes.append(Vote(principal="bo", action="delegate", delegate="cy", at="t", surface="api"))
    assert not entries_unexpiring({**item, "votes": run_items.interrupt_votes("pk", claimed)["ExpressionAttributeValues"][":votes"]})
    assert ENTRIES_UNEXPIRING not in run_items.interrupt_votes("pk", claimed)["UpdateExpression"]
    assert not entries_unexpiring({"votes": item["votes"]})
