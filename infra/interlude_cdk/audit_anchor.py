"""The audit anchors' bucket (wiring.AUDIT_ANCHOR_BUCKET; issue 26 S6): S3 with Object Lock, so every anchor the
checkpoint sweep publishes stays, as written, for the deployment's retention.

Only wiring's writers may put objects and only its readers read them, under the bucket's prefix; the bucket policy
denies deleting an object or a version to every principal (a delete marker would hide the current anchor), and the
bucket outlives the stack: it is evidence.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Acknowledgment, CfnOutput, Duration, RemovalPolicy, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from constructs import Construct

from interlude import wiring
from interlude_cdk.functions import acknowledge_run_time_resources
from interlude_cdk.props import require_whole

LOCK_MODES = ("COMPLIANCE", "GOVERNANCE")
# S3's bounds on a default retention in days (PutObjectLockConfiguration).
RETENTION_DAYS = (1, 36500)
OUTPUT_BUCKET = "AuditAnchorBucket"


class AuditAnchors(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        functions: Mapping[str, lambda_.Function],
        retention_days: int,
        lock_mode: str,
        encryption_key: kms.IKey | None,
    ) -> None:
        super().__init__(scope, construct_id)
        if lock_mode not in LOCK_MODES:
            raise ValueError(f"audit_anchor_lock_mode must be one of {', '.join(LOCK_MODES)}, not {lock_mode!r}")
        require_whole("audit_anchor_retention_days", retention_days, *RETENTION_DAYS)
        spec = wiring.AUDIT_ANCHOR_BUCKET
        retention = Duration.days(retention_days)
        lock = s3.ObjectLockRetention.compliance if lock_mode == "COMPLIANCE" else s3.ObjectLockRetention.governance
        self.bucket = s3.Bucket(
            self,
            spec.name,
            object_lock_enabled=True,
            object_lock_default_retention=lock(retention),
            versioned=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            encryption=s3.BucketEncryption.KMS if encryption_key is not None else s3.BucketEncryption.S3_MANAGED,
            encryption_key=encryption_key,
            bucket_key_enabled=encryption_key is not None,
            # A version no longer current is kept as long as its lock holds, then goes.
            lifecycle_rules=[s3.LifecycleRule(noncurrent_version_expiration=Duration.days(retention_days + 1))],
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["s3:DeleteObject", "s3:DeleteObjectVersion"],
                resources=[self.bucket.arn_for_objects("*")],
            )
        )
        Validations.of(self.bucket).acknowledge(
            Acknowledgment(
                id="AwsSolutions-S1",
                reason="One function writes it and one reads it, each through its role (CloudTrail data events "
                "record them where the account turns them on); Object Lock keeps every version, so nothing an access "
                "log would explain can be undone.",
            )
        )
        objects = self.bucket.arn_for_objects(f"{spec.prefix}*")
        for name in spec.writers:
            functions[name].add_to_role_policy(iam.PolicyStatement(actions=list(wiring.BUCKET_WRITE_ACTIONS), resources=[objects]))
        for name in spec.readers:
            functions[name].add_to_role_policy(iam.PolicyStatement(actions=list(wiring.BUCKET_READ_ACTIONS), resources=[objects]))
            # Without ListBucket, S3 answers a missing object (a tenant not anchored yet) 403, not 404.
            functions[name].add_to_role_policy(
                iam.PolicyStatement(
                    actions=list(wiring.BUCKET_LIST_ACTIONS),
                    resources=[self.bucket.bucket_arn],
                    conditions={"StringLike": {"s3:prefix": [f"{spec.prefix}*"]}},
                )
            )
        for name in {*spec.writers, *spec.readers}:
            acknowledge_run_time_resources(
                functions[name],
                objects,
                "One anchor object per tenant, named by the tenant at run time: the grant is the objects under this one "
                "prefix of this one bucket, and nothing else.",
            )
            functions[name].add_environment(spec.env, self.bucket.bucket_name)
        CfnOutput(self, OUTPUT_BUCKET, value=self.bucket.bucket_name, description=spec.description).override_logical_id(OUTPUT_BUCKET)
