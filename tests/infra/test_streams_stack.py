"""Issue 7 in the synthesized template: the SSE route and the ModuleX routes reach the api function, whose
timeout leaves room for a held stream request, and whose role needed nothing new to read the log."""

from __future__ import annotations

from interlude import wiring
from interlude.app.streams import RESUMABLE_FLOOR_SECONDS
from interlude.config import Settings
from tests.infra.conftest import actions_on

STREAM_ROUTES = {
    "GET /runs/{runId}/events",
    "POST /workflows/run",
    "GET /workflows/listen/{runId}",
    "POST /workflows/resume/{threadId}",
    "POST /workflows/cancel/{runId}",
    "GET /workflows/state/{threadId}",
}
# API Gateway HTTP API ends an integration at 30 s.
API_GATEWAY_LIMIT_S = 30




def test_stream_and_modulex_routes_are_served_by_the_api_function(synth):
    function_arn = {"Fn::GetAtt": [synth.function_id(wiring.ROUTES_FUNCTION), "Arn"]}
    integrations = {
        key: res
        for key, res in synth.of_type("AWS::ApiGatewayV2::Integration").items()
        if res["Properties"]["IntegrationUri"] == function_arn
    }
    routes = {res["Properties"]["RouteKey"]: res for res in synth.of_type("AWS::ApiGatewayV2::Route").values()}
    assert set(routes) >= STREAM_ROUTES
    for key in STREAM_ROUTES:
        target = routes[key]["Properties"]["Target"]["Fn::Join"][1][1]["Ref"]
        assert target in integrations
    # The OpenWOP workflow routes stay beside the longer ModuleX ones.
    assert {"GET /workflows/{workflowId}", "PUT /workflows/{workflowId}"} <= set(routes)


def test_the_api_function_outlives_a_held_stream_request_within_the_gateway_limit(synth):
    props = synth.resources[synth.function_id("api")]["Properties"]
    defaults = Settings(table_name="t", entries_table_name="e", step_budget=1, max_poll_seconds=1, key_ring_secret="s")
    held = max(defaults.stream_hold_seconds, RESUMABLE_FLOOR_SECONDS) + defaults.stream_linger_seconds
    assert held < props["Timeout"] < API_GATEWAY_LIMIT_S


def test_reading_the_log_needs_only_the_api_roles_declared_table_actions(synth):
    table_arn = {"Fn::GetAtt": [synth.table_id(), "Arn"]}
    actions = actions_on(synth.statements("api"), table_arn)
    assert {"dynamodb:GetItem", "dynamodb:Query"} <= actions
    assert "dynamodb:Scan" not in actions
