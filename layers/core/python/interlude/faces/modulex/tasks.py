"""ModuleX nodes Interlude does not run itself (`llm`, `tool`, `agent`, `function`, `knowledge`, `guardrails`): each
becomes a task on a named queue that the tenant's workers take (engine/tasks.py, issue 15 item 2).

The author's `<type>_config` travels to the worker as the task's `config`, its `{{...}}` references resolved when
the node is reached (one with no value yet is null, or empty inside text, as everywhere); the task's `input` is the
run's input. Three fields of `<type>_config` are Interlude's and are not passed on: `queue` (default: the node
type), `timeoutSeconds` and `heartbeatTimeoutSeconds`; the node's own `retry_config` sets the retries. An `llm`
node's output is its text (the worker's string, or its `{"text": ...}`), so `{{node_draft}}` is the draft.
"""


from collections.abc import Mapping
from functools import partial
from typing import Any

from pydantic import Field

from interlude.domain.budgets import Meter
from interlude.engine.nodetypes import ActionSpec, NodeType
from interlude.engine.tasks import RetryConfig, TaskLimits, TaskSpec, action_of
from interlude.faces.modulex.fields import JsonType
from interlude.faces.modulex.references import MODULEX, modulex_id, render

TASK_NODE_TYPES = ("llm", "tool", "agent", "function", "knowledge", "guardrails")
LIMIT_FIELDS = ("queue", "timeoutSeconds", "heartbeatTimeoutSeconds")
RETRY_FIELDS = frozenset(RetryConfig.model_fields)
# The JSON type of Interlude's numbers in a task node's config and of its retry_config's, checked before the engine's
# models read them (they would read "30" as 30 seconds and true as one attempt).
LIMIT_TYPES: dict[str, JsonType] = {"timeoutSeconds": "integer", "heartbeatTimeoutSeconds": "integer"}
RETRY_TYPES: dict[str, JsonType] = {
    "max_attempts": "integer",
    "max_retries": "integer",
    "initial_interval": "number",
    "backoff_factor": "number",
    "max_interval": "number",
}


class ModulexTaskConfig(TaskLimits):
    # The author's <type>_config without Interlude's fields.
    config: dict[str, Any] = Field(default_factory=dict)


def task_config(raw: dict[str, Any], retry_config: dict[str, Any] | None) -> dict[str, Any]:
    """The engine config of a task node: its `<type>_config` split into Interlude's fields and the worker's."""
    config: dict[str, Any] = {k: raw[k] for k in LIMIT_FIELDS if raw.get(k) is not None}
    config["config"] = {k: v for k, v in raw.items() if k not in LIMIT_FIELDS}
    if retry_config:
        # ModuleX ignores fields it does not know; so does this face.
        config["retry_config"] = {k: v for k, v in retry_config.items() if k in RETRY_FIELDS and v is not None}
    return config


def agent_problems(cfg: ModulexTaskConfig) -> list[str]:
    prompt = cfg.config.get("system_prompt")
    if prompt is None or prompt == "":
        return ["an agent node needs a system_prompt in its agent_config"]
    return [] if isinstance(prompt, str) else ["an agent node's system_prompt must be a string"]


def _task(node_type: str, node_id: str, cfg: ModulexTaskConfig, scope: Mapping[str, Any]) -> ActionSpec:
    meter = Meter(what="the task's config")
    config = render(cfg.config, scope, meter)
    spec = TaskSpec(
        node_type, modulex_id(node_id), config, scope.get("inputs") or {}, cfg, text_output=node_type == "llm"
    )
    return action_of(node_id, spec, scope)


MODULEX_TASK_TYPES: tuple[NodeType, ...] = tuple(
    NodeType(f"modulex.{t}", ModulexTaskConfig, act=partial(_task, t), dialect=MODULEX) for t in TASK_NODE_TYPES
)
