"""Request bodies of the approver inbox, external events and credential grants (closed), and the tenant's settings
(stored: closed only where a request sends them)."""


from typing import Annotated

from pydantic import Field, StringConstraints

from interlude.domain import budgets
from interlude.domain.models import Stored, new_list
from interlude.domain.token_lifetimes import MAX_MINTED_LINK_LIFETIME_S

DEFAULT_EVENT_RETENTION_HOURS = 24
MAX_EVENT_RETENTION_HOURS = 14 * 24
# How long an effect record and a run's ledger entry of it are kept after their last change (OpenWOP
# idempotency.md: at least 14 days); a tenant may keep them longer, up to a year.
MIN_EFFECT_RETENTION_DAYS = 14
MAX_EFFECT_RETENTION_DAYS = 366
# How long a finished run (completed, failed, cancelled) is kept before DynamoDB's TTL removes its items (issue 30
# item 4): Temporal's namespace retention, Step Functions' 90 days of history.
DEFAULT_RETENTION_DAYS = 90
MIN_RETENTION_DAYS = 1
MAX_RETENTION_DAYS = 3650

# Ceilings of what a tenant may set its limits to (docs/limits.md).
MAX_REQUESTS_PER_SECOND = 500
MAX_OPEN_RUNS = 100_000
MAX_WORKFLOW_VERSIONS = 100_000
MAX_DEFINITION_BYTES = 300_000
# The most nodes a definition may hold at all (WorkflowDefinition.nodes).
MAX_DEFINITION_NODES = 500

# Reminders of a gate (issue 14), bounded in domain/budgets.py.
MAX_REMINDERS = budgets.MAX_REMINDERS
MAX_REMINDER_MS = budgets.MAX_REMINDER_MS

# No whitespace, no control character.
PrincipalRef = Annotated[
    str, StringConstraints(min_length=1, max_length=512, pattern=r"^[^\s\x00-\x1f\x7f-\x9f]+$")
]
SearchableKey = Annotated[str, StringConstraints(pattern=budgets.SEARCHABLE_KEY)]


def _unset(value: object) -> bool:
    return value is None


def _empty(value: object) -> bool:
    return not value


class TenantLimits(Stored):
    """The tenant's own limits; a field left out takes the host's default (config: INTERLUDE_TENANT_*).

    Each is capped here, whatever the tenant asks: the ceilings keep one tenant inside what the stage is sized
    for (the rate under DynamoDB's 1000 writes/s per partition, a definition under the 380 KB item budget).
    """

    # Authenticated requests per second (a fixed one-second window; 429 rate_limited with Retry-After past it).
    requestsPerSecond: int | None = Field(default=None, ge=1, le=MAX_REQUESTS_PER_SECOND, exclude_if=_unset)
    # Runs not yet completed, failed or cancelled.
    openRuns: int | None = Field(default=None, ge=1, le=MAX_OPEN_RUNS, exclude_if=_unset)
    # Workflow versions stored (every PUT /workflows/{id} and every new inline ModuleX definition stores one).
    workflowVersions: int | None = Field(default=None, ge=1, le=MAX_WORKFLOW_VERSIONS, exclude_if=_unset)
    # A definition's size as compact JSON, and its node count.
    definitionBytes: int | None = Field(default=None, ge=1024, le=MAX_DEFINITION_BYTES, exclude_if=_unset)
    definitionNodes: int | None = Field(default=None, ge=1, le=MAX_DEFINITION_NODES, exclude_if=_unset)


def no_limits() -> TenantLimits:
    """Settings' `limits` where the document has none: every field left to the host's default, constructed (nothing
    to validate), so a tenant with no limits of its own builds no TenantLimits validator (≈ 1 % of a cold resolve's
    instructions, ADR 0151); a function, not the class or its `model_construct`, for the signature pydantic asks of a
    default factory (interlude.domain.models.new_list)."""
    return TenantLimits.model_construct()


class TenantSettings(Stored):
    # Principals that release an approval gate alone where the gate sets overrideBypassesQuorum: a subjectId,
    # or `issuer|subjectId` to pin the issuer. Gates may name more in their own config.overridePrincipals.
    overridePrincipals: list[PrincipalRef] = Field(default_factory=new_list, max_length=100)
    # How long an external event that matched no waiting interrupt is kept for one raised later.
    eventRetentionHours: int = Field(default=DEFAULT_EVENT_RETENTION_HOURS, ge=1, le=MAX_EVENT_RETENTION_HOURS)
    limits: TenantLimits = Field(default_factory=no_limits)
    # Issue 14 item 4: an eligible approver may hand their vote to another principal, for one interrupt or while
    # out of office (the directory's outOfOffice.delegate). Left out: not allowed.
    allowDelegation: bool | None = Field(default=None, exclude_if=_unset)
    # Issue 14: reminders for gates that ask for none themselves (ms after the gate asks), to those who have not voted.
    remindersMs: list[Annotated[int, Field(ge=1000, le=MAX_REMINDER_MS)]] | None = Field(
        default=None, max_length=MAX_REMINDERS, exclude_if=_unset
    )
    # Issue 26: days an effect record and its ledger entry outlive their last change. Left out: the minimum.
    effectRetentionDays: int | None = Field(
        default=None, ge=MIN_EFFECT_RETENTION_DAYS, le=MAX_EFFECT_RETENTION_DAYS, exclude_if=_unset
    )
    # Issue 30 item 4: days a finished run is kept past its end (then every item of it expires). Left out: 90.
    retentionDays: int | None = Field(default=None, ge=MIN_RETENTION_DAYS, le=MAX_RETENTION_DAYS, exclude_if=_unset)
    # Issue 28 item 5: the longest a link minted for a named principal may live (POST .../links). Left out: 7 days.
    maxLinkLifetimeSeconds: int | None = Field(default=None, ge=60, le=MAX_MINTED_LINK_LIFETIME_S, exclude_if=_unset)
    # Issue 29 item 1: metadata keys a run listing may filter on (`GET /runs?metadata.<key>=…`), each indexed from
    # the run's creation on, and for runs created before it was declared by a job (app/search_keys.py) (rules/run_search.py:
    # at most 10, each 1-64 of A-Z a-z 0-9 _ -).
    searchableMetadata: list[SearchableKey] = Field(
        default_factory=new_list, max_length=budgets.MAX_SEARCHABLE_KEYS, exclude_if=_empty
    )
    # Issue 31: the words of a run's title (its workflow's id and name, its gates' titles) indexed for `GET /runs?q=`,
    # from the run's creation on (a few write units per run). Left out: not indexed; `q` then reads the run listing
    # and checks each run's title on the head it reads anyway (ADR 0112, amendment).
    searchTitles: bool | None = Field(default=None, exclude_if=_unset)
