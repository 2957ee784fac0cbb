"""The HTTP API: one route per wiring.ROUTES entry, all served by one Lambda through payload format 2.0."""

from __future__ import annotations

import json

import jsii
from aws_cdk import Acknowledgment, Validations
from aws_cdk import aws_apigateway as apigw_v1
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk.aws_apigatewayv2_integrations import HttpLambdaIntegration
from constructs import Construct

from interlude import wiring

# Route key, never the raw path: token surfaces carry a signed capability token in the path, and access logs
# must not become a store of live tokens.
ACCESS_LOG_FIELDS = {
    "requestId": "$context.requestId",
    "requestTime": "$context.requestTimeEpoch",
    "sourceIp": "$context.identity.sourceIp",
    "routeKey": "$context.routeKey",
    "status": "$context.status",
    "protocol": "$context.protocol",
    "responseLength": "$context.responseLength",
    "responseLatency": "$context.responseLatency",
    "integrationLatency": "$context.integrationLatency",
    "integrationError": "$context.integrationErrorMessage",
}


class HttpFront(Construct):
    # A stage-wide ceiling on every route, so one runaway client is refused at the edge before it reaches
    # Lambda concurrency and the table.
    THROTTLE = apigw.ThrottleSettings(rate_limit=100, burst_limit=200)
    ACCESS_LOG_RETENTION = logs.RetentionDays.ONE_MONTH

    def __init__(self, scope: Construct, construct_id: str, *, handler: lambda_.IFunction) -> None:
        super().__init__(scope, construct_id)
        self.http_api = apigw.HttpApi(
            self,
            "HttpApi",
            description="Interlude: OpenWOP v2 and ModuleX human-in-the-loop gates",
            create_default_stage=False,
        )
        self.stage = self._build_stage()
        integration = HttpLambdaIntegration(
            "Handler", handler, payload_format_version=apigw.PayloadFormatVersion.VERSION_2_0
        )
        self.routes = [self._add_route(route, integration) for route in wiring.ROUTES]

    @property
    def url(self) -> str:
        return self.stage.url

    def _build_stage(self) -> apigw.HttpStage:
        access_logs = logs.LogGroup(self, "AccessLogs", retention=self.ACCESS_LOG_RETENTION)
        return apigw.HttpStage(
            self,
            "DefaultStage",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            throttle=self.THROTTLE,
            access_log_settings=_AccessLogSettings(access_logs),
        )

    def _add_route(self, route: wiring.Route, integration: HttpLambdaIntegration) -> apigw.HttpRoute:
        http_route = apigw.HttpRoute(
            self,
            f"Route{route.operation[0].upper()}{route.operation[1:]}",
            http_api=self.http_api,
            route_key=apigw.HttpRouteKey.with_(route.path, apigw.HttpMethod[route.method]),
            integration=integration,
        )
        if route.scope:
            reason = f"The api function authorizes this route itself: an API key holding scope {route.scope!r}."
        else:
            reason = (
                "Public by design (wiring scope None): a discovery document, or a surface the signed token authorizes."
            )
        Validations.of(http_route).acknowledge(Acknowledgment(id="AwsSolutions-APIG4", reason=reason))
        return http_route


@jsii.implements(apigw.IAccessLogSettings)
class _AccessLogSettings:
    # IAccessLogSettings is a jsii interface (not a struct), so it needs a class rather than a dict.
    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigw.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigw.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw_v1.AccessLogFormat:
        return apigw_v1.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FIELDS))
