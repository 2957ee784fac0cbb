"""The local stack's S3 buckets (wiring.BUCKETS) in moto, made from the same declarations as a deployment's: Object
Lock in governance mode for a day (a deployment chooses its own: interlude_cdk.InterludeProps)."""

from __future__ import annotations

from interlude import wiring
from interlude.adapters.audit_anchor import ensure_locked_bucket

LOCAL_RETENTION_DAYS = 1


def create_local_buckets() -> dict[str, str]:
    """Create each bucket unless it exists; returns the environment its writers and readers find it through."""
    names = {spec.env: f"interlude-local-{spec.name.lower()}" for spec in wiring.BUCKETS}
    for name in names.values():
        ensure_locked_bucket(name, LOCAL_RETENTION_DAYS)
    return names
