"""ModuleX database mode: deployed ModuleX workflows (`POST /workflows`, `GET/PUT/DELETE /workflows/{id}`) and ModuleX
run rows (`GET /workflow-runs`, `GET /workflow-runs/{run_pk}`), in the shapes modulex-python parses.

A ModuleX workflow is stored twice over in one transaction: its record (what the SDK reads back: name, the ModuleX
`workflow_schema`, status, ...) and, when its schema changes, a new immutable version of the translated definition
under the same id, which is what `POST /workflows/run {workflow_id}` and resume run. Which face a workflow id speaks
is the face that created it (its catalogue entry, docs/adr/0030, "Two faces on /workflows").
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from interlude.app.retries import MAX_RACE_RETRIES, busy
from interlude.domain.errors import Invalid, NotFound, Unprocessable
from interlude.domain.ids import INLINE_WORKFLOW_PREFIX, to_wire
from interlude.domain.models import Answer
from interlude.domain.models.run import RunState
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine import run as engine
from interlude.faces.modulex import definition as mx
from interlude.faces.modulex.fields import JsonType, mistyped, refused, typing_problems, unknown_problems
from interlude.faces.modulex.frames import ModulexStatus, RunView, status_of
from interlude.rules import auth
from interlude.rules.run_search import RunFilters

if TYPE_CHECKING:
    from interlude.app.ports import VersionWrites
    from interlude.app.run_listing import RunListing
    from interlude.domain.clock import Clock
    from interlude.faces.modulex.ports import ListingBookmarks, ModulexRecords

# The fields of a ModuleX workflow a create or update may set (modulex-python's `workflows.update` allow-list), each
# with its JSON type (`tags`: of strings).
WRITABLE_TYPES: dict[str, JsonType] = {
    "name": "string",
    "description": "string",
    "version": "string",
    "tags": "array",
    "category": "string",
    "status": "string",
    "visibility": "string",
    "workflow_schema": "object",
    "input": "object",
    "config": "object",
}
WRITABLE = tuple(WRITABLE_TYPES)
STRING_FIELDS = ("name", "description", "version", "category", "status", "visibility")
MAX_NAME = 256
VISIBILITIES = ("private", "organization", "public", "system")
# GET /workflows filters (modulex-python's workflows.list / list_all send these): each a string of at most MAX_NAME.
LISTING_FILTERS = ("status", "category", "visibility", "search")
# How an OpenWOP workflow reads on the ModuleX face: runnable by id (deployed, in ModuleX's words) and seen org-wide.
OPENWOP_STATUS = "published"
OPENWOP_VISIBILITY = "organization"
# GET /workflow-runs: `limit` at most this, `offset` at most MAX_RUN_OFFSET; a page starts at most MAX_RUN_SKIP runs
# past a bookmark (list_run_rows), which stays BOOKMARK_TTL_S.
MAX_RUN_LIMIT = 100
MAX_RUN_OFFSET = 10**9
MAX_RUN_SKIP = 1_000
BOOKMARK_TTL_S = 24 * 3600


class ModulexWorkflowRequest(BaseModel):
    """POST /workflows (for the OpenAPI document; the face checks bodies itself, with ModuleX's answers)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    workflow_schema: dict[str, Any] = Field(description="A ModuleX workflow definition")
    name: str | None = None
    description: str | None = None
    version: str | None = None
    tags: list[str] | None = None
    category: str | None = None
    status: str | None = None
    visibility: Literal["private", "organization", "public", "system"] | None = None
    input: dict[str, Any] | None = None
    config: dict[str, Any] | None = None


# -- answers (closed: the OpenAPI document is generated from them) -------------------------------------


class ModulexWorkflow(Answer):
    """A ModuleX workflow as modulex-python's WorkflowResponse, and the latest version its schema runs as."""

    id: str
    organization_id: str
    creator_id: str
    name: str
    description: str | None
    version: str
    tags: list[str]
    category: str | None
    status: str
    visibility: str
    workflow_schema: dict[str, Any]
    input: dict[str, Any]
    config: dict[str, Any]
    edit_version: int
    last_edited_by: str
    last_edited_at: str
    created_at: str
    updated_at: str
    latest_version: int


class OpenwopWorkflow(Answer):
    """An OpenWOP workflow as a ModuleX client reads it (GET /workflows/{id}): the fields modulex-python's
    WorkflowResponse declares that an OpenWOP workflow has, its latest version's number and its definition."""

    id: str
    face: Literal["openwop"]
    organization_id: str
    name: str
    description: str | None
    version: str | None
    tags: list[str]
    category: None
    status: str
    visibility: str
    workflow_schema: None
    input: dict[str, Any]
    config: dict[str, Any]
    updated_at: str | None
    latest_version: int
    definition: dict[str, Any]


class WorkflowSummary(Answer):
    """A listed workflow of either face (GET /workflows): `face` says which; versions are numbered 1..latest."""

    id: str
    face: Literal["openwop", "modulex"]
    name: str
    latest_version: int
    updated_at: str
    status: str | None = None
    version: str | None = None
    created_at: str | None = None
    description: str | None = None
    category: str | None = None
    visibility: str | None = None


class WorkflowList(Answer):
    workflows: list[WorkflowSummary]
    total: int
    page: int
    page_size: int
    total_pages: int


class WorkflowDeleted(Answer):
    status: Literal["deleted"]
    workflow_id: str
    message: str


class RunFields(Answer):
    """What a run's row and its detail both carry, in ModuleX's order."""

    id: str
    run_id: str
    workflow_id: str
    trigger_type: str
    is_ad_hoc: bool
    status: ModulexStatus
    started_at: str | None
    completed_at: str | None
    duration_seconds: float | None
    error_message: str | None
    created_at: str


class RunRow(RunFields):
    has_output: bool


class RunRows(Answer):
    runs: list[RunRow]
    has_more: bool
    limit: int
    offset: int


class RunDetail(RunFields):
    organization_id: str
    user_id: str | None
    thread_id: str
    input_snapshot: dict[str, Any]
    output_summary: dict[str, Any] | None
    updated_at: str
    openwop_status: str


def listed_fields(entry: dict[str, Any]) -> dict[str, Any]:
    """The fields GET /workflows shows and filters on, of a catalogue entry of either face (an entry written before
    an optional field existed has none)."""
    if entry["face"] == "openwop":
        fields = {"status": OPENWOP_STATUS, "visibility": OPENWOP_VISIBILITY, "category": None}
    else:
        fields = {name: entry.get(name) for name in ("status", "visibility", "category")}
    return {**fields, "description": entry.get("description")}


def summary(workflow_id: str, entry: dict[str, Any]) -> WorkflowSummary:
    return WorkflowSummary(
        id=workflow_id,
        face=entry["face"],
        name=entry["name"],
        latest_version=entry["latestVersion"],
        updated_at=entry["updatedAt"],
        version=entry.get("version"),
        created_at=entry.get("createdAt"),
        **listed_fields(entry),
    )


@dataclass(frozen=True)
class ListingFilter:
    """GET /workflows's filters: `status`, `category` and `visibility` match exactly, `search` is a case-blind part
    of the name or the description."""

    status: str | None = None
    category: str | None = None
    visibility: str | None = None
    search: str | None = None

    @classmethod
    def of(cls, query: dict[str, str]) -> ListingFilter:
        for name, value in query.items():
            if len(value) > MAX_NAME:
                raise Invalid(f"{name} must be at most {MAX_NAME} characters", {"field": name})
        return cls(**query)

    @property
    def any(self) -> bool:
        return any(getattr(self, name) is not None for name in LISTING_FILTERS)

    def keeps(self, entry: dict[str, Any]) -> bool:
        fields = listed_fields(entry)
        if any(getattr(self, name) not in (None, fields[name]) for name in ("status", "category", "visibility")):
            return False
        if self.search is None:
            return True
        needle = self.search.casefold()
        return any(needle in (text or "").casefold() for text in (entry["name"], fields["description"]))


def not_found() -> NotFound:
    return NotFound("workflow not found")


def _checked(body: Any, creating: bool) -> dict[str, Any]:
    """The writable fields of a create or update body, each check refusing in this order (the first that fails
    answers): the body's shape (400), its fields' JSON types (422, naming every field of another type), this host's
    limits (400)."""
    if not isinstance(body, dict):
        raise Invalid("the body must be a JSON object")
    fields = {k: v for k, v in body.items() if k in WRITABLE and v is not None}
    _no_unknown_fields(body)
    if creating and "workflow_schema" not in fields:
        raise Invalid("workflow_schema is required (a ModuleX workflow definition)")
    problems = typing_problems(fields, WRITABLE_TYPES)
    tags = fields.get("tags")
    if isinstance(tags, list):
        problems += [mistyped(["tags", i], "string", tag) for i, tag in enumerate(tags) if not isinstance(tag, str)]
    if problems:
        raise refused(problems)
    _short_strings(fields)
    _known_visibility(fields)
    _few_tags(fields)
    return fields


def _no_unknown_fields(body: dict[str, Any]) -> None:
    unknown = unknown_problems(body, (*WRITABLE, "id", "organization_id"), "a workflow body")
    if unknown:
        raise refused(unknown)


def _short_strings(fields: dict[str, Any]) -> None:
    for name in STRING_FIELDS:
        if name in fields and len(fields[name]) > MAX_NAME:
            raise Invalid(f"{name} must be a string of at most {MAX_NAME} characters")


def _known_visibility(fields: dict[str, Any]) -> None:
    if "visibility" in fields and fields["visibility"] not in VISIBILITIES:
        raise Invalid(f"visibility must be one of {list(VISIBILITIES)}")


def _few_tags(fields: dict[str, Any]) -> None:
    if len(fields.get("tags", ())) > 50:
        raise Invalid("tags must be a list of at most 50 strings")


def translated(schema: Any, field: str = "workflow_schema") -> WorkflowDefinition:
    """The engine's definition of a ModuleX schema sent in the body's `field`; 422 when it cannot run (`translation`)."""
    return translation(schema, field)[1]


def translation(schema: Any, field: str) -> tuple[dict[str, Any], WorkflowDefinition]:
    """A ModuleX schema sent in the body's `field` (`workflow_schema` deployed, `workflow` inline) as the engine's
    definition, raw (what an inline one's content id is made of) and read; 422 with FastAPI-style errors, each placed
    under that field, when it cannot run."""
    try:
        raw = mx.translate(schema, field)
    except mx.Invalid as exc:
        raise Unprocessable(str(exc), {"errors": exc.errors}) from None
    definition = WorkflowDefinition.model_validate(raw)
    problems = engine.check_config(definition)
    if problems:
        errors = [{"loc": ["body", field, *p["path"].split("/")], "msg": p["message"]} for p in problems]
        raise Unprocessable("the workflow cannot run", {"errors": errors})
    return raw, definition


def catalogue_entry(record: dict[str, Any]) -> dict[str, Any]:
    """What GET /workflows shows of a ModuleX workflow, and filters on, without reading its record."""
    return {
        "face": "modulex",
        "name": record["name"],
        "status": record["status"],
        "version": record["version"],
        "createdAt": record["created_at"],
        "updatedAt": record["updated_at"],
        "latestVersion": record["latest_version"],
        "description": record.get("description"),
        "category": record.get("category"),
        "visibility": record.get("visibility"),
    }


class ModulexWorkflows:
    def __init__(self, records: ModulexRecords, versions: VersionWrites, clock: Clock) -> None:
        self.records = records
        self.versions = versions
        self.clock = clock

    def _now(self) -> str:
        return engine.iso(self.clock())

    def _store_version(
        self, principal: auth.Principal, workflow_id: str, definition: WorkflowDefinition, record: dict[str, Any]
    ) -> dict[str, Any]:
        version = (self.records.latest_workflow_version(principal.tenant, workflow_id) or 0) + 1
        for _ in range(MAX_RACE_RETRIES):
            record = {**record, "latest_version": version}
            stored = self.versions.store_workflow_version(
                principal, workflow_id, version, definition, catalogue_entry(record), record
            )
            if stored is not None:
                return record
            version += 1
        raise busy("too many concurrent updates of this workflow; retry")

    def create(self, principal: auth.Principal, body: Any) -> dict[str, Any]:
        fields = _checked(body, creating=True)
        schema = fields["workflow_schema"]
        definition = translated(schema)
        metadata = schema.get("metadata") if isinstance(schema.get("metadata"), dict) else {}
        now = self._now()
        workflow_id = str(uuid.uuid4())
        record = {
            "id": workflow_id,
            "organization_id": principal.tenant,
            "creator_id": principal.subject["subjectId"],
            "name": fields.get("name") or metadata.get("name") or "Untitled workflow",
            "description": fields.get("description") or metadata.get("description"),
            "version": fields.get("version") or metadata.get("version") or "1.0.0",
            "tags": fields.get("tags") or [],
            "category": fields.get("category"),
            "status": fields.get("status") or "draft",
            "visibility": fields.get("visibility") or "organization",
            "workflow_schema": schema,
            "input": fields.get("input") or {},
            "config": fields.get("config") or {},
            "edit_version": 1,
            "last_edited_by": principal.subject["subjectId"],
            "last_edited_at": now,
            "created_at": now,
            "updated_at": now,
        }
        return self._store_version(principal, workflow_id, definition, record)

    def get(self, principal: auth.Principal, workflow_id: str) -> dict[str, Any]:
        record = self.records.get_modulex_workflow(principal.tenant, workflow_id)
        if record is None or "deletedAt" in record:
            raise not_found()
        return record

    def read(self, principal: auth.Principal, workflow_id: str) -> ModulexWorkflow | OpenwopWorkflow:
        """GET /workflows/{id} on the ModuleX face: a ModuleX workflow's record, or an OpenWOP workflow (latest
        version) in the fields modulex-python's WorkflowResponse reads; 404 for none, or a deleted one."""
        store = self.records
        record = store.get_modulex_workflow(principal.tenant, workflow_id)
        if record is not None:
            if "deletedAt" in record:
                raise not_found()
            return ModulexWorkflow.model_validate(record)
        latest = store.latest_workflow(principal.tenant, workflow_id)
        if latest is None:
            raise not_found()
        version, definition = latest
        entry = store.catalogue_entry(principal.tenant, workflow_id) or {}
        return OpenwopWorkflow(
            id=workflow_id,
            face="openwop",
            organization_id=principal.tenant,
            name=definition.get("name") or workflow_id,
            description=definition.get("description"),
            version=definition.get("version"),
            tags=[],
            category=None,
            status=OPENWOP_STATUS,
            visibility=OPENWOP_VISIBILITY,
            workflow_schema=None,
            input={},
            config={},
            updated_at=entry.get("updatedAt"),
            latest_version=version,
            definition=definition,
        )

    def update(self, principal: auth.Principal, workflow_id: str, body: Any) -> dict[str, Any]:
        fields = _checked(body, creating=False)
        store = self.records
        record = store.get_modulex_workflow(principal.tenant, workflow_id)
        if record is None and store.latest_workflow_version(principal.tenant, workflow_id) is not None:
            raise Invalid(
                f"{workflow_id!r} is an OpenWOP workflow: a new version is an OpenWOP definition PUT by an OpenWOP "
                "client (without X-Organization-ID)"
            )
        if record is None or "deletedAt" in record:
            raise not_found()
        now = self._now()
        record = {
            **record,
            **fields,
            "edit_version": int(record.get("edit_version", 1)) + 1,
            "last_edited_by": principal.subject["subjectId"],
            "last_edited_at": now,
            "updated_at": now,
        }
        if "workflow_schema" in fields:
            return self._store_version(principal, workflow_id, translated(fields["workflow_schema"]), record)
        if not self.records.put_modulex_metadata(principal.tenant, workflow_id, record, catalogue_entry(record)):
            raise not_found()
        return record

    def delete(self, principal: auth.Principal, workflow_id: str) -> dict[str, Any]:
        self.get(principal, workflow_id)
        self.records.delete_modulex_workflow(principal.tenant, workflow_id, self._now())
        return {"status": "deleted", "workflow_id": workflow_id, "message": "Workflow deleted"}

    def deleted(self, tenant: str, workflow_id: str) -> bool:
        """Whether `workflow_id` names a ModuleX workflow that was deleted (its runs by id are refused)."""
        record = self.records.get_modulex_workflow(tenant, workflow_id)
        return record is not None and "deletedAt" in record


# -- run rows (GET /workflow-runs) -------------------------------------------------------------------------------


def _duration(state: RunState) -> float | None:
    if not state.completedAt:
        return None
    began = datetime.fromisoformat((state.startedAt or state.createdAt).replace("Z", "+00:00"))
    ended = datetime.fromisoformat(state.completedAt.replace("Z", "+00:00"))
    return round((ended - began).total_seconds(), 3)


# How a run was started, as a run row says (`trigger_type`): by a key through an API (either face: POST /runs or
# POST /workflows/run), or as a sub-workflow by its parent run (core.subWorkflow).
TRIGGER_TYPES = ("api", "subworkflow")


def trigger_type(state: RunState) -> str:
    return "subworkflow" if state.parentRunId is not None else "api"


def run_row(state: RunState) -> dict[str, Any]:
    """A run as modulex-python's WorkflowRunListItem: `id` (the run_pk) is the run's wire id, as `run_id` is; a run
    of an inline definition (stored under its content id) is ad hoc."""
    wire = to_wire(state.runId)
    return {
        "id": wire,
        "run_id": wire,
        "workflow_id": state.workflowId,
        "trigger_type": trigger_type(state),
        "is_ad_hoc": state.workflowId.startswith(INLINE_WORKFLOW_PREFIX),
        "status": status_of(state.status),
        "started_at": state.startedAt or state.createdAt,
        "completed_at": state.completedAt,
        "duration_seconds": _duration(state),
        "error_message": (state.error or {}).get("message"),
        "created_at": state.createdAt,
        "has_output": bool(state.outputs),
    }


def run_detail(state: RunState, view: RunView) -> dict[str, Any]:
    """A run as modulex-python's WorkflowRunDetail: its outputs keyed by the author's node ids (`view`)."""
    row = run_row(state)
    return {
        **{k: v for k, v in row.items() if k != "has_output"},
        "organization_id": state.tenant,
        "user_id": state.owner.get("subject", {}).get("subjectId"),
        "thread_id": row["run_id"],
        "input_snapshot": state.inputs,
        "output_summary": view.state_of(state.outputs) or None,
        "updated_at": state.completedAt or state.startedAt or state.createdAt,
        "openwop_status": state.status,
    }


STATUS_FILTERS = {
    "running": ("running", "pending"),
    "interrupted": ("waiting-approval", "waiting-input", "waiting-external"),
    "completed": ("completed",),
    "failed": ("failed",),
    "cancelled": ("cancelled",),
}


def _row_filter(trigger: str | None) -> Callable[[RunState], bool] | None:
    """What a row must be beyond the listing's filters: started as `trigger`."""
    if trigger is None:
        return None
    return lambda state: trigger_type(state) == trigger


def listing_key(filters: RunFilters, trigger: str | None) -> str:
    """Which listing a bookmark belongs to: the filters, hashed (a filter's value is caller-chosen text)."""
    asked = {**filters._asdict(), "statuses": sorted(filters.statuses), "metadata": sorted(filters.metadata.items())}
    text = json.dumps([asked, trigger], separators=(",", ":"), allow_nan=False, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def list_run_rows(
    runs: RunListing,
    bookmarks: ListingBookmarks,
    clock: Clock,
    tenant: str,
    offset: int,
    limit: int,
    filters: RunFilters,
    trigger: str | None = None,
) -> dict[str, Any]:
    """GET /workflow-runs: `{runs, has_more, limit, offset}`, newest first, those `filters` (GET /runs's, in
    ModuleX's spelling: api/modulex_workflows.py) accept and started as `trigger` (one of TRIGGER_TYPES).

    Offsets are served by cursor: each page that has more leaves a bookmark (offset + limit -> the listing's cursor
    after its last run, kept BOOKMARK_TTL_S), and a page starts at the nearest bookmark at or below its offset,
    skipping at most MAX_RUN_SKIP runs from there (400 past that). Read in order, as iter_runs reads, every page
    starts at a bookmark and reads only its own runs, however deep."""
    page = {"limit": limit, "offset": offset}
    if trigger is not None and trigger not in TRIGGER_TYPES:
        return {"runs": [], "has_more": False, **page}  # no run was started so: nothing to read
    listing = listing_key(filters, trigger)
    now = int(clock().timestamp())
    start, cursor = 0, None
    if offset > 0:
        start, cursor = bookmarks.listing_bookmark(tenant, listing, offset, now) or (0, None)
    if offset - start > MAX_RUN_SKIP:
        raise Invalid(
            f"offset may start at most {MAX_RUN_SKIP} runs past where this listing was last read to (offset {start}); "
            "read it in order, as iter_runs does",
            {"field": "offset", "maxSkip": MAX_RUN_SKIP, "nearest": start},
        )
    got = runs.skip_and_take(tenant, offset - start, limit, filters, _row_filter(trigger), cursor)
    if got.after is not None:
        bookmarks.put_listing_bookmark(tenant, listing, offset + limit, got.after, now + BOOKMARK_TTL_S)
    return {"runs": [run_row(r) for r in got.runs], "has_more": got.more, **page}
