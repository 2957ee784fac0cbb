"""The tenant lifecycle of a managed deployment (issue 30 item 6): what the operator surface does (the `admin` function,
which `interlude tenants` invokes; docs/operations.md, "Tenants").

* create: a tenant's record and its first admin key, in one transaction;
* list: tenants in name order with their usage this month;
* suspend: every request of the tenant is refused (403 interlude.tenant_suspended) and every worker holds the tenant's
  work instead of doing it (interlude.store.tenant_standing): runs stay where they are, deadlines are deferred, callbacks
  and notifications wait; nothing is lost;
* resume: the tenant is active again, and the work held meanwhile is handed back where it was going (messages to their
  queues, deferred deadlines to the scheduler, due at once); a resume whose call stopped before it was all handed back
  (cut short, or its CLI stopped calling) is taken over by the per-minute sweep (`hand_back_left`), so no run waits on
  work held for a tenant that is active;
* delete (a suspended tenant only): a job that goes on from its checkpoint at each call until it is done: it waits for
  work already in flight to end, deletes the tenant's schedules and secrets, then every item the tenant has in the
  table (whole-table scans, page by page, until one finds nothing), closing each live connection whose item it deletes,
  and leaves its record as a tombstone holding the report;
* usage: a tenant's usage document of a month (closed once the month is over).

Dependencies, declared: the table's transactions (each with an audit entry), the tenants' records, `Outside` (what a tenant
holds outside the table, and where held work goes back), the clock, and the deletion's grace period.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any, Protocol

from interlude import wiring
from interlude.app import audit_entries as audit
from interlude.app.caught import caught
from interlude.domain.clock import Clock, instant, iso
from interlude.domain.errors import Conflict, Invalid, NotFound, Unavailable
from interlude.domain.ids import TENANT_RE
from interlude.rules import auth
from interlude.store.api_keys import api_key_put
from interlude.store.layout import FIRST, SECOND, keyed_ids
from interlude.store.tenants import (
    ACTIVE,
    DELETED,
    DELETING,
    SUSPENDED,
    Held,
    RecordChanged,
    Stored,
    TenantRecords,
    Usage,
)
from interlude.store.transactions import TransactionalTable

logger = logging.getLogger(__name__)
# Who acts through the operator surface (the `admin` function, invoked with the operator's AWS credentials).
OPERATOR = {**audit.OPERATOR, "surface": "admin"}

# A page of `list`.
DEFAULT_PAGE = 50
MAX_PAGE = 200
# Held work handed back per batch, and items a deletion reads per page of its scan.
HAND_BACK_BATCH = 25
# How long whoever hands a tenant's held work back holds it without a batch done (a batch takes seconds): the sweep
# takes over a resume whose call stopped this long after its last batch.
HAND_BACK_LEASE_S = 120
SCAN_PAGE_ITEMS = 1000
# A month's usage document is closed this long after the month ends (late work counts in the month it is done).
CLOSE_AFTER = timedelta(days=1)
# What a deletion leaves by design, named in its report.
KEPT = (
    "the tenant's signed audit anchor in the Object Lock bucket, until its retention ends (S3 refuses to delete it "
    "earlier; it holds chain heads and signatures, no content)",
)


class Outside(Protocol):
    """What a tenant holds outside the table, and where its held work goes back (interlude.adapters.tenant_outside)."""

    def hand_back(self, tenant: str, held: Held) -> None: ...

    def tenant_schedules(self, tenant: str) -> list[str]: ...

    def delete_schedules(self, names: list[str]) -> None: ...

    def tenant_secrets(self, tenant: str) -> list[str]: ...

    def delete_secrets(self, names: list[str]) -> None: ...

    def close_connections(self, connection_ids: list[str]) -> None: ...


def checked_tenant(tenant: Any) -> str:
    if not isinstance(tenant, str) or not TENANT_RE.fullmatch(tenant):
        raise Invalid("a tenant id is 1 to 128 of A-Z a-z 0-9 . _ ~ -", {"field": "tenant"})
    return tenant


def month_of(moment: datetime) -> str:
    return moment.strftime("%Y-%m")


def month_over(month: str, now: datetime) -> bool:
    """Whether `month` (YYYY-MM; ValueError when it is not one) ended CLOSE_AFTER or longer before `now`."""
    start = datetime.strptime(month, "%Y-%m").replace(tzinfo=now.tzinfo)
    return now >= (start + timedelta(days=32)).replace(day=1) + CLOSE_AFTER


def close_ended_months(records: TenantRecords, tenant: str, now: datetime) -> list[str]:
    """Close each month the tenant's open-runs counter items still hold billed measures of, once it is over: the daily
    sweep's part, so a tenant whose usage nobody reads keeps those items small (each month adds ≈ 65 bytes to each).
    The months closed, oldest first."""
    closed = []
    for month in sorted(records.billed_months(tenant)):
        if month_over(month, now):
            records.close_month(tenant, records.usage([tenant], month)[tenant], iso(now))
            closed.append(month)
    return closed


class TenantLifecycle:
    def __init__(
        self, store: TransactionalTable, records: TenantRecords, outside: Outside, clock: Clock, grace_s: int
    ) -> None:
        self.store = store
        self.records = records
        self.outside = outside
        self.clock = clock
        self.grace_s = grace_s

    # -- create, list ------------------------------------------------------------------------------------

    def create(self, tenant: str, subject_id: str, scopes: list[str]) -> dict[str, Any]:
        """The tenant's record and its first admin key (printed once), in one transaction with its audit entry."""
        tenant = checked_tenant(tenant)
        existing = self.records.get(tenant, consistent=True)
        if existing is not None and existing.status != DELETED:
            raise Conflict(f"tenant {tenant!r} exists already", {"tenant": tenant}, code="interlude.tenant_exists")
        at = iso(self.clock())
        key_id, api_key, secret_hash = auth.new_key()
        key = auth.key_record(tenant, subject_id, scopes, [], [], "user", secret_hash, at)
        entry = audit.entry(
            tenant, OPERATOR, "tenant.created", {"tenant": tenant}, at, {"keyId": key_id, "subjectId": subject_id}
        )
        record = self.records.put_item(Stored(tenant, ACTIVE, 0, {}), ACTIVE, {"createdAt": at})
        try:
            self.store.transact([record, api_key_put(key_id, key)], entry)
        except Exception as exc:
            if self.records.lost_race(exc):
                raise Conflict(
                    f"tenant {tenant!r} exists already", {"tenant": tenant}, code="interlude.tenant_exists"
                ) from None
            raise
        return {
            "tenant": tenant,
            "status": ACTIVE,
            "createdAt": at,
            "keyId": key_id,
            "apiKey": api_key,
            "scopes": key["scopes"],
        }

    def list(self, limit: int, after: str | None) -> dict[str, Any]:
        """Tenants in name order (a page of `limit`, after tenant `after`), each with its usage this month."""
        if not 1 <= limit <= MAX_PAGE:
            raise Invalid(f"limit is 1 to {MAX_PAGE}", {"field": "limit"})
        page, last = self.records.page(limit, checked_tenant(after) if after is not None else None)
        usage = self.records.usage([stored.tenant for stored in page], month_of(self.clock()))
        rows = [{**described(stored), **unfinished(stored), "usage": shown(usage[stored.tenant])} for stored in page]
        listed = {"tenants": rows}
        return {**listed, "after": last} if last else listed

    # -- suspend, resume ---------------------------------------------------------------------------------

    def suspend(self, tenant: str, reason: str | None) -> dict[str, Any]:
        stored = self._existing(tenant)
        if stored.status == SUSPENDED:
            return described(stored)
        if stored.status == DELETING:
            raise deleting(tenant)
        at = iso(self.clock())
        record = {**stored.record, "suspendedAt": at, **({"reason": reason} if reason else {})}
        changed = self._change(stored, SUSPENDED, record, "tenant.suspended", {"reason": reason} if reason else {})
        return described(changed)

    def resume(self, tenant: str, more_time: Callable[[], bool], hand_back_only: bool = False) -> dict[str, Any]:
        """Active again; then the held work is handed back, batch by batch while `more_time()`: `remaining` says that
        some is left for the next call (resume again, `hand_back_only`: an active tenant's resume goes on handing back;
        else the sweep takes it over within minutes). A suspension made meanwhile stops it: the operator's latest
        action stands, and the answer says where the tenant stands."""
        stored = self._existing(tenant)
        if stored.status == DELETING:
            raise deleting(tenant)
        if stored.status == SUSPENDED:
            if hand_back_only:
                # Suspended again since the resume this call goes on with.
                return {**described(stored), "handedBack": 0, "remaining": False}
            record = {key: value for key, value in stored.record.items() if key not in ("suspendedAt", "reason")}
            record["resumedAt"] = iso(self.clock())
            # Listed as handing back in the same write: whatever stops this call from here on, the work it leaves held
            # is found by the sweep.
            stored = self._change(stored, ACTIVE, record, "tenant.resumed", {}, handing_back=True)
        handed, remaining = self._hand_back(stored, more_time)
        current = self.records.get(tenant, consistent=True) or stored
        return {**described(current), "handedBack": handed, "remaining": remaining}

    def hand_back_left(self, listed: Iterable[Stored], more_time: Callable[[], bool]) -> int:
        """The per-minute sweep's part (the timeouts function, wiring.AUDIT_CHECKPOINT_SWEEP): the work each resume
        left held (its call cut short, its CLI stopped; or work the daily sweep found held for an active tenant) handed
        back while `more_time()`, each tenant's once no resume call has handed any back for HAND_BACK_LEASE_S; how many
        pieces. `listed`: the records listed as handing back (TenantRecords.handing_back)."""
        handed = 0
        for stored in listed:
            if not more_time():
                break
            now = self.clock().timestamp()
            if not self.records.lease_hand_back(stored, now, now + HAND_BACK_LEASE_S, taking_over=True):
                continue
            try:
                done, remaining = self._hand_back(stored, more_time)
            except Exception:  # noqa: BLE001 - one tenant's failure stops no other's; its lease lapses, and it is retried
                caught(logger, "tenant-hand-back", "the held work of tenant %s could not all be handed back", stored.tenant)
                continue
            handed += done
            if remaining:
                # Out of time: the next sweep goes on at once.
                self.records.release_hand_back(stored)
        return handed

    def _hand_back(self, stored: Stored, more_time: Callable[[], bool]) -> tuple[int, bool]:
        """The tenant's held work handed back, batch by batch while `more_time()`, each batch under the hand back's
        lease and each piece after a read of the record, both conditional on the record's version (it stops when the
        record changed: suspended again, its work held again); (how many, whether some is left). Once none is, the
        record is no longer listed."""
        if not stored.handing_back:
            # An active tenant's held work not listed (a resume of a release before 0.12.0 left it): listed first, so
            # that each batch goes under the lease, which a suspension made meanwhile ends.
            if not self.records.held(stored.tenant, 1) or not self.records.list_handing_back(stored):
                return 0, False
            stored = stored._replace(handing_back=True)
        handed, remaining = 0, True
        while remaining and more_time():
            now = self.clock().timestamp()
            if not self.records.lease_hand_back(stored, now, now + HAND_BACK_LEASE_S):
                # Changed since it was read: suspended again (its work held again), or all handed back by another.
                return handed, False
            batch = self.records.held(stored.tenant, HAND_BACK_BATCH)
            for held in batch:
                # Asked before each piece, not only at the batch's lease: a suspension made during the batch stops it
                # at the next piece (docs/adr/0206; one consistent read a piece).
                if not self.records.unchanged(stored):
                    return handed, False
                self.outside.hand_back(stored.tenant, held)
                # Counted once deleted: a piece held again meanwhile (the tenant suspended again as it went back) keeps
                # its new holding for the next resume, and one another hand back deleted is that one's.
                if self.records.release(stored.tenant, held):
                    handed += 1
            remaining = len(batch) == HAND_BACK_BATCH
        if not remaining:
            self.records.handed_back(stored)
        return handed, remaining

    # -- delete ------------------------------------------------------------------------------------------

    def delete(self, tenant: str, more_time: Callable[[], bool]) -> dict[str, Any]:
        """One call of a tenant's deletion: from its checkpoint on, while `more_time()`; the progress, or (done) the
        report. A deleted tenant's tombstone answers its report again."""
        tenant = checked_tenant(tenant)
        stored = self.records.get(tenant, consistent=True)
        if stored is None:
            raise NotFound(f"no tenant {tenant!r}", {"tenant": tenant})
        if stored.status == DELETED:
            return {"tenant": tenant, "status": DELETED, "done": True, "report": stored.record.get("report", {})}
        if stored.status == ACTIVE:
            raise Conflict(
                f"tenant {tenant!r} is active: suspend it first, then delete it",
                {"tenant": tenant},
                code="interlude.tenant_not_suspended",
            )
        if stored.status == SUSPENDED:
            # The month's usage so far goes into the report (the usage documents are the tenant's items, deleted too):
            # a suspended tenant's usage does not grow, so billing reads the last of it there.
            usage = self.records.usage([tenant], month_of(self.clock()))[tenant]
            job = {
                "startedAt": iso(self.clock()),
                "phase": "waiting",
                "pass": 1,
                "items": 0,
                "apiKeys": 0,
                "usage": shown(usage),
            }
            stored = self.records.put(stored, DELETING, {**stored.record, "deletion": job})
        try:
            return self._go_on(stored, more_time)
        except RecordChanged:
            # Another call moved the deletion on meanwhile; its checkpoint holds: the next call goes on from there.
            return {"tenant": tenant, "status": DELETING, "done": False, "busy": True}

    def _go_on(self, stored: Stored, more_time: Callable[[], bool]) -> dict[str, Any]:
        tenant = stored.tenant
        job = dict(stored.record["deletion"])
        while more_time():
            phase = job["phase"]
            if phase == "waiting":
                # Work already in flight for the tenant (a request that passed its check, a worker's invocation) ends
                # within the grace period; after it nothing writes the tenant's items but this job.
                waited = (self.clock() - instant(job["startedAt"])).total_seconds()
                if waited < self.grace_s:
                    return {**progress(tenant, job), "waitSeconds": int(self.grace_s - waited) + 1}
                job["phase"] = "schedules"
            # Each step counts what it deletes before deleting it, in the checkpoint, so that a call cut short while it
            # deletes (the next call finds fewer, or none) counts nothing twice and nothing too few: the report says
            # what was deleted, however often its calls were cut short.
            elif phase == "schedules":
                found = self.outside.tenant_schedules(tenant)
                if "schedules" not in job:
                    # After the grace period nothing makes a schedule of the tenant's: the first listing is all of them.
                    job["schedules"] = len(found)
                    stored = self._checkpoint(stored, job)
                self.outside.delete_schedules(found)
                job["phase"] = "secrets"
            elif phase == "secrets":
                found = self.outside.tenant_secrets(tenant)
                if not set(found) <= set(job.get("secrets", [])):
                    job["secrets"] = sorted({*job.get("secrets", []), *found})
                    stored = self._checkpoint(stored, job)
                self.outside.delete_secrets(found)
                job["phase"] = "items"
            else:
                # Each pass scans the first table, then the second (its items: store/layout.py), `in` saying which.
                where = job.get("in", FIRST)
                keys, scanned, position = self.records.scan_page(tenant, job.get("position"), SCAN_PAGE_ITEMS, where)
                # The page's items counted already: a call cut short after its checkpoint read them from the same
                # position, and deleted some, all or none of them.
                counted = set(job.pop("counted", []))
                new = [key for key in keys if key_digest(key) not in counted]
                held = keyed_ids(new)
                job["items"] += len(new)
                job["apiKeys"] += len(held.api_keys)
                job["liveConnections"] = job.get("liveConnections", 0) + len(held.connections)
                job["scanned"] = job.get("scanned", 0) + scanned
                job[f"pass{job['pass']}"] = job.get(f"pass{job['pass']}", 0) + len(new)
                if keys:
                    job["counted"] = [key_digest(key) for key in keys]
                    stored = self._checkpoint(stored, job)
                    # Closed before their items go: a call cut short after the delete would find them no more, and the
                    # connections would stay open. (The $disconnect each close brings may delete an item first.)
                    self.outside.close_connections(keyed_ids(keys).connections)
                    self.records.delete(keys, where)
                    job.pop("counted")
                job.pop("position", None)
                job.pop("in", None)
                if position is not None:
                    job["position"] = position
                    job["in"] = where
                elif where == FIRST:
                    job["in"] = SECOND
                elif job["pass"] > 1 and not job[f"pass{job['pass']}"]:
                    return self._finish(stored, job)
                else:
                    # A pass that deleted something is followed by another, which finds what was written meanwhile.
                    job["pass"] += 1
            stored = self._checkpoint(stored, job)
        return progress(tenant, job)

    def _checkpoint(self, stored: Stored, job: dict[str, Any]) -> Stored:
        return self.records.put(stored, DELETING, {**stored.record, "deletion": job})

    def _finish(self, stored: Stored, job: dict[str, Any]) -> dict[str, Any]:
        at = iso(self.clock())
        report = {
            "tenant": stored.tenant,
            "startedAt": job["startedAt"],
            "finishedAt": at,
            "items": job["items"],
            "apiKeys": job["apiKeys"],
            "schedules": job.get("schedules", 0),
            "secrets": len(job.get("secrets", [])),
            "liveConnections": job.get("liveConnections", 0),
            "passes": job["pass"],
            "itemsRead": job.get("scanned", 0),
            "usage": job.get("usage"),
            "kept": list(KEPT),
        }
        # The report is logged before the record turns into the tombstone: the operator's copy whatever happens next.
        logger.warning("tenant deleted", extra={"report": report})
        expires = int(self.clock().timestamp()) + wiring.TENANT_TOMBSTONE_S
        self.records.put(stored, DELETED, {"createdAt": stored.record.get("createdAt"), "report": report}, expires)
        return {"tenant": stored.tenant, "status": DELETED, "done": True, "report": report}

    # -- usage -------------------------------------------------------------------------------------------

    def usage(self, tenant: str, month: str | None) -> dict[str, Any]:
        """The tenant's usage document of `month` (YYYY-MM; default this one), closed once the month is over."""
        tenant = checked_tenant(tenant)
        now = self.clock()
        month = month or month_of(now)
        try:
            over = month_over(month, now)
        except ValueError:
            raise Invalid("month is YYYY-MM", {"field": "month"}) from None
        found = self.records.usage([tenant], month)[tenant]
        if found.closed_at is None and over:
            found = self.records.close_month(tenant, found, iso(now))
        return {"tenant": tenant, **shown(found)}

    # -- shared ------------------------------------------------------------------------------------------

    def _existing(self, tenant: str) -> Stored:
        tenant = checked_tenant(tenant)
        stored = self.records.get(tenant, consistent=True)
        if stored is None or stored.status == DELETED:
            raise NotFound(f"no tenant {tenant!r}", {"tenant": tenant})
        return stored

    def _change(
        self,
        stored: Stored,
        status: str,
        record: dict[str, Any],
        action: str,
        details: dict[str, Any],
        handing_back: bool = False,
    ) -> Stored:
        """The record's new status with its audit entry (in the tenant's own log), in one transaction."""
        entry = audit.entry(stored.tenant, OPERATOR, action, {"tenant": stored.tenant}, iso(self.clock()), details)
        try:
            self.store.transact([self.records.put_item(stored, status, record, handing_back)], entry)
        except Exception as exc:
            if self.records.lost_race(exc):
                raise Unavailable(f"tenant {stored.tenant!r} changed meanwhile; try again", retry_after_s=1) from None
            raise
        return Stored(stored.tenant, status, stored.version + 1, record, handing_back)


def key_digest(key: dict[str, Any]) -> str:
    """An item's key in 16 characters, as a deletion's checkpoint names the items of a page it counted (a page's keys
    whole could outgrow the record)."""
    named = "\0".join(key[part]["S"] for part in (wiring.PARTITION_KEY, wiring.SORT_KEY))
    return hashlib.blake2b(named.encode(), digest_size=8).hexdigest()


def deleting(tenant: str) -> Conflict:
    return Conflict(
        f"tenant {tenant!r} is being deleted: nothing else can be done to it",
        {"tenant": tenant},
        code="interlude.tenant_deleting",
    )


def described(stored: Stored) -> dict[str, Any]:
    shown_fields = ("createdAt", "suspendedAt", "reason", "resumedAt")
    return {
        "tenant": stored.tenant,
        "status": stored.status,
        **{k: stored.record[k] for k in shown_fields if k in stored.record},
    }


def unfinished(stored: Stored) -> dict[str, Any]:
    """What a listing says of a resume or a deletion that has not ended: the held work still to hand back, or where
    the deletion stands (it goes on only when called again)."""
    if stored.status == DELETING:
        job = stored.record.get("deletion") or {}
        return {"deletion": {field: job[field] for field in ("phase", "pass", "items") if field in job}}
    return {"handingBack": True} if stored.handing_back else {}


def shown(usage: Usage) -> dict[str, Any]:
    return {"month": usage.month, **usage.counts, **({"closedAt": usage.closed_at} if usage.closed_at else {})}


def progress(tenant: str, job: dict[str, Any]) -> dict[str, Any]:
    step = {"phase": job["phase"], "pass": job["pass"], "items": job["items"]}
    return {"tenant": tenant, "status": DELETING, "done": False, **step}
