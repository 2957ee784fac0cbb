"""When a finished run expires (issue 30 item 4): its end plus its tenant's retentionDays, in epoch seconds (the
table's TTL attribute). The transition that ends the run writes it (app/runs.py); the retention job gives it to the
rest of the run's items (app/retention.py)."""

from __future__ import annotations

from datetime import datetime

from interlude.domain.clock import epoch_of

DAY_S = 24 * 3600


def run_expiry(completed_at: str | None, retention_days: int, now: datetime) -> int:
    """`completed_at`: the run's end (a run that recorded none ends `now`)."""
    ended = epoch_of(completed_at) if completed_at else now.timestamp()
    return int(ended) + retention_days * DAY_S


def effect_expiry(written_s: float, retention_days: int, items_expire: int | None = None) -> int:
    """When an effect record and its ledger entry written at `written_s` (epoch seconds) expire: the tenant's effect
    retention (at least 14 days, TenantSettings.effectRetentionDays) from then, however the run they belong to ends;
    or `items_expire` when that is later: the provisional expiry of the open run's items (ADR 0142: a run that ends
    within its items' margin then has no retention write for them either)."""
    own = int(written_s) + retention_days * DAY_S
    return own if items_expire is None else max(own, items_expire)
