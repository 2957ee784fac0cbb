"""Request bodies of the OpenWOP surface. All closed: an unknown field is a 400 validation_error."""


from typing import Any, Literal

from pydantic import AwareDatetime, Field

from interlude.domain.ids import AUTHOR_ID, SUBJECT_ID
from interlude.domain.models import Closed, new_list
from interlude.wiring import Scope


class CreateRunRequest(Closed):
    workflowId: str = Field(pattern=AUTHOR_ID)
    inputs: dict[str, Any] = Field(default_factory=dict)
    tenantId: str | None = None
    scopeId: str | None = None
    # Length and everything else are judged by the egress guard, whose refusal names the field (issue 6).
    callbackUrl: str | None = None
    configurable: dict[str, Any] | None = None
    tags: list[str] = Field(default_factory=new_list, max_length=100)
    metadata: dict[str, Any] = Field(default_factory=dict)
    # Accepted by the schema but not offered by this host: refused with a clear message.
    residency: Any = None
    mode: Literal["run", "eval"] | None = None
    evalSuiteRef: Any = None
    agentId: str | None = None


class ResolveInterruptRequest(Closed):
    resumeValue: Any


class CancelRunRequest(Closed):
    reason: str | None = Field(default=None, max_length=1000)


class RunOptionsOverlay(Closed):
    """A branch's run options over its source's (run-options.schema.json): configurable merged, tags replaced,
    metadata merged (app/forks.py)."""

    configurable: dict[str, Any] | None = None
    tags: list[str] | None = Field(default=None, max_length=100)
    metadata: dict[str, Any] | None = None


class ForkRunRequest(Closed):
    mode: Literal["replay", "branch"]
    # Events before it are the fork's history; required for a branch, 0 for a replay when left out (replay.md).
    fromSeq: int | None = Field(default=None, ge=0)
    runOptionsOverlay: RunOptionsOverlay | None = None


class BulkCancelRequest(Closed):
    # More than app.run_listing.MAX_BULK_CANCEL ids is refused there, with details.maxRunIds.
    runIds: list[str] = Field(min_length=1)
    reason: str | None = Field(default=None, max_length=512)


class CreateKeyRequest(Closed):
    subjectId: str = Field(pattern=SUBJECT_ID)
    scopes: list[Scope] = Field(min_length=1)
    groups: list[str] = Field(default_factory=new_list, max_length=100)
    roles: list[str] = Field(default_factory=new_list, max_length=100)
    kind: Literal["user", "agent", "workload"] = "user"
    # After this instant the key is refused (401 unauthenticated); with a time zone, in the future.
    expiresAt: AwareDatetime | None = None
