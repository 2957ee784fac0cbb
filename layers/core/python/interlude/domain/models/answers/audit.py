"""What the audit routes answer: a verification and a page of entries.

Apart from interlude.domain.models.responses (which says why), so only the requests that answer them build them.
"""


from pydantic import Field

from interlude.domain.models.responses import Answer, JsonObject, Omitted


class AuditCheckpoint(Answer):
    checkpoint: str = Field(max_length=256)
    atSequence: int = Field(ge=1)
    merkleRoot: str
    signature: str


class AuditVerification(Answer):
    fromSeq: int
    toSeq: int
    chainValid: bool
    checkpointsValid: bool | None = Omitted()
    checkpoints: list[AuditCheckpoint]
    anomalies: list[JsonObject]


class AuditEntry(Answer):
    # Which of the tenant's chains holds it (its run's, its key's, or else the tenant's): seq counts within it.
    chain: int
    seq: int
    at: str
    tenant: str
    action: str
    actor: JsonObject
    target: JsonObject
    details: JsonObject
    prevHash: str | None


class AuditPage(Answer):
    # Newest first.
    entries: list[JsonObject]
    # The highest last sequence among the tenant's chains (0 before the first entry): verifying [1, headSeq]
    # walks every chain to its end.
    headSeq: int
    # Each chain that holds entries (its number, as text) and its last sequence.
    chains: dict[str, int]
    # Present when older entries follow: pass it as `cursor` for the next page.
    cursor: str | None = Omitted()
