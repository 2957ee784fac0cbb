"""The notification log (issue 14 item 6) and the tenant's Slack settings: who was told what, when, how.

The log answers one entry per notification and channel, with the outcome; never an address, a link, a token or
a secret (the store keeps none of them either).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlude.rules.auth import Principal

if TYPE_CHECKING:
    from interlude.app.ports import NotificationLog, RunLedger

PUBLIC_FIELDS = (
    "notificationId",
    "principalId",
    "purpose",
    "nodeId",
    "interruptId",
    "queuedAt",
    "reason",
    "recipientsCut",
)


class Notifications:
    def __init__(self, runs: RunLedger, log: NotificationLog) -> None:
        self.runs = runs
        self.log = log

    def run_notifications(self, principal: Principal, run_id: str) -> dict[str, Any]:
        state, _ = self.runs.load_run(principal.tenant, run_id)
        entries: list[dict[str, Any]] = []
        for item in self.log.of_run(state.runId):
            record = item["record"]
            base = {k: record[k] for k in PUBLIC_FIELDS if record.get(k) is not None}
            base.update({"status": item["status"], "attempts": item["attempts"]})
            channels = record.get("channels") or {}
            if not channels:
                entries.append({**base, "channel": None, "outcome": item["status"]})
            for channel, outcome in sorted(channels.items()):
                entry = {**base, "channel": channel, "outcome": outcome.get("outcome"), "at": outcome.get("at")}
                if outcome.get("errorClass"):
                    entry["errorClass"] = outcome["errorClass"]
                entries.append(entry)
        entries.sort(key=lambda e: (e.get("queuedAt") or "", e["notificationId"], e.get("channel") or ""))
        return {"runId": state.runId, "notifications": entries}
