"""A run's events and values as a person reads them on the run page (issue 29 item 3): each event in words with the
fields worth reading, and what a step was given and what it gave back. Pure: events and values in, words and
`text.Cell`s out; never an event's own field names, never JSON.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from interlude.api.page import approval
from interlude.api.page.names import Names
from interlude.api.page.text import Cell, as_written, cell_of
from interlude.domain.audit_words import AUDIT_ACTIONS, SURFACES
from interlude.domain.event_words import event_in_words
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.domain.outcomes import in_words
from interlude.engine.nodetypes import STEP_INPUTS, STEP_INPUTS_DIGEST
from interlude.faces.modulex.references import modulex_id

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
    # Its declared inputs: as bound when it last started (`recorded`), else bound from the run's values as they are now
    # (a start from before the inputs were recorded, or off this page of events); None: it declares none
    bound: Mapping[str, Any] | None
    # Its output (None: none yet)
    output: Any
    # Its error, when it failed
    error: Mapping[str, Any] | None
    recorded: bool = False
    # The size of inputs too large to keep when it started (then `bound` is None)
    too_large: int | None = None


def step_panel(
    step: StepInputs, labels: Mapping[str, str], people: Mapping[str, str]
) -> tuple[list[Shown], list[Shown]]:
    """(input, output) of a step as values to read; a decided approval's outcome in words, then what else it holds."""
    given: list[Shown] = []
    if step.asked is not None:
        artifact = approval.artifact_of(step.asked, labels)
        if artifact is not None:
            given.append(Shown(artifact.heading, artifact.content))
    if step.too_large is not None:
        kept = f"{step.too_large:,} bytes when it started: too large to keep, so not shown"
        given.append(Shown("Its inputs when it started", Cell("text", text=kept)))
    elif step.bound:
        heading = "Its inputs when it started" if step.recorded else "Its inputs, as the run stands now"
        given.append(Shown(heading, cell_of(step.bound, labels)))
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


def started_inputs(events: Sequence[Mapping[str, Any]], node_id: str) -> Mapping[str, Any] | None:
    """What the step's latest start among these events recorded of its inputs (engine/nodetypes.recorded_inputs): its
    node.started payload's inputs or their size and digest; None when it recorded neither."""
    for e in reversed(events):
        if e.get("type") == "node.started" and e.get("nodeId") == node_id:
            payload = e.get("payload") or {}
            kept = {k: payload[k] for k in (STEP_INPUTS, STEP_INPUTS_DIGEST) if isinstance(payload.get(k), Mapping)}
            return kept or None
    return None


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
    # A channel set up failed for good (its error class says how): not "nothing set up" (docs/adr/0208).
    "undeliverable": "it cannot be delivered; trying again would not help",
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


# -- callback deliveries ---------------------------------------------------------------------------------------------

DELIVERY_OUTCOMES = {"succeeded": "Delivered", "failed": "Failed"}
# Why an attempt failed (the delivery worker's error class), in words.
DELIVERY_FAILURES = {
    "http_status": "the receiver answered with an error",
    "redirect": "the receiver redirected it (not followed)",
    "timeout": "no answer in time",
    "connect": "could not connect",
    "tls": "a secure connection could not be made",
    "protocol": "the answer was not HTTP",
    "io": "the connection broke",
    "too_large": "the answer was too large",
    "egress_denied": "the address is not one the service may call",
    "unprojectable": "the event could not be sent",
    "internal": "an error of the service",
    # A dead letter made on its message's last receive, before its attempts ran out (store/deliveries.py): no attempt.
    "receives_exhausted": "given up before its attempts ran out",
}


# Why a notification's channel failed (the notify worker's error class), in words; the connection's as a delivery's.
NOTIFICATION_FAILURES = {
    **DELIVERY_FAILURES,
    "address_invalid": "their address in the directory is not one mail can go to",
    "credential_gone": "the Slack app that posted it was removed from the tenant's settings or replaced by a webhook",
    "secret_unreadable": "the tenant's Slack settings could not be read",
    **dict.fromkeys(
        ("slack_invalid_auth", "slack_not_authed", "slack_account_inactive", "slack_token_revoked"),
        "Slack no longer accepts the tenant's Slack app",
    ),
    "slack_channel_not_found": "Slack cannot find the conversation",
    "slack_message_not_found": "the Slack message is gone",
    **dict.fromkeys(
        ("slack_cant_update_message", "slack_edit_window_closed"), "Slack no longer lets the message change"
    ),
}


def notification_failure_words(error_class: str) -> str:
    if error_class in NOTIFICATION_FAILURES:
        return NOTIFICATION_FAILURES[error_class]
    if error_class.startswith("slack_"):
        return "Slack refused it"
    if error_class.startswith("ses_"):
        return "the mail service refused it"
    return key_words(error_class).lower()


def delivery_words(attempt: Mapping[str, Any]) -> str:
    status = str(attempt.get("outcome") or attempt.get("status") or "")
    said = DELIVERY_OUTCOMES.get(status, key_words(status))
    failure = attempt.get("errorClass")
    return f"{said}: {DELIVERY_FAILURES.get(str(failure), key_words(str(failure)).lower())}" if failure else said


# -- the audit trail --------------------------------------------------------------------------------------------------

# What an audit entry's action means (domain/audit.ACTIONS, and the claims'), in words.
# An entry's details, by their key: the label, and the words of a value where it is a protocol word.
DETAIL_LABELS = {
    "kind": "Request",
    "action": "Chose",
    "outcome": "Then",
    "comment": "Comment",
    "reason": "Reason",
    "intent": "The link lets them",
    "principal": "For",
    "subjectId": "For",
    "assignee": "Assigned to",
    "expiresAt": "Works until",
    "scopes": "Scopes",
    "settings": "Settings now",
    "keyId": "Key",
    "sourceRunId": "Forked from",
    "fromSeq": "At event #",
    "mode": "How",
}
CHOICES = {
    "accept": "approve",
    "reject": "reject",
    "refine": "request changes",
    "edit-accept": "approve with edits",
    "ask": "ask a question",
}
DETAIL_VALUES: dict[str, Mapping[str, str]] = {
    "action": CHOICES,
    "outcome": {"completed": "the request closed", "failed": "the request closed and the run stopped"},
    "intent": {"resolve": "decide", "inspect": "look, not decide"},
    "mode": {"replay": "replayed from the start", "branch": "branched at an event"},
}
PEOPLE_DETAILS = frozenset({"principal", "subjectId", "assignee"})
CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def key_words(key: str) -> str:
    """A field name a person reads: `retentionDays` as "Retention days"."""
    spaced = CAMEL.sub(" ", key).replace("_", " ").strip()
    return spaced[:1].upper() + spaced[1:].lower() if spaced else key


def readable_labels(value: Any, path: tuple[str, ...] = (), depth: int = 0) -> dict[str, str]:
    """Every key of `value` (nested objects too, by dotted path) in words, for `cell_of`."""
    labels: dict[str, str] = {}
    if isinstance(value, Mapping) and depth < 4:
        for key, item in value.items():
            at = (*path, str(key))
            labels[".".join(at)] = key_words(str(key))
            labels.update(readable_labels(item, at, depth + 1))
    return labels


@dataclass(frozen=True)
class AuditLine:
    """One audit entry as a row: what was done, by whom and where, to what, and what else it records."""

    place: str
    at: str
    action: str
    who: str
    # (words, a console page to open, or "")
    target: tuple[tuple[str, str], ...]
    details: Cell | None


def audit_line(entry: Mapping[str, Any], people: Mapping[str, str], run_href: Any) -> AuditLine:
    """`run_href`: a run id -> its console page."""
    action = str(entry.get("action", ""))
    return AuditLine(
        f"{entry.get('chain', '')}:{entry.get('seq', '')}",
        str(entry.get("at", "")),
        AUDIT_ACTIONS.get(action, key_words(action.replace(".", " "))),
        actor_words(entry.get("actor"), people),
        target_words(entry.get("target"), run_href),
        details_cell(entry.get("details"), people),
    )


def actor_words(actor: Any, people: Mapping[str, str]) -> str:
    if not isinstance(actor, Mapping):
        return ""
    who = person(actor.get("subjectId"), people) or "Someone"
    where = SURFACES.get(str(actor.get("surface")), "")
    return f"{who} {where}".strip()


def target_words(target: Any, run_href: Any) -> tuple[tuple[str, str], ...]:
    """What an entry was about: a run (with a link to it) and its step, a key, a provider, the tenant."""
    if not isinstance(target, Mapping):
        return ()
    said: list[tuple[str, str]] = []
    if target.get("runId"):
        said.append((f"Run {target['runId']}", run_href(str(target["runId"]))))
    if target.get("nodeId"):
        said.append((f"step {modulex_id(str(target['nodeId']))}", ""))
    if target.get("keyId"):
        said.append((f"Key {target['keyId']}", ""))
    if target.get("provider"):
        said.append((f"Account {target['provider']}", ""))
    if target.get("tenant") and not said:
        said.append((f"Tenant {target['tenant']}", ""))
    return tuple(said)


def details_cell(details: Any, people: Mapping[str, str]) -> Cell | None:
    """An entry's details as labelled fields, protocol words said in words (None: it has none worth reading)."""
    if not isinstance(details, Mapping) or not details:
        return None
    if details.get("truncated"):
        return Cell("text", text="Too long to keep; shortened when recorded.")
    shown: dict[str, Any] = {}
    labels: dict[str, str] = {}
    for key, value in details.items():
        if key in PEOPLE_DETAILS:
            value = person(value, people)
        elif key == "kind":
            value = approval.kind_words({"kind": value})
        elif isinstance(value, str) and key in DETAIL_VALUES:
            value = DETAIL_VALUES[key].get(value, value)
        if value in (None, "", [], {}):
            continue
        shown[key] = value
        labels.update(readable_labels({key: value}))
        labels[key] = DETAIL_LABELS.get(key, key_words(key))
    return cell_of(shown, labels) if shown else None


# -- a workflow definition in words -----------------------------------------------------------------------------------

# Where a step goes next, by its incoming edges' trigger rule (the rule is the target's).
TRIGGER_WORDS = {
    "all_success": "",
    "any_success": "once any step before it succeeds",
    "all_complete": "once every step before it has ended, however",
    "none_failed": "unless a step before it failed",
    "any_failed": "if a step before it fails or is rejected",
}
CONDITION_OPERATORS = {"equals": "is", "notEquals": "is not", "contains": "contains", "regex": "matches"}


@dataclass(frozen=True)
class StepWords:
    name: str
    # What it does, in a sentence.
    does: str
    # Where it goes next, each in words.
    then: tuple[str, ...]


def definition_in_words(definition: WorkflowDefinition) -> list[StepWords]:
    """Each step of a definition as a person reads it: its name, what it does, and where the run goes after it."""
    names = {n.id: definition.step_name(n.id) for n in definition.nodes}
    steps = []
    for node in definition.nodes:
        then = tuple(
            _edge_words(names.get(e.targetNodeId, e.targetNodeId), e.condition, definition.trigger_rule(e.targetNodeId))
            for e in definition.outgoing(node.id)
        )
        steps.append(StepWords(names[node.id], step_does(node.typeId, node.config), then))
    return steps


def _edge_words(target: str, condition: Any, rule: str | None) -> str:
    when = ""
    if condition is not None:
        kind = condition.kind
        if kind == "expression":
            when = f"when {condition.expression}"
        elif kind in ("truthy", "falsy"):
            when = f"when {condition.left} is {'set' if kind == 'truthy' else 'not set'}"
        elif kind in CONDITION_OPERATORS:
            right = condition.right if isinstance(condition.right, str) else as_written(condition.right)
            when = f"when {condition.left} {CONDITION_OPERATORS[kind]} {right}"
    else:
        when = TRIGGER_WORDS.get(str(rule), "")
    return f"{target}, {when}" if when else target


def _said(config: Mapping[str, Any], key: str) -> str:
    # As the author wrote it, `{{…}}` and all: here it is the definition's own text, not a value left unfilled.
    value = config.get(key)
    return str(value) if isinstance(value, str | int | float) else ""


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def _approvals_needed(config: Mapping[str, Any]) -> str:
    needed = config.get("requiredApprovals")
    return f" ({needed} approvals needed)" if isinstance(needed, int) and needed > 1 else ""


def _first_line(text: str) -> str:
    return text.strip().partition("\n")[0]


# What a step of each type does, from its config, in a sentence.
STEP_WORDS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "core.approvalGate": lambda c: f"Asks for approval: “{_said(c, 'title')}”{_approvals_needed(c)}.",
    "core.clarificationGate": lambda c: f"Asks {_counted(len(c.get('questions') or []), 'question')}.",
    "core.interrupt": lambda c: "Waits for an outside event." if c.get("kind") == "external-event" else "Asks for input.",
    "core.confidenceGate": lambda c: f"Asks a person to check agent {_said(c, 'agentId')}'s decision when it is unsure.",
    "core.credentialGate": lambda c: f"Asks a person to connect their {_said(c, 'provider')} account.",
    "core.conversationGate": lambda c: "Takes a turn of a conversation with a person.",
    "core.transform": lambda c: f"Works out {', '.join(str(k) for k in c.get('outputs') or {}) or 'nothing'}.",
    "core.http": lambda c: f"Calls {str(c.get('method') or 'POST').upper()} {_said(c, 'url')}.",
    "core.delay": lambda c: "Waits a while before going on.",
    "core.task": lambda c: f"Hands work to a worker ({_said(c, 'taskType')}).",
    "core.subWorkflow": lambda c: f"Runs the workflow {_said(c, 'workflowId')} and waits for it.",
    "core.noop": lambda c: "Marks a point in the run.",
    "modulex.interrupt": lambda c: f"Asks for input: “{_first_line(_said(c, 'message'))}”." if _said(c, "message") else "Asks for input.",
    "modulex.conditional": lambda c: "Chooses where the run goes next.",
    "modulex.transformer": lambda c: "Reshapes the run's values.",
}


def step_does(type_id: str, config: Mapping[str, Any]) -> str:
    """What a step of `type_id` does with `config`, in a sentence."""
    said = STEP_WORDS.get(type_id)
    if said is not None:
        return said(config)
    if type_id.startswith("modulex."):
        return f"Runs a {type_id.removeprefix('modulex.')} step."
    return "A step of its own kind."
