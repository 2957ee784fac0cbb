"""A run's callback deliveries as its tenant may see them (GET /runs/{runId}/deliveries)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlude.store.deliveries import public_attempts

if TYPE_CHECKING:
    from interlude.app.ports import DeliveryAttempts, RunLedger
    from interlude.rules import auth


class RunDeliveries:
    def __init__(self, runs: RunLedger, attempts: DeliveryAttempts) -> None:
        self.runs = runs
        self.attempts = attempts

    def run_deliveries(self, principal: auth.Principal, run_id: str) -> dict[str, Any]:
        """Every callback delivery attempt of a run, oldest first, in the fields a tenant may see."""
        # Tenant check and existence first: a foreign or unknown run answers as getRun would.
        state, _ = self.runs.load_run(principal.tenant, run_id)
        attempts = sorted(
            self.attempts.attempts(run_id),
            key=lambda a: (a.get("at", ""), a.get("noticeId", ""), a.get("attempt", 0)),
        )
        return {"runId": state.runId, "callbackUrl": state.callbackUrl, "deliveries": public_attempts(attempts)}
