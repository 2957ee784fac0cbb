"""Business metrics in CloudWatch's embedded metric format (Powertools Metrics), namespace `Interlude`.

Each data point is one EMF line in the function's log, dimensioned by the deployment ($INTERLUDE_DEPLOYMENT)
and what it counts. Points are written only inside Lambda ($AWS_LAMBDA_FUNCTION_NAME), so the local stack and
the tests stay quiet; POWERTOOLS_METRICS_DISABLED=true silences a deployment. Emitted from the edge (API,
handlers) and the adapters; the engine, the rules and the store stay free of it.

What is counted: InterruptsRaised{kind}, InterruptsDecided{kind, outcome} (from the outbox, once per event
item), Decisions{surface} (the route that decided), DeadlinesFired{purpose}, CallbackNotices{outcome},
Notifications{outcome} (sent, skipped, undeliverable, dead, duplicate, failed: docs/operations.md), Actions{outcome},
TenantWork{outcome} (a suspended or deleted tenant's work held or dropped: interlude.adapters.held_work),
MigrationItems{migration, measure}, IdempotentReplays{operation}, ApiErrors{route, status}; the failures that page (docs/operations.md, "What to
watch"), by the physical name of the function that met them: RecordFailures{FunctionName} (a stream record or queue
message a worker failed, other than a designed retry: interlude.adapters.batch), CaughtErrors{FunctionName} (an
error the code logged and carried on from: interlude.app.caught) and OrphanBatches{FunctionName} (dispatch's: a new
run's event batch dropped because its run was never created, interlude.app.dispatch, docs/adr/0165); and
TimeToDecision{kind, outcome} in milliseconds, from the interrupt's raisedAt to the timestamp of its
interrupt.resolved event (a decision on any surface, or the timeout: outcome `timeout`). The resolved event does not
carry raisedAt; the event batch that closed the gate names its inbox entries, whose keys do (`{raisedAt}#{interruptId}`:
dispatch holds them, app/dispatch.py HeldRuns.raised_at), else it is read back from the interrupt's item (one GetItem
per decided interrupt, and only where metrics are written).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from interlude.app.ports import DispatchedRuns

from interlude.config.runtime import DEPLOYMENT_ENV as DEPLOYMENT_ENV
from interlude.config.runtime import runtime_settings

NAMESPACE = "Interlude"
# The failure metrics the alarms read (interlude_cdk.observability), each dimensioned by deployment and FunctionName.
RECORD_FAILURES = "RecordFailures"
CAUGHT_ERRORS = "CaughtErrors"
ORPHAN_BATCHES = "OrphanBatches"


def enabled() -> bool:
    runtime = runtime_settings()
    return bool(runtime.function_name) and not runtime.metrics_disabled


def count(name: str, value: float = 1, **dimensions: Any) -> None:
    put(name, value, "Count", **dimensions)


def put(name: str, value: float, unit: str, **dimensions: Any) -> None:
    """One data point; `unit` is a CloudWatch unit name (Count, Milliseconds, ...)."""
    if not enabled():
        return
    # Imported on first use: the cold start of a function that counts nothing pays nothing.
    from aws_lambda_powertools.metrics import MetricUnit, single_metric

    deployment = {"deployment": runtime_settings().deployment}
    with single_metric(
        name=name, unit=MetricUnit(unit), value=value, namespace=NAMESPACE, default_dimensions=deployment
    ) as metric:
        for key, dimension in dimensions.items():
            metric.add_dimension(key, str(dimension))


def function_name() -> str:
    return runtime_settings().function_name


def record_failed() -> None:
    count(RECORD_FAILURES, FunctionName=function_name())


def orphan_batch_dropped() -> None:
    count(ORPHAN_BATCHES, FunctionName=function_name())


def count_caught_errors() -> None:
    """Entry points call it: every interlude.app.caught error is counted as CaughtErrors of this function."""
    from interlude.app import caught

    caught.count_with(lambda: count(CAUGHT_ERRORS, FunctionName=function_name()))


def decision_outcome(payload: dict[str, Any]) -> str:
    """granted / rejected / overridden for approvals, timeout for a deadline, else the action or `resolved`."""
    if payload.get("reason") == "timeout":
        return "timeout"
    return str(payload.get("decision") or payload.get("action") or "resolved")


def on_events(records: DispatchedRuns, run_id: str, events: list[dict[str, Any]]) -> None:
    """Outbox handler: interrupts raised and decided, counted from the event log itself, and how long each took."""
    decided = []
    for event in events:
        payload = event.get("payload") or {}
        if event.get("type") == "interrupt.requested":
            count("InterruptsRaised", kind=payload.get("kind", "unknown"))
        elif event.get("type") == "interrupt.resolved":
            count("InterruptsDecided", kind=payload.get("kind", "unknown"), outcome=decision_outcome(payload))
            decided.append(event)
    if decided and enabled():
        time_to_decision(records, run_id, decided)


def time_to_decision(records: DispatchedRuns, run_id: str, resolved: list[dict[str, Any]]) -> None:
    # Imported here, only where metrics are written: the API and callbacks functions count with this module and
    # import no engine package for it (cold starts). The visits' names, not the engine's run rules.
    from interlude.engine.visits import interrupt_key, visit_of

    got = records.run_head(run_id)  # its visits alone
    if got is None:
        return
    state, _ = got
    for event in resolved:
        payload = event.get("payload") or {}
        node_id = payload.get("nodeId") or event.get("nodeId", "")
        # The interrupt has left the run head; its id still names its visit, and so its item's key.
        interrupt_id = payload.get("interruptId")
        visit = visit_of(state, node_id, interrupt_id)
        raised_at = None if visit is None else records.raised_at(run_id, interrupt_key(run_id, node_id, visit), interrupt_id)
        if raised_at is None:
            continue
        waited_ms = (_instant(event["timestamp"]) - _instant(raised_at)) * 1000
        put(
            "TimeToDecision",
            max(waited_ms, 0.0),
            "Milliseconds",
            kind=payload.get("kind", "unknown"),
            outcome=decision_outcome(payload),
        )


def _instant(iso_text: str) -> float:
    return datetime.fromisoformat(iso_text.replace("Z", "+00:00")).timestamp()
