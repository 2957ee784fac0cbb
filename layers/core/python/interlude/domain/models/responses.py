"""What the OpenWOP face answers: one model per success body (the OpenAPI document is generated from them).

Closed in the document (`additionalProperties: false`); at runtime an answer leaves out what it does not declare
(interlude.domain.models.Answer), so a stored field a later release wrote never reaches an older release's answer.
A field that an answer carries only sometimes is `Omitted`: absent, never `null`. The run snapshot, the events and
the interrupt payload keep their OpenWOP shapes: they travel as JSON objects here and the document describes them
with the vendored OpenWOP schemas (interlude.domain.schemas).

Here: the base, and the answers of the run routes (api/runs: discovery, workflows, createRun, getRun, poll,
cancel, createKey), which a lifecycle's first request loads. Every other route area's answers are a module
of `answers/` (inbox, keys, tokens, ...), loaded with the route module that answers them: a model class costs its
module's import ≈ 0.5 ms to build even when its validator is deferred, and the first request to the run routes built
all 43. New answers go into their area's module; `responses.X` still finds any of them (`__getattr__`, below).
"""


from importlib import import_module
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from interlude.domain.models import Answer
from interlude.domain.models.run import RunStatus

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


class RunForked(Answer):
    runId: str
    sourceRunId: str
    fromSeq: int
    mode: Literal["replay", "branch"]
    status: RunStatus
    eventsUrl: str


class RunEventDiff(Answer):
    """One sequence where two runs' logs differ (run-diff-response.schema.json): `aEvent` absent when added, `bEvent`
    absent when removed."""

    seq: int = Field(ge=0)
    op: Literal["added", "removed", "changed"]
    aEvent: RunEventDoc | None = Field(default=None, exclude_if=lambda v: v is None)
    bEvent: RunEventDoc | None = Field(default=None, exclude_if=lambda v: v is None)


class RunDiff(Answer):
    """OpenWOP diffRun (rules/run_diff.py): where run `a`'s log and run `b`'s diverge, each differing event, and how the
    state their logs reach differs."""

    a: str
    b: str
    divergedAtSeq: int | None
    eventDiffs: list[RunEventDiff]
    stateDiff: dict[str, Any]
    truncated: bool | None = Field(default=None, exclude_if=lambda v: v is None)


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


class CreatedKey(Answer):
    keyId: str
    # The secret, shown once: only its hash is stored.
    apiKey: str
    tenant: str
    subject: JsonObject
    scopes: list[str]
    expiresAt: str | None = Omitted()


# The modules of answers/, for `responses.X` (api/contract.py names every answer so): any name not defined here is
# looked up in them, in this order.
ANSWER_AREAS = (
    "decisions",
    "inbox",
    "keys",
    "tokens",
    "deliveries",
    "principals",
    "run_listing",
    "effects",
    "audit",
    "notifications",
    "subworkflows",
)


def __getattr__(name: str) -> Any:
    for area in ANSWER_AREAS if not name.startswith("_") else ():
        module = import_module(f"interlude.domain.models.answers.{area}")
        if name in vars(module):
            return vars(module)[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
