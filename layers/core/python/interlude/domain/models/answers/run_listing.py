"""What the run listing answers: a page of runs, and a bulk cancel's results.

Apart from interlude.domain.models.responses (which says why), so only the requests that answer them build them.
"""


from typing import Literal

from interlude.domain.models.responses import Answer, JsonObject, Omitted, RunSnapshotDoc


class RunList(Answer):
    """GET /runs (run-list-response.schema.json): one page of the caller's runs, newest first."""

    runs: list[RunSnapshotDoc]
    # Present when more runs follow: pass it as `cursor` for the next page.
    nextCursor: str | None = Omitted()


class BulkCancelResult(Answer):
    runId: str
    ok: bool
    status: Literal["cancelled", "cancelling"] | None = Omitted()
    # The refusal this id met, in the OpenWOP envelope.
    error: JsonObject | None = Omitted()


class BulkCancelAnswer(Answer):
    results: list[BulkCancelResult]
