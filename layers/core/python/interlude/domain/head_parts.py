"""Format 4 of the run head (docs/adr/0127): a large gate text and large inputs held elsewhere, not in the head.

The run head is written in every transition of its run, inside a transaction (2 WRU per started KB, by the larger of
the item before and after), yet a gate's text and the run's inputs are already stored where they are written once:
the gate's whole payload in its interrupt item (and its `interrupt.requested` event), the inputs in the run.started
event of the run's first event batch. A head in format 4 keeps of an open gate's large payload what the reads of a head
that put nothing back use (its title, approvers, audience, actions, quorum) and the whole payload's digest
(OpenInterrupt.payloadDigest), and of large inputs only the batch that holds them and their digest
(RunState.inputsBatch, inputsDigest). Whatever reads a head reads the parts it needs back (store/head_parts.py):
`held_elsewhere` says which, `completed` puts them back, after checking each against its digest.

Only large parts leave the head: below PAYLOAD_TEXT_INLINE_MAX and INPUTS_INLINE_MAX bytes they stay, and a head that
holds them reads nothing more.

Format 9 (docs/adr/0134) does the same for the events that repeat a gate's payload (`interrupt.requested` and its
kind's own type), written in the transaction that puts the gate's interrupt item: an event batch in format 9 keeps of
such an event the payload a head keeps (`decision_payload`) and names the whole (EVENT_PAYLOAD_HELD: the interrupt's
key and the whole payload's digest). Every read of stored events puts it back (`events_filled`) before anyone sees an
event: what a caller receives is the event as it was emitted.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from interlude.domain import formats
from interlude.domain.errors import Internal
from interlude.domain.ids import MODULEX_INTERRUPT_KIND
from interlude.domain.models.run import OpenInterrupt, RunState
from interlude.domain.title_words import MAX_TITLE_WORDS, words

# The fields of a gate's `data` that only display it (no decision, notice routing or search reads them: ADR 0127),
# by the gate's kind: the prose a page, a notice and an inbox row show.
TEXT_FIELDS: dict[str, tuple[str, ...]] = {"approval": ("description", "artifactData")}
# A ModuleX interrupt (kind `custom`, faces/modulex/nodes.py interrupt_data) holds what its face shows under this key of
# its data: its `message` (rendered from the node's template when it opens, often the draft it asks about), the state
# it snapshots, its resume schema and examples (ADR 0142).
MODULEX_KIND = "custom"
MODULEX_TEXT = "payload"
# A text of the document this long or longer that a ModuleX message repeats is not counted as the message's own.
REPEAT_MIN = 64
# What leaves the head with a large text besides: the answer's schema (≈ 600 B of JSON for an approval), which only the
# decision reads, and the decision reads the whole payload back.
LEAVES_WITH_TEXT = ("resumeSchema",)
# A gate's text (its TEXT_FIELDS, as compact JSON) up to this many bytes stays in the head; above it, it leaves. Each
# started KB a transaction writes costs 2 WRU, and the head is written at least twice while the gate is open; reading
# the text back costs one strongly consistent read of ≤ 4 KB (1 RRU, a fifth of a WRU) per page or notice that shows
# it (ADR 0127 has the figures).
PAYLOAD_TEXT_INLINE_MAX = 512
# The run's inputs (compact JSON) up to this many bytes stay in the head; above it, they leave.
INPUTS_INLINE_MAX = 512
# A gate's text of any size leaves the head or the event batch that would hold it where leaving it makes that item
# cost a unit less (store/run_items.py: a smaller text is then read back as a large one is; docs/adr/0153).
ANY_TEXT = 0


def digest(value: Any) -> str:
    """The sha256 of `value` as canonical JSON (sorted keys, compact, ASCII): the same for the dict a transition held and
    the one read back from an item's JSON."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=True, allow_nan=False))


def decision_payload(
    payload: Mapping[str, Any], held: Iterable[str] = (), inline_max: int = PAYLOAD_TEXT_INLINE_MAX
) -> dict[str, Any] | None:
    """What the head keeps of a gate's payload when its text is large (the payload without its TEXT_FIELDS and what
    LEAVES_WITH_TEXT; a ModuleX interrupt's: `modulex_kept`, `held` the texts the document holds besides); None: its
    text is small (or it has none), and the whole payload stays. Large: over `inline_max` bytes."""
    data = payload.get("data")
    if not isinstance(data, Mapping):
        return None
    if modulex(payload):
        kept_data = modulex_kept(data, held, inline_max)
    else:
        text = {k: data[k] for k in TEXT_FIELDS.get(str(payload.get("kind")), ()) if k in data}
        large = bool(text) and _size(text) > inline_max
        kept_data = {k: v for k, v in data.items() if k not in text} if large else None
    if kept_data is None:
        return None
    kept = {k: v for k, v in payload.items() if k not in LEAVES_WITH_TEXT}
    return {**kept, "data": kept_data}


def modulex_kept(
    data: Mapping[str, Any], held: Iterable[str] = (), inline_max: int = PAYLOAD_TEXT_INLINE_MAX
) -> dict[str, Any] | None:
    """What the head keeps of a ModuleX interrupt's `custom` data when what its face shows (MODULEX_TEXT: the rendered
    message, the state snapshot, the resume schema and examples, none of which a decision reads) is large: the data
    without it, and its message's searchable words as the gate's title (`title`, which rules/run_search.gate_title
    reads before the message), so a read that puts nothing back (retention's search entries, from stored events) finds
    the same words. None: it is small, or its words would not read back the same (the whole payload stays).

    Large means large less what the message repeats of `held` (texts the document holds besides: a `{{node}}`
    reference renders a node's output, which the head and the batch hold already, and deflate stores a repeat as a
    back-reference of a few bytes): such a message costs the document next to nothing, and leaving it would cost every
    read of the gate one read more (ADR 0142)."""
    shown = data.get(MODULEX_TEXT)
    if not isinstance(shown, Mapping):
        return None
    message = shown.get("message")
    own = message if isinstance(message, str) else ""
    for text in held:
        if len(text) >= REPEAT_MIN:
            own = own.replace(text, "")
    if _size({**shown, "message": own}) <= inline_max:
        return None
    found = words(message)[:MAX_TITLE_WORDS] if isinstance(message, str) else []
    title = " ".join(found)
    if words(title) != found:
        return None
    kept = {k: v for k, v in data.items() if k != MODULEX_TEXT}
    return {**kept, "title": title} if title else kept


def modulex(payload: Mapping[str, Any]) -> bool:
    """Whether the gate is a ModuleX interrupt's (faces/modulex/nodes.py interrupt_data)."""
    data = payload.get("data")
    return payload.get("kind") == MODULEX_KIND and isinstance(data, Mapping) and data.get("customKind") == MODULEX_INTERRUPT_KIND


def texts(value: Any) -> list[str]:
    """Every string `value` holds (in its lists and objects), at least REPEAT_MIN long."""
    if isinstance(value, str):
        return [value] if len(value) >= REPEAT_MIN else []
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return [t for item in value for t in texts(item)]
    return []


def inputs_leave(state: RunState, docs: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the run's inputs are large and the event docs of the batch a transition writes (the run's first) hold
    them in its run.started event: the head then names that batch (RunState.inputsBatch) and leaves them to it. Heads
    with small inputs name no batch (a head near a KB pays 2 WRU a write for the bytes)."""
    started = next((d for d in docs if d.get("type") == "run.started"), None)
    return (
        started is not None
        and (started.get("payload") or {}).get("inputs") == state.inputs
        and _size(state.inputs) > INPUTS_INLINE_MAX
    )


def lean(state: RunState, text_inline_max: int = PAYLOAD_TEXT_INLINE_MAX) -> RunState:
    """The state as a format-4 head holds it: each open gate's large text (over `text_inline_max` bytes) and the run's
    large inputs (when the head knows the event batch that holds them) left out, with their digests; the state itself
    when nothing leaves (in its format as read). A part already left out stays out."""
    interrupts: dict[str, OpenInterrupt] = {}
    for node_id, interrupt in state.interrupts.items():
        if interrupt.payloadDigest is not None:
            continue
        # What a ModuleX message may repeat (walked only for such a gate: every head write of a run leans it)
        kept = decision_payload(interrupt.payload, texts(state.outputs) if modulex(interrupt.payload) else (), text_inline_max)
        if kept is not None:
            interrupts[node_id] = interrupt.model_copy(update={"payload": kept, "payloadDigest": digest(interrupt.payload)})
    update: dict[str, Any] = {}
    if interrupts:
        update["interrupts"] = {**state.interrupts, **interrupts}
    if state.inputsBatch is not None and state.inputsDigest is None and _size(state.inputs) > INPUTS_INLINE_MAX:
        update.update(inputs={}, inputsDigest=digest(state.inputs))
    if not update:
        return state
    return state.model_copy(update={**update, "v": max(state.v, formats.HEAD_PARTS_ELSEWHERE)})


# The field of a stored event (format 9) whose payload its gate's interrupt item holds: {"key": the interrupt's key,
# "digest": the whole payload's}. Never seen by a caller: `events_filled` takes it off.
EVENT_PAYLOAD_HELD = "payloadHeld"


def lean_events(
    docs: Sequence[Mapping[str, Any]], opened: Sequence[OpenInterrupt], text_inline_max: int = PAYLOAD_TEXT_INLINE_MAX
) -> list[dict[str, Any]] | None:
    """The event docs as a format-9 batch holds them: each event whose payload is a gate's opened with them (its
    interrupt item written in the same transaction) and whose text is large (over `text_inline_max` bytes) keeps the
    payload a format-4 head keeps and names the whole; None when nothing leaves. The payload's key stays where it was,
    so a filled event is the event."""
    by_node = {i.nodeId: i for i in opened}
    asks = any(modulex(i.payload) for i in opened)
    held = texts([d.get("payload") for d in docs if by_node.get(str(d.get("nodeId"))) is None]) if asks else []
    lean: list[dict[str, Any]] = []
    left = False
    for doc in docs:
        interrupt = by_node.get(str(doc.get("nodeId")))
        kept = (
            decision_payload(interrupt.payload, held, text_inline_max)
            if interrupt is not None and doc.get("payload") == interrupt.payload
            else None
        )
        if interrupt is None or kept is None:
            lean.append(dict(doc))
            continue
        left = True
        lean.append({**doc, "payload": kept, EVENT_PAYLOAD_HELD: {"key": interrupt.key, "digest": digest(interrupt.payload)}})
    return lean if left else None


def events_held(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """The keys of the interrupts whose items hold payloads of `events` (stored events, format 9)."""
    return list(dict.fromkeys(str(e[EVENT_PAYLOAD_HELD]["key"]) for e in events if EVENT_PAYLOAD_HELD in e))


def events_filled(run_id: str, events: list[dict[str, Any]], payloads: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`events` (stored events of run `run_id`, in place) with each payload held elsewhere put back from `payloads`
    (the interrupt items' by key), each a copy of its own; a payload missing or not the one the event names is a failure
    of this host (Internal), never shown or sent."""
    for event in events:
        held = event.pop(EVENT_PAYLOAD_HELD, None)
        if held is not None:
            payload = _checked(run_id, f"interrupt {held['key']}", payloads.get(held["key"]), held["digest"], "an event")
            event["payload"] = copy.deepcopy(payload)
    return events


def held_elsewhere(state: RunState) -> tuple[list[str], int | None]:
    """What `state` holds elsewhere: the keys of the interrupts whose payload is their interrupt item's, and the event
    batch (its last sequence) whose run.started event holds the inputs (None: the inputs are here)."""
    keys = [i.key for i in state.interrupts.values() if i.payloadDigest is not None]
    return keys, state.inputsBatch if state.inputsDigest is not None else None


def completed(
    state: RunState, payloads: Mapping[str, Any], started: Mapping[str, Any] | None, inputs: bool = True
) -> None:
    """Put back into `state` (in place) what it holds elsewhere: `payloads` by interrupt key (the interrupt items'),
    `started` the run.started event's payload (None: none was read; with `inputs` False, the inputs then stay where
    they are, `inputsDigest` set). Each must match its digest: a part missing or not the one the head names is a
    failure of this host (Internal), never shown or decided on."""
    for interrupt in state.interrupts.values():
        if interrupt.payloadDigest is not None:
            interrupt.payload = _checked(state.runId, f"interrupt {interrupt.key}", payloads.get(interrupt.key), interrupt.payloadDigest)
            interrupt.payloadDigest = None
    if state.inputsDigest is not None and (inputs or started is not None):
        read = started.get("inputs") if started is not None else None
        state.inputs = _checked(state.runId, "inputs", read, state.inputsDigest)
        state.inputsDigest = None


def _checked(run_id: str, part: str, value: Any, expected: str, holder: str = "its head") -> Any:
    if isinstance(value, dict) and digest(value) == expected:
        return value
    raise Internal(
        f"run {run_id}: {holder} holds its {part} elsewhere, and what is stored there is "
        + ("missing" if value is None else "not what it names (its digest differs)"),
        {"runId": run_id, "part": part},
    )
