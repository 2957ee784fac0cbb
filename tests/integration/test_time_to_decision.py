"""Time to decision: the outbox's TimeToDecision metric against moto's DynamoDB, with the service's clock moved."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from interlude import config
from interlude.adapters import metrics
from interlude.composition import Services
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.store.facade import Store
from tests.integration.conftest import signed_in
from tests.support.local_stack import FIXTURES

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.moment = START

    def __call__(self) -> datetime:
        return self.moment


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def services(world, clock) -> Services:
    return Services(Store(world.table, world.entries_table), clock=clock)


@pytest.fixture
def in_lambda(monkeypatch):
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "interlude-dispatch")
    monkeypatch.setenv(metrics.DEPLOYMENT_ENV, "prod-eu")
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    # Fixtures made before this one (the moto world, the services' clients) may already have read the settings.
    config.forget()


def start(services: Services, fixture: str) -> str:
    admin = signed_in(services)
    definition = json.loads((FIXTURES / f"{fixture}.json").read_text())
    services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
    return services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": definition["id"]})).runId


def decided_transition(services: Services, run_id: str) -> list[dict]:
    """The RunEventDocs of the transition that resolved the interrupt (what its stream record carries)."""
    events = services.store.read_events(run_id)
    first = next(i for i, e in enumerate(events) if e["type"] == "interrupt.resolved")
    return [e for e in events[first:] if e["timestamp"] == events[first]["timestamp"]]


def time_to_decision_points(capsys) -> list[tuple[dict[str, str], float]]:
    """(dimensions, milliseconds) of every TimeToDecision EMF line written to stdout."""
    points = []
    for line in capsys.readouterr().out.splitlines():
        document = json.loads(line)
        (directive,) = document["_aws"]["CloudWatchMetrics"]
        if directive["Metrics"][0]["Name"] != "TimeToDecision":
            continue
        assert directive["Namespace"] == metrics.NAMESPACE
        assert directive["Metrics"] == [{"Name": "TimeToDecision", "Unit": "Milliseconds"}]
        (dimension_names,) = directive["Dimensions"]
        value = document["TimeToDecision"]
        points.append(({n: document[n] for n in dimension_names}, value[0] if isinstance(value, list) else value))
    return points


def test_a_decision_reports_the_milliseconds_since_the_interrupt_was_raised(services, clock, in_lambda, capsys):
    run_id = start(services, "conformance-approval")
    clock.moment = START + timedelta(minutes=7, seconds=30, milliseconds=250)
    services.decisions.resolve_interrupt(signed_in(services, "bob"), run_id, "gate", {"action": "accept"})
    capsys.readouterr()

    metrics.on_events(services.held_runs, run_id, decided_transition(services, run_id))

    assert time_to_decision_points(capsys) == [
        ({"deployment": "prod-eu", "kind": "approval", "outcome": "granted"}, 450_250.0)
    ]


def test_a_timeout_reports_the_wait_under_outcome_timeout(services, clock, in_lambda, capsys):
    run_id = start(services, "conformance-approval-timeout")  # timeoutMs 1500
    clock.moment = START + timedelta(seconds=4)
    services.runs.fire_deadline({"runId": run_id})  # recorded when the deadline is applied, 4 s after the raise
    capsys.readouterr()

    metrics.on_events(services.held_runs, run_id, decided_transition(services, run_id))

    assert time_to_decision_points(capsys) == [
        ({"deployment": "prod-eu", "kind": "approval", "outcome": "timeout"}, 4_000.0)
    ]


def test_no_reads_and_no_points_outside_lambda(services, clock, monkeypatch, capsys):
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    run_id = start(services, "conformance-approval")
    services.decisions.resolve_interrupt(signed_in(services, "bob"), run_id, "gate", {"action": "accept"})
    events = decided_transition(services, run_id)

    class NoStore:
        def __getattr__(self, name: str):
            raise AssertionError(f"the store was read ({name}) where no metric is written")

    metrics.on_events(NoStore(), run_id, events)
    assert capsys.readouterr().out == ""
