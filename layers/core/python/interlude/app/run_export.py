"""GET /runs/{runId}/export (issue 30 item 4): a run whole, as one JSON document, to archive before retention removes
it: its snapshot, every interrupt it raised and what became of it (the decisions), its effect ledger and its events.

One answer holds at most budgets.MAX_ANSWER_BYTES (4 MB, under the 6 MB a Lambda answer may carry). The snapshot,
decisions and effects come whole on every page; the events fill what is left, from `afterSequence` on, and
`complete` says whether the last one is the run's last: if not, the next page is asked after the last sequence
received. A run whose snapshot, decisions and effects alone pass the budget is refused (413 payload_too_large) rather
than cut short: nothing an export answers is ever a silent part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlude.app.snapshots import snapshot
from interlude.domain.budgets import MAX_ANSWER_BYTES, BudgetExceeded, first_page, json_size
from interlude.domain.clock import iso, iso_epoch
from interlude.domain.errors import TooLarge

if TYPE_CHECKING:
    from interlude.app.ports import EffectLedger, RunArchive, RunRecords
    from interlude.app.runs import Runs
    from interlude.domain.clock import Clock
    from interlude.rules.auth import Principal

EXPORT_VERSION = 1
# Events one page reads at most before it measures them (a page of events is far smaller than this many).
EVENTS_READ = 5000
# What a page keeps for its events at least: less, and the document is refused.
MIN_EVENT_BYTES = 64 * 1024
DECISION_FIELDS = ("interruptId", "nodeId", "kind", "status", "raisedAt", "payload", "resolution", "votes")


class RunExports:
    def __init__(self, runs: Runs, records: RunRecords, archive: RunArchive, effects: EffectLedger, clock: Clock) -> None:
        self.runs = runs
        self.records = records
        self.archive = archive
        self.effects = effects
        self.clock = clock

    def export(self, principal: Principal, run_id: str, after: int = -1) -> dict[str, Any]:
        state, _ = self.runs.load_run(principal.tenant, run_id)
        document: dict[str, Any] = {
            "exportVersion": EXPORT_VERSION,
            "runId": state.runId,
            "status": state.status,
            "exportedAt": iso(self.clock()),
            "snapshot": snapshot(state),
            "decisions": [
                {name: doc[name] for name in DECISION_FIELDS if doc.get(name) is not None}
                for doc in self.archive.interrupts(state.runId)
            ],
            "effects": self.effects.ledger(state.runId),
            "lastSequence": state.nextSeq - 1,
        }
        expires = self.archive.expires_at(state.runId)
        if expires is not None:
            document["expiresAt"] = iso_epoch(expires)
        room = MAX_ANSWER_BYTES - _size(document)
        if room < MIN_EVENT_BYTES:
            raise TooLarge(
                "the run's snapshot, decisions and effects alone pass what one export answers",
                {"budget": "one export answer", "limit": MAX_ANSWER_BYTES, "unit": "bytes"},
            )
        events = first_page(self.records.read_events(state.runId, after, limit=EVENTS_READ, holder=state), room)
        document["events"] = events
        document["complete"] = (events[-1]["sequence"] if events else after) >= state.nextSeq - 1
        return document


def _size(document: dict[str, Any]) -> int:
    try:
        return json_size(document, MAX_ANSWER_BYTES, "an export", depth=1 << 20)
    except BudgetExceeded:
        return MAX_ANSWER_BYTES
