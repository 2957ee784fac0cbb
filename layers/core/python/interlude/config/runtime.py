"""What the process is told about where it runs: the Lambda runtime's and the AWS SDK's own variables, the
deployment's name, and the development switches that only the local stack and the tests set (the construct never
does; tests/infra asserts it of the clock's)."""

from __future__ import annotations

from interlude.config.reading import EnvironmentSettings, cached, setting

DEPLOYMENT_ENV = "INTERLUDE_DEPLOYMENT"
VALIDATE_EVENTS_ENV = "INTERLUDE_VALIDATE_EVENTS"
CLOCK_FILE_ENV = "INTERLUDE_CLOCK_FILE"
SDK_DATA_ENV = "INTERLUDE_SDK_DATA"
VALIDATE_REQUESTS_ENV = "INTERLUDE_VALIDATE_REQUESTS"


def _powertools_true(raw: str) -> bool:
    # Powertools' own reading of its switch: "true" (any case) silences a deployment's metrics.
    return raw.strip().lower() == "true"


class RuntimeSettings(EnvironmentSettings):
    # Lambda sets it in every function: business metrics are written only where it is set (interlude.adapters.metrics).
    function_name: str = setting("AWS_LAMBDA_FUNCTION_NAME", default="")
    metrics_disabled: bool = setting("POWERTOOLS_METRICS_DISABLED", default=False, parse=_powertools_true)
    # Every business metric's `deployment` dimension (the construct sets it).
    deployment: str = setting(DEPLOYMENT_ENV, default="unnamed")
    # An endpoint the AWS SDK is pointed at (the local stack's moto): S3 is then addressed by path.
    aws_endpoint_url: str = setting(("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"), default="")
    # Development: check every event against the OpenWOP schemas before it is written (interlude.engine.events).
    validate_events: bool = setting(VALIDATE_EVENTS_ENV, default=False)
    # Development: botocore checks every DynamoDB request against the service's model before sending it, a check
    # DynamoDB makes again on arrival (interlude.store.table); the functions leave it to DynamoDB.
    validate_requests: bool = setting(VALIDATE_REQUESTS_ENV, default=False)
    # Development: a file whose number of seconds the process clock adds (interlude.domain.clock).
    clock_file: str = setting(CLOCK_FILE_ENV, default="")
    # Benches and tests: a directory of SDK data of their own, read instead of the layer's (interlude.sdk_clients).
    sdk_data: str = setting(SDK_DATA_ENV, default="")


runtime_settings = cached(RuntimeSettings.from_env)
