"""The AWS SDK state a warm process keeps, and how to let go of it (an instance restored from a SnapStart snapshot).

Every boto3 client is made from boto3's default session, which keeps the credentials it first resolved; Powertools'
parameter providers keep a client each and the values they fetched. A restored instance must make its clients
again, under its own credentials and connections (interlude.api.snapstart); what it keeps is botocore's loader, the
service models and endpoint rules parsed before the snapshot, read-only data that made most of a client's cost (a
DynamoDB client: ≈ 65 ms of CPU from a new session, ≈ 3.5 ms from one handed the loaded models;
bench/client_creation.py).

The layer ships its own copy of the SDK data the functions read (infra/interlude_cdk/sdk_data.py: six services'
models, DynamoDB's cut to the operations the code calls): a process whose default session reads only that copy pays
a fraction of that for its first client, most of it spent by botocore's own loader listing every service's directory
and parsing DynamoDB's whole model and every service's endpoints.
"""

from __future__ import annotations

import sys
from pathlib import Path

import boto3
import botocore
import botocore.loaders
import botocore.session

from interlude.config.runtime import runtime_settings

POWERTOOLS_PARAMETERS = "aws_lambda_powertools.utilities.parameters.base"
# The directory of the layer's SDK data, beside botocore in the layer (/opt/python); absent from a development venv.
PACKAGED_MODELS = "interlude_sdk_data"


def packaged_models() -> Path | None:
    found = Path(runtime_settings().sdk_data or Path(botocore.__file__).parent.parent / PACKAGED_MODELS)
    return found if found.is_dir() else None


def use_packaged_models() -> None:
    """Make boto3's default session read the SDK data the layer ships, and nothing else; where there is none (a
    development checkout), or a default session exists already (its clients are made), nothing changes."""
    found = packaged_models()
    if found is None or boto3.DEFAULT_SESSION is not None:
        return
    session = botocore.session.get_session()
    loader = botocore.loaders.Loader(extra_search_paths=[str(found)], include_default_search_paths=False)
    session.register_component("data_loader", loader)
    boto3.setup_default_session(botocore_session=session)


def forget_clients() -> None:
    """Replace the default session (its credentials, its clients' connections) with a new one that keeps the parsed
    models, and drop Powertools' providers (their clients and values)."""
    held = boto3.DEFAULT_SESSION
    boto3.DEFAULT_SESSION = None
    if held is not None:
        fresh = botocore.session.get_session()
        fresh.register_component("data_loader", held._session.get_component("data_loader"))
        boto3.setup_default_session(botocore_session=fresh)
    # Cleared only where loaded: nothing is imported to be cleared.
    parameters = sys.modules.get(POWERTOOLS_PARAMETERS)
    if parameters is not None:
        parameters.clear_caches()
