"""A run's durable state: what the run head item holds (as JSON) between transitions."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

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
    model_config = ConfigDict(extra="forbid", validate_assignment=False, defer_build=True)


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
    groups: list[str] = Field(default_factory=list)
    roles: list[str] = Field(default_factory=list)
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
    votes: list[Vote] = Field(default_factory=list)


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


class RunState(Mutable):
    v: int = 1  # format version of this document
    runId: str
    tenant: str
    workflowId: str
    workflowVersion: int
    status: RunStatus = "pending"
    owner: dict[str, Any]
    inputs: dict[str, Any] = Field(default_factory=dict)
    configurable: dict[str, Any] | None = None
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    callbackUrl: str | None = None
    createdAt: str
    startedAt: str | None = None
    completedAt: str | None = None
    step: int = 0
    executed: int = 0
    nodes: dict[str, NodeState] = Field(default_factory=dict)
    outputs: dict[str, Any] = Field(default_factory=dict)
    queue: list[str] = Field(default_factory=list)
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
    children: list[str] = Field(default_factory=list)
    # The tenant usage shard this run's open-runs claim went to (interlude.store.limits), released there.
    usageShard: int = 0

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def run_options(self) -> dict[str, Any]:
        """configurable.run: the per-run limits and thresholds (maxLoopIterations, runTimeoutMs, ...)."""
        return (self.configurable or {}).get("run") or {}

