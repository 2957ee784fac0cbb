"""The AWS SDK state a warm process keeps, and how to let go of it (an instance restored from a SnapStart snapshot).

Every boto3 client is made from boto3's default session, which keeps the credentials it first resolved; Powertools'
parameter providers keep a client each and the values they fetched. A restored instance must make its clients
again, under its own credentials and connections (interlude.api.snapstart); what it keeps is botocore's loader, the
service models and endpoint rules parsed before the snapshot, read-only data that made most of a client's cost (a
DynamoDB client: ≈ 65 ms of CPU from a new session, ≈ 3.5 ms from one handed the loaded models;
bench/client_creation.py).
"""

from __future__ import annotations

import sys

import boto3
import botocore.session

POWERTOOLS_PARAMETERS = "aws_lambda_powertools.utilities.parameters.base"


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
