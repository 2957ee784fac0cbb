"""What GET /runs/{runId}/ancestry answers.

Apart from interlude.domain.models.responses (which says why), so only the requests that answer them build them.
"""


from typing import Literal

from interlude.domain.models.responses import Answer


class AncestryParent(Answer):
    runId: str
    hostId: str
    cause: Literal["core.subWorkflow", "core.dispatch", "mcp-tool-call", "a2a-message"]


class RunAncestry(Answer):
    """run-ancestry-response.schema.json: the run and only its immediate parent (null for a root run)."""

    runId: str
    hostId: str
    parent: AncestryParent | None
