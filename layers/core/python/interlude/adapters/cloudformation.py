"""Answering a CloudFormation custom resource that a function of ours serves (the deploy's migrations resource,
interlude_cdk): the response document PUT to the pre-signed S3 URL the request names, as AWS documents the
protocol ("Custom resource response objects"). Written here rather than taken from a library: AWS's `cfnresponse`
exists only inside inline function code, and the dozen lines need nothing urllib3 (botocore's) does not give."""

from __future__ import annotations

import json
from typing import Any, Literal

import urllib3

# What the response's Reason may hold (CloudFormation keeps 4 KB of the whole document).
MAX_REASON = 1000


def answer(request: dict[str, Any], status: Literal["SUCCESS", "FAILED"], reason: str, physical_id: str) -> None:
    document = {
        "Status": status,
        "Reason": reason[:MAX_REASON],
        "PhysicalResourceId": physical_id,
        "StackId": request["StackId"],
        "RequestId": request["RequestId"],
        "LogicalResourceId": request["LogicalResourceId"],
        "NoEcho": False,
        "Data": {},
    }
    # The URL is signed without a content type: the request must send none.
    response = urllib3.PoolManager().request(
        "PUT",
        request["ResponseURL"],
        body=json.dumps(document, allow_nan=False).encode(),
        headers={"Content-Type": ""},
        timeout=urllib3.Timeout(total=15),
        retries=urllib3.Retry(total=3, backoff_factor=0.5, allowed_methods=None),
    )
    if response.status >= 300:
        raise RuntimeError(f"CloudFormation's response URL answered {response.status}")
