"""Where the local stack's AWS is, for every process that works on it: the stack itself, and the CLI's `--local`
commands, which need no more than this (importing `interlude.local.stack` would load moto's server, the gateways and
their web frameworks into every such command: about a second of CPU each)."""

from __future__ import annotations

from interlude import config, wiring
from interlude.config.local import export, export_defaults, unset
from interlude.local import LOCAL_REGION

TABLE_NAME = "interlude-local"
ENTRIES_TABLE_NAME = f"{TABLE_NAME}-entries"


def configure_environment(moto_endpoint: str, table_name: str, entries_table_name: str) -> None:
    """Point every AWS client in this process (the handlers' too) at the local moto server."""
    export(
        {
            "AWS_ENDPOINT_URL": moto_endpoint,
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
            "AWS_DEFAULT_REGION": LOCAL_REGION,
            "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
            wiring.TABLE_NAME_ENV: table_name,
            wiring.ENTRIES_TABLE_NAME_ENV: entries_table_name,
            "POWERTOOLS_SERVICE_NAME": "interlude",
            "POWERTOOLS_METRICS_NAMESPACE": "Interlude",
        }
    )
    unset("AWS_PROFILE")
    export_defaults(
        {
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            # A test suite drives one tenant far faster than a person would: the local stack's default rate is the
            # ceiling (a tenant may still set its own lower; an environment that sets the variable wins).
            "INTERLUDE_TENANT_REQUESTS_PER_SECOND": "500",
            # A tenant's deletion waits for work in flight to end; on one machine that is seconds, not a function's
            # timeout.
            "INTERLUDE_TENANT_DELETION_GRACE_SECONDS": "5",
        }
    )
    # Settings read before (an import reads the engine's debug switch) are read again from this environment.
    config.forget()
