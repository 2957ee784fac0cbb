"""Issue 16 in the synthesized template: the audit logs are append-only below the application; issue 26 S6: the
anchors' bucket keeps what the sweep publishes past the reach of the table's writers."""

from __future__ import annotations

import json
import re

import pytest

from interlude import wiring
from interlude.store import audit as items
from tests.infra.conftest import as_list


@pytest.mark.parametrize("spec", [f for f in wiring.FUNCTIONS if f.table_actions], ids=lambda spec: spec.name)
def test_every_role_with_the_table_is_denied_updating_or_deleting_an_audit_log_entry(synth, spec):
    # Given a function that may write the table / Then its role is denied Update and Delete on the audit logs'
    # partitions: entries can only ever be Put (issue 16, the append-only obligation of openwop-audit-log-integrity)
    (deny,) = [s for s in synth.statements(spec.name) if s.get("Effect") == "Deny"]
    # (BatchWriteItem too: its DeleteRequest would delete past a DeleteItem deny). The operator surface alone may
    # remove a deleted tenant's whole log with the rest of its items, and change no entry either (issue 30 item 6).
    if spec.name in wiring.APPEND_ONLY_REMOVERS:
        assert as_list(deny["Action"]) == ["dynamodb:UpdateItem"]
    else:
        assert set(as_list(deny["Action"])) == {"dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"}
    assert deny["Condition"] == {"ForAnyValue:StringLike": {"dynamodb:LeadingKeys": ["T#*#AUDIT#*"]}}
    # And the pattern covers every chain's log partition but neither a chain head nor any other item of the tenant
    pattern = re.compile("^" + deny["Condition"]["ForAnyValue:StringLike"]["dynamodb:LeadingKeys"][0].replace("*", ".*") + "$")
    assert all(pattern.match(items.log_pk("acme", chain)) for chain in range(wiring.AUDIT_CHAINS))
    others = (items.head_pk("acme", 0), items.head_pk("acme", 127), "T#acme#R#run", "T#acme", "K#0123", "T#acme#INBOX#ANY#00")
    assert not any(pattern.match(pk) for pk in others)


# -- issue 26 S6: the anchors' bucket ---------------------------------------------------------------------------


def anchors_bucket(synth) -> tuple[str, dict]:
    bucket_id = synth.stack.get_logical_id(synth.interlude.audit_anchors.bucket.node.default_child)
    return bucket_id, synth.resources[bucket_id]


def test_the_anchors_bucket_keeps_every_version_under_object_lock_and_outlives_the_stack(synth):
    bucket_id, bucket = anchors_bucket(synth)
    props = bucket["Properties"]
    assert props["ObjectLockEnabled"] is True
    assert props["ObjectLockConfiguration"] == {
        "ObjectLockEnabled": "Enabled",
        "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": 365}},
    }
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert [rule["NoncurrentVersionExpiration"]["NoncurrentDays"] for rule in props["LifecycleConfiguration"]["Rules"]] == [366]
    assert bucket["DeletionPolicy"] == "Retain"
    (policy,) = [p for p in synth.of_type("AWS::S3::BucketPolicy").values() if p["Properties"]["Bucket"] == {"Ref": bucket_id}]
    denied = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    # No one deletes an anchor, nor a version of one (a delete marker would hide the current anchor); TLS only.
    assert {"s3:DeleteObject", "s3:DeleteObjectVersion"} <= {a for s in denied if s["Principal"] == {"AWS": "*"} for a in as_list(s["Action"])}
    assert any(s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}} for s in denied)


def s3_statements(synth, name: str) -> list[dict]:
    return [s for s in synth.statements(name) if any(a.startswith("s3:") for a in as_list(s["Action"]))]


@pytest.mark.parametrize("spec", wiring.FUNCTIONS, ids=lambda spec: spec.name)
def test_only_the_sweep_writes_anchors_and_only_the_api_reads_them(synth, spec):
    bucket_id, _ = anchors_bucket(synth)
    anchors = wiring.AUDIT_ANCHOR_BUCKET
    objects = {"Fn::Join": ["", [{"Fn::GetAtt": [bucket_id, "Arn"]}, f"/{anchors.prefix}*"]]}
    granted = {(a, json.dumps(s["Resource"], sort_keys=True)) for s in s3_statements(synth, spec.name) for a in as_list(s["Action"])}
    expected = set()
    if spec.name in anchors.writers:
        expected |= {(a, json.dumps(objects, sort_keys=True)) for a in wiring.BUCKET_WRITE_ACTIONS}
    if spec.name in anchors.readers:
        expected |= {(a, json.dumps(objects, sort_keys=True)) for a in wiring.BUCKET_READ_ACTIONS}
        expected |= {(a, json.dumps({"Fn::GetAtt": [bucket_id, "Arn"]}, sort_keys=True)) for a in wiring.BUCKET_LIST_ACTIONS}
    assert granted == expected
    if spec.name in anchors.writers or spec.name in anchors.readers:
        assert synth.env(spec.name)[anchors.env] == {"Ref": bucket_id}
    else:
        assert anchors.env not in synth.env(spec.name)


def test_the_lock_mode_and_retention_are_the_deployments_and_refused_outside_s3s_bounds(offline):
    from aws_cdk import App, Stack
    from aws_cdk import aws_lambda as lambda_
    from aws_cdk.assertions import Template

    from interlude_cdk.audit_anchor import AuditAnchors

    def stack_with(**props) -> Template:
        stack = Stack(App(outdir=str(offline)), "Anchors")
        functions = {
            name: lambda_.Function(stack, name, runtime=lambda_.Runtime.PYTHON_3_13, handler="h.h", code=lambda_.Code.from_inline("h=1"))
            for name in ("api", "timeouts")
        }
        AuditAnchors(stack, "AuditAnchors", functions=functions, encryption_key=None, **props)
        return Template.from_stack(stack)

    rule = {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 7}}
    stack_with(retention_days=7, lock_mode="GOVERNANCE").has_resource_properties("AWS::S3::Bucket", {"ObjectLockConfiguration": {"ObjectLockEnabled": "Enabled", "Rule": rule}})
    for props in ({"retention_days": 0, "lock_mode": "COMPLIANCE"}, {"retention_days": 7, "lock_mode": "LEGAL"}):
        with pytest.raises(ValueError, match="audit_anchor_"):
            stack_with(**props)
