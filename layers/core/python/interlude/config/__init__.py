"""Settings read once per process from the environment (validated at cold start).

Each field's default is written once, here; `from_env` overrides a field only when its variable is set.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from functools import cache
from typing import Any

from interlude import wiring

MAX_STREAM_HOLD_SECONDS = 25.0
# Node executions per transaction by default (the engine's default too; declared here so config imports no engine).
DEFAULT_STEP_BUDGET = 200


@dataclass(frozen=True)
class Settings:
    table_name: str
    # Node executions per transaction; the rest continues through the table stream.
    step_budget: int = DEFAULT_STEP_BUDGET
    # Longest a poll request may wait, bounded by API Gateway's 30 s integration timeout.
    max_poll_seconds: float = 25.0
    # Secrets Manager secret holding the token key ring (interlude.adapters.keyring_store).
    key_ring_secret: str = "interlude/token-keys"
    # Secrets Manager secret holding the audit checkpoint signing key (interlude.adapters.audit_key).
    audit_key_secret: str = "interlude/audit-key"
    # S3 bucket (Object Lock) of the tenants' signed audit anchors (interlude.adapters.audit_anchor); "": none kept.
    audit_anchor_bucket: str = ""
    # How long a warm function reuses the key ring it read (a retired kid stops verifying within this time).
    key_ring_cache_seconds: int = 60
    # SSE streams behind a buffering gateway (interlude.app.streams.Bounds): the longest one request waits with
    # nothing to send, how long it lingers for more once it has sent a frame, and the `retry:` hint it ends with.
    stream_hold_seconds: float = 20.0
    stream_linger_seconds: float = 0.5
    stream_retry_ms: int = 1000
    # Per-tenant limits of a tenant that set none (README, "Limits"; a tenant sets its own in PUT /tenant/settings).
    # The rate keeps one tenant well under the stage's shared throttle (writes 50/s, reads 100/s).
    tenant_requests_per_second: int = 25
    tenant_open_runs: int = 1000
    tenant_workflow_versions: int = 1000
    tenant_definition_bytes: int = 256 * 1024
    tenant_definition_nodes: int = 500
    # GET /runs/{runId}/ancestry and its discovery advertisement (interlude.app.subworkflows.ancestry_capability):
    # off, the route answers 404 not_found and discovery names no multiAgent family.
    ancestry_endpoint: bool = True

    @staticmethod
    def from_env() -> Settings:
        table = os.environ.get("TABLE_NAME", "")
        if not table:
            raise RuntimeError("TABLE_NAME is not set")
        settings = Settings(table_name=table)
        overrides = {
            f.name: _parsed(type(getattr(settings, f.name)), os.environ[ENVIRONMENT[f.name]])
            for f in fields(Settings)
            if f.name in ENVIRONMENT and ENVIRONMENT[f.name] in os.environ
        }
        settings = replace(settings, **overrides)
        return replace(settings, stream_hold_seconds=min(MAX_STREAM_HOLD_SECONDS, settings.stream_hold_seconds))


def _parsed(kind: type, raw: str) -> Any:
    if kind is not bool:
        return kind(raw)
    # bool("off") is True: a switch is read by its words, and a word it does not know stops the cold start.
    words = {"true": True, "on": True, "1": True, "false": False, "off": False, "0": False}
    if raw.strip().lower() not in words:
        raise RuntimeError(f"a switch is one of {sorted(words)}, not {raw!r}")
    return words[raw.strip().lower()]


# Field -> the environment variable that sets it.
ENVIRONMENT = {
    "step_budget": "INTERLUDE_STEP_BUDGET",
    "max_poll_seconds": "INTERLUDE_MAX_POLL_SECONDS",
    "key_ring_secret": wiring.KEY_RING_SECRET.env,
    "key_ring_cache_seconds": "INTERLUDE_KEY_RING_CACHE_SECONDS",
    "audit_key_secret": wiring.AUDIT_KEY_SECRET.env,
    "audit_anchor_bucket": wiring.AUDIT_ANCHOR_BUCKET.env,
    "stream_hold_seconds": "INTERLUDE_STREAM_HOLD_SECONDS",
    "stream_linger_seconds": "INTERLUDE_STREAM_LINGER_SECONDS",
    "stream_retry_ms": "INTERLUDE_STREAM_RETRY_MS",
    "tenant_requests_per_second": "INTERLUDE_TENANT_REQUESTS_PER_SECOND",
    "tenant_open_runs": "INTERLUDE_TENANT_OPEN_RUNS",
    "tenant_workflow_versions": "INTERLUDE_TENANT_WORKFLOW_VERSIONS",
    "tenant_definition_bytes": "INTERLUDE_TENANT_DEFINITION_BYTES",
    "tenant_definition_nodes": "INTERLUDE_TENANT_DEFINITION_NODES",
    "ancestry_endpoint": "INTERLUDE_ANCESTRY_ENDPOINT",
}


@cache
def settings() -> Settings:
    return Settings.from_env()
