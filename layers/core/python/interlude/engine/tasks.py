"""Task nodes (issue 15 item 2): work the tenant's own workers do, taken from named queues. Pure.

A visit of a task node (`core.task`, and the ModuleX `llm`, `tool`, `agent`, `function`, `knowledge` and
`guardrails` nodes the ModuleX face registers) builds a TaskSpec and leaves the node `running` with a PendingAction
of kind "task", like a `core.http` action; the `interlude.action-requested` event is the outbox's cue to put the
task on its queue (interlude.app.tasks). A worker claims it (POST /tasks:claim), heartbeats, and completes or fails
it; the outcome lands on that visit once (engine.run.finish_action), retries emit `node.retried`
(engine.run.retry_task).

The task's id derives from (run, node, visit): a redelivered request finds the same task. Attempts are counted on
the task item (store/tasks.py): a claim whose heartbeat or timeout lapses, or a retryable failure, puts the task
back on its queue with attempt + 1, after the backoff of the node's `retry_config` (ModuleX shape).

Limits (README, "Task workers"): a queue name is 1..64 of [A-Za-z0-9_.:-]; timeoutSeconds 1..MAX_TIMEOUT_S (default
DEFAULT_TIMEOUT_S) per attempt from its claim; heartbeatTimeoutSeconds 1..MAX_HEARTBEAT_S (default
DEFAULT_HEARTBEAT_S); retry_config.max_attempts 1..MAX_ATTEMPTS (default DEFAULT_ATTEMPTS).
"""


import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from pydantic import Field, model_validator

from interlude.domain.budgets import Meter
from interlude.domain.models import FrozenStored
from interlude.domain.templates import render
from interlude.engine.effect_names import NODE_RETRIED as NODE_RETRIED
from interlude.engine.effect_names import TASK as TASK
from interlude.engine.effect_names import task_id as task_id
from interlude.engine.nodetypes import ActionSpec, NodeType

QUEUE_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
DEFAULT_TIMEOUT_S = 300
MAX_TIMEOUT_S = 24 * 3600
DEFAULT_HEARTBEAT_S = 60
MAX_HEARTBEAT_S = 3600
DEFAULT_ATTEMPTS = 3
MAX_ATTEMPTS = 10
DEFAULT_INITIAL_INTERVAL_MS = 1000
DEFAULT_MAX_INTERVAL_MS = 60_000
MAX_INTERVAL_MS = 3600 * 1000


class RetryConfig(FrozenStored):
    """ModuleX `retry_config` ({max_attempts?, initial_interval? (ms), backoff_factor?}); `max_retries` (the SDK's
    spelling) is read as max_attempts - 1. The intervals are numbers, as modulex-python types them (floats); a whole
    number stays an int, so a stored definition reads and hashes as it did."""

    max_attempts: int = Field(default=DEFAULT_ATTEMPTS, ge=1, le=MAX_ATTEMPTS)
    initial_interval: int | float = Field(default=DEFAULT_INITIAL_INTERVAL_MS, ge=0, le=MAX_INTERVAL_MS, allow_inf_nan=False)
    backoff_factor: float = Field(default=2.0, ge=1.0, le=10.0)
    max_interval: int | float = Field(default=DEFAULT_MAX_INTERVAL_MS, ge=0, le=MAX_INTERVAL_MS, allow_inf_nan=False)
    max_retries: int | None = Field(default=None, ge=0, le=MAX_ATTEMPTS - 1)

    @model_validator(mode="before")
    @classmethod
    def _retries(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and data.get("max_retries") is not None and "max_attempts" not in data:
            return {**data, "max_attempts": data["max_retries"] + 1} if isinstance(data["max_retries"], int) else data
        return data

    def delay_ms(self, attempt: int) -> int:
        """The wait before the attempt after `attempt` (1-based): initial_interval x backoff_factor^(attempt-1)."""
        return int(min(self.initial_interval * self.backoff_factor ** max(0, attempt - 1), self.max_interval))


class TaskLimits(FrozenStored):
    """Where a task goes and how long an attempt may take: every task node's config carries these."""

    queue: str | None = Field(default=None, pattern=QUEUE_RE.pattern)
    timeoutSeconds: int = Field(default=DEFAULT_TIMEOUT_S, ge=1, le=MAX_TIMEOUT_S)
    heartbeatTimeoutSeconds: int = Field(default=DEFAULT_HEARTBEAT_S, ge=1, le=MAX_HEARTBEAT_S)
    retry_config: RetryConfig = Field(default_factory=RetryConfig)


class TaskConfig(TaskLimits):
    """`core.task`: `taskType` names the work (what a worker registers for, and the default queue)."""

    taskType: str = Field(pattern=QUEUE_RE.pattern)
    # Any JSON value whose string leaves are templates over the run's scope; the worker receives it rendered.
    input: Any = None
    # Handed to the worker verbatim.
    config: dict[str, Any] = Field(default_factory=dict)


class TaskSpec(NamedTuple):
    """What a task node's visit puts on a queue."""

    node_type: str
    # The node's id as its author wrote it (a face may spell ids its own way).
    display_node_id: str
    config: Any
    input: Any
    limits: TaskLimits
    # The worker's output is kept as text when it is a string or {"text": str} (a ModuleX llm node).
    text_output: bool = False


def action_of(node_id: str, spec: TaskSpec, scope: Mapping[str, Any]) -> ActionSpec:
    """The PendingAction's request: everything the task item needs, fixed at the visit."""
    run = scope.get("$run") or {}
    tid = task_id(run.get("runId", "probe/probe"), node_id, int(run.get("visit", 1)))
    limits = spec.limits
    request = {
        "queue": limits.queue or spec.node_type,
        "nodeType": spec.node_type,
        "nodeId": spec.display_node_id,
        "config": spec.config,
        "input": spec.input,
        "timeoutSeconds": limits.timeoutSeconds,
        "heartbeatTimeoutSeconds": limits.heartbeatTimeoutSeconds,
        "retry": limits.retry_config.model_dump(exclude={"max_retries"}),
        "textOutput": spec.text_output,
    }
    return ActionSpec(TASK, tid, "activity-recipe", request)


def text_output(output: Any) -> Any:
    """An llm node's output: the text itself when the worker returned a string or {"text": str}."""
    if isinstance(output, Mapping) and isinstance(output.get("text"), str):
        return output["text"]
    return output


def _core_task(node_id: str, cfg: TaskConfig, scope: Mapping[str, Any]) -> ActionSpec | str:
    rendered = render(cfg.input, scope, meter=Meter(what="the task's input"))
    spec = TaskSpec(cfg.taskType, node_id, dict(cfg.config), rendered, cfg)
    return action_of(node_id, spec, scope)


TASK_TYPES: tuple[NodeType, ...] = (NodeType("core.task", TaskConfig, act=_core_task),)
