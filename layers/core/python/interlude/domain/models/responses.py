"""What the OpenWOP face answers: one model per success body (the OpenAPI document is generated from them).

Closed (`additionalProperties: false` in the document), so a field that leaks into an answer fails the build's
schemathesis run. A field that an answer carries only sometimes is `Omitted`: absent, never `null`. The run
snapshot, the events and the interrupt payload keep their OpenWOP shapes: they travel as JSON objects here
and the document describes them with the vendored OpenWOP schemas (interlude.domain.schemas).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from interlude.domain.models.run import RunStatus
from interlude.domain.models.tenants import TenantSettings

COMPONENT_MARKER = "x-interlude-component"


def component(name: str) -> WithJsonSchema:
    """Describe a field with the document's component `name` (a vendored OpenWOP schema or a request model).

    A marker the document turns into a $ref: pydantic would look a $ref up among its own definitions."""
    return WithJsonSchema({COMPONENT_MARKER: name})


# A field absent from an answer that has nothing to say, rather than null.
def Omitted() -> Any:  # noqa: N802 - reads as a type in field declarations
    return Field(default=None, exclude_if=lambda value: value is None)


JsonObject = dict[str, Any]
RunSnapshotDoc = Annotated[JsonObject, component("RunSnapshot")]
RunEventDoc = Annotated[JsonObject, component("RunEvent")]
WorkflowDocument = Annotated[JsonObject, component("WorkflowDefinition")]


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Implementation(Answer):
    name: str
    version: str


class Capabilities(BaseModel):
    """The discovery document: open, as OpenWOP discovery is (a host advertises what it serves)."""

    model_config = ConfigDict(extra="allow", defer_build=True)
    protocolVersions: list[str]
    preferredVersion: str
    implementation: Implementation
    engineVersion: int
    eventLogSchemaVersion: int


class WorkflowVersion(Answer):
    workflowId: str
    version: int = Field(ge=1)
    definition: WorkflowDocument


class RunCreated(Answer):
    runId: str
    status: RunStatus
    eventsUrl: str
    statusUrl: str


class RunCancelled(Answer):
    runId: str
    status: RunStatus


class EventPage(Answer):
    runId: str
    events: list[RunEventDoc]
    # The sequence of the run's last event so far (-1 before the first).
    lastSequence: int = Field(ge=-1)
    status: RunStatus
    isTerminal: bool


class Resolution(Answer):
    runId: str
    nodeId: str
    status: RunStatus


class CreatedKey(Answer):
    keyId: str
    # The secret, shown once: only its hash is stored.
    apiKey: str
    tenant: str
    subject: JsonObject
    scopes: list[str]
    expiresAt: str | None = Omitted()


class KeyMetadata(Answer):
    """A key as its tenant may see it: never the secret, nor the secret's hash."""

    keyId: str
    status: Literal["active", "revoked", "expired"]
    tenant: str
    subject: JsonObject
    scopes: list[str]
    groups: list[str]
    roles: list[str]
    createdAt: str
    expiresAt: str | None = Omitted()
    revokedAt: str | None = Omitted()


class KeyPage(Answer):
    keys: list[KeyMetadata]
    # Present when more keys follow: pass it as `cursor` for the next page.
    cursor: str | None = Omitted()


class MintedToken(Answer):
    interruptId: str
    token: str
    expiresAt: str
    intent: Literal["resolve", "inspect"]
    payload: JsonObject
    # The token surface's address for this token (GET: the payload or the approval page; POST: resolve).
    url: str


class DeliveryAttempt(Answer):
    noticeId: str = Omitted()
    webhookId: str = Omitted()
    type: str = Omitted()
    nodeId: str = Omitted()
    attempt: int = Omitted()
    at: str = Omitted()
    status: Literal["succeeded", "failed"] = Omitted()
    httpStatus: int = Omitted()
    errorClass: str = Omitted()
    elapsedMs: float = Omitted()
    final: bool = Omitted()


class RunDeliveries(Answer):
    runId: str
    callbackUrl: str | None
    deliveries: list[DeliveryAttempt]


class PublicVote(Answer):
    principal: str
    action: str
    at: str
    surface: str
    groups: list[str] = Omitted()
    roles: list[str] = Omitted()
    # Issue 14 item 4: a delegated vote names who cast it and how; a delegation names its delegate.
    castBy: str = Omitted()
    delegation: str = Omitted()
    delegate: str = Omitted()


class InboxEntry(Answer):
    interruptId: str
    runId: str
    nodeId: str
    workflowId: str
    kind: str
    raisedAt: str
    payload: JsonObject
    votes: list[PublicVote]
    # The principals (subjectIds) whose votes the caller may cast on this gate by delegation (issue 14 item 4), in
    # the order a resolve casts them (after the caller's own vote, when the caller is eligible and has not voted).
    onBehalfOf: list[str] = Omitted()


class Inbox(Answer):
    interrupts: list[InboxEntry]
    nextCursor: str | None


class EventOutcome(Answer):
    runId: str
    nodeId: str
    outcome: Literal["resolved", "already-resolved", "refused"]
    status: RunStatus = Omitted()
    errors: list[JsonObject] = Omitted()


class EventAccepted(Answer):
    eventId: str
    receivedAt: str
    matched: int = Field(ge=0)
    resolved: int = Field(ge=0)
    results: list[EventOutcome]
    kept: bool
    expiresAt: str


class LimitsInForce(Answer):
    """The tenant's own limits over the host's defaults (README, "Limits")."""

    requestsPerSecond: int
    openRuns: int
    workflowVersions: int
    definitionBytes: int
    definitionNodes: int


class TenantUsage(Answer):
    openRuns: int
    workflowVersions: int


class TenantSettingsAnswer(Answer):
    tenant: str
    settings: TenantSettings
    # On reading: the limits in force and what the tenant uses of them.
    limits: LimitsInForce | None = Omitted()
    usage: TenantUsage | None = Omitted()


class CredentialGrant(Answer):
    tenant: str
    provider: str
    scopes: list[str]
    grantedAt: str


class OutOfOfficeAnswer(Answer):
    delegate: str
    from_: str | None = Field(default=None, alias="from", exclude_if=lambda value: value is None)
    until: str = Omitted()

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)


class PrincipalAnswer(Answer):
    """A directory entry (issue 14) as stored, with when it was last written."""

    principalId: str
    displayName: str = Omitted()
    email: str = Omitted()
    slackUserId: str = Omitted()
    groups: list[str]
    roles: list[str]
    timeZone: str = Omitted()
    channels: list[str] = Omitted()
    outOfOffice: OutOfOfficeAnswer = Omitted()
    updatedAt: str


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


class EffectRecord(Answer):
    """One effect of a run (OpenWOP effect-ledger-projection.schema.json): content-free, never a payload or secret."""

    effectId: str
    nodeId: str
    attempt: int
    keying: Literal["business-identity", "activity-recipe"]
    providerKey: str = Omitted()
    state: Literal["claimed", "completed", "released", "escaped"]
    at: str


class RunEffects(Answer):
    runId: str
    effects: list[EffectRecord]


class EffectSeam(Answer):
    id: str
    kind: Literal["http", "provider", "webhook", "queue", "storage", "pack", "other"]
    suppression: Literal["recorded-outcome"]
    witness: Literal["witnessable-gated", "seam-gated"] = Omitted()
    note: str = Omitted()


class EffectSeamHostBuild(Answer):
    kind: Literal["image-digest", "commit", "artifact-sha256"]
    id: str


class EffectSeamHost(Answer):
    name: str
    build: EffectSeamHostBuild


class EffectSeamManifest(Answer):
    """GET /host/effect-seams (OpenWOP effect-seam-manifest.schema.json)."""

    manifestVersion: Literal["1"]
    host: EffectSeamHost
    seams: list[EffectSeam]


# -- the audit log (issue 16 item 5; OpenWOP openwop-audit-log-integrity, RFC 0218) ------------------------------


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


class NotificationEntry(Answer):
    """One notification over one channel (issue 14): who, what, when, how, and what came of it."""

    notificationId: str
    principalId: str
    purpose: str
    nodeId: str
    interruptId: str
    queuedAt: str = Omitted()
    status: Literal["queued", "sending", "pending", "sent", "skipped", "dead"]
    attempts: int
    channel: Literal["email", "slack"] | None
    outcome: str
    at: str = Omitted()
    errorClass: str = Omitted()
    reason: str = Omitted()
    # The gate named more recipients than one visit notifies (README, "Limits"): some were not told.
    recipientsCut: bool = Omitted()


class RunNotifications(Answer):
    runId: str
    notifications: list[NotificationEntry]


class SlackConfigured(Answer):
    tenant: str
    configured: Literal["webhook", "bot-token"]
    webhookHost: str = Omitted()


class AncestryParent(Answer):
    runId: str
    hostId: str
    cause: Literal["core.subWorkflow", "core.dispatch", "mcp-tool-call", "a2a-message"]


class RunAncestry(Answer):
    """run-ancestry-response.schema.json: the run and only its immediate parent (null for a root run)."""

    runId: str
    hostId: str
    parent: AncestryParent | None
