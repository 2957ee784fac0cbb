"""A tenant's re-stamp jobs (interlude.app.retention.Restamp) as its settings see them (app/ports.RetentionRestamps):
the item a change of retentionDays writes to start one, its first turn queued, its progress. Apart from
adapters/migration_turns: dispatch, which queues retention turns, loads no store of the job."""

from __future__ import annotations

from typing import Any

from interlude.adapters.migration_turns import queue_retention_restamp
from interlude.config.queues import queue_settings
from interlude.store.retention import RetentionStore, restamp_put

# What a tenant's settings answer shows of its re-stamp job.
RESTAMP_SHOWN = ("state", "days", "runsSeen", "runsRestamped", "startedAt", "finishedAt")


class RestampJobs:
    """The re-stamp jobs as the tenant settings see them (app/ports.RetentionRestamps)."""

    def __init__(self, store: RetentionStore) -> None:
        self.store = store

    def starting(self, tenant: str, days: int, generation: str) -> dict[str, Any]:
        return restamp_put(tenant, days, generation)

    def started(self, tenant: str, generation: str) -> None:
        # Where this runs with no queue (the CLI against a table), the daily retention sweep takes the job on.
        if queue_settings().migrations_url:
            queue_retention_restamp(tenant, generation)

    def progress(self, tenant: str) -> dict[str, Any] | None:
        job = self.store.restamp_job(tenant)
        return None if job is None else {k: job[k] for k in RESTAMP_SHOWN if k in job}
