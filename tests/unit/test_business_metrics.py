"""Business metrics: EMF lines in the function's log, counted at the edge and from the outbox, only in Lambda."""

from __future__ import annotations

import json

import boto3
import pytest

from interlude import composition, config
from interlude.adapters import metrics
from interlude.api.app import count_response
from interlude.store.facade import Store


@pytest.fixture
def in_lambda(monkeypatch):
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "interlude-api")
    monkeypatch.setenv(metrics.DEPLOYMENT_ENV, "prod-eu")
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    # What every deployed function is given (the outbox reads its settings: whether a live API is deployed).
    monkeypatch.setenv("TABLE_NAME", "metrics")
    monkeypatch.setenv("ENTRIES_TABLE_NAME", "metrics-entries")
    # Fixtures made before this one may already have read the settings (their clients read the runtime's).
    config.forget()


def emitted(capsys) -> list[tuple[str, dict[str, str]]]:
    """(metric name, its dimensions) of every EMF line written to stdout."""
    points = []
    for line in capsys.readouterr().out.splitlines():
        document = json.loads(line)
        (directive,) = document["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == metrics.NAMESPACE
        (metric,) = directive["Metrics"]
        (dimension_names,) = directive["Dimensions"]
        assert document[metric["Name"]] in (1.0, [1.0])
        points.append((metric["Name"], {name: document[name] for name in dimension_names}))
    return points


class GoneRun:
    """The run records with the run gone."""

    @staticmethod
    def run_head(run_id):
        return None


def test_the_outbox_counts_interrupts_raised_and_decided_by_kind_and_outcome(in_lambda, capsys):
    events = [
        {"type": "interrupt.requested", "payload": {"kind": "approval"}},
        {"type": "node.suspended", "payload": {}},
        {"type": "interrupt.resolved", "payload": {"kind": "approval", "decision": "granted"}},
        {"type": "interrupt.resolved", "payload": {"kind": "input", "reason": "timeout"}},
    ]
    # (The run is gone, so no TimeToDecision: tests/integration/test_time_to_decision.py measures that.)
    metrics.on_events(GoneRun(), "run-1", events)
    assert emitted(capsys) == [
        ("InterruptsRaised", {"deployment": "prod-eu", "kind": "approval"}),
        ("InterruptsDecided", {"deployment": "prod-eu", "kind": "approval", "outcome": "granted"}),
        ("InterruptsDecided", {"deployment": "prod-eu", "kind": "input", "outcome": "timeout"}),
    ]
    # And the outbox runs it for every event item on the stream
    outbox = composition.Services(Store("metrics", "metrics-entries", boto3.client("dynamodb", region_name="us-east-1"))).outbox
    assert [handler for handler in outbox if getattr(handler, "func", None) is metrics.on_events]


def test_api_errors_by_route_and_class_and_decisions_by_surface(in_lambda, capsys):
    count_response("POST /runs", 201)
    count_response("POST /runs", 422)
    count_response("GET /runs/{runId}", 503)
    count_response("POST /interrupts/{token}", 200)
    count_response("POST /interrupts/{token}", 409)
    assert emitted(capsys) == [
        ("ApiErrors", {"deployment": "prod-eu", "route": "POST /runs", "status": "4xx"}),
        ("ApiErrors", {"deployment": "prod-eu", "route": "GET /runs/{runId}", "status": "5xx"}),
        ("Decisions", {"deployment": "prod-eu", "surface": "token"}),
        ("ApiErrors", {"deployment": "prod-eu", "route": "POST /interrupts/{token}", "status": "4xx"}),
    ]


def test_nothing_is_written_outside_lambda_or_when_disabled(monkeypatch, capsys):
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    metrics.count("InterruptsRaised", kind="approval")
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "interlude-api")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    metrics.count("InterruptsRaised", kind="approval")
    assert capsys.readouterr().out == ""
