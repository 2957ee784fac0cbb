"""The seed page's worked example (draft -> approval -> conditional route), with the LLM draft replaced by a
transformer node, as one ModuleX workflow definition the tests share."""

from __future__ import annotations

import copy
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


# A reviewer's instructions before the draft: a message with large text of its own (not a repeat of what the run holds).
INSTRUCTIONS = "Check the tone, the figures and the promises before this goes out. " * 12


def instructed_example() -> dict[str, Any]:
    """The worked example whose interrupt's message holds the reviewer's instructions (INSTRUCTIONS) before the draft."""
    flow = worked_example()
    flow["nodes"][1]["interrupt_config"]["message"] = INSTRUCTIONS + "\n\n{{node_draft}}"
    return flow
