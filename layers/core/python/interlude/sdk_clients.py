"""The AWS SDK session every client of Interlude's is made from, and how to let go of it (an instance restored from a
SnapStart snapshot).

One botocore session per process (`session()`, `client()`): it keeps the credentials it first resolved and botocore's
loader, the service models and endpoint rules it parsed; the secrets read through it are kept a while
(interlude.adapters.secret_values). A restored instance must make its clients again, under its own credentials and connections
(interlude.api.snapstart); what it keeps is the loader, read-only data that made most of a client's cost (a DynamoDB
client: ≈ 65 ms of CPU from a new session, ≈ 3.5 ms from one handed the loaded models; bench/client_creation.py).

A botocore session, not boto3's default one: `boto3.client()` is that session's `create_client()`, but importing boto3
imports s3transfer and with it multiprocessing, concurrent.futures and boto3's resource machinery, which nothing here
uses: ≈ 60 modules and ≈ 11 ms of CPU in every cold start (bench/cold_resolve.py; ADR 0107 as amended). Beside the
layers, like coldstart.py: the store's DynamoDB client and the adapters' clients come from the one session.

The layer ships its own copy of the SDK data the functions read (infra/interlude_cdk/sdk_data.py: six services'
models, DynamoDB's cut to the operations the code calls): a session that reads only that copy pays a fraction of that
for its first client, most of it spent by botocore's own loader listing every service's directory and parsing
DynamoDB's whole model and every service's endpoints.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import botocore
import botocore.loaders
import botocore.session
from botocore.credentials import CredentialResolver, EnvProvider
from botocore.exceptions import ClientError
from botocore.hooks import BaseEventHooks, EventAliaser, HierarchicalEmitter

from interlude.config.runtime import runtime_settings

# The secrets read through the session, kept (their client is one of the session's).
SECRET_VALUES = "interlude.adapters.secret_values"
# The directory of the layer's SDK data, beside botocore in the layer (/opt/python); absent from a development venv.
PACKAGED_MODELS = "interlude_sdk_data"
# The error codes AWS services answer a request they throttled with (DynamoDB's, SQS's, Scheduler's, Secrets Manager's,
# S3's): the throttles botocore's standard retry mode retries, less those some services also use for a quota no retry
# lifts (Secrets Manager's LimitExceededException: too many secrets). A DynamoDB transaction names its throttled items
# in its cancellation reasons instead.
THROTTLED_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "RequestThrottled",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "SlowDown",
    }
)
THROTTLED_IN_TRANSACTION = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded"})

# Made at the first use, kept for the process (a module global, not a cache: interlude.local.lambda_runtime's
# fresh_instances clears caches, and a new session would parse the models again).
_session: botocore.session.Session | None = None


class _EventAliaser(EventAliaser):
    """botocore's event aliaser, which finds an event name with no alias at once. botocore's tries each of its 65
    aliases on a name before keeping it in its cache (a split of the name each): for the ≈ 130 built-in handlers a
    session registers and the events each new client emits, 30 M of a cold resolve's 974 M instructions (docs/adr/
    0164's figures, `bench/cold_resolve.py --instructions`). A name with an alias is aliased by botocore's own method,
    so every name maps as it does in botocore."""

    # botocore's own attributes, which its stubs leave out.
    _event_aliases: dict[str, str]
    _alias_name_cache: dict[str, str]

    def __init__(self, event_emitter: BaseEventHooks, event_aliases: dict[str, str] | None = None) -> None:
        super().__init__(event_emitter, event_aliases)
        self._dotless = {old for old in self._event_aliases if "." not in old}
        self._dotted = [old for old in self._event_aliases if "." in old]

    def _alias_event_name(self, event_name: str) -> str:
        # botocore's method replaces a part equal to a dotless alias, or a run of parts equal to a dotted alias; a
        # name with neither is returned as it is.
        if (
            event_name not in self._alias_name_cache
            and self._dotless.isdisjoint(event_name.split("."))
            and not any(old in event_name for old in self._dotted)
        ):
            self._alias_name_cache[event_name] = event_name
        aliased: str = super()._alias_event_name(event_name)  # type: ignore[misc]  # botocore's own (untyped)
        return aliased


class _Emitter(HierarchicalEmitter):
    """botocore's event emitter, which takes botocore's own handlers without reading their signatures: it checks that
    every handler registered takes keyword arguments (`inspect.getfullargspec`), botocore's ≈ 130 built-in ones at
    every session and a client's own at every client, 10 M of a cold resolve's 944 M instructions (docs/adr/0164's
    figures). Any other handler (a test's, a harness's) is checked as botocore checks it."""

    def _verify_accept_kwargs(self, func: Any) -> None:
        if not str(getattr(func, "__module__", "")).startswith("botocore."):
            super()._verify_accept_kwargs(func)  # type: ignore[misc]  # botocore's own (untyped)


class _Session(botocore.session.Session):
    """botocore's session, whose credential chain is the environment's provider alone when the environment holds
    credentials (a Lambda function's own, a test's): that provider comes first in botocore's chain and answers
    whenever it can, so the rest of the chain (the instance-metadata and container fetchers, each with an HTTP pool
    and a TLS context; SSO, credential processes, config files) would never be asked. Building it was ≈ 0.7 % of a
    cold resolve's instructions. Without them (a SnapStart function's container credentials, a profile), the chain
    is botocore's whole. Its event hooks are the aliaser and emitter above (docs/adr/0164)."""

    _original_handler: BaseEventHooks  # botocore's own (its stubs leave it out)

    def __init__(self) -> None:
        super().__init__(event_hooks=_Emitter())

    def _register_builtin_handlers(self, events: BaseEventHooks) -> None:
        self._events = _EventAliaser(self._original_handler)
        super()._register_builtin_handlers(self._events)  # type: ignore[misc]  # botocore's own (its stubs leave it out)

    def _create_credential_resolver(self) -> CredentialResolver:
        environment = EnvProvider()
        if environment.load() is not None:
            return CredentialResolver([environment])
        return super()._create_credential_resolver()  # type: ignore[misc]  # botocore's own (its stubs leave it out)


def session() -> botocore.session.Session:
    global _session
    if _session is None:
        _session = _Session()
    return _session


def held() -> botocore.session.Session | None:
    """The session, if one is made (a harness that watches its calls registers on it)."""
    return _session


def client(service: str, **options: Any) -> Any:
    return session().create_client(service, **options)


def throttled(exc: BaseException) -> bool:
    """Whether `exc` is an AWS service's throttle that the SDK's retries did not absorb."""
    return isinstance(exc, ClientError) and throttled_answer(exc.response)


def throttled_answer(parsed: Mapping[str, Any]) -> bool:
    """Whether an error answer, as botocore parses it (a ClientError's `response`), is a throttle."""
    code = parsed.get("Error", {}).get("Code")
    if code == "TransactionCanceledException":
        return not THROTTLED_IN_TRANSACTION.isdisjoint(r.get("Code") for r in parsed.get("CancellationReasons") or ())
    return code in THROTTLED_CODES


def packaged_models() -> Path | None:
    found = Path(runtime_settings().sdk_data or Path(botocore.__file__).parent.parent / PACKAGED_MODELS)
    return found if found.is_dir() else None


def use_packaged_models() -> None:
    """Make the session read the SDK data the layer ships, and nothing else; where there is none (a development
    checkout), or a session is made already (its clients are made), nothing changes."""
    found = packaged_models()
    if found is None or _session is not None:
        return
    loader = botocore.loaders.Loader(extra_search_paths=[str(found)], include_default_search_paths=False)
    session().register_component("data_loader", loader)


def forget_clients() -> None:
    """Replace the session (its credentials, its clients' connections) with a new one that keeps the parsed models,
    and drop the secrets read through it (their client and values)."""
    global _session
    kept, _session = _session, None
    if kept is not None:
        session().register_component("data_loader", kept.get_component("data_loader"))
    # Cleared only where loaded: nothing is imported to be cleared.
    secrets = sys.modules.get(SECRET_VALUES)
    if secrets is not None:
        secrets.forget()
