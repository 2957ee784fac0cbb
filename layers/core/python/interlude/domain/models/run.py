"""A run's durable state: what the run head item holds (as JSON) between transitions."""


import json
import math
import re
from collections.abc import Mapping
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticSerializationError

from interlude.domain import formats
from interlude.domain.budgets import MAX_WRITTEN_NUMBERS
from interlude.domain.models import new_list

RunStatus = Literal[
    "pending",
    "running",
    "waiting-approval",
    "waiting-input",
    "waiting-external",
    "completed",
    "failed",
    "cancelled",
]
TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
WAITING_STATUSES: frozenset[str] = frozenset({"waiting-approval", "waiting-input", "waiting-external"})
# "running": a core.delay node sleeping until its wake-up time.
NodeStatus = Literal["pending", "queued", "running", "suspended", "completed", "failed", "skipped"]
TERMINAL_NODE_STATUSES: frozenset[str] = frozenset({"completed", "failed", "skipped"})


class Mutable(BaseModel):
    """A part of the run head's document, rewritten by every transition: a field written by a later release is kept
    and written back (interlude.domain.models.Stored says why)."""

    model_config = ConfigDict(extra="allow", validate_assignment=False, defer_build=True)


class NodeState(Mutable):
    status: NodeStatus = "pending"
    visits: int = 0
    # Step counters: a source counts for a target only if it settled after the target last started.
    activatedAt: int = -1
    settledAt: int = -1
    # Set by a routing node (modulex.conditional) when it completes: the targets it continues to.
    routes: list[str] | None = None


# What of a vote anyone who may see the interrupt is shown (the run snapshot and the inbox alike).
PUBLIC_VOTE_FIELDS = ("principal", "action", "at", "surface", "groups", "roles", "castBy", "delegation", "delegate")


class Vote(Mutable):
    principal: str
    action: str
    at: str
    surface: str
    subject: dict[str, Any] | None = None
    groups: list[str] = Field(default_factory=new_list)
    roles: list[str] = Field(default_factory=new_list)
    resumeValue: Any = None
    # Delegation (issue 14 item 4). On a vote cast for another principal: who cast it (`principal` is whose vote it
    # is) and by which delegation ("interrupt" or "out-of-office"). On an `action: "delegate"` record: to whom.
    castBy: str | None = Field(default=None, exclude_if=lambda v: v is None)
    delegation: str | None = Field(default=None, exclude_if=lambda v: v is None)
    delegate: str | None = Field(default=None, exclude_if=lambda v: v is None)


class OpenInterrupt(Mutable):
    nodeId: str
    key: str
    interruptId: str
    kind: str
    visit: int
    payload: dict[str, Any]
    raisedAt: str
    # Epoch seconds, or None when the interrupt has no timeout.
    deadline: float | None = None
    votes: list[Vote] = Field(default_factory=new_list)
    # Issue 29 item 3: who works the gate now (a subject id), claimed by them or assigned by another (`assignedBy`),
    # and when. It narrows who is reminded, never who may decide.
    assignee: str | None = Field(default=None, exclude_if=lambda v: v is None)
    assignedBy: str | None = Field(default=None, exclude_if=lambda v: v is None)
    assignedAt: str | None = Field(default=None, exclude_if=lambda v: v is None)
    # Format 4 (domain/head_parts.py): set, `payload` holds only what the decision reads, and the whole payload, whose
    # digest this is, is read from the interrupt item; None: `payload` is whole.
    payloadDigest: str | None = Field(default=None, exclude_if=lambda v: v is None)
    # The format its interrupt item was written in (None: 1). A format-3 item (domain/formats.GATE_STATUS_ON_HEAD)
    # carries no status: the gate's close writes nothing to it, whichever release closes it (store/run_items.py).
    itemFormat: int | None = Field(default=None, exclude_if=lambda v: v is None)
    # The table its inbox entries are in (format 11, docs/adr/0161: "entries", the second; None: the first), so that
    # every later write of them (a claim's put, a delegate's, the close's delete) goes where they are.
    entriesTable: str | None = Field(default=None, exclude_if=lambda v: v is None)

    @property
    def written_once(self) -> bool:
        """Whether its item is in format 3: written when the gate opened, never by its close."""
        return self.itemFormat == formats.GATE_STATUS_ON_HEAD


class Delay(Mutable):
    """A core.delay node asleep: it completes when `due` (epoch seconds) has passed."""

    visit: int
    delayMs: int
    due: float


class PendingAction(Mutable):
    """A node whose work is done outside the run (core.http): it completes when its worker reports the outcome.

    `request` is what the worker performs (interlude.engine.actions documents it); `effectId` is the effect's
    identity (OpenWOP idempotency Layer 2), the same on every attempt and every redelivery."""

    visit: int
    kind: str
    effectId: str
    keying: Literal["business-identity", "activity-recipe"]
    request: dict[str, Any]
    requestedAt: str


class ForkOrigin(Mutable):
    """Where a forked run came from (POST /runs/{runId}:fork, or a redrive: engine/forks.py)."""

    sourceRunId: str
    fromSeq: int
    mode: Literal["replay", "branch"]
    redrive: bool = False


class RunState(Mutable):
    v: int = 1  # this document's format (domain/formats.py)
    runId: str
    tenant: str
    workflowId: str
    workflowVersion: int
    status: RunStatus = "pending"
    owner: dict[str, Any]
    inputs: dict[str, Any] = Field(default_factory=dict)
    # Format 4 (domain/head_parts.py): the event batch (its last sequence) whose run.started event holds the inputs,
    # on a head whose inputs may be left out of it; and, while they are left out (`inputs` empty), their digest.
    inputsBatch: int | None = Field(default=None, exclude_if=lambda v: v is None)
    inputsDigest: str | None = Field(default=None, exclude_if=lambda v: v is None)
    configurable: dict[str, Any] | None = None
    tags: list[str] = Field(default_factory=new_list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Run search (rules/run_search.py): the workflow's name (its title's words), and the metadata keys the tenant
    # declared searchable when the run was created (the run is indexed under those, and found by them only).
    workflowName: str | None = Field(default=None, exclude_if=lambda v: v is None)
    searchableMetadata: list[str] = Field(default_factory=new_list, exclude_if=lambda v: not v)
    # Issue 31: whether its title's words are indexed (the tenant's searchTitles at its creation), and the provisional
    # expiry its search entries are written with (epoch s). None: a run created before either existed (its entries
    # include its title words and carry no expiry until the retention job stamps them).
    searchTitles: bool = Field(default=False, exclude_if=lambda v: not v)
    searchExpiry: int | None = Field(default=None, exclude_if=lambda v: v is None)
    callbackUrl: str | None = None
    # The API key that created the run (issue 26, S3): the links its callback notices carry act for that key.
    createdByKey: str | None = None
    createdAt: str
    startedAt: str | None = None
    completedAt: str | None = None
    step: int = 0
    executed: int = 0
    nodes: dict[str, NodeState] = Field(default_factory=dict)
    outputs: dict[str, Any] = Field(default_factory=dict)
    queue: list[str] = Field(default_factory=new_list)
    interrupts: dict[str, OpenInterrupt] = Field(default_factory=dict)
    # Conversations this run opened (core.conversationGate): id -> open | closing | closed.
    conversations: dict[str, str] = Field(default_factory=dict)
    # Sleeping core.delay nodes by node id, and the run's own deadline (configurable.run.runTimeoutMs), epoch s.
    delays: dict[str, Delay] = Field(default_factory=dict)
    deadline: float | None = None
    # Nodes waiting on work done outside the run (core.http through the actions queue), by node id.
    actions: dict[str, PendingAction] = Field(default_factory=dict)
    error: dict[str, Any] | None = None
    failedNodeId: str | None = None
    nextSeq: int = 0
    # Sub-workflows (engine/subworkflows.py): the run and node visit that started this run as its child, how deep
    # it sits under its root run, and the child runs this run started (at most MAX_CHILDREN_PER_RUN).
    parentRunId: str | None = None
    parentNodeId: str | None = None
    parentVisit: int | None = None
    depth: int = 0
    children: list[str] = Field(default_factory=new_list)
    # Forks (engine/forks.py): the run this one was forked from; the source's decided gates and performed effects it
    # has not reached yet ({"gates": {...}, "effects": {...}}, each entry dropped when used); the runs forked from this
    # one (at most MAX_FORKS_PER_RUN, oldest first). Left out of the document while empty.
    fork: ForkOrigin | None = Field(default=None, exclude_if=lambda v: v is None)
    recorded: dict[str, dict[str, Any]] = Field(default_factory=dict, exclude_if=lambda v: not any(v.values()))
    forks: list[str] = Field(default_factory=new_list, exclude_if=lambda v: not v)
    # The tenant usage shard this run's open-runs claim went to (interlude.store.limits), released there.
    usageShard: int = 0
    # What the run owes its tenant's usage since its counter item last billed it (decisions, storageBytes: rules/usage),
    # billed by the transaction that ends it (store/transitions.py, docs/adr/0123). Left out of the document while empty.
    unbilled: dict[str, int] = Field(default_factory=dict, exclude_if=lambda v: not v)
    # How the request that started the run wrote the numbers Python writes back otherwise (`1.50`, `1e3`), by the text
    # Python writes (domain/written_numbers.spellings): a page shows a number as its caller wrote it (docs/adr/0119). Never
    # answered by the API; left out of the document while empty.
    writtenNumbers: dict[str, str] = Field(default_factory=dict, exclude_if=lambda v: not v)

    def with_written_numbers(self, written: Mapping[str, str] | None) -> Self:
        """This state, also keeping how `written` (a decision's request or form) wrote its numbers; the first spelling
        of a value stays, and at most MAX_WRITTEN_NUMBERS are kept."""
        fresh = {k: v for k, v in (written or {}).items() if k not in self.writtenNumbers}
        room = MAX_WRITTEN_NUMBERS - len(self.writtenNumbers)
        if not fresh or room <= 0:
            return self
        return self.model_copy(update={"writtenNumbers": {**self.writtenNumbers, **dict(list(fresh.items())[:room])}})

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def run_options(self) -> dict[str, Any]:
        """configurable.run: the per-run limits and thresholds (maxLoopIterations, runTimeoutMs, ...)."""
        return (self.configurable or {}).get("run") or {}



# The run head's document (issue 13, item 3), written and read by pydantic-core (about three times faster than a
# model_dump walked into json.dumps, and json.loads walked into model_validate). Its bytes are the same compact,
# ASCII-escaped JSON json.dumps makes, and so as long as budgets.json_size counts (the run-state budget measures them).
# Keys keep their order (fields as declared, dicts as built; the store used to sort them, so a reloaded state's dicts
# came back sorted: now a resumed transition sees them as the transition that built them did). The reference encoder
# below makes the same document where pydantic-core and Python print differently or one refuses to: a float whose exponent is
# -5 to -9 ("0.00001" or "1e-7" for "1e-05", "1e-07"), a DEL character (left raw, not "\u007f"), a lone surrogate (a
# serialisation error), a non-finite float in a float field (null, where json.dumps refuses it). A document that may
# hold any of them is made by the reference encoder instead; strings that merely look like one only cost that time.
_REFERENCE = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_SHORT_EXPONENT = re.compile(rb"e-\d(?!\d)")


def _may_differ(made: bytes) -> bool:
    # Substring tests first (each a memchr-speed scan); the pattern only when an "e-" is there at all.
    return b"0.0000" in made or b"\x7f" in made or (b"e-" in made and _SHORT_EXPONENT.search(made) is not None)


def _float_fields_finite(state: RunState) -> bool:
    # Plain loops: a resolve asks twice (its state measured, then written), and generators cost more than the floats.
    if state.deadline is not None and not math.isfinite(state.deadline):
        return False
    for interrupt in state.interrupts.values():
        if interrupt.deadline is not None and not math.isfinite(interrupt.deadline):
            return False
    return all(math.isfinite(delay.due) for delay in state.delays.values()) if state.delays else True


def state_json(state: RunState) -> bytes:
    """The state's compact JSON: what the run head stores and what the run-state budget measures (its length).

    A field at its default is left out (a reader's model fills it back): a waiting run's parent, error, deadline and
    empty maps cost ≈ 140 B of the deflated head, which a timed gate's head with a callback URL had crossed 1 KB by,
    doubling its two transactional writes (docs/adr/0153). So a default is part of the format: changing one is a
    format change."""
    if _float_fields_finite(state):
        try:
            made = state.model_dump_json(ensure_ascii=True, exclude_defaults=True).encode()
        except PydanticSerializationError:
            pass
        else:
            if not _may_differ(made):
                return made
    return _REFERENCE.encode(state.model_dump(mode="json", exclude_defaults=True)).encode()


def state_from_json(raw: bytes | str) -> RunState:
    """A stored state document (either encoder's, any key order), validated as model_validate(json.loads(raw)) would:
    what pydantic-core's parser refuses (a lone surrogate's escape) is parsed by json.loads, and an invalid document
    raises that path's ValidationError. A document in a format newer than this release reads (its `v`) is refused as
    such (domain/formats.py), before any validation error its new shape would raise."""
    try:
        state = RunState.model_validate_json(raw)
    except ValidationError:
        document = json.loads(raw)
        formats.check("run", document.get(formats.FORMAT_FIELD) if isinstance(document, dict) else None)
        state = RunState.model_validate(document)
    formats.check("run", state.v)
    return state
