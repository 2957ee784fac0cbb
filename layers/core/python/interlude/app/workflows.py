"""Workflow definitions: registering a version, reading the latest, and the process cache of immutable versions."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from interlude.app.retries import MAX_RACE_RETRIES, busy
from interlude.domain.clock import Clock, iso
from interlude.domain.errors import Internal, Invalid, NotFound
from interlude.domain.ids import INLINE_WORKFLOW_PREFIX
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.rules import auth
from interlude.rules.limits import check_definition
from interlude.store.facade import Store

if TYPE_CHECKING:
    from interlude.app.limits import TenantLimiter


# GET /workflows: a page holds at most MAX_WORKFLOW_PAGE workflows and pages reach the first MAX_WORKFLOW_LISTING.
MAX_WORKFLOW_PAGE = 100
DEFAULT_WORKFLOW_PAGE = 20
MAX_WORKFLOW_LISTING = 10_000


def check_workflow(definition: WorkflowDefinition) -> None:
    """What PUT /workflows/{id} refuses a parsed definition for (also `interlude workflows validate`, offline)."""
    from interlude.engine.run import check_config  # the engine's rules: only a definition registered loads them here

    problems = check_config(definition)
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


class WorkflowOperations:
    """Part of Service (app/service.py), which sets these attributes."""

    store: Store
    clock: Clock
    _workflows: OrderedDict[tuple[str, str, int], WorkflowDefinition]
    if TYPE_CHECKING:  # the service's, built with its first use (app/service.py)

        @property
        def limiter(self) -> TenantLimiter: ...

    def put_workflow(
        self, principal: auth.Principal, workflow_id: str, definition: WorkflowDefinition
    ) -> dict[str, Any]:
        if workflow_id.startswith(INLINE_WORKFLOW_PREFIX):
            raise Invalid(
                f"workflow ids beginning {INLINE_WORKFLOW_PREFIX!r} are reserved for inline ModuleX definitions",
                {"field": "workflowId"},
            )
        check_workflow(definition)
        version = (self.store.latest_workflow_version(principal.tenant, workflow_id) or 0) + 1
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
        limits = self.limiter.limits(principal.tenant)
        check_definition(stored_size(stored), len(definition.nodes), limits)
        written = self.store.put_workflow_version(
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
        entries, total = self.store.catalogue_page(tenant, (page - 1) * page_size, page_size, keep)
        return {
            "workflows": [{"id": workflow_id, **entry} for workflow_id, entry in entries],
            "total": total,
            "page": page,
            "page_size": page_size,
            "total_pages": max(1, -(-total // page_size)),
        }

    def get_workflow(self, principal: auth.Principal, workflow_id: str) -> dict[str, Any]:
        latest = self.store.latest_workflow(principal.tenant, workflow_id)
        if latest is None:
            raise NotFound(f"no workflow {workflow_id!r}")
        return {"workflowId": workflow_id, "version": latest[0], "definition": latest[1]}

    def get_workflow_version(self, principal: auth.Principal, workflow_id: str, version: int) -> dict[str, Any]:
        """One stored version of a workflow, with the latest version's number beside it."""
        latest = self.store.latest_workflow_version(principal.tenant, workflow_id)
        definition = self.store.get_workflow(principal.tenant, workflow_id, version) if latest else None
        if definition is None:
            raise NotFound(f"no version {version} of workflow {workflow_id!r}")
        return {"workflowId": workflow_id, "version": version, "latestVersion": latest, "definition": definition}

    def workflow(self, tenant: str, workflow_id: str, version: int) -> WorkflowDefinition:
        # Versions are immutable, so a process may keep them for its whole life.
        cache_key = (tenant, workflow_id, version)
        hit = self._workflows.get(cache_key)
        if hit is None:
            raw = self.store.get_workflow(tenant, workflow_id, version)
            if raw is None:
                raise Internal("a run refers to a workflow version that is missing")
            hit = WorkflowDefinition.model_validate(raw)
            self._remember(cache_key, hit)
        return hit

    def _remember(self, cache_key: tuple[str, str, int], definition: WorkflowDefinition) -> None:
        self._workflows[cache_key] = definition
        if len(self._workflows) > 256:
            self._workflows.popitem(last=False)
