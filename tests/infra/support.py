"""Reading IAM statements out of the synthesized template."""

from __future__ import annotations

from typing import Any


def statements_of_role(synth: Any, role_id: str) -> list[dict]:
    role = synth.resources[role_id]["Properties"]
    statements = [s for policy in role.get("Policies", []) for s in policy["PolicyDocument"]["Statement"]]
    for policy in synth.of_type("AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def actions_on(statements: list[dict], resource) -> set[str]:
    return {
        action
        for statement in statements
        if resource in as_list(statement["Resource"])
        for action in as_list(statement["Action"])
    }
