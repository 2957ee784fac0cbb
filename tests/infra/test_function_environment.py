"""Every variable the construct sets on a function is one the function reads: declared by a settings group of
interlude.config, or read by a library the functions use (a misspelt name would otherwise be ignored silently)."""

from __future__ import annotations

import ast

import pytest

from interlude import config, wiring
from interlude.config.local import CliSettings, LocalStackSettings
from interlude.config.reading import EnvironmentSettings, variables
from interlude_cdk.functions import FUNCTIONS_DIR

# Powertools' logger reads them (the service name of every line, and the log level).
LIBRARY_VARIABLES = {"POWERTOOLS_SERVICE_NAME", "LOG_LEVEL"}
# Read on the operator's machine (the CLI, the local stack), by no function.
OPERATOR_GROUPS = {CliSettings, LocalStackSettings}


def declared() -> set[str]:
    groups = [group for group, _ in config.groups()]
    assert set(EnvironmentSettings.__subclasses__()) == {*groups, *OPERATOR_GROUPS}
    return {name for group in groups for names in variables(group).values() for name in names}


@pytest.mark.parametrize("synthesized", ["synth", "customer_synth"])
def test_every_variable_a_function_is_given_is_one_it_reads(synthesized, request):
    synth = request.getfixturevalue(synthesized)
    read = declared() | LIBRARY_VARIABLES
    for spec in wiring.FUNCTIONS:
        unread = set(synth.env(spec.name)) - read
        assert unread == set(), f"{spec.name} is given {sorted(unread)}, which nothing reads"


@pytest.mark.parametrize("spec", wiring.FUNCTIONS, ids=lambda spec: spec.name)
def test_every_function_reads_every_settings_group_at_its_cold_start(spec):
    # So config.groups() is what each function reads, and the construct judges every function's environment by all
    # of them at synthesis (interlude_cdk.functions.StartsWithItsSettings; tests/infra/test_settings_at_synth.py).
    handler = ast.parse((FUNCTIONS_DIR / spec.name / "handler.py").read_text())
    calls = [node for node in ast.walk(handler) if isinstance(node, ast.Call)]
    assert any(ast.unparse(call) == "config.check()" for call in calls), spec.name
