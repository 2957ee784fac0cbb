"""The core settings every function reads, and `check`, which reads every group at cold start.

Every variable the package reads is declared in this package, once (interlude.config.reading explains how and
when they are read); each field's default is written once, beside its variable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from interlude import wiring
from interlude.config.reading import ConfigError, EnvironmentSettings, cached, forget, setting, variables

__all__ = [
    "DEFAULT_KEY_CACHE_SECONDS",
    "DEFAULT_STEP_BUDGET",
    "KEY_CACHE_SECONDS_RANGE",
    "ENVIRONMENT",
    "MAX_STREAM_HOLD_SECONDS",
    "ConfigError",
    "Settings",
    "check",
    "forget",
    "groups",
    "key_cache_seconds",
    "refusals",
    "settings",
]

MAX_STREAM_HOLD_SECONDS = 25.0
# Node executions per transaction by default (the engine's default too; declared here so config imports no engine).
DEFAULT_STEP_BUDGET = 200
# How long an instance trusts an API key it read as active (app/keys.py): the bound on a revocation's reach to the
# other instances, which a deployment chooses within this range (the construct's `key_cache_seconds`). 0: every
# request reads its key; a minute at most, so that no choice leaves a revoked key working for long.
DEFAULT_KEY_CACHE_SECONDS = 5.0
KEY_CACHE_SECONDS_RANGE = (0.0, 60.0)


def key_cache_seconds(seconds: float) -> float:
    """`seconds` as a key cache bound, or ValueError saying the range it is outside of (the cold start's and the
    construct's one check)."""
    low, high = KEY_CACHE_SECONDS_RANGE
    if not low <= seconds <= high:
        raise ValueError(f"must be {low:g}-{high:g} seconds, not {seconds:g}")
    return seconds


def _key_cache_seconds(raw: str) -> float:
    try:
        seconds = float(raw)
    except ValueError:
        raise ValueError("not a number") from None
    return key_cache_seconds(seconds)


class Settings(EnvironmentSettings):
    table_name: str = setting(wiring.TABLE_NAME_ENV)
    # The second table (wiring.ENTRIES_TABLE, docs/adr/0161): required as the first is, never assumed to be the first.
    entries_table_name: str = setting(wiring.ENTRIES_TABLE_NAME_ENV)
    # Node executions per transaction; the rest continues through the table stream.
    step_budget: int = setting("INTERLUDE_STEP_BUDGET", default=DEFAULT_STEP_BUDGET)
    # Longest a poll request may wait, bounded by API Gateway's 30 s integration timeout.
    max_poll_seconds: float = setting("INTERLUDE_MAX_POLL_SECONDS", default=25.0)
    # Secrets Manager secret holding the token key ring (interlude.adapters.keyring_store).
    key_ring_secret: str = setting(wiring.KEY_RING_SECRET.env, default="interlude/token-keys")
    # Secrets Manager secret holding the audit checkpoint signing key (interlude.adapters.audit_key).
    audit_key_secret: str = setting(wiring.AUDIT_KEY_SECRET.env, default="interlude/audit-key")
    # S3 bucket (Object Lock) of the tenants' signed audit anchors (interlude.adapters.audit_anchor); "": none kept.
    audit_anchor_bucket: str = setting(wiring.AUDIT_ANCHOR_BUCKET.env, default="")
    # How long a warm function reuses the key ring it read (a retired kid stops verifying within this time).
    key_ring_cache_seconds: int = setting("INTERLUDE_KEY_RING_CACHE_SECONDS", default=60)
    # SSE streams behind a buffering gateway (interlude.app.streams.Bounds): the longest one request waits with
    # nothing to send, how long it lingers for more once it has sent a frame, and the `retry:` hint it ends with.
    stream_hold_seconds: float = setting("INTERLUDE_STREAM_HOLD_SECONDS", default=20.0, at_most=MAX_STREAM_HOLD_SECONDS)
    stream_linger_seconds: float = setting("INTERLUDE_STREAM_LINGER_SECONDS", default=0.5)
    stream_retry_ms: int = setting("INTERLUDE_STREAM_RETRY_MS", default=1000)
    # Per-tenant limits of a tenant that set none (docs/limits.md; a tenant sets its own in PUT /tenant/settings).
    # The rate keeps one tenant well under the stage's shared throttle (writes 50/s, reads 100/s).
    tenant_requests_per_second: int = setting("INTERLUDE_TENANT_REQUESTS_PER_SECOND", default=25)
    tenant_open_runs: int = setting("INTERLUDE_TENANT_OPEN_RUNS", default=1000)
    tenant_workflow_versions: int = setting("INTERLUDE_TENANT_WORKFLOW_VERSIONS", default=1000)
    tenant_definition_bytes: int = setting("INTERLUDE_TENANT_DEFINITION_BYTES", default=256 * 1024)
    tenant_definition_nodes: int = setting("INTERLUDE_TENANT_DEFINITION_NODES", default=500)
    # Following runs live over the WebSocket API (wiring.LIVE_API, docs/limits.md): its management endpoint ("": none
    # deployed), the connections a tenant holds open at once and the connections that follow one run.
    live_endpoint: str = setting(wiring.LIVE_API.endpoint_env, default="")
    live_connections_per_tenant: int = setting("INTERLUDE_LIVE_CONNECTIONS_PER_TENANT", default=500)
    live_followers_per_run: int = setting("INTERLUDE_LIVE_FOLLOWERS_PER_RUN", default=50)
    # GET /runs/{runId}/ancestry and its discovery advertisement (interlude.app.subworkflows.ancestry_capability):
    # off, the route answers 404 not_found and discovery names no multiAgent family.
    ancestry_endpoint: bool = setting("INTERLUDE_ANCESTRY_ENDPOINT", default=True)
    # Issue 30 item 6. How long an instance trusts a tenant's status it read (a suspension reaches every instance within
    # it), and how long a tenant's deletion waits, once it began, for work already in flight for the tenant to end
    # before it reads the table for the tenant's items (longer than any function's timeout but the migrations').
    tenant_status_cache_seconds: float = setting("INTERLUDE_TENANT_STATUS_CACHE_SECONDS", default=5.0)
    tenant_deletion_grace_seconds: int = setting("INTERLUDE_TENANT_DELETION_GRACE_SECONDS", default=180)
    # The API-key revocation bound (DEFAULT_KEY_CACHE_SECONDS); a value outside its range stops the cold start.
    key_cache_seconds: float = setting(
        "INTERLUDE_KEY_CACHE_SECONDS", default=DEFAULT_KEY_CACHE_SECONDS, parse=_key_cache_seconds
    )


# Field -> the environment variable that sets it (the construct sets INTERLUDE_ANCESTRY_ENDPOINT by it).
ENVIRONMENT = {name: names[0] for name, names in variables(Settings).items()}
settings = cached(Settings.from_env)


def groups() -> tuple[tuple[type[EnvironmentSettings], Callable[[], object]], ...]:
    """Every settings group a function reads, with its cached reading: every entry point reads them all at its cold
    start (`check`), so a function's environment must satisfy each one, which the construct judges before deploying
    it (`refusals`)."""
    from interlude.config import actions, delivery, notify, queues, runtime, scheduler, secrets

    return (
        (Settings, settings),
        (delivery.DeliverySettings, delivery.delivery_settings),
        (notify.NotifySettings, notify.notify_settings),
        (actions.ActionSettings, actions.action_settings),
        (queues.QueueSettings, queues.queue_settings),
        (runtime.RuntimeSettings, runtime.runtime_settings),
        (scheduler.SchedulerSettings, scheduler.scheduler_settings),
        (secrets.CreatedSecrets, secrets.created_secrets),
    )


def check() -> None:
    """Read every settings group (an entry point's cold start): missing or malformed variables stop it here, each
    named in one ConfigError, rather than failing a request later."""
    problems = []
    for _, read in groups():
        try:
            read()
        except ConfigError as refused:
            problems.append(str(refused))
    if problems:
        raise ConfigError("; ".join(problems))


def refusals(environ: Mapping[str, str | None]) -> list[str]:
    """What a cold start (`check`) would refuse in a function's environment `environ`, judged before it is deployed:
    None for a variable whose value only the deployment will know (EnvironmentSettings.refusals)."""
    return [problem for group, _ in groups() for problem in group.refusals(environ)]
