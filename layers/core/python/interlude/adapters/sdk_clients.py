"""The AWS clients a warm process keeps, and how to let go of them (an instance restored from a SnapStart snapshot).

Every boto3 client is made from boto3's default session, which keeps the credentials it first resolved; Powertools'
parameter providers keep a client each and the values they fetched. A restored instance must make its clients
again, under its own credentials and connections (interlude.api.snapstart).
"""

from __future__ import annotations

import sys

import boto3

# Loaded-module name -> its cached factory of a client (cleared only where loaded: nothing is imported to clear it).
CACHED_CLIENTS = (("interlude.adapters.queues", "_sqs"),)
POWERTOOLS_PARAMETERS = "aws_lambda_powertools.utilities.parameters.base"


def forget_clients() -> None:
    """Drop the default session (its credentials), every cached client, and Powertools' providers and their values."""
    boto3.DEFAULT_SESSION = None
    for module_name, factory in CACHED_CLIENTS:
        module = sys.modules.get(module_name)
        if module is not None:
            getattr(module, factory).cache_clear()
    parameters = sys.modules.get(POWERTOOLS_PARAMETERS)
    if parameters is not None:
        parameters.clear_caches()
