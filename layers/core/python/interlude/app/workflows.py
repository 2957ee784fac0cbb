"""Workflow definitions: registering a version (checked, within the tenant's quotas), listing and reading them.
Runs read their versions through app/definitions.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from interlude.app.retries import MAX_RACE_RETRIES, busy
from interlude.domain.clock import Clock, iso
from interlude.domain.errors import Invalid, NotFound
from interlude.domain.ids import INLINE_WORKFLOW_PREFIX
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine.run import HTTP_ACTION, check_config
from interlude.rules import auth
from interlude.rules.callback_url import action_url_problems
from interlude.rules.limits import check_definition

if TYPE_CHECKING:
    from interlude.app.ports import TenantLimits, WorkflowRecords


# GET /workflows: a page holds at most MAX_WORKFLOW_PAGE workflows and pages reach the first MAX_WORKFLOW_LISTING.
MAX_WORKFLOW_PAGE = 100
DEFAULT_WORKFLOW_PAGE = 20
MAX_WORKFLOW_LISTING = 10_000


def check_workflow(definition: WorkflowDefinition) -> None:
    """What PUT /workflows/{id} refuses a parsed definition for (also `interlude workflows validate`, offline)."""
    actions = ((index, node.config.get("url")) for index, node in enumerate(definition.nodes) if node.typeId == HTTP_ACTION)
    problems = [*check_config(definition), *action_url_problems(actions)]
    if problems:
        raise Invalid("the workflow definition is not valid", {"errors": problems})


def stored_form(definition: WorkflowDefinition, workflow_id: str) -> dict[str, Any]:
    stored = definition.model_dump(mode="json", exclude_none=True, by_alias=True)
    stored["id"] = workflow_id
    return stored


def stored_size(stored: dict[str, Any]) -> int:
    """The definition's size as the quota counts it: compact, strict JSON in UTF-8."""
    text = json.dumps(stored, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return len(text.encode("utf-8", "surrogatepass"))


def catalogue_entry(definition: WorkflowDefinition, workflow_id: str, now: str) -> dict[str, Any]:
    """What GET /workflows shows of an OpenWOP workflow, and filters on, without reading its definition."""
    entry = {"face": "openwop", "name": definition.name or workflow_id, "updatedAt": now}
    return {**entry, **{k: v for k, v in (("description", definition.description), ("version", definition.version)) if v}}


class Workflows:
    def __init__(self, records: WorkflowRecords, limits: TenantLimits, clock: Clock) -> None:
        self.records = records
        self.limits = limits
        self.clock = clock

    def put_workflow(
        self, principal: auth.Principal, workflow_id: str, definition: WorkflowDefinition
    ) -> dict[str, Any]:
        if workflow_id.startswith(INLINE_WORKFLOW_PREFIX):
            raise Invalid(
                f"workflow ids beginning {INLINE_WORKFLOW_PREFIX!r} are reserved for inline ModuleX definitions",
                {"field": "workflowId"},
            )
        check_workflow(definition)
        version = (self.records.latest_workflow_version(principal.tenant, workflow_id) or 0) + 1
        now = iso(self.clock())
        for _ in range(MAX_RACE_RETRIES):
            entry = catalogue_entry(definition, workflow_id, now)
            stored = self.store_workflow_version(principal, workflow_id, version, definition, entry)
            if stored is not None:
                return {"workflowId": workflow_id, "version": version, "definition": stored}
            version += 1
        raise busy("too many concurrent registrations of this workflow; retry")

    def store_workflow_version(
        self,
        principal: auth.Principal,
        workflow_id: str,
        version: int,
        definition: WorkflowDefinition,
        catalogue: dict[str, Any] | None = None,
        modulex_record: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """Store a checked definition as `version` of `workflow_id`: its stored form, or None if that version is
        taken (a concurrent writer); each face checks the definition first and reports problems its own way."""
        stored = stored_form(definition, workflow_id)
        limits = self.limits.limits(principal.tenant)
        check_definition(stored_size(stored), len(definition.nodes), limits)
        written = self.records.put_workflow_version(
            principal.tenant,
            workflow_id,
            version,
            stored,
            iso(self.clock()),
            principal.subject["subjectId"],
            limits.workflow_versions,
            catalogue,
            modulex_record,
        )
        return stored if written else None

    def list_workflows(
        self, tenant: str, page: int, page_size: int, keep: Callable[[dict[str, Any]], bool] | None = None
    ) -> dict[str, Any]:
        """One page of the tenant's listed workflows of both faces (those whose catalogue entry `keep` keeps), by id,
        with their latest version numbers (versions are numbered 1..latest)."""
        if (page - 1) * page_size >= MAX_WORKFLOW_LISTING:
            raise Invalid(
                f"pages reach the first {MAX_WORKFLOW_LISTING} workflows",
                {"field": "page", "limit": MAX_WORKFLOW_LISTING},
            )
        entries, total = self.records.catalogue_page(tenant, (page - 1) * page_size, page_size, keep)
        return {
            "workflows": [{"id": workflow_id, **entry} for workflow_id, entry in entries],
            "total": total,
            "page": page,
            "page_size": page_size,
            "total_pages": max(1, -(-total // page_size)),
        }

    def named_workflows(self, tenant: str, most: int) -> list[tuple[str, str]] | None:
        """(id, name) of each of the tenant's listed workflows, by name, when it has at most `most` of them (one Query
        of the catalogue); None when it has more."""
        entries = self.records.catalogue_first(tenant, most + 1)
        if len(entries) > most:
            return None
        named = ((workflow_id, str(entry.get("name") or workflow_id)) for workflow_id, entry in entries)
        return sorted(named, key=lambda choice: (choice[1].casefold(), choice[0]))

    def get_workflow(self, principal: auth.Principal, workflow_id: str) -> dict[str, Any]:
        latest = self.records.latest_workflow(principal.tenant, workflow_id)
        if latest is None:
            raise NotFound(f"no workflow {workflow_id!r}")
        return {"workflowId": workflow_id, "version": latest[0], "definition": latest[1]}

    def get_workflow_version(self, principal: auth.Principal, workflow_id: str, version: int) -> dict[str, Any]:
        """One stored version of a workflow, with the latest version's number beside it."""
        latest = self.records.latest_workflow_version(principal.tenant, workflow_id)
        definition = self.records.get_workflow(principal.tenant, workflow_id, version) if latest else None
        if definition is None:
            raise NotFound(f"no version {version} of workflow {workflow_id!r}")
        return {"workflowId": workflow_id, "version": version, "latestVersion": latest, "definition": definition}
