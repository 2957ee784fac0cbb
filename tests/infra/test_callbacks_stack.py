"""Callback delivery in the synthesized template: queues, redrive, the SQS event source, exact grants, and no
development-only loopback switch anywhere in the deployed stack."""

from __future__ import annotations

import json

import pytest

from interlude import wiring
from interlude.config.delivery import DEFAULT_TOTAL_TIMEOUT_S, DEV_ALLOW_LOOPBACK_ENV, PUBLIC_BASE_URL_ENV
from tests.infra.conftest import actions_on, as_list


def queue_id(synth, name: str) -> str:
    return synth.logical_id(synth.interlude.callbacks.queues[name])


def test_queues_follow_wiring_with_redrive_encryption_and_tls_only(synth):
    # Given wiring.QUEUES / When their resources are read
    for spec in wiring.QUEUES:
        props = synth.resources[queue_id(synth, spec.name)]["Properties"]
        # Then retention, visibility and encryption are as declared
        assert props["MessageRetentionPeriod"] == spec.retention_s
        assert props["VisibilityTimeout"] == spec.visibility_timeout_s
        assert props["SqsManagedSseEnabled"] is True
        # And the redrive goes to the declared dead-letter queue after max_receive_count receives
        if spec.dead_letter:
            assert props["RedrivePolicy"] == {
                "deadLetterTargetArn": {"Fn::GetAtt": [queue_id(synth, spec.dead_letter), "Arn"]},
                "maxReceiveCount": spec.max_receive_count,
            }
        else:
            assert "RedrivePolicy" not in props
    # And the callback queue's visibility outlasts six runs of its consumer (AWS's guidance for SQS sources)
    (consumer,) = [f for f in wiring.FUNCTIONS if f.consumes == "callbacks"]
    assert wiring.queue("callbacks").visibility_timeout_s >= 6 * consumer.timeout_s
    # And a whole batch of attempts at their longest fits in one invocation
    assert consumer.timeout_s > wiring.CALLBACK_BATCH_SIZE * DEFAULT_TOTAL_TIMEOUT_S
    # And every queue refuses requests without TLS
    policies = synth.of_type("AWS::SQS::QueuePolicy").values()
    for spec in wiring.QUEUES:
        ref = {"Ref": queue_id(synth, spec.name)}
        (policy,) = [p for p in policies if ref in p["Properties"]["Queues"]]
        (deny,) = policy["Properties"]["PolicyDocument"]["Statement"]
        assert deny["Effect"] == "Deny"
        assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_every_consuming_function_consumes_its_queue_reporting_item_failures(synth):
    # Given the SQS event source mappings
    mappings = [
        m["Properties"]
        for m in synth.of_type("AWS::Lambda::EventSourceMapping").values()
        if "Fn::GetAtt" in m["Properties"]["EventSourceArn"]
        and m["Properties"]["EventSourceArn"]["Fn::GetAtt"][0] in {queue_id(synth, q.name) for q in wiring.QUEUES}
    ]
    # Then exactly one per consuming function (callbacks, actions; notify, issue 14; dispatch, the outbox, issue 26;
    # migrate, issue 30), on its queue, with partial batch responses
    consumers = [f for f in wiring.FUNCTIONS if f.consumes]
    assert {f.name for f in consumers} == {"callbacks", "actions", "notify", "dispatch", "migrate"}
    assert len(mappings) == len(consumers)
    for consumer in consumers:
        (props,) = [m for m in mappings if m["FunctionName"] == {"Ref": synth.function_id(consumer.name)}]
        assert props["EventSourceArn"] == {"Fn::GetAtt": [queue_id(synth, consumer.consumes), "Arn"]}
        assert props["BatchSize"] == consumer.batch_size
        assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert wiring.function("callbacks").batch_size == wiring.CALLBACK_BATCH_SIZE


@pytest.mark.parametrize("spec", wiring.FUNCTIONS, ids=lambda spec: spec.name)
def test_queue_actions_of_every_role_are_exactly_wirings(synth, spec):
    # Given a function's role / When its actions on each callback queue are collected
    statements = synth.statements(spec.name)
    for queue in wiring.QUEUES:
        expected = set()
        if queue.name in spec.sends_to:
            expected.add("sqs:SendMessage")
        if queue.name == spec.consumes:
            expected |= set(wiring.QUEUE_CONSUME_ACTIONS)
        # Then they are exactly what wiring declares (dispatch: SendMessage on the callback queue only)
        assert actions_on(statements, {"Fn::GetAtt": [queue_id(synth, queue.name), "Arn"]}) == expected, queue.name
    # And no SQS action is granted on "*"
    for statement in statements:
        if any(a.startswith("sqs:") for a in as_list(statement["Action"])):
            assert "*" not in as_list(statement["Resource"])


@pytest.mark.parametrize("spec", wiring.FUNCTIONS, ids=lambda spec: spec.name)
def test_webhook_secret_actions_cover_exactly_the_tenant_secret_prefix(synth, spec):
    # Given the statements that name this deployment's webhook secrets' prefix
    prefix = synth.interlude.callbacks.secret_prefixes["WEBHOOK_SECRET_PREFIX"]
    on_prefix = [
        s
        for s in synth.statements(spec.name)
        for r in as_list(s["Resource"])
        if "Fn::Join" in r and r["Fn::Join"][1][-1] == f":secret:{prefix}*"
    ]
    granted = {a for s in on_prefix for a in as_list(s["Action"])}
    declared = {a for key, actions in spec.secret_grants if key == "WEBHOOK_SECRET_PREFIX" for a in actions}
    # Then only the declared function holds them, with exactly the declared actions
    assert granted == declared
    if declared:
        (statement,) = on_prefix
        # (one resource; the operator surface's DeleteSecret names each tenant secret prefix in one statement)
        for resource in as_list(statement["Resource"]):
            assert resource["Fn::Join"][1][:2] == ["arn:", {"Ref": "AWS::Partition"}]


def test_functions_get_the_queue_urls_prefix_and_public_base_url_they_use(synth):
    # Given the functions' environments / Then each names the queues it uses and nothing else of delivery
    api_url = synth.template_json["Outputs"]["ApiUrl"]["Value"]
    for spec in wiring.FUNCTIONS:
        variables = synth.env(spec.name)
        uses = set(spec.sends_to) | ({spec.consumes} if spec.consumes else set())
        for queue in wiring.QUEUES:
            if queue.name in uses:
                assert variables[queue.url_env] == {"Ref": queue_id(synth, queue.name)}
            else:
                assert queue.url_env not in variables
        if spec.needs_public_base_url:
            assert variables[PUBLIC_BASE_URL_ENV] == api_url
        else:
            assert PUBLIC_BASE_URL_ENV not in variables
        for key, _ in spec.secret_grants:
            assert variables[key] == synth.interlude.callbacks.secret_prefixes[key]


def test_webhook_secrets_live_under_a_prefix_of_the_deployments_own(synth):
    # Given the deployed stack / Then its webhook secret prefix names the deployment, so two stacks in one account
    # and region never read or overwrite each other's tenant secrets
    prefix = synth.interlude.callbacks.secret_prefixes["WEBHOOK_SECRET_PREFIX"]
    assert prefix == f"interlude/{synth.stack.stack_name}/webhooks/"
    assert prefix != wiring.SECRET_PREFIXES["WEBHOOK_SECRET_PREFIX"]
    # And the CLI can find it among the stack's outputs
    assert synth.template_json["Outputs"]["WebhookSecretPrefix"]["Value"] == prefix


def test_webhook_secrets_are_created_with_the_deployment_tag_and_no_key_when_none_is_given(synth):
    # Given the default stack (no customer-managed key; the customer app's test covers a key)
    for spec in wiring.FUNCTIONS:
        variables = synth.env(spec.name)
        assert wiring.CREATED_SECRETS_KMS_KEY_ENV not in variables
        if wiring.creates_secrets(spec):
            # Then the creator of tenants' secrets tags each with the deployment, for a teardown to find them
            tags = json.loads(variables[wiring.CREATED_SECRETS_TAGS_ENV])
            assert tags["interlude:deployment"] == synth.stack.stack_name
        else:
            assert wiring.CREATED_SECRETS_TAGS_ENV not in variables
    # And the stack's outputs tell the CLI the same (no key output: there is no key)
    assert json.loads(synth.template_json["Outputs"][wiring.OUTPUT_WEBHOOK_SECRET_TAGS]["Value"]) == tags
    assert wiring.OUTPUT_WEBHOOK_SECRET_KMS_KEY not in synth.template_json["Outputs"]


def test_the_deployed_stack_never_allows_loopback_callbacks(synth):
    # Given every function of the deployed stack / Then none sets the development-only loopback switch
    for spec in wiring.FUNCTIONS:
        assert DEV_ALLOW_LOOPBACK_ENV not in synth.env(spec.name)
    # And the switch's name appears nowhere in the template at all
    assert DEV_ALLOW_LOOPBACK_ENV not in json.dumps(synth.template_json)
