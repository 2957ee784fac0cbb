"""External events by correlation: posting one resolves the waiting interrupts it matches, and one kept until a
matching gate is raised resumes it then (an outbox handler). Rules and their reasons: docs/adr/0007."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from interlude.app.tenant_facts import tenant_settings
from interlude.domain.clock import iso, iso_epoch
from interlude.domain.errors import DomainError, Invalid
from interlude.domain.ids import mint_opaque, tenant_of
from interlude.domain.models.tenant_requests import PostEventRequest
from interlude.domain.written_numbers import OUTCOME_KEY as WRITTEN_NUMBERS
from interlude.engine.events import raised_external_events
from interlude.rules.auth import Principal
from interlude.rules.interrupts.correlation import correlation_hash
from interlude.rules.interrupts.decide import Resolver
from interlude.rules.interrupts.secrets import credential_material

if TYPE_CHECKING:
    from interlude.app.ports import Decider, EventRecords, RunRecords, TenantRecords
    from interlude.domain.clock import Clock


def _resume_value(record: dict[str, Any]) -> dict[str, Any]:
    return {k: record[k] for k in ("eventId", "eventType", "correlation", "payload", "receivedAt")}


class ExternalEvents:
    def __init__(
        self, events: EventRecords, records: RunRecords, decisions: Decider, tenants: TenantRecords, clock: Clock
    ) -> None:
        self.events = events
        self.records = records
        self.decisions = decisions
        self.tenants = tenants
        self.clock = clock

    def _already_resolved(
        self, run_id: str, key: str, record: dict[str, Any], outcome: dict[str, Any]
    ) -> dict[str, Any]:
        # The outbox may have resumed the interrupt with this very event first: kept before the waiters were read, it is
        # what the interrupt's raise looks for. The event did resolve it then, and the answer says so (not "kept").
        closed = self.records.closed_interrupt(run_id, key) or {}
        resolution = closed.get("resolution") or {}
        value = resolution.get("resumeValue")
        if closed.get("status") == "resolved" and isinstance(value, dict) and value.get("eventId") == record["eventId"]:
            got = self.records.get_run(run_id)
            return {**outcome, "outcome": "resolved", "status": got[0].status if got else "unknown"}
        return {**outcome, "outcome": "already-resolved"}

    def _resolve_waiter(
        self, run_id: str, node_id: str, key: str, record: dict[str, Any], subject: dict[str, Any] | None
    ) -> dict[str, Any]:
        outcome: dict[str, Any] = {"runId": run_id, "nodeId": node_id}
        got = self.records.get_run(run_id)
        interrupt = got[0].interrupts.get(node_id) if got else None
        if got is None or interrupt is None or interrupt.key != key:
            return self._already_resolved(run_id, key, record, outcome)
        state, version = got
        try:
            result = self.decisions.resolve(
                state,
                version,
                node_id,
                _resume_value(record),
                Resolver(subject, "event"),
                interrupt_id=interrupt.interruptId,
                written_numbers=record.get(WRITTEN_NUMBERS),
            )
        except DomainError as exc:
            if exc.code == "interrupt_already_resolved":
                return self._already_resolved(run_id, key, record, outcome)
            if exc.code == "validation_error":
                return {**outcome, "outcome": "refused", "errors": (exc.details or {}).get("errors", [])}
            raise
        return {**outcome, "outcome": "resolved", "status": result["status"]}

    def post_event(
        self, principal: Principal, request: PostEventRequest, written_numbers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """Keep the event, then resolve every waiting interrupt it matches (race-free with raising; see decisions).
        `written_numbers`: how the request wrote its numbers, kept with the event for the runs it resolves."""
        found = credential_material({"correlation": request.correlation, "payload": request.payload})
        if found is not None:
            raise Invalid(
                "an event never carries credential material: it becomes an interrupt's resume value",
                {"field": found.split("/")[1], "path": found},
            )
        tenant = principal.tenant
        now = self.clock()
        retention_h = tenant_settings(self.tenants, tenant).eventRetentionHours
        expires = int(now.timestamp()) + retention_h * 3600
        record = {
            "eventId": mint_opaque(),
            "eventType": request.eventType,
            "correlation": request.correlation,
            "payload": request.payload,
            "receivedAt": iso(now),
            "sentBy": principal.subject,
        }
        if written_numbers:
            record[WRITTEN_NUMBERS] = dict(written_numbers)
        hash_ = correlation_hash(request.eventType, request.correlation)
        # 1. keep the event (so an interrupt raised from now on finds it), 2. then look for who waits already.
        sk = self.events.put_event(tenant, hash_, record, expires)
        results = [
            self._resolve_waiter(w["runId"], w["nodeId"], w["interruptKey"], record, principal.subject)
            for w in self.events.waiters(tenant, hash_)
        ]
        resolved = [r for r in results if r["outcome"] == "resolved"]
        if resolved:
            self.events.claim_event(tenant, hash_, sk, f"{resolved[0]['runId']}:{resolved[0]['nodeId']}")
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

    def resolve_kept_events(self, run_id: str, events: list[dict[str, Any]]) -> None:
        """Outbox handler: an external-event interrupt just raised takes the oldest kept event that matches it.

        A kept event is taken (marked used by the interrupt, conditionally) before it resolves anything, so of gates
        raised at once, each by a dispatch thread or instance of its own, one takes it (docs/adr/0182); one that does not
        resolve its gate with it (refused by its resume schema, or the gate closed otherwise) gives it back.
        Idempotent: an interrupt already resolved (by this handler before, or by POST /events) is left alone, and a
        handler delivered again finds the event its interrupt took as its own.
        """
        raised = raised_external_events(events)
        if not raised:
            return
        tenant = tenant_of(run_id)
        for event in raised:
            data = event["payload"]["data"]
            hash_ = correlation_hash(data["eventType"], data["correlation"])
            key = event["payload"]["key"]
            kept = self.events.unconsumed_events(tenant, hash_, self.clock().timestamp(), taken_by=key)
            for sk, record in kept:
                if not self.events.claim_event(tenant, hash_, sk, key):
                    continue  # another gate took it since the read
                outcome = self._resolve_waiter(run_id, event["nodeId"], key, record, record.get("sentBy"))
                if outcome["outcome"] == "resolved":
                    break
                self.events.release_event(tenant, hash_, sk, key)
                if outcome["outcome"] != "refused":
                    break
