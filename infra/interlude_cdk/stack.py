"""InterludeStack: one Interlude construct in a stack of its own (what this project's app.py deploys)."""

from __future__ import annotations

from aws_cdk import Stack

from interlude_cdk.construct import Interlude


class InterludeStack(Stack):
    """A stack holding one Interlude; `build(**props)` adds it (props may name constructs of this stack)."""

    interlude: Interlude

    def build(self, **props) -> Interlude:
        self.interlude = Interlude(self, "Interlude", **props)
        return self.interlude
