"""Gated actions (core.http) in the synthesized template: their queue and dead-letter queue from wiring, the
worker's event source, and least privilege (read-only on the tenants' action secrets, no queries, no creation)."""

from __future__ import annotations

import pytest

from interlude import wiring
from interlude.config.delivery import DEV_ALLOW_LOOPBACK_ENV
from tests.infra.conftest import as_list


def queue_id(synth, name: str) -> str:
    return synth.logical_id(synth.interlude.callbacks.queues[name])


def test_the_actions_queue_redrives_to_its_alarmed_dead_letter_queue_and_outlasts_its_worker(synth):
    spec = wiring.queue("actions")
    props = synth.resources[queue_id(synth, "actions")]["Properties"]
    assert props["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": [queue_id(synth, "actions-dlq"), "Arn"]}
    # AWS's guidance for SQS event sources: at least six times the consumer's timeout
    assert spec.visibility_timeout_s >= 6 * wiring.function("actions").timeout_s
    # And a dead letter is kept 14 days
    assert synth.resources[queue_id(synth, "actions-dlq")]["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600


@pytest.mark.parametrize("spec", wiring.FUNCTIONS, ids=lambda spec: spec.name)
def test_only_the_actions_function_reads_action_secrets_and_nothing_more(synth, spec):
    prefix = synth.interlude.callbacks.secret_prefixes["ACTION_SECRET_PREFIX"]
    assert prefix == f"interlude/{synth.stack.stack_name}/actions/"
    on_prefix = [
        s
        for s in synth.statements(spec.name)
        for r in as_list(s["Resource"])
        if "Fn::Join" in r and r["Fn::Join"][1][-1] == f":secret:{prefix}*"
    ]
    granted = {a for s in on_prefix for a in as_list(s["Action"])}
    # (the operator surface deletes a deleted tenant's action secrets, and reads none: wiring.TENANT_SECRET_PREFIXES)
    removes = {"secretsmanager:DeleteSecret"} if spec.name == wiring.OPERATOR_FUNCTION else set()
    assert granted == ({"secretsmanager:GetSecretValue"} if spec.name == "actions" else removes)


def test_the_actions_function_holds_exactly_its_declared_table_actions_and_no_loopback_switch(synth):
    spec = wiring.function("actions")
    table = {"Fn::GetAtt": [synth.table_id(), "Arn"]}
    granted = {
        a
        for s in synth.statements("actions")
        if table in as_list(s["Resource"]) and s.get("Effect", "Allow") == "Allow"
        for a in as_list(s["Action"])
        if a.startswith("dynamodb:")
    }
    # (its one Query asks whether a tenant without a record holds a key: store/tenant_standing.py, docs/adr/0195)
    assert granted == set(spec.table_actions)
    assert DEV_ALLOW_LOOPBACK_ENV not in synth.env("actions")
