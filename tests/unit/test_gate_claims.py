"""Who works an open gate (issue 29 item 3): the rules of claiming, releasing and assigning, and who is reminded."""

from __future__ import annotations

import pytest

from interlude.adapters.notify.messages import reminds
from interlude.domain.errors import Conflict
from interlude.domain.models.run import OpenInterrupt
from interlude.rules.interrupts.claims import next_assignee


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
