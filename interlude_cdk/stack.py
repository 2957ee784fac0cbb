"""InterludeStack: one Interlude construct in a stack of its own (what this project's app.py deploys)."""

from __future__ import annotations

from aws_cdk import Stack
from constructs import Construct

from interlude_cdk.construct import Interlude


class InterludeStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, interlude: dict | None = None, **stack_props) -> None:
        super().__init__(scope, construct_id, **stack_props)
        self.interlude = Interlude(self, "Interlude", **(interlude or {}))
