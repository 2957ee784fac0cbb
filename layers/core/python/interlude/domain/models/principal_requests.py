"""Request bodies and answers of the principal surfaces (a vote's delegation, a gate's claim and assignment, Slack's
settings): apart from the directory's stored entries (interlude.domain.models.principals), which a decision reads, so
only the routes that take them build them (ADR 0137)."""


from typing import Self

from pydantic import Field, model_validator

from interlude.domain.models import Answer, Closed
from interlude.domain.models.principals import PrincipalId


class DelegateVoteRequest(Closed):
    """Issue 14 item 4: hand the caller's vote on one approval gate to another principal (a subjectId)."""

    delegate: PrincipalId


class VoteDelegated(Answer):
    runId: str
    nodeId: str
    interruptId: str
    principal: str
    delegate: str
    at: str


class AssignGateRequest(Closed):
    """Issue 29 item 3: who works the open gate now (a subjectId), or nobody (null)."""

    assignee: PrincipalId | None


class GateAssignment(Answer):
    """Who works an open gate (issue 29 item 3), after a claim, release or assign."""

    runId: str
    nodeId: str
    interruptId: str
    assignee: str | None
    assignedBy: str | None
    assignedAt: str | None


class SlackSettings(Closed):
    """`PUT /tenant/notifications/slack`: exactly one of an incoming-webhook URL or a bot token (never returned)."""

    webhookUrl: str | None = Field(default=None, min_length=8, max_length=2048)
    botToken: str | None = Field(default=None, pattern=r"^xox[bpa]-[A-Za-z0-9-]{8,250}$")

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        if (self.webhookUrl is None) == (self.botToken is None):
            raise ValueError("give exactly one of webhookUrl or botToken")
        return self


class SlackSigningSecret(Closed):
    """`PUT /tenant/notifications/slack/signing-secret`: the Slack app's signing secret (its Basic Information page),
    which verifies every click Slack reports to the interactivity URL (never returned)."""

    signingSecret: str = Field(pattern=r"^[A-Za-z0-9]{16,128}$")
