"""What a decision on a gate answers (the run-scoped resolve, api/run_decisions.py; the token surface's resolve).

Apart from interlude.domain.models.responses (which says why): a resolve's first request builds this one answer, not
the run routes' others.
"""


from interlude.domain.models import Answer
from interlude.domain.models.run import RunStatus


class Resolution(Answer):
    runId: str
    nodeId: str
    status: RunStatus
