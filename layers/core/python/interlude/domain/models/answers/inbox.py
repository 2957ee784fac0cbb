"""What the inbox, the external events and the tenant's settings and credential grants answer.

Apart from interlude.domain.models.responses (which says why), so only the requests that answer them build them.
"""


from typing import Literal

from pydantic import Field

from interlude.domain.models.responses import Answer, JsonObject, Omitted
from interlude.domain.models.run import RunStatus
from interlude.domain.models.tenants import TenantSettings


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
    """The tenant's own limits over the host's defaults (docs/limits.md)."""

    requestsPerSecond: int
    openRuns: int
    workflowVersions: int
    definitionBytes: int
    definitionNodes: int


class TenantUsage(Answer):
    openRuns: int
    workflowVersions: int


class SearchIndexing(Answer):
    """The search-keys job (app/search_keys.py): runs created before `keys` were declared searchable, being indexed
    under them (`pending`) or indexed (`done`)."""

    status: Literal["pending", "done"]
    keys: list[str]
    runsRead: int
    entriesWritten: int
    declaredAt: str
    doneAt: str | None = Omitted()


class RetentionRestamp(Answer):
    """Where the job giving a change of retentionDays to the runs finished before it stands (ADR 0118)."""

    state: Literal["running", "done"]
    days: int
    runsSeen: int
    runsRestamped: int
    startedAt: str
    finishedAt: str = Omitted()


class TenantSettingsAnswer(Answer):
    tenant: str
    settings: TenantSettings
    # Once a key was declared searchable: the job that indexes older runs under it.
    searchIndexing: SearchIndexing | None = Omitted()
    # On reading: the limits in force and what the tenant uses of them.
    limits: LimitsInForce | None = Omitted()
    usage: TenantUsage | None = Omitted()
    # On a change (PUT, PATCH): the settings it replaced, so a PUT that left a field out shows what it reset.
    previous: TenantSettings | None = Omitted()
    # On reading, once retentionDays was changed: the job giving the change to the runs finished before it.
    retentionRestamp: RetentionRestamp | None = Omitted()


class CredentialGrant(Answer):
    tenant: str
    provider: str
    scopes: list[str]
    grantedAt: str
