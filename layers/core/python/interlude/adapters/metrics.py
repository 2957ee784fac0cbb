"""Business metrics in CloudWatch's embedded metric format (Powertools Metrics), namespace `Interlude`.

Each data point is one EMF line in the function's log, dimensioned by the deployment ($INTERLUDE_DEPLOYMENT)
and what it counts. Points are written only inside Lambda ($AWS_LAMBDA_FUNCTION_NAME), so the local stack and
the tests stay quiet; POWERTOOLS_METRICS_DISABLED=true silences a deployment. Emitted from the edge (API,
handlers) and the adapters; the engine, the rules and the store stay free of it.

What is counted: InterruptsRaised{kind}, InterruptsDecided{kind, outcome} (from the outbox, once per event
item), Decisions{surface} (the route that decided), DeadlinesFired{purpose}, CallbackNotices{outcome},
IdempotentReplays{operation}, ApiErrors{route, status}.
"""

from __future__ import annotations

import os
from typing import Any

NAMESPACE = "Interlude"
DEPLOYMENT_ENV = "INTERLUDE_DEPLOYMENT"


def enabled() -> bool:
    return bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME")) and (
        os.environ.get("POWERTOOLS_METRICS_DISABLED", "").lower() != "true"
    )


def count(name: str, value: float = 1, **dimensions: Any) -> None:
    if not enabled():
        return
    # Imported on first use: the cold start of a function that counts nothing pays nothing.
    from aws_lambda_powertools.metrics import MetricUnit, single_metric

    deployment = {"deployment": os.environ.get(DEPLOYMENT_ENV, "unnamed")}
    with single_metric(
        name=name, unit=MetricUnit.Count, value=value, namespace=NAMESPACE, default_dimensions=deployment
    ) as metric:
        for key, dimension in dimensions.items():
            metric.add_dimension(key, str(dimension))


def decision_outcome(payload: dict[str, Any]) -> str:
    """granted / rejected / overridden for approvals, timeout for a deadline, else the action or `resolved`."""
    if payload.get("reason") == "timeout":
        return "timeout"
    return str(payload.get("decision") or payload.get("action") or "resolved")


def on_events(_service: Any, _run_id: str, events: list[dict[str, Any]]) -> None:
    """Outbox handler: interrupts raised and decided, counted from the event log itself."""
    for event in events:
        payload = event.get("payload") or {}
        if event.get("type") == "interrupt.requested":
            count("InterruptsRaised", kind=payload.get("kind", "unknown"))
        elif event.get("type") == "interrupt.resolved":
            count("InterruptsDecided", kind=payload.get("kind", "unknown"), outcome=decision_outcome(payload))
