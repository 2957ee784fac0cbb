"""Each tenant's audit anchor in S3 (wiring.AUDIT_ANCHOR_BUCKET): one object per tenant, `{prefix}{tenant}.json`, the
bytes interlude.rules.audit.signed_anchor makes, a new version at every publication. The bucket has Object Lock with
a default retention, so each version stays as written for that long; no function role holds any S3 action but the
timeouts function's PutObject and the api function's GetObject, and the bucket policy denies deleting an object or
a version to everyone (infra/interlude_cdk/audit_anchor.py).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from botocore.config import Config
from botocore.exceptions import ClientError

from interlude import sdk_clients, wiring
from interlude.config import settings
from interlude.config.runtime import runtime_settings


class S3Anchors:
    def __init__(self, bucket: str) -> None:
        self.bucket = bucket

    def publish(self, tenant: str, published: bytes) -> None:
        # A checksum: S3 takes no object into an Object Lock bucket without one (Content-MD5 or a flexible checksum).
        _s3().put_object(
            Bucket=self.bucket,
            Key=anchor_key(tenant),
            Body=published,
            ContentType="application/json",
            ChecksumAlgorithm="SHA256",
        )

    def read(self, tenant: str) -> bytes | None:
        """The tenant's current anchor, or None when none was published yet."""
        try:
            got = _s3().get_object(Bucket=self.bucket, Key=anchor_key(tenant))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise
        body: bytes = got["Body"].read()
        return body


def configured_anchors() -> S3Anchors | None:
    """The deployment's bucket (AUDIT_ANCHOR_BUCKET), or None where it keeps none."""
    bucket = settings().audit_anchor_bucket
    return S3Anchors(bucket) if bucket else None


def anchor_key(tenant: str) -> str:
    # Tenant ids are [A-Za-z0-9._~-]: safe in a key as they are.
    return f"{wiring.AUDIT_ANCHOR_BUCKET.prefix}{tenant}.json"


@cache
def _s3() -> Any:
    # Path-style addressing where an endpoint is configured (the local stack's moto answers on 127.0.0.1, where no
    # bucket host name resolves); AWS's own endpoints keep their default.
    return sdk_clients.client("s3", config=Config(s3={"addressing_style": "path"}) if _custom_endpoint() else None)


def _custom_endpoint() -> bool:
    return bool(runtime_settings().aws_endpoint_url)


def ensure_locked_bucket(name: str, retention_days: int, client: Any = None) -> None:
    """Create the bucket with Object Lock (governance mode, `retention_days`) unless it exists (the local stack; a
    deployment's is made by CloudFormation)."""
    client = client or _s3()
    try:
        client.head_bucket(Bucket=name)
        return
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket", "NotFound"):
            raise
    region = client.meta.region_name
    where = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    client.create_bucket(Bucket=name, ObjectLockEnabledForBucket=True, **where)
    client.put_object_lock_configuration(
        Bucket=name,
        ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": retention_days}},
        },
    )
