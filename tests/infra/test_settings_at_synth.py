"""Delivery settings that a function's cold start would refuse are refused when the stack is synthesized (`cdk synth`,
`cdk deploy`), naming the function, the variables and what to lower (docs/adr/0205): set through function_overrides,
they would otherwise deploy and stop every invocation of the function."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from aws_cdk import App
from aws_cdk import aws_lambda as lambda_

from interlude_cdk import InterludeStack
from tests.infra.conftest import OFFLINE_AWS, Synth
from tests.infra.test_tuning import PROJECT_CONTEXT


def environment(variables: Mapping[str, str]):
    def override(function: lambda_.Function) -> None:
        for name, value in variables.items():
            function.add_environment(name, value)

    return override


def synthesize(tmp_path, prebuilt_layer, overrides: Mapping[str, Mapping[str, str]]) -> Synth:
    """The real stack, built with `overrides` (function name -> variables its override sets), synthesized."""
    with pytest.MonkeyPatch.context() as env:
        for key, value in OFFLINE_AWS.items():
            env.setenv(key, value)
        env.delenv("CDK_OUTDIR", raising=False)
        app = App(context=PROJECT_CONTEXT, outdir=str(tmp_path / "cdk.out"), analytics_reporting=False)
        stack = InterludeStack(app, "Overridden")
        stack.build(
            layer_dir=str(prebuilt_layer),
            function_overrides={name: environment(variables) for name, variables in overrides.items()},
        )
        return Synth(app, stack, tmp_path / "cdk.out")


def test_an_override_whose_settings_a_cold_start_would_refuse_fails_the_synthesis_naming_function_and_bound(
    tmp_path, prebuilt_layer
):
    # Valid in 0.11.0 (the cap was taken up to 12 h): with the default 10 attempts the waits outlast the queue.
    overrides = {
        "callbacks": {"INTERLUDE_CALLBACK_BACKOFF_CAP_S": "38341"},
        "actions": {"INTERLUDE_ACTION_BACKOFF_CAP_S": str(12 * 3600)},
        "api": {"INTERLUDE_STREAM_HOLD_SECONDS": "60"},
    }
    with pytest.raises(Exception, match="Validation failed") as refused:
        synthesize(tmp_path, prebuilt_layer, overrides)
    said = str(refused.value)
    assert (
        "the callbacks function would stop at every cold start: INTERLUDE_CALLBACK_MAX_ATTEMPTS=10 with "
        "INTERLUDE_CALLBACK_BACKOFF_CAP_S=38341: their worst-case wait (9 x 38341 s = 345069 s) must be at most "
        "345060 s"
    ) in said
    assert (
        "lower INTERLUDE_CALLBACK_BACKOFF_CAP_S to at most 38340 s or INTERLUDE_CALLBACK_MAX_ATTEMPTS to at most 9"
        in said
    )
    assert (
        "the actions function would stop at every cold start: core.http maxAttempts=10 with "
        "INTERLUDE_ACTION_BACKOFF_CAP_S=43200"
    ) in said
    assert "lower INTERLUDE_ACTION_BACKOFF_CAP_S to at most 38360 s" in said
    assert (
        "the api function would stop at every cold start: INTERLUDE_STREAM_HOLD_SECONDS='60': at most 25, not 60"
        in said
    )
    # Only the functions given the values are named: the others' environment holds none of them.
    assert "the notify function" not in said


def test_an_override_its_cold_start_accepts_is_synthesized_as_given(tmp_path, prebuilt_layer):
    # The longest cap the default attempts allow, and the longest SQS allows with fewer attempts.
    overrides = {
        "callbacks": {"INTERLUDE_CALLBACK_BACKOFF_CAP_S": "38340"},
        "notify": {"INTERLUDE_NOTIFY_MAX_ATTEMPTS": "3", "INTERLUDE_NOTIFY_BACKOFF_CAP_S": str(12 * 3600)},
    }
    synth = synthesize(tmp_path, prebuilt_layer, overrides)
    assert synth.env("callbacks")["INTERLUDE_CALLBACK_BACKOFF_CAP_S"] == "38340"
    assert synth.env("notify")["INTERLUDE_NOTIFY_BACKOFF_CAP_S"] == str(12 * 3600)
    # The queue URLs and table names beside them are references, known once deployed: not judged, not refused.
    assert not isinstance(synth.env("callbacks")["TABLE_NAME"], str)
