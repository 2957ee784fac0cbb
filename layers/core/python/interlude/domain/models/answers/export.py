"""What GET /runs/{runId}/export answers: a run whole, as one JSON document, for archiving before it expires
(issue 30 item 4). Apart from interlude.domain.models.responses (which says why)."""


from typing import Any, Literal

from pydantic import Field

from interlude.domain.models import new_list
from interlude.domain.models.answers.effects import EffectRecord
from interlude.domain.models.responses import Answer, Omitted, RunEventDoc, RunSnapshotDoc
from interlude.domain.models.run import RunStatus


class RunDecision(Answer):
    """An interrupt the run raised and what became of it: still open, or resolved (its resolution and votes)."""

    interruptId: str
    nodeId: str
    kind: str
    status: str
    raisedAt: str
    payload: Any = None
    resolution: Any = Omitted()
    votes: list[dict[str, Any]] = Field(default_factory=new_list)


class RunExport(Answer):
    exportVersion: Literal[1]
    runId: str
    status: RunStatus
    exportedAt: str
    # When retention removes the run (its end plus the tenant's retentionDays); absent while it is not finished.
    expiresAt: str = Omitted()
    snapshot: RunSnapshotDoc
    decisions: list[RunDecision]
    effects: list[EffectRecord]
    # The events after `afterSequence`, as many as the answer holds: `complete` false means more follow (ask again
    # with afterSequence = the last one's sequence; the rest of the document is the same on every page).
    events: list[RunEventDoc]
    lastSequence: int = Field(ge=-1)
    complete: bool
