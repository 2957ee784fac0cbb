"""A run's events and values as a person reads them on the run page (issue 29 item 3): each event in words with the
fields worth reading, and what a step was given and what it gave back. Pure: events and values in, words and
`text.Cell`s out; never an event's own field names, never JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from interlude.api.page import approval
from interlude.api.page.names import Names
from interlude.api.page.text import Cell, cell_of
from interlude.domain.event_words import event_in_words
from interlude.domain.outcomes import in_words

# Why a step or a gate ended, when the engine says it in a word.
REASON_WORDS = {"timeout": "nobody decided in time", "not reached": "not reached"}
# What a decision's recorded value holds besides the person's own answer: said in the line, not shown again.
DECISION_STAMPS = frozenset({"action", "decidedAt", "decidedBy", "onBehalfOf", "decision", "reason"})


@dataclass(frozen=True)
class Shown:
    """A value to read under a heading ("Inputs", "What you are approving", "Output")."""

    heading: str
    cell: Cell


def person(subject_id: Any, people: Mapping[str, str]) -> str:
    return people.get(str(subject_id), str(subject_id)) if subject_id else ""


def error_words(error: Any) -> str:
    """A run's or a step's error as its sentence (its message; else that it failed)."""
    if isinstance(error, Mapping) and isinstance(error.get("message"), str) and error["message"]:
        return str(error["message"])
    return "it failed"


def event_summary(event: Mapping[str, Any], names: Names | None = None, people: Mapping[str, str] | None = None) -> str:
    """One readable line for an event: what happened, to which step (by name), decided how and by whom."""
    people = people or {}
    payload = event.get("payload") or {}
    kind = str(event.get("type"))
    bits = [event_in_words(kind)]
    if event.get("nodeId"):
        bits.append(names.step(str(event["nodeId"])) if names else str(event["nodeId"]))
    who = person(
        (payload.get("resolvedBy") or {}).get("subjectId") if isinstance(payload.get("resolvedBy"), Mapping) else None,
        people,
    )
    if kind in ("interrupt.requested", "approval.requested"):
        bits.append(approval.kind_words(payload))
    elif kind == "approval.received" or (kind == "interrupt.resolved" and payload.get("kind") == "approval"):
        bits.append(decision_words(payload, who))
    elif kind == "interrupt.resolved":
        bits.append("Answered" + (f" by {who}" if who else ""))
    elif isinstance(payload.get("reason"), str) and payload["reason"]:
        bits.append(REASON_WORDS.get(payload["reason"], payload["reason"]))
    if kind in ("node.failed", "run.failed"):
        bits.append(error_words(payload.get("error")))
    return " · ".join(b for b in bits if b)


def decision_words(payload: Mapping[str, Any], who: str) -> str:
    """An approval's vote or outcome as people say it ("Approved by Ana: looks right")."""
    if payload.get("action") == "ask":
        return "Asked a question" + (f" ({who})" if who else "")
    value = payload["resumeValue"] if isinstance(payload.get("resumeValue"), Mapping) else {}
    outcome = {**value, **{k: payload.get(k) for k in ("action", "decision", "reason") if k in payload}}
    if payload.get("reason") == "timeout":
        outcome["action"] = "timeout"
    return in_words(outcome, who or None)


def event_details(event: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> Shown | None:
    """The part of an event worth reading as fields (None: its line says it all)."""
    payload = event.get("payload") or {}
    kind = event.get("type")
    if kind == "run.started":
        return shown("Inputs", payload.get("inputs"))
    if kind == "run.completed":
        return shown("Results", payload.get("outputs"))
    if kind == "node.completed":
        return shown("Output", payload.get("outputs"), labels)
    if kind == "interrupt.requested":
        asked = approval.artifact_of(payload, labels)
        return None if asked is None else Shown(asked.heading, asked.content)
    if kind in ("interrupt.resolved", "approval.received"):
        # An approval's comment is in its line already.
        said_already = {"comment"} if kind == "approval.received" or payload.get("kind") == "approval" else set()
        return shown("Answer", answer_of(payload.get("resumeValue"), said_already))
    return None


def answer_of(value: Any, said_already: set[str] | frozenset[str] = frozenset()) -> Any:
    """What a person answered, without what the service stamped on it (who, when, which action: said in words)."""
    if isinstance(value, Mapping):
        left_out = DECISION_STAMPS | said_already
        return {k: v for k, v in value.items() if k not in left_out and v not in (None, "", [], {})}
    return value


def shown(heading: str, value: Any, labels: Mapping[str, str] | None = None) -> Shown | None:
    if value is None or value == {} or value == []:
        return None
    return Shown(heading, cell_of(value, labels))


# -- a step's input and output ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepInputs:
    """What is known of one step, for its Input / Output panel."""

    # The gate's latest request payload (open, or its last interrupt.requested on the page); None: not a gate, or none
    asked: Mapping[str, Any] | None
    # Its declared inputs bound from the run's values (None: it declares none)
    bound: Mapping[str, Any] | None
    # Its output (None: none yet)
    output: Any
    # Its error, when it failed
    error: Mapping[str, Any] | None


def step_panel(
    step: StepInputs, labels: Mapping[str, str], people: Mapping[str, str]
) -> tuple[list[Shown], list[Shown]]:
    """(input, output) of a step as values to read; a decided approval's outcome in words, then what else it holds."""
    given: list[Shown] = []
    if step.asked is not None:
        artifact = approval.artifact_of(step.asked, labels)
        if artifact is not None:
            given.append(Shown(artifact.heading, artifact.content))
    if step.bound:
        given.append(Shown("Its inputs", cell_of(step.bound, labels)))
    gave: list[Shown] = []
    if step.error is not None:
        gave.append(Shown("What went wrong", Cell("text", text=error_words(step.error))))
    output = step.output
    if (
        step.asked is not None
        and step.asked.get("kind") == "approval"
        and isinstance(output, Mapping)
        and output.get("action")
    ):
        who = person(output.get("decidedBy"), people)
        gave.append(Shown("Decision", Cell("text", text=in_words({**output, "decidedBy": None}, who or None))))
        output = answer_of(output, {"comment", "refineFeedback"})
    if output is not None and output != {}:
        gave.append(Shown("Output", cell_of(output, labels)))
    return given, gave


def latest_request(events: Sequence[Mapping[str, Any]], node_id: str) -> Mapping[str, Any] | None:
    """The latest request a gate made among these events."""
    return next(
        (
            e.get("payload") or {}
            for e in reversed(events)
            if e.get("type") == "interrupt.requested" and e.get("nodeId") == node_id
        ),
        None,
    )


def failure_of(events: Sequence[Mapping[str, Any]], node_id: str) -> Mapping[str, Any] | None:
    """The error of the step's latest failure among these events."""
    failed = next(
        (
            e.get("payload") or {}
            for e in reversed(events)
            if e.get("type") == "node.failed" and e.get("nodeId") == node_id
        ),
        None,
    )
    return None if failed is None else (failed.get("error") or {})


# -- who may still vote -----------------------------------------------------------------------------------------------

ACCEPTING = ("accept", "edit-accept")


def still_to_vote(
    payload: Mapping[str, Any], votes: Sequence[Mapping[str, Any]], voted: set[str], people: Mapping[str, str]
) -> str | None:
    """Who may still vote on an approval, and how many approvals it still needs, in words (None: not an approval).
    `voted`: the subject ids who voted. Eligibility as the gate names it (its approvers, groups and roles); no one
    named: anyone who may decide here."""
    if payload.get("kind") != "approval":
        return None
    data = payload.get("data") or {}
    required = data["requiredApprovals"] if isinstance(data.get("requiredApprovals"), int) else 1
    needed = max(0, required - sum(1 for v in votes if v.get("action") in ACCEPTING))
    named = [str(a) for a in data.get("approversList") or []]
    waiting = [person(a, people) for a in named if not any(a == v or a.endswith(":" + v) for v in voted)]
    who = [
        *waiting,
        *(f"anyone in group {g}" for g in data.get("approverGroupRefs") or []),
        *(f"anyone with role {r}" for r in data.get("approverRoleRefs") or []),
    ]
    if not named and not data.get("approverGroupRefs") and not data.get("approverRoleRefs"):
        who = ["anyone who may decide here and has not voted"]
    more = f"{needed} more approval{'s' if needed != 1 else ''} needed"
    return f"{', '.join(who) or 'nobody named is left'} ({more})"


# -- the notification log ---------------------------------------------------------------------------------------------

NOTIFICATION_OUTCOMES = {
    "sent": "Sent",
    "skipped": "Not sent",
    "failed": "Failed",
    "not_configured": "No channel set up",
    "queued": "Waiting to be sent",
}
# Why a notification was not sent (the notify worker's reasons), in words.
NOTIFICATION_REASONS = {
    "settled": "the request was already decided",
    "voted": "they had already voted",
    "run_gone": "the run is gone",
    "not_in_directory": "they are not in the directory",
    "no_channel": "the directory has no way to reach them",
    "not_configured": "no channel is set up for the tenant",
    "assigned_elsewhere": "someone else works the request",
}


def purpose_words(purpose: str) -> str:
    """Why someone was told: asked to decide, reminded, or escalated to."""
    if purpose == "raised":
        return "Asked to decide"
    if purpose == "escalation":
        return "Escalated: nobody decided in time"
    if purpose.startswith("reminder-"):
        return f"Reminder {purpose.removeprefix('reminder-')}: not decided yet"
    return purpose
