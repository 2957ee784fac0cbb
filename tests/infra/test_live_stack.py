"""The WebSocket API clients follow runs live on (wiring.LIVE_API, ADR 0143), as the construct synthesizes it."""

from __future__ import annotations

import json

from interlude import wiring
from tests.infra.conftest import as_list, execute_api_arn


def live_api(synth) -> dict:
    return {"Ref": synth.logical_id(synth.interlude.live.web_socket_api)}


def test_every_route_of_the_websocket_api_invokes_the_api_function(synth):
    api = live_api(synth)
    (props,) = [
        r["Properties"]
        for r in synth.of_type("AWS::ApiGatewayV2::Api").values()
        if r["Properties"]["ProtocolType"] == "WEBSOCKET"
    ]
    assert props["RouteSelectionExpression"] == "$request.body.action"
    routes = [
        r["Properties"] for r in synth.of_type("AWS::ApiGatewayV2::Route").values() if r["Properties"]["ApiId"] == api
    ]
    assert sorted(r["RouteKey"] for r in routes) == sorted(
        ["$connect", "$disconnect", "$default", *wiring.LIVE_API.actions]
    )
    function_arn = {"Fn::GetAtt": [synth.function_id(wiring.LIVE_API.function), "Arn"]}
    for route in routes:
        integration = synth.resources[route["Target"]["Fn::Join"][1][1]["Ref"]]["Properties"]
        assert integration["IntegrationType"] == "AWS_PROXY"
        assert function_arn in integration["IntegrationUri"]["Fn::Join"][1]
    # API Gateway may invoke it for this API alone, by one permission whatever the routes (issue 25, finding 1).
    (permission,) = [
        p["Properties"]
        for p in synth.of_type("AWS::Lambda::Permission").values()
        if api in p["Properties"]["SourceArn"]["Fn::Join"][1]
    ]
    assert permission["FunctionName"] == function_arn
    assert permission["Principal"] == "apigateway.amazonaws.com"
    assert permission["SourceArn"]["Fn::Join"][1][-2:] == [api, "/*"]


def test_the_stage_throttles_and_logs_connections_without_message_bodies(synth):
    stage = synth.resources[synth.logical_id(synth.interlude.live.stage)]["Properties"]
    assert stage["StageName"] == wiring.LIVE_API.stage
    assert stage["AutoDeploy"] is True
    assert stage["DefaultRouteSettings"]["ThrottlingRateLimit"] > 0
    log_format = json.loads(stage["AccessLogSettings"]["Format"])
    assert log_format["connectionId"] == "$context.connectionId"
    assert not [value for value in log_format.values() if "body" in value.lower()]


def test_only_the_managers_may_manage_connections_each_by_its_own_methods_and_only_on_this_apis_stage(synth):
    for spec in wiring.FUNCTIONS:
        granted = [
            s
            for s in synth.statements(spec.name)
            if any(action.startswith("execute-api:") for action in as_list(s["Action"]))
        ]
        if spec.name in wiring.LIVE_API.managers:
            methods = wiring.LIVE_API.managers[spec.name]
            arns = [execute_api_arn(live_api(synth), f"/{wiring.LIVE_API.stage}/{m}/@connections/*") for m in methods]
            (statement,) = granted
            assert statement["Action"] == wiring.MANAGE_CONNECTIONS_ACTION
            assert sorted(as_list(statement["Resource"]), key=json.dumps) == sorted(arns, key=json.dumps)
            endpoint = synth.env(spec.name)[wiring.LIVE_API.endpoint_env]["Fn::Join"][1]
            assert endpoint[:2] == ["https://", live_api(synth)]
            assert endpoint[-1] == f"/{wiring.LIVE_API.stage}"
        else:
            assert granted == [], spec.name
            assert wiring.LIVE_API.endpoint_env not in synth.env(spec.name), spec.name


def test_the_websocket_url_is_an_output(synth):
    url = synth.template_json["Outputs"][wiring.OUTPUT_LIVE_URL]["Value"]["Fn::Join"][1]
    assert url[:2] == ["wss://", live_api(synth)]
    assert url[-1] == f"/{wiring.LIVE_API.stage}"
