"""The WebSocket API on which clients follow runs live (wiring.LIVE_API, ADR 0143): its $connect, $disconnect,
$default and message routes all invoke the api function, which authorizes them as GET /runs/{runId}/events; the
functions that manage connections (LIVE_API.managers) are granted execute-api:ManageConnections on this API's stage
for their methods alone and find its management endpoint in LIVE_API.endpoint_env."""

from __future__ import annotations

from aws_cdk import Acknowledgment, RemovalPolicy, Stack, Validations
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from interlude import wiring
from interlude_cdk.api import AccessLogSettings
from interlude_cdk.functions import acknowledge_run_time_resources
from interlude_cdk.props import RouteThrottle

# A WebSocket stage's access log: the connection and route, never a message's body.
ACCESS_LOG_FIELDS = {
    "requestId": "$context.requestId",
    "apiId": "$context.apiId",
    "connectionId": "$context.connectionId",
    "eventType": "$context.eventType",
    "routeKey": "$context.routeKey",
    "requestTime": "$context.requestTimeEpoch",
    "sourceIp": "$context.identity.sourceIp",
    "status": "$context.status",
    "integrationLatency": "$context.integrationLatency",
    "integrationError": "$context.integrationErrorMessage",
}
# API Gateway's route selection for the API's messages: `{"action": "subscribe", …}` takes the `subscribe` route.
ROUTE_SELECTION = "$request.body.action"
AUTHORIZED_BY_FUNCTION = (
    "The api function authorizes every route of the WebSocket API itself, as GET /runs/{runId}/events: $connect "
    "takes an API key holding runs:read (Authorization: Bearer, or a browser's key subprotocol), each message is "
    "authorized again with that key."
)


class LiveFront(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler: lambda_.IFunction,
        managers: dict[str, lambda_.Function],
        throttle: RouteThrottle,
        log_retention: logs.RetentionDays,
        encryption_key: kms.IKey | None,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        spec = wiring.LIVE_API
        integration = _LambdaProxy("Handler", handler)
        route = apigw.WebSocketRouteOptions(integration=integration)
        self.web_socket_api = apigw.WebSocketApi(
            self,
            "Api",
            description="Interlude: follow runs live (subscribe to a run, receive its events as they commit)",
            route_selection_expression=ROUTE_SELECTION,
            connect_route_options=route,
            disconnect_route_options=route,
            default_route_options=route,
        )
        for action in spec.actions:
            self.web_socket_api.add_route(action, integration=integration)
        # One permission for the whole API (any stage and route of it), as the HTTP API's: one per route would grow
        # the function's resource policy toward Lambda's 20 KB with every route (issue 25, finding 1).
        handler.add_permission(
            "LiveApiInvoke",
            principal=iam.ServicePrincipal("apigateway.amazonaws.com"),
            source_arn=Stack.of(self).format_arn(
                service="execute-api", resource=self.web_socket_api.api_id, resource_name="*"
            ),
        )
        self.access_logs = logs.LogGroup(
            self, "AccessLogs", retention=log_retention, encryption_key=encryption_key, removal_policy=removal_policy
        )
        self.stage = apigw.WebSocketStage(
            self,
            "Stage",
            web_socket_api=self.web_socket_api,
            stage_name=spec.stage,
            auto_deploy=True,
            throttle=apigw.ThrottleSettings(rate_limit=throttle.rate_limit, burst_limit=throttle.burst_limit),
            access_log_settings=AccessLogSettings(self.access_logs, ACCESS_LOG_FIELDS),
        )
        for name, methods in spec.managers.items():
            function = managers[name]
            # Each function's methods alone (POST @connections/{id} sends, GET reads whether it is open, DELETE closes it).
            arns = [
                Stack.of(self).format_arn(
                    service="execute-api",
                    resource=self.web_socket_api.api_id,
                    resource_name=f"{spec.stage}/{method}/@connections/*",
                )
                for method in methods
            ]
            function.add_to_role_policy(iam.PolicyStatement(actions=[wiring.MANAGE_CONNECTIONS_ACTION], resources=arns))
            for arn in arns:
                acknowledge_run_time_resources(
                    function,
                    arn,
                    "Connections are opened by clients at run time: the grant is this method on any connection of this "
                    "one WebSocket API's one stage, and nothing else.",
                )
            function.add_environment(spec.endpoint_env, self.stage.callback_url)
        for child in self.web_socket_api.node.find_all():
            if isinstance(child, apigw.CfnRoute):
                Validations.of(child).acknowledge(
                    Acknowledgment(id="AwsSolutions-APIG4", reason=AUTHORIZED_BY_FUNCTION)
                )
        self.url = self.stage.url


class _LambdaProxy(apigw.WebSocketRouteIntegration):
    """A Lambda proxy integration of a route that adds no permission of its own (LiveFront adds one for the API)."""

    def __init__(self, construct_id: str, handler: lambda_.IFunction) -> None:
        super().__init__(construct_id)
        self._handler = handler

    def bind(self, *, route: apigw.IWebSocketRoute, scope: Construct) -> apigw.WebSocketRouteIntegrationConfig:
        stack = Stack.of(scope)
        uri = (
            f"arn:{stack.partition}:apigateway:{stack.region}:lambda:path/2015-03-31/functions/"
            f"{self._handler.function_arn}/invocations"
        )
        return apigw.WebSocketRouteIntegrationConfig(type=apigw.WebSocketIntegrationType.AWS_PROXY, uri=uri)
