"""examples/customer-app: a customer's own CDK app using the Interlude construct with non-default props.

It is synthesized here as a customer would (its own app.py, a stack of its own with a concrete account and
region), and every prop it sets is looked for in the template.
"""

from __future__ import annotations

import json

import pytest
from cfnlint.api import ManualArgs, lint

from interlude import wiring
from interlude.config.delivery import PUBLIC_BASE_URL_ENV
from tests.infra.conftest import as_list, load_customer_app


@pytest.fixture(scope="module")
def customer(customer_synth):
    return load_customer_app(), customer_synth.stack, customer_synth.template_json


def of_type(template: dict, resource_type: str) -> dict[str, dict]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == resource_type}


def ref(stack, construct) -> dict:
    return {"Ref": stack.get_logical_id(construct.node.default_child)}


def arn(stack, construct) -> dict:
    return {"Fn::GetAtt": [stack.get_logical_id(construct.node.default_child), "Arn"]}


def test_the_custom_domain_fronts_the_api_and_every_link(customer):
    module, stack, template = customer
    (domain,) = of_type(template, "AWS::ApiGatewayV2::DomainName").values()
    assert domain["Properties"]["DomainName"] == module.DOMAIN
    (api,) = [a for a in of_type(template, "AWS::ApiGatewayV2::Api").values() if a["Properties"]["ProtocolType"] == "HTTP"]
    assert api["Properties"]["DisableExecuteApiEndpoint"] is True
    (record,) = of_type(template, "AWS::Route53::RecordSet").values()
    assert record["Properties"]["Name"] == f"{module.DOMAIN}."
    (certificate,) = of_type(template, "AWS::CertificateManager::Certificate").values()
    assert certificate["Properties"]["ValidationMethod"] == "DNS"
    # PUBLIC_BASE_URL (links in notices) and the ApiUrl output both use the domain
    url = f"https://{module.DOMAIN}/"
    assert template["Outputs"]["ApiUrl"]["Value"] == url
    functions = stack.interlude.functions.by_name
    for spec in wiring.FUNCTIONS:
        variables = template["Resources"][stack.get_logical_id(functions[spec.name].node.default_child)]
        assert variables["Properties"]["Environment"]["Variables"].get(PUBLIC_BASE_URL_ENV) == (
            url if spec.needs_public_base_url else None
        )


def test_the_customer_key_encrypts_the_table_queues_secret_and_logs(customer):
    _, stack, template = customer
    key_arn = arn(stack, stack.key)
    tables = of_type(template, "AWS::DynamoDB::Table").values()
    assert len(tables) == len(wiring.TABLES)
    for table in tables:
        assert table["Properties"]["SSESpecification"] == {
            "KMSMasterKeyId": key_arn,
            "SSEEnabled": True,
            "SSEType": "KMS",
        }
    queues = of_type(template, "AWS::SQS::Queue")
    # wiring.QUEUES, the stream's dead-letter queue, the schedules' and the timeouts function's failure queue
    assert len(queues) == len(wiring.QUEUES) + 3
    for queue in queues.values():
        assert queue["Properties"]["KmsMasterKeyId"] == key_arn
    secrets = of_type(template, "AWS::SecretsManager::Secret").values()
    assert len(secrets) == len(wiring.SECRETS)  # the token key ring, the audit signing key
    for secret in secrets:
        assert secret["Properties"]["KmsKeyId"] == key_arn
    log_groups = of_type(template, "AWS::Logs::LogGroup")
    assert len(log_groups) == len(wiring.FUNCTIONS) + 2  # and the two APIs' access logs
    for group in log_groups.values():
        assert group["Properties"]["KmsKeyId"] == key_arn
        assert group["Properties"]["RetentionInDays"] == 90
    # And the key lets CloudWatch Logs use it, and every function role use it (no more than that)
    key_policy = json.dumps(template["Resources"][stack.get_logical_id(stack.key.node.default_child)])
    assert "logs.eu-west-1.amazonaws.com" in key_policy


def test_every_alarm_pages_the_customers_topic(customer):
    _, stack, template = customer
    alarms = of_type(template, "AWS::CloudWatch::Alarm")
    assert alarms
    for alarm in alarms.values():
        assert alarm["Properties"]["AlarmActions"] == [ref(stack, stack.pager)]
    # No topic of Interlude's own: the customer's replaces it
    assert len(of_type(template, "AWS::SNS::Topic")) == 1
    assert template["Outputs"]["AlarmTopic"]["Value"] == ref(stack, stack.pager)


def test_reserved_concurrency_merges_the_customers_over_the_defaults(customer):
    """Finding 9: naming three functions keeps the reservation of the fourth (actions) the customer did not name."""
    module, stack, template = customer
    reserved = {
        spec.name: template["Resources"][
            stack.get_logical_id(stack.interlude.functions.by_name[spec.name].node.default_child)
        ]["Properties"].get("ReservedConcurrentExecutions")
        for spec in wiring.FUNCTIONS
    }
    defaults = {spec.name: spec.reserved_concurrency for spec in wiring.FUNCTIONS}
    assert reserved == {**defaults, **module.RESERVED_CONCURRENCY}
    assert reserved["actions"] == wiring.function("actions").reserved_concurrency == 10
    # And the whole fits the stated quota less what Lambda keeps unreserved
    assert sum(v for v in reserved.values() if v) <= module.ACCOUNT_CONCURRENCY_QUOTA - 100


def test_each_queue_mapping_polls_at_most_its_functions_reservation(customer):
    """Finding 9: MaximumConcurrency on every SQS mapping, never above the function's reserved concurrency."""
    _, stack, template = customer
    for spec in wiring.FUNCTIONS:
        if not spec.consumes:
            continue
        function = template["Resources"][
            stack.get_logical_id(stack.interlude.functions.by_name[spec.name].node.default_child)
        ]["Properties"]
        (mapping,) = [
            m["Properties"]
            for m in of_type(template, "AWS::Lambda::EventSourceMapping").values()
            if m["Properties"]["FunctionName"] == ref(stack, stack.interlude.functions.by_name[spec.name])
        ]
        maximum = mapping["ScalingConfig"]["MaximumConcurrency"]
        assert 2 <= maximum <= 1000
        if "ReservedConcurrentExecutions" in function:
            assert maximum <= function["ReservedConcurrentExecutions"], spec.name


def test_tags_reach_every_taggable_resource(customer):
    module, _, template = customer
    expected = {**module.TAGS, "interlude:deployment": "approvals-prod"}
    for resource_type in ("AWS::DynamoDB::Table", "AWS::Lambda::Function", "AWS::SQS::Queue", "AWS::IAM::Role"):
        for resource in of_type(template, resource_type).values():
            tags = {t["Key"]: t["Value"] for t in resource["Properties"]["Tags"]}
            assert tags.items() >= expected.items(), resource_type
    for api in of_type(template, "AWS::ApiGatewayV2::Api").values():  # the HTTP API and the WebSocket API
        assert api["Properties"]["Tags"].items() >= expected.items()


def test_each_route_is_throttled_by_its_class(customer):
    module, _, template = customer
    (stage,) = [st for st in of_type(template, "AWS::ApiGatewayV2::Stage").values() if "RouteSettings" in st["Properties"]]
    settings = stage["Properties"]["RouteSettings"]
    assert set(settings) == {r.gateway_key for r in wiring.ROUTES}
    for route in wiring.ROUTES:
        throttle = module.THROTTLES.of(wiring.route_class(route))
        assert settings[route.gateway_key] == {
            "ThrottlingRateLimit": throttle.rate_limit,
            "ThrottlingBurstLimit": throttle.burst_limit,
        }
    assert settings["POST /runs"]["ThrottlingRateLimit"] == module.THROTTLES.writes.rate_limit
    assert settings["GET /runs/{runId}/events"]["ThrottlingRateLimit"] == module.THROTTLES.held.rate_limit
    # The stage's DependsOn lists every route, so CloudFormation never sets a route's throttle before it exists
    assert len(as_list(stage.get("DependsOn", []))) >= len(wiring.gateway_routes())


def test_secret_prefix_and_names_follow_the_deployment_name(customer):
    _, stack, template = customer
    assert template["Outputs"]["WebhookSecretPrefix"]["Value"] == "interlude/approvals-prod/webhooks/"
    alarms = of_type(template, "AWS::CloudWatch::Alarm").values()
    assert alarms  # an empty set would pass the loop below
    for alarm in alarms:
        assert alarm["Properties"]["AlarmName"].startswith("approvals-prod-")
    (dashboard,) = of_type(template, "AWS::CloudWatch::Dashboard").values()
    assert dashboard["Properties"]["DashboardName"].startswith("approvals-prod")


def test_the_customer_template_passes_cfn_lint(customer):
    _, _, template = customer
    matches = lint(json.dumps(template), config=ManualArgs(regions=["eu-west-1"], ignore_checks=["W3005"]))
    assert [str(match) for match in matches] == []


def test_webhook_secrets_made_at_run_time_are_told_the_customer_key_and_tags(customer):
    module, stack, template = customer
    key_arn = arn(stack, stack.key)
    for spec in wiring.FUNCTIONS:
        function = stack.interlude.functions.by_name[spec.name]
        variables = template["Resources"][stack.get_logical_id(function.node.default_child)]["Properties"][
            "Environment"
        ]["Variables"]
        if not wiring.creates_secrets(spec):
            assert wiring.CREATED_SECRETS_KMS_KEY_ENV not in variables
            assert wiring.CREATED_SECRETS_TAGS_ENV not in variables
            continue
        # The function that creates tenants' signing secrets creates them under the customer's key
        assert variables[wiring.CREATED_SECRETS_KMS_KEY_ENV] == key_arn
        # with the stack's tags, the construct's and the deployment's (what a teardown looks them up by)
        assert json.loads(variables[wiring.CREATED_SECRETS_TAGS_ENV]) == {
            **module.STACK_TAGS,
            **module.TAGS,
            "interlude:deployment": "approvals-prod",
        }
        # and its role may encrypt under that key (Secrets Manager asks for a data key as the caller)
        role_id = stack.get_logical_id(function.role.node.default_child)
        role = template["Resources"][role_id]["Properties"]
        statements = [s for policy in role.get("Policies", []) for s in policy["PolicyDocument"]["Statement"]]
        statements += [
            s
            for policy in of_type(template, "AWS::IAM::Policy").values()
            if {"Ref": role_id} in policy["Properties"]["Roles"]
            for s in policy["Properties"]["PolicyDocument"]["Statement"]
        ]
        on_key = {a for s in statements if key_arn in as_list(s["Resource"]) for a in as_list(s["Action"])}
        assert {"kms:Encrypt", "kms:GenerateDataKey", "kms:Decrypt"} <= on_key
        # and tag what it creates
        assert any("secretsmanager:TagResource" in as_list(s["Action"]) for s in statements)
    # And the CLI, which may create a tenant's secret too, finds the same key and tags among the stack's outputs
    assert template["Outputs"][wiring.OUTPUT_WEBHOOK_SECRET_KMS_KEY]["Value"] == key_arn
    assert json.loads(template["Outputs"][wiring.OUTPUT_WEBHOOK_SECRET_TAGS]["Value"]) == {
        **module.STACK_TAGS,
        **module.TAGS,
        "interlude:deployment": "approvals-prod",
    }


def test_only_the_notify_function_sends_mail_from_the_configured_identity(customer):
    """Issue 14: SES is granted on exactly the from-identity (address and domain) and the configuration set."""
    _, stack, template = customer
    domain = "approvals.example.com"
    for spec in wiring.FUNCTIONS:
        function = stack.interlude.functions.by_name[spec.name]
        role_id = stack.get_logical_id(function.role.node.default_child)
        statements = [
            s
            for policy in of_type(template, "AWS::IAM::Policy").values()
            if {"Ref": role_id} in policy["Properties"]["Roles"]
            for s in policy["Properties"]["PolicyDocument"]["Statement"]
        ]
        ses = [s for s in statements if any(a.startswith("ses:") for a in as_list(s["Action"]))]
        env = template["Resources"][stack.get_logical_id(function.node.default_child)]["Properties"]["Environment"]
        variables = env["Variables"]
        if not spec.sends_email:
            assert ses == []
            assert "SES_FROM_ADDRESS" not in variables
            continue
        (statement,) = ses
        assert sorted(as_list(statement["Action"])) == ["ses:SendEmail", "ses:SendRawEmail"]
        names = [r if isinstance(r, str) else r["Fn::Join"][1][-1] for r in as_list(statement["Resource"])]
        wanted = [f":identity/approvals@{domain}", f":identity/{domain}", ":configuration-set/approvals-prod"]
        assert sorted(next(w for w in wanted if n.endswith(w)) for n in names) == sorted(wanted), names
        assert variables["SES_FROM_ADDRESS"] == f"approvals@{domain}"
        assert variables["SES_CONFIGURATION_SET"] == "approvals-prod"


def test_a_deployment_without_ancestry_switches_the_route_and_its_advertisement_off_together(customer):
    """Issue 15: `ancestry_endpoint=False` reaches the API function as the one switch both read."""
    _, stack, template = customer
    for spec in wiring.FUNCTIONS:
        function = stack.interlude.functions.by_name[spec.name]
        variables = template["Resources"][stack.get_logical_id(function.node.default_child)]["Properties"]["Environment"]["Variables"]
        wanted = "off" if spec.name == wiring.ROUTES_FUNCTION else None
        assert variables.get("INTERLUDE_ANCESTRY_ENDPOINT") == wanted
