"""The HTTP API: one route per API Gateway route key of wiring.ROUTES (wiring.gateway_routes), all served by one Lambda
through payload format 2.0.

Each route is throttled by its class (wiring.route_class: writes, reads, held); an optional custom domain
replaces the execute-api URL.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import jsii
from aws_cdk import Acknowledgment, RemovalPolicy, Validations
from aws_cdk import aws_apigateway as apigw_v1
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_route53_targets as targets
from aws_cdk.aws_apigatewayv2_integrations import HttpLambdaIntegration
from constructs import Construct

from interlude import wiring
from interlude_cdk.props import CustomDomain, Throttles

# Route key, never the raw path: token surfaces carry a signed capability token in the path, and access logs
# must not become a store of live tokens.
ACCESS_LOG_FIELDS = {
    "requestId": "$context.requestId",
    "apiId": "$context.apiId",
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
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler: lambda_.IFunction,
        throttles: Throttles,
        domain: CustomDomain | None,
        log_retention: logs.RetentionDays,
        encryption_key: kms.IKey | None,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.http_api = apigw.HttpApi(
            self,
            "HttpApi",
            description="Interlude: OpenWOP v2 and ModuleX human-in-the-loop gates",
            create_default_stage=False,
            disable_execute_api_endpoint=bool(domain and domain.disable_default_endpoint),
        )
        self.access_logs = logs.LogGroup(
            self, "AccessLogs", retention=log_retention, encryption_key=encryption_key, removal_policy=removal_policy
        )
        self.stage = self._build_stage(throttles)
        integration = HttpLambdaIntegration(
            "Handler",
            handler,
            payload_format_version=apigw.PayloadFormatVersion.VERSION_2_0,
            # One permission for the whole API (source: this API's ARN, any stage, method and path), not one per
            # route: 69 route-scoped statements make a resource policy of about 30 KB, over Lambda's 20 KB limit
            # (issue 25, finding 1). The api function authorizes every route itself.
            scope_permission_to_route=False,
        )
        self.routes = [self._add_route(route, integration) for route in wiring.gateway_routes()]
        self._throttle_routes(throttles)
        self.domain_name = self._attach_domain(domain) if domain else None
        self.url = f"https://{domain.domain_name}/" if domain else self.stage.url

    def _build_stage(self, throttles: Throttles) -> apigw.HttpStage:
        return apigw.HttpStage(
            self,
            "DefaultStage",
            http_api=self.http_api,
            stage_name="$default",
            auto_deploy=True,
            # Routes without settings of their own (none today) fall back to the reads class.
            throttle=apigw.ThrottleSettings(
                rate_limit=throttles.reads.rate_limit, burst_limit=throttles.reads.burst_limit
            ),
            access_log_settings=AccessLogSettings(self.access_logs, ACCESS_LOG_FIELDS),
        )

    def _throttle_routes(self, throttles: Throttles) -> None:
        # HttpStage has no per-route throttle; the stage's RouteSettings may only name routes that already exist.
        settings = {}
        for route in wiring.gateway_routes():
            throttle = throttles.of(wiring.route_class(route))
            settings[route.gateway_key] = {
                "ThrottlingRateLimit": throttle.rate_limit,
                "ThrottlingBurstLimit": throttle.burst_limit,
            }
        stage = self.stage.node.default_child
        assert isinstance(stage, apigw.CfnStage)
        stage.add_property_override("RouteSettings", settings)
        for route in self.routes:
            self.stage.node.add_dependency(route)

    def _attach_domain(self, domain: CustomDomain) -> apigw.DomainName:
        certificate = domain.certificate or acm.Certificate(
            self,
            "Certificate",
            domain_name=domain.domain_name,
            validation=acm.CertificateValidation.from_dns(domain.hosted_zone),
        )
        domain_name = apigw.DomainName(self, "DomainName", domain_name=domain.domain_name, certificate=certificate)
        apigw.ApiMapping(self, "ApiMapping", api=self.http_api, domain_name=domain_name, stage=self.stage)
        if domain.hosted_zone is not None:
            alias = targets.ApiGatewayv2DomainProperties(
                domain_name.regional_domain_name, domain_name.regional_hosted_zone_id
            )
            route53.ARecord(
                self,
                "Alias",
                zone=domain.hosted_zone,
                record_name=domain.domain_name,
                target=route53.RecordTarget.from_alias(alias),
            )
        return domain_name

    def _add_route(self, route: wiring.Route, integration: HttpLambdaIntegration) -> apigw.HttpRoute:
        http_route = apigw.HttpRoute(
            self,
            f"Route{route.operation[0].upper()}{route.operation[1:]}",
            http_api=self.http_api,
            route_key=apigw.HttpRouteKey.with_(route.gateway_path, apigw.HttpMethod[route.method]),
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
class AccessLogSettings:
    """A stage's access log: `fields` (name -> $context variable), one JSON line a request, to `log_group` (the HTTP
    API's and the WebSocket API's: interlude_cdk.live)."""

    # IAccessLogSettings is a jsii interface (not a struct), so it needs a class rather than a dict.
    def __init__(self, log_group: logs.ILogGroup, fields: Mapping[str, str]) -> None:
        self._destination = apigw.LogGroupLogDestination(log_group)
        self._fields = dict(fields)

    @property
    def destination(self) -> apigw.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw_v1.AccessLogFormat:
        return apigw_v1.AccessLogFormat.custom(json.dumps(self._fields))
