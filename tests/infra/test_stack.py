"""The synthesized CloudFormation template carries exactly the wiring that interlude.wiring declares."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from cfnlint.api import ManualArgs, lint

from interlude import wiring
from interlude.api.page import approval, templating
from tests.infra.conftest import actions_on, as_list, execute_api_arn

PROJECT_ROOT = Path(__file__).resolve().parents[2]

from interlude_cdk import Interlude  # noqa: E402
from interlude_cdk import layer as layer_module  # noqa: E402

# What Lambda's stream poller calls on the stream (DynamoDB developer guide, "IAM policy to allow a Lambda
# function to access DynamoDB stream records").
STREAM_READ_ACTIONS = {
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
}


# --- table ---------------------------------------------------------------------------------------------


def test_the_two_tables_keys_and_attribute_definitions_match_wiring(synth):
    # Given the synthesized template / When the tables are read / Then there are wiring's two, their keys wiring's
    tables = synth.of_type("AWS::DynamoDB::Table")
    assert set(tables) == {synth.table_id(), synth.entries_table_id()}
    for logical_id, spec in ((synth.table_id(), wiring.TABLE), (synth.entries_table_id(), wiring.ENTRIES_TABLE)):
        props = tables[logical_id]["Properties"]
        assert props["KeySchema"] == [
            {"AttributeName": wiring.PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": wiring.SORT_KEY, "KeyType": "RANGE"},
        ]
        definitions = [(d["AttributeName"], d["AttributeType"]) for d in props["AttributeDefinitions"]]
        assert sorted(definitions) == sorted(wiring.key_attributes(spec))
        assert props["BillingMode"] == "PAY_PER_REQUEST"


def test_the_second_table_is_kept_as_the_first_without_stream_or_index(synth):
    # Given the synthesized second table (inbox entries, delivery records: docs/adr/0161)
    first = synth.table(synth.table_id())
    table = synth.table(synth.entries_table_id())
    props = table["Properties"]
    # Then it has TTL, point-in-time recovery, deletion protection and the first's encryption and policies
    assert props["TimeToLiveSpecification"] == {"AttributeName": wiring.TTL_ATTRIBUTE, "Enabled": True}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["DeletionProtectionEnabled"] is True
    assert props.get("SSESpecification") == first["Properties"].get("SSESpecification")
    assert (table["DeletionPolicy"], table["UpdateReplacePolicy"]) == ("Retain", "Retain")
    # And no stream (nothing of it invokes a function) and no global index
    assert "StreamSpecification" not in props
    assert "GlobalSecondaryIndexes" not in props


def test_table_indexes_ttl_stream_and_protection(synth):
    # Given the synthesized table / Then GSIs, TTL, stream and recovery settings follow wiring
    table = synth.table(synth.table_id())
    props = table["Properties"]
    indexes = {index["IndexName"]: index for index in props["GlobalSecondaryIndexes"]}
    assert set(indexes) == {index.name for index in wiring.GLOBAL_INDEXES}
    for index in wiring.GLOBAL_INDEXES:
        assert indexes[index.name]["KeySchema"] == [
            {"AttributeName": index.partition_key, "KeyType": "HASH"},
            {"AttributeName": index.sort_key, "KeyType": "RANGE"},
        ]
    assert props["TimeToLiveSpecification"] == {"AttributeName": wiring.TTL_ATTRIBUTE, "Enabled": True}
    assert props["StreamSpecification"] == {"StreamViewType": wiring.STREAM_VIEW}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["DeletionProtectionEnabled"] is True
    assert table["DeletionPolicy"] == "Retain"
    assert table["UpdateReplacePolicy"] == "Retain"


# --- functions ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", wiring.FUNCTIONS, ids=lambda spec: spec.name)
def test_function_runtime_architecture_handler_and_environment(synth, spec):
    # Given a wiring.Function / When its Lambda resource is read / Then it runs the declared handler on arm64, on
    # the runtime the layer's wheels were locked for
    fn = synth.resources[synth.function_id(spec.name)]
    props = fn["Properties"]
    assert props["Runtime"] == f"python{layer_module.PYTHON_VERSION}"
    assert props["Architectures"] == ["arm64"]
    assert props["Handler"] == spec.handler
    assert props["MemorySize"] == spec.memory_mb
    assert props["Timeout"] == spec.timeout_s
    base = {
        "TABLE_NAME": {"Ref": synth.table_id()},
        wiring.ENTRIES_TABLE_NAME_ENV: {"Ref": synth.entries_table_id()},
        "POWERTOOLS_SERVICE_NAME": "interlude",
        "LOG_LEVEL": "INFO",
        # business metrics are dimensioned by the deployment (interlude.adapters.metrics)
        "INTERLUDE_DEPLOYMENT": synth.stack.stack_name,
    }
    # Feature wiring (queues, secrets, public base URL, schedules) adds named variables, each asserted by the
    # infra test of its feature (e.g. tests/infra/test_callbacks_stack.py).
    variables = props["Environment"]["Variables"]
    assert {key: variables.get(key) for key in base} == base
    layers = synth.interlude.core_layers
    assert props["Layers"] == [{"Ref": synth.logical_id(layer)} for layer in (layers.dependencies, layers.package)]
    # The handler module named by wiring is inside the code asset, which is functions/<name>/ as it is on disk.
    asset_dir = synth.outdir / fn["Metadata"]["aws:asset:path"]
    module = spec.handler.rsplit(".", 1)[0].replace(".", "/") + ".py"
    assert (asset_dir / module).read_text() == (PROJECT_ROOT / "functions" / spec.name / module).read_text()


@pytest.mark.parametrize("spec", wiring.FUNCTIONS, ids=lambda spec: spec.name)
def test_function_has_own_log_group_with_retention(synth, spec):
    # Given a function / Then it logs to a log group of its own that expires its entries
    props = synth.resources[synth.function_id(spec.name)]["Properties"]
    log_group_id = props["LoggingConfig"]["LogGroup"]["Ref"]
    assert synth.resources[log_group_id]["Type"] == "AWS::Logs::LogGroup"
    assert synth.resources[log_group_id]["Properties"]["RetentionInDays"] > 0
    # and Lambda's own records of each invocation (its REPORT line: duration, memory used) are kept by default
    assert props["LoggingConfig"]["SystemLogLevel"] == "INFO"


def test_layers_are_built_for_the_functions_platform(synth):
    # Given both layers / Then they target the functions' runtime and architecture
    layers = synth.interlude.core_layers
    for layer in (layers.dependencies, layers.package):
        props = synth.resources[synth.logical_id(layer)]["Properties"]
        assert props["CompatibleRuntimes"] == [f"python{layer_module.PYTHON_VERSION}"]
        assert props["CompatibleArchitectures"] == ["arm64"]
    # And the package layer ships interlude under python/, without the local stack (the only user of moto)
    package = synth.resources[synth.logical_id(layers.package)]
    asset_dir = synth.outdir / package["Metadata"]["aws:asset:path"]
    assert (asset_dir / "python" / "interlude" / "wiring.py").is_file()
    assert not (asset_dir / "python" / "interlude" / "local").exists()
    # (and with the runtime's bytecode only: tests/infra/test_bytecode.py)
    assert {p.name.split(".")[-2] for p in asset_dir.rglob("*.pyc")} == {f"cpython-{layer_module.PYTHON_VERSION.replace('.', '')}"}
    # And the dependencies layer names the lock file it was built from
    dependencies = synth.resources[synth.logical_id(layers.dependencies)]["Properties"]
    assert layer_module.lock_sha256()[:12] in dependencies["Description"]


def test_the_package_layer_ships_the_pages_templates_compiled_and_renders_a_page_from_them(synth):
    # Given the package layer as synthesis bundled it
    package = synth.resources[synth.logical_id(synth.interlude.core_layers.package)]
    shipped = synth.outdir / package["Metadata"]["aws:asset:path"] / "python"
    # Then every template and style sheet of the approval page and the console is in it as written
    for folder in templating.TEMPLATE_DIRS.values():
        sources = sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        assert sources
        for source in sources:
            copy = shipped / "interlude" / source.relative_to(layer_module.INTERLUDE_DIR)
            assert copy.read_bytes() == source.read_bytes(), copy
    # And compiled to modules, each with the runtime's bytecode (tests/infra/test_bytecode.py checks every module's)
    compiled = shipped / "interlude" / templating.COMPILED_DIR.relative_to(layer_module.INTERLUDE_DIR)
    assert len(list(compiled.glob("tmpl_*.py"))) == len(templating.make_environment(None).list_templates())
    # And the package imported from the layer draws a page from those modules, as from the sources
    render = (
        "import interlude, sys\nassert interlude.__file__.startswith(sys.argv[1]), interlude.__file__\n"
        "from interlude.api.page import approval, templating\n"
        "assert type(templating.environment().loader).__name__ == 'ModuleLoader'\n"
        "print(approval.document('Ship it?', approval.render_result(approval.Result('expired'), None), 'nonce'))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(shipped), "PYTHONDONTWRITEBYTECODE": "1"}
    page = subprocess.run([sys.executable, "-c", render, str(shipped)], env=env, capture_output=True, text=True, check=True)
    expected = approval.document("Ship it?", approval.render_result(approval.Result("expired"), None), "nonce")
    assert page.stdout == expected + "\n"


# --- least privilege ------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", wiring.FUNCTIONS, ids=lambda spec: spec.name)
def test_role_table_actions_are_exactly_wirings(synth, spec):
    # Given a function's role / When every statement attached to it is collected
    statements = synth.statements(spec.name)
    table_arn = {"Fn::GetAtt": [synth.table_id(), "Arn"]}
    stream_arn = {"Fn::GetAtt": [synth.table_id(), "StreamArn"]}

    # Then the table gets exactly wiring's actions, and so does every index, and the second table its own
    assert actions_on(statements, table_arn) == set(spec.table_actions)
    entries_arn = {"Fn::GetAtt": [synth.entries_table_id(), "Arn"]}
    assert actions_on(statements, entries_arn) == set(spec.entries_table_actions)
    for index in wiring.GLOBAL_INDEXES:
        index_arn = {"Fn::Join": ["", [table_arn, f"/index/{index.name}"]]}
        assert actions_on(statements, index_arn) == set(spec.table_actions)
    # And the stream is readable only by the function wiring says reads it
    assert actions_on(statements, stream_arn) == (STREAM_READ_ACTIONS if spec.reads_stream else set())
    # And no DynamoDB action is granted anywhere else or through a wildcard
    allowed = [s for s in statements if s.get("Effect", "Allow") == "Allow"]
    all_dynamodb = {a for s in allowed for a in as_list(s["Action"]) if a.startswith("dynamodb:")}
    assert all_dynamodb == set(spec.table_actions) | set(spec.entries_table_actions) | (
        STREAM_READ_ACTIONS if spec.reads_stream else set()
    )
    assert not [a for s in statements for a in as_list(s["Action"]) if "*" in a]
    for statement in statements:
        if any(a.startswith("dynamodb:") for a in as_list(statement["Action"])):
            assert "*" not in as_list(statement["Resource"])


def test_roles_have_no_managed_policies(synth):
    # Given every function role / Then nothing broader than the inline statements is attached
    for spec in wiring.FUNCTIONS:
        assert "ManagedPolicyArns" not in synth.resources[synth.role_id(spec.name)]["Properties"]


# --- the stream outbox ----------------------------------------------------------------------------------


def test_stream_mapping_feeds_only_new_event_items_to_the_reader(synth):
    # Given wiring's stream reader / When the event source mappings are read
    (reader,) = [spec for spec in wiring.FUNCTIONS if spec.reads_stream]
    mappings = [
        m
        for m in synth.of_type("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["EventSourceArn"].get("Fn::GetAtt", [None, None])[1] == "StreamArn"
    ]
    assert len(mappings) == 1
    props = mappings[0]["Properties"]

    # Then the reader consumes the table's stream with wiring's batch and retry settings
    assert props["FunctionName"] == {"Ref": synth.function_id(reader.name)}
    assert props["EventSourceArn"] == {"Fn::GetAtt": [synth.table_id(), "StreamArn"]}
    assert props["BatchSize"] == wiring.STREAM_BATCH_SIZE
    assert props["MaximumRetryAttempts"] == wiring.STREAM_MAX_RETRIES
    # And a record older than wiring's age goes to the dead letters before the stream's 24 h trim could drop it
    assert props["MaximumRecordAgeInSeconds"] == wiring.STREAM_MAX_RECORD_AGE_S < 24 * 3600
    assert props["BisectBatchOnFunctionError"] is True
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["StartingPosition"] == "TRIM_HORIZON"
    # And only inserts of event-log items pass the filter
    (only_filter,) = props["FilterCriteria"]["Filters"]
    assert json.loads(only_filter["Pattern"]) == wiring.STREAM_FILTER == {
        "eventName": ["INSERT"],
        "dynamodb": {"NewImage": {wiring.SORT_KEY: {"S": [{"prefix": wiring.EVENT_ITEM_PREFIX}]}}},
    }
    # And batches that exhaust their retries land in an SQS dead-letter queue the reader may write to
    dlq_id = props["DestinationConfig"]["OnFailure"]["Destination"]["Fn::GetAtt"][0]
    assert synth.resources[dlq_id]["Type"] == "AWS::SQS::Queue"
    dlq_actions = actions_on(synth.statements(reader.name), {"Fn::GetAtt": [dlq_id, "Arn"]})
    assert "sqs:SendMessage" in dlq_actions


# --- HTTP API -------------------------------------------------------------------------------------------


def test_one_route_per_wiring_route_all_on_the_routes_function(synth):
    # Given the HTTP API / When its routes are read
    http_api = {"Ref": synth.logical_id(synth.interlude.api.http_api)}
    routes = [r for r in synth.of_type("AWS::ApiGatewayV2::Route").values() if r["Properties"]["ApiId"] == http_api]
    route_keys = [route["Properties"]["RouteKey"] for route in routes]

    # Then there is exactly one route per API Gateway route key of the wiring (a custom method after a parameter shares
    # the parameter's route: wiring.Route.gateway_key)
    assert sorted(route_keys) == sorted({r.gateway_key for r in wiring.ROUTES})
    # And every route targets a Lambda proxy integration (payload 2.0) of the routes function
    function_arn = {"Fn::GetAtt": [synth.function_id(wiring.ROUTES_FUNCTION), "Arn"]}
    for route in routes:
        target = route["Properties"]["Target"]["Fn::Join"][1]
        assert target[0] == "integrations/"
        integration = synth.resources[target[1]["Ref"]]["Properties"]
        assert integration["IntegrationType"] == "AWS_PROXY"
        assert integration["IntegrationUri"] == function_arn
        assert integration["PayloadFormatVersion"] == "2.0"


def test_api_gateway_may_invoke_the_routes_function_through_one_permission_for_this_api(synth):
    # Given the Lambda permissions / Then exactly one lets API Gateway invoke the routes function: any stage, method
    # and path of this API, and no other API (one per route would exceed Lambda's policy size: issue 25, finding 1)
    function_arn = {"Fn::GetAtt": [synth.function_id(wiring.ROUTES_FUNCTION), "Arn"]}
    http_api = {"Ref": synth.logical_id(synth.interlude.api.http_api)}
    (permission,) = [
        p["Properties"]
        for p in synth.of_type("AWS::Lambda::Permission").values()
        if p["Properties"]["FunctionName"] == function_arn and http_api in p["Properties"]["SourceArn"]["Fn::Join"][1]
    ]
    assert permission["Principal"] == "apigateway.amazonaws.com"
    assert permission["Action"] == "lambda:InvokeFunction"
    assert permission["SourceArn"] == execute_api_arn({"Ref": synth.logical_id(synth.interlude.api.http_api)}, "/*/*/*")


def test_default_stage_throttles_and_logs_without_raw_paths(synth):
    # Given the API's stage / Then it deploys itself, throttles, and writes access logs keyed by route
    props = synth.resources[synth.logical_id(synth.interlude.api.stage)]["Properties"]
    assert props["StageName"] == "$default"
    assert props["AutoDeploy"] is True
    assert props["DefaultRouteSettings"]["ThrottlingRateLimit"] > 0
    assert props["DefaultRouteSettings"]["ThrottlingBurstLimit"] > 0
    log_format = json.loads(props["AccessLogSettings"]["Format"])
    assert log_format["requestId"] == "$context.requestId"
    assert log_format["routeKey"] == "$context.routeKey"
    # Token surfaces carry capability tokens in the path; the access log must not record them.
    assert not [value for value in log_format.values() if "$context.path" in value]


def test_outputs_have_stable_names(synth):
    # Given the outputs / Then the API URL and table name sit under fixed logical ids
    outputs = synth.template_json["Outputs"]
    assert outputs[Interlude.OUTPUT_TABLE_NAME]["Value"] == {"Ref": synth.table_id()}
    assert outputs[wiring.OUTPUT_ENTRIES_TABLE_NAME]["Value"] == {"Ref": synth.entries_table_id()}
    url_parts = outputs[Interlude.OUTPUT_API_URL]["Value"]["Fn::Join"][1]
    assert url_parts[0] == "https://"
    assert url_parts[1] == {"Ref": synth.logical_id(synth.interlude.api.http_api)}


# --- linters --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pack", [AwsSolutionsChecks, ServerlessChecks], ids=lambda pack: pack.__name__)
def test_cdk_nag_packs_report_nothing_unacknowledged(synth, pack):
    # Given the whole app / When the pack evaluates it / Then every finding is acknowledged
    report = pack().validate_scope(synth.app)
    findings = [f"{v.rule_name} at {[r.construct_path for r in v.violating_resources]}" for v in report.violations]
    assert findings == []
    assert report.success


def test_every_acknowledgement_gives_a_reason(synth):
    # Given the synthesized metadata / Then each acknowledged rule carries a written reason
    metadata = json.loads((synth.outdir / f"{synth.stack.artifact_id}.metadata.json").read_text())
    acknowledged = {
        f"{path} {rule}": reason
        for path, entries in metadata.items()
        for entry in entries
        if entry["type"] == "aws:cdk:acknowledged-rules"
        for rule, reason in entry["data"].items()
    }
    assert acknowledged
    assert {key: reason for key, reason in acknowledged.items() if len(reason.strip()) < 20} == {}


def test_cfn_lint_passes(synth):
    # Given the template / When cfn-lint checks it / Then nothing is reported
    # W3005 (redundant DependsOn) is how aws_lambda.Function orders itself after its role's default policy.
    matches = lint(
        json.dumps(synth.template_json),
        config=ManualArgs(regions=["us-east-1", "eu-west-1"], ignore_checks=["W3005"]),
    )
    assert [str(match) for match in matches] == []




def test_the_default_deployment_serves_ancestry(synth):
    # Issue 15: the switch is only written to turn the route (and its advertisement) off.
    for spec in wiring.FUNCTIONS:
        variables = synth.resources[synth.function_id(spec.name)]["Properties"]["Environment"]["Variables"]
        assert "INTERLUDE_ANCESTRY_ENDPOINT" not in variables
