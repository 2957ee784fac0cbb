"""The business metrics a real handler writes: its EMF lines on stdout, read back as CloudWatch parses them."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout

import pytest

from interlude import config
from interlude.adapters import metrics
from interlude.local import lambda_runtime

# (metric name, its dimensions) of one data point
Point = tuple[str, dict[str, str]]


def as_function(monkeypatch: pytest.MonkeyPatch, deployment: str, name: str) -> str:
    """Run what follows as function `name` of `deployment`, deployed (its physical name, as Lambda sets it, answered):
    its metrics are written."""
    physical = f"{deployment}-{name}-0A1B2C3D"
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", physical)
    monkeypatch.setenv(metrics.DEPLOYMENT_ENV, deployment)
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    # Lambda sets them before the function starts, and the function reads its environment then.
    config.forget()
    return physical


@contextmanager
def written(name: str) -> Iterator[list[Point]]:
    """The points function `name`'s handler writes inside the block; filled on exit."""
    # Loaded first: its Logger keeps the stream it was made with, which must not be this capture's.
    lambda_runtime.handler_module(name)
    out = io.StringIO()
    points: list[Point] = []
    try:
        with redirect_stdout(out):
            yield points
    finally:
        for line in out.getvalue().splitlines():
            document = json.loads(line)
            (directive,) = document["_aws"]["CloudWatchMetrics"]
            assert directive["Namespace"] == metrics.NAMESPACE
            (metric,) = directive["Metrics"]
            (dimension_names,) = directive["Dimensions"]
            points.append((metric["Name"], {dimension: document[dimension] for dimension in dimension_names}))


def of(points: list[Point], metric: str) -> list[dict[str, str]]:
    """The dimensions of each of `metric`'s points."""
    return [dimensions for name, dimensions in points if name == metric]
