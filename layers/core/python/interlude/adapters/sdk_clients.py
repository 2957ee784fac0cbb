"""The AWS SDK state a warm process keeps, and how to let go of it (an instance restored from a SnapStart snapshot).

Every boto3 client is made from boto3's default session, which keeps the credentials it first resolved; Powertools'
parameter providers keep a client each and the values they fetched. A restored instance must make its clients
again, under its own credentials and connections (interlude.api.snapstart).
"""

from __future__ import annotations

import sys

import boto3

POWERTOOLS_PARAMETERS = "aws_lambda_powertools.utilities.parameters.base"


def forget_clients() -> None:
    """Drop the default session (its credentials) and Powertools' providers (their clients and values)."""
    boto3.DEFAULT_SESSION = None
    # Cleared only where loaded: nothing is imported to be cleared.
    parameters = sys.modules.get(POWERTOOLS_PARAMETERS)
    if parameters is not None:
        parameters.clear_caches()
