"""The operations behind the approver inbox, external events by correlation, tenant settings and grants.

Between the HTTP layer (api/hitl.py) and the store (store/hitl.py); the interrupt rules stay in
interrupts/decide.py. Rules and their reasons: docs/decisions.md, "Issue 3".
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from interlude.domain import schemas
from interlude.domain.errors import ApiError
from interlude.domain.ids import check_author_id, mint_opaque, tenant_of
from interlude.domain.models.run import OpenInterrupt
from interlude.domain.models.tenants import CredentialGrantRequest, PostEventRequest, TenantSettings
from interlude.domain.validation import parse
from interlude.engine.run import iso, iso_epoch
from interlude.rules.auth import Principal, run_resolver
from interlude.rules.interrupts.correlation import correlation_hash
from interlude.rules.interrupts.decide import Resolver, eligible
from interlude.rules.interrupts.secrets import credential_material
from interlude.store.interactions import HitlStore

if TYPE_CHECKING:
    from interlude.app.service import Service

INTERRUPT_KINDS = tuple(schemas.load("suspend-request.schema.json")["properties"]["kind"]["enum"])
# What of a vote anyone who may see the interrupt is shown (the run snapshot and the inbox alike).
PUBLIC_VOTE_FIELDS = ("principal", "action", "at", "surface", "groups", "roles")
MAX_INBOX_LIMIT = 100
DEFAULT_INBOX_LIMIT = 25
MAX_INBOX_QUERIES = 10


# -- tenant settings and credential grants ---------------------------------------------------------


def tenant_settings(hitl: HitlStore, tenant: str) -> TenantSettings:
    raw = hitl.get_settings(tenant)
    return TenantSettings.model_validate(raw) if raw else TenantSettings()


def get_settings(service: Service, principal: Principal) -> dict[str, Any]:
    settings = tenant_settings(service.hitl_store, principal.tenant)
    return {"tenant": principal.tenant, "settings": settings.model_dump()}


def put_settings(service: Service, tenant: str, body: Any, by: str) -> dict[str, Any]:
    settings: TenantSettings = parse(TenantSettings, body, "tenant settings")
    service.hitl_store.put_settings(tenant, settings.model_dump(), iso(service.clock()), by)
    return {"tenant": tenant, "settings": settings.model_dump()}


def put_grant(service: Service, tenant: str, provider: str, body: Any, by: str) -> dict[str, Any]:
    check_author_id(provider, "provider")
    request: CredentialGrantRequest = parse(CredentialGrantRequest, body, "credential grant")
    at = iso(service.clock())
    service.hitl_store.put_grant(tenant, provider, list(request.scopes), at, by)
    return {"tenant": tenant, "provider": provider, "scopes": sorted(set(request.scopes)), "grantedAt": at}


def with_tenant_facts(hitl: HitlStore, tenant: str, interrupt: OpenInterrupt, resolver: Resolver) -> Resolver:
    """Add the tenant-held facts a decision needs, read at decision time: override principals, grants."""
    data = interrupt.payload.get("data") or {}
    if interrupt.kind == "approval" and data.get("overrideBypassesQuorum"):
        settings = tenant_settings(hitl, tenant)
        resolver = replace(resolver, tenant_override_principals=tuple(settings.overridePrincipals))
    if interrupt.kind == "credential":
        resolver = replace(resolver, granted_scopes=hitl.get_grant(tenant, data["provider"]))
    return resolver


# -- external events -------------------------------------------------------------------------------


def _resume_value(record: dict[str, Any]) -> dict[str, Any]:
    return {k: record[k] for k in ("eventId", "eventType", "correlation", "payload", "receivedAt")}


def _resolve_waiter(
    service: Service, run_id: str, node_id: str, key: str, record: dict[str, Any], subject: dict[str, Any] | None
) -> dict[str, Any]:
    outcome: dict[str, Any] = {"runId": run_id, "nodeId": node_id}
    got = service.store.get_run(run_id)
    interrupt = got[0].interrupts.get(node_id) if got else None
    if got is None or interrupt is None or interrupt.key != key:
        return {**outcome, "outcome": "already-resolved"}
    state, version = got
    try:
        result = service.resolve(
            state,
            version,
            node_id,
            _resume_value(record),
            Resolver(subject, "event"),
            interrupt_id=interrupt.interruptId,
        )
    except ApiError as exc:
        if exc.code == "interrupt_already_resolved":
            return {**outcome, "outcome": "already-resolved"}
        if exc.code == "validation_error":
            return {**outcome, "outcome": "refused", "errors": (exc.details or {}).get("errors", [])}
        raise
    return {**outcome, "outcome": "resolved", "status": result["status"]}


def post_event(service: Service, principal: Principal, body: Any) -> dict[str, Any]:
    """Keep the event, then resolve every waiting interrupt it matches (race-free with raising; see decisions)."""
    request: PostEventRequest = parse(PostEventRequest, body, "request body")
    found = credential_material({"correlation": request.correlation, "payload": request.payload})
    if found is not None:
        raise ApiError(
            "validation_error",
            "an event never carries credential material: it becomes an interrupt's resume value",
            {"field": found.split("/")[1], "path": found},
        )
    hitl = service.hitl_store
    tenant = principal.tenant
    now = service.clock()
    retention_h = tenant_settings(hitl, tenant).eventRetentionHours
    expires = int(now.timestamp()) + retention_h * 3600
    record = {
        "eventId": mint_opaque(),
        "eventType": request.eventType,
        "correlation": request.correlation,
        "payload": request.payload,
        "receivedAt": iso(now),
        "sentBy": principal.subject,
    }
    hash_ = correlation_hash(request.eventType, request.correlation)
    # 1. keep the event (so an interrupt raised from now on finds it), 2. then look for who waits already.
    sk = hitl.put_event(tenant, hash_, record, expires)
    results = [
        _resolve_waiter(service, w["runId"], w["nodeId"], w["interruptKey"], record, principal.subject)
        for w in hitl.waiters(tenant, hash_)
    ]
    resolved = [r for r in results if r["outcome"] == "resolved"]
    if resolved:
        hitl.claim_event(tenant, hash_, sk, f"{resolved[0]['runId']}:{resolved[0]['nodeId']}")
    return {
        "eventId": record["eventId"],
        "receivedAt": record["receivedAt"],
        "matched": len(results),
        "resolved": len(resolved),
        "results": results,
        # Kept for an interrupt raised later when nothing took it now.
        "kept": not resolved,
        "expiresAt": iso_epoch(expires),
    }


def resolve_kept_events(service: Service, run_id: str, events: list[dict[str, Any]]) -> None:
    """Outbox handler: an external-event interrupt just raised takes the oldest kept event that matches it.

    Idempotent: an interrupt already resolved (by this handler before, or by POST /events) is left alone,
    and a kept event is marked used once it has resolved an interrupt, so a later interrupt never reuses it.
    """
    raised = [
        e for e in events if e.get("type") == "interrupt.requested" and e["payload"].get("kind") == "external-event"
    ]
    if not raised:
        return
    hitl = service.hitl_store
    tenant = tenant_of(run_id)
    for event in raised:
        data = event["payload"]["data"]
        hash_ = correlation_hash(data["eventType"], data["correlation"])
        kept = hitl.unconsumed_events(tenant, hash_, service.clock().timestamp())
        for sk, record in kept:
            outcome = _resolve_waiter(
                service, run_id, event["nodeId"], event["payload"]["key"], record, record.get("sentBy")
            )
            if outcome["outcome"] == "resolved":
                hitl.claim_event(tenant, hash_, sk, f"{run_id}:{event['nodeId']}")
            if outcome["outcome"] != "refused":
                break


# -- inbox -----------------------------------------------------------------------------------------


def _vote_view(votes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in vote.items() if k in PUBLIC_VOTE_FIELDS} for vote in votes]


def _may_decide(kind: str, payload: dict[str, Any], votes: list[dict[str, Any]], resolver: Resolver) -> bool:
    if kind != "approval":
        return True
    if not eligible(payload["data"], resolver):
        return False
    # A principal who has cast a vote cannot cast another, so the gate is no longer theirs to decide.
    return not any(v["principal"] == resolver.principal and v["action"] != "ask" for v in votes)


def inbox(
    service: Service, principal: Principal, limit: int, filters: dict[str, str], cursor: str | None
) -> dict[str, Any]:
    """Pending interrupts the principal may decide, newest first. `filters`: kind, workflowId, runId."""
    if "runId" in filters and tenant_of(filters["runId"]) != principal.tenant:
        raise ApiError("id_tenant_mismatch", "the run id belongs to another tenant")
    resolver = run_resolver(principal)
    hitl = service.hitl_store
    out: list[dict[str, Any]] = []
    for _ in range(MAX_INBOX_QUERIES):
        try:
            entries, next_cursor = hitl.inbox_page(principal.tenant, min(MAX_INBOX_LIMIT, limit * 2), cursor, filters)
        except ValueError:
            raise ApiError("validation_error", "cursor is not one this inbox issued", {"field": "cursor"}) from None
        for i, entry in enumerate(entries):
            if entry.get("deadline") is not None and float(entry["deadline"]) <= service.clock().timestamp():
                # Past its deadline: timed out, not pending. Reading the run records the timeout if nobody has.
                with contextlib.suppress(ApiError):
                    service.load_run(principal.tenant, entry["runId"])
                continue
            if not _may_decide(entry["kind"], entry["payload"], entry["votes"], resolver):
                continue
            out.append(
                {
                    **{k: entry[k] for k in ("interruptId", "runId", "nodeId", "workflowId", "kind", "raisedAt", "payload")},
                    "votes": _vote_view(entry["votes"]),
                }
            )
            if len(out) == limit:
                more = i < len(entries) - 1 or next_cursor is not None
                return {"interrupts": out, "nextCursor": entry["cursor"] if more else None}
        if next_cursor is None:
            return {"interrupts": out, "nextCursor": None}
        cursor = next_cursor
    return {"interrupts": out, "nextCursor": cursor}
