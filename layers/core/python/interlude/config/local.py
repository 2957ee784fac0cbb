"""What runs on the operator's machine: the variables of the operator's shell the CLI reads, the local stack's own
switches, and the functions' environment the local stack writes (as the deployed stack's template sets it).

Neither group is cached: a command and a local stack read the environment they are started in, once, where they
start (a test starts many in one process, each with its own environment).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from interlude import wiring
from interlude.config.reading import EnvironmentSettings, setting

# The deployed stack the CLI's --stack names when it is not given.
STACK_ENV = "INTERLUDE_STACK"
# `module:function`, called once in every process that runs functions (the stack's and each instance pool's) before
# its first AWS client is made: the suite's AWS call recorder installs itself through it. Unset: nothing runs.
PROCESS_HOOK_ENV = "INTERLUDE_LOCAL_PROCESS_HOOK"


class CliSettings(EnvironmentSettings):
    # A client of the HTTP API: its base URL and key (--url, --key win; else the local stack's state file).
    url: str = setting("INTERLUDE_URL", default="")
    api_key: str = setting("INTERLUDE_API_KEY", default="")
    # A deployment, found by its stack's outputs; or its table or key ring named outright.
    stack: str = setting(STACK_ENV, default="")
    table_name: str = setting(wiring.TABLE_NAME_ENV, default="")
    entries_table_name: str = setting(wiring.ENTRIES_TABLE_NAME_ENV, default="")
    key_ring_secret: str = setting(wiring.KEY_RING_SECRET.env, default="")
    # `interlude dev`'s port.
    port: int = setting("INTERLUDE_PORT", default=8080)
    # Set to anything: an unexpected error shows its traceback rather than one line.
    debug: bool = setting("INTERLUDE_DEBUG", default=False, parse=bool)


class LocalStackSettings(EnvironmentSettings):
    # Off: callback notices and `core.http` actions stay queued, nothing is dialled (a demo or test naming
    # callbackUrls it must not reach).
    callback_delivery: bool = setting("INTERLUDE_LOCAL_CALLBACK_DELIVERY", default=True)
    # API handler instances, one process each, as Lambda runs separate instances.
    instances: int = setting("INTERLUDE_LOCAL_INSTANCES", default=4)
    # Batches each queue's function handles at once: its mapping runs up to its maximum concurrency in AWS; two are
    # enough to model what SQS fair queues rely on (a busy tenant holds messages in flight, a quiet one none).
    queue_concurrency: int = setting("INTERLUDE_LOCAL_QUEUE_CONCURRENCY", default=2)
    process_hook: str = setting(PROCESS_HOOK_ENV, default="")


def cli_settings() -> CliSettings:
    return CliSettings.from_env()


def local_stack_settings() -> LocalStackSettings:
    return LocalStackSettings.from_env()


def export(variables: Mapping[str, str]) -> None:
    """Set the functions' environment in this process (the instances the stack starts afterwards inherit it)."""
    os.environ.update(variables)


def export_defaults(variables: Mapping[str, str]) -> None:
    """Set each variable the environment does not set already (one the operator set wins)."""
    for name, value in variables.items():
        os.environ.setdefault(name, value)


def unset(name: str) -> None:
    os.environ.pop(name, None)
