"""The seed page's worked example (draft -> approval -> conditional route), with the LLM draft replaced by a
transformer node, as one ModuleX workflow definition the tests share."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

APPROVAL_MESSAGE = "Approve sending this draft?\n\n{{node_draft}}"

WORKED_EXAMPLE: dict[str, Any] = {
    "metadata": {"name": "Approve before sending", "version": "1.0.0"},
    "nodes": [
        {
            "id": "node_draft",
            "type": "transformer",
            "name": "Draft",
            "x": 0,
            "y": 0,
            "transformer_config": {
                "operations": [
                    {"type": "template", "params": {"template": "Dear customer, about {{input.request}}: it is done."}}
                ]
            },
        },
        {
            "id": "node_approval",
            "type": "interrupt",
            "name": "Approval",
            "x": 320,
            "y": 0,
            "retry_config": {"max_attempts": 5},
            "interrupt_config": {
                "message": APPROVAL_MESSAGE,
                "resume_schema": {
                    "type": "object",
                    "properties": {"approved": {"type": "boolean"}, "notes": {"type": "string"}},
                    "required": ["approved"],
                },
                "examples": {"approve": {"approved": True}, "reject": {"approved": False, "notes": "Tone too casual"}},
            },
        },
        {
            "id": "node_route",
            "type": "conditional",
            "name": "Route",
            "x": 640,
            "y": 0,
            "conditional_config": {
                "condition_type": "expression",
                "expression_branches": [
                    {
                        "id": "b_send",
                        "source": "{{node_approval.approved}}",
                        "operator": "equals",
                        "value": True,
                        "target": "node_send",
                    }
                ],
                "default_target": "node_end_rejected",
            },
        },
        {
            "id": "node_send",
            "type": "transformer",
            "name": "Send",
            "x": 960,
            "y": 0,
            "transformer_config": {
                "operations": [{"type": "template", "params": {"template": "sent: {{node_draft}}"}}]
            },
        },
        {
            "id": "node_end_rejected",
            "type": "transformer",
            "name": "Rejected",
            "x": 960,
            "y": 200,
            "transformer_config": {
                "source": "{{node_approval}}",
                "operations": [{"type": "pick", "params": {"fields": ["notes"]}}],
            },
        },
    ],
    "edges": [
        {"source": "node_draft", "target": "node_approval"},
        {"source": "node_approval", "target": "node_route"},
    ],
}

DRAFT = "Dear customer, about {request}: it is done."


def worked_example() -> dict[str, Any]:
    return copy.deepcopy(WORKED_EXAMPLE)


def node(node_id: str, kind: str, x: int, **config: Any) -> dict[str, Any]:
    """A ModuleX node of `kind` named by its id, at (x, 0), with `config` as its `{kind}_config`."""
    return {"id": node_id, "type": kind, "name": node_id, "x": x, "y": 0, f"{kind}_config": config}


# A reviewer's instructions before the draft: a message with large text of its own (not a repeat of what the run holds).
INSTRUCTIONS = "Check the tone, the figures and the promises before this goes out. " * 12


def instructed_example() -> dict[str, Any]:
    """The worked example whose interrupt's message holds the reviewer's instructions (INSTRUCTIONS) before the draft."""
    flow = worked_example()
    flow["nodes"][1]["interrupt_config"]["message"] = INSTRUCTIONS + "\n\n{{node_draft}}"
    return flow


def _as_task(flow: dict[str, Any], node_type: str, **config: Any) -> None:
    flow["nodes"][0] = {"id": "node_draft", "type": node_type, "x": 0, "y": 0, f"{node_type}_config": config}


# Each field of a definition the contract types, given a value of another JSON type (or, for a string that cuts or a
# list of names, one no run could use): how to break the worked example that way, and where the refusal points
# (its `loc` after ["body", "workflow"]). None of them is read as something else.
MISTYPED_DEFINITION_FIELDS: dict[str, tuple[Callable[[dict[str, Any]], Any], list[Any]]] = {
    "enabled as a string": (lambda w: w["nodes"][0].update(enabled="false"), ["nodes", 0, "enabled"]),
    "enabled as a number": (lambda w: w["nodes"][0].update(enabled=0), ["nodes", 0, "enabled"]),
    "x as a string": (lambda w: w["nodes"][0].update(x="0"), ["nodes", 0, "x"]),
    "y as a boolean": (lambda w: w["nodes"][0].update(y=True), ["nodes", 0, "y"]),
    "recursion_limit as a boolean": (lambda w: w.update(config={"recursion_limit": True}), ["config", "recursion_limit"]),
    "recursion_limit as a string": (lambda w: w.update(config={"recursion_limit": "7.0"}), ["config", "recursion_limit"]),
    "condition_type as a number": (
        lambda w: w["nodes"][2]["conditional_config"].update(condition_type=0),
        ["nodes", 2, "conditional_config", "condition_type"],
    ),
    "condition_type as false": (
        lambda w: w["nodes"][2]["conditional_config"].update(condition_type=False),
        ["nodes", 2, "conditional_config", "condition_type"],
    ),
    "expression_branches as an object": (
        lambda w: w["nodes"][2]["conditional_config"].update(expression_branches={}),
        ["nodes", 2, "conditional_config", "expression_branches"],
    ),
    "routes as a list": (
        lambda w: w["nodes"][2]["conditional_config"].update(routes=[]),
        ["nodes", 2, "conditional_config", "routes"],
    ),
    "an empty operator": (
        lambda w: w["nodes"][2]["conditional_config"]["expression_branches"][0].update(operator=""),
        ["nodes", 2, "conditional_config"],
    ),
    "operations as a number": (
        lambda w: w["nodes"][0]["transformer_config"].update(operations=0),
        ["nodes", 0, "transformer_config", "operations"],
    ),
    "operations as an object": (
        lambda w: w["nodes"][0]["transformer_config"].update(operations={"type": "template"}),
        ["nodes", 0, "transformer_config", "operations"],
    ),
    "a join separator as an object": (
        lambda w: w["nodes"][0]["transformer_config"]["operations"].append({"type": "join", "params": {"separator": {}}}),
        ["nodes", 0, "transformer_config"],
    ),
    "an empty split separator": (
        lambda w: w["nodes"][0]["transformer_config"]["operations"].append({"type": "split", "params": {"separator": ""}}),
        ["nodes", 0, "transformer_config"],
    ),
    "pick fields that are not names": (
        lambda w: w["nodes"][4]["transformer_config"]["operations"][0]["params"].update(fields=[1]),
        ["nodes", 4, "transformer_config"],
    ),
    "a task's timeoutSeconds as a string": (
        lambda w: _as_task(w, "llm", timeoutSeconds="30"),
        ["nodes", 0, "llm_config", "timeoutSeconds"],
    ),
    "a task's heartbeatTimeoutSeconds as a float": (
        lambda w: _as_task(w, "tool", heartbeatTimeoutSeconds=1.5),
        ["nodes", 0, "tool_config", "heartbeatTimeoutSeconds"],
    ),
    "a task's max_attempts as a boolean": (
        lambda w: (_as_task(w, "llm"), w["nodes"][0].update(retry_config={"max_attempts": True})),
        ["nodes", 0, "retry_config", "max_attempts"],
    ),
    "a task's backoff_factor as a string": (
        lambda w: (_as_task(w, "function"), w["nodes"][0].update(retry_config={"backoff_factor": "2"})),
        ["nodes", 0, "retry_config", "backoff_factor"],
    ),
    "an agent's system_prompt as a number": (
        lambda w: _as_task(w, "agent", system_prompt=5),
        ["nodes", 0, "agent_config"],
    ),
}
