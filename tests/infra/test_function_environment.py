"""Every variable the construct sets on a function is one the function reads: declared by a settings group of
interlude.config, or read by a library the functions use (a misspelt name would otherwise be ignored silently)."""

from __future__ import annotations

import pytest

from interlude import wiring
from interlude.config import actions, delivery, notify, queues, runtime, scheduler, secrets  # noqa: F401 - every group
from interlude.config.local import CliSettings, LocalStackSettings
from interlude.config.reading import EnvironmentSettings, variables

# Powertools' logger reads them (the service name of every line, and the log level).
LIBRARY_VARIABLES = {"POWERTOOLS_SERVICE_NAME", "LOG_LEVEL"}
# Read on the operator's machine (the CLI, the local stack), by no function.
OPERATOR_GROUPS = {CliSettings, LocalStackSettings}


def declared() -> set[str]:
    groups = [group for group in EnvironmentSettings.__subclasses__() if group not in OPERATOR_GROUPS]
    assert len(groups) == 8
    return {name for group in groups for names in variables(group).values() for name in names}


@pytest.mark.parametrize("synthesized", ["synth", "customer_synth"])
def test_every_variable_a_function_is_given_is_one_it_reads(synthesized, request):
    synth = request.getfixturevalue(synthesized)
    read = declared() | LIBRARY_VARIABLES
    for spec in wiring.FUNCTIONS:
        unread = set(synth.env(spec.name)) - read
        assert unread == set(), f"{spec.name} is given {sorted(unread)}, which nothing reads"


@pytest.mark.parametrize("synthesized", ["synth", "customer_synth"])
def test_every_function_starts_with_the_environment_it_is_given(synthesized, request):
    # What a deployed function's cold start checks (interlude.config.check), on the environment the construct gives
    # it: a value resolved at deploy time (a queue's URL, a bucket's name) stands in as a name.
    synth = request.getfixturevalue(synthesized)
    for spec in wiring.FUNCTIONS:
        given = {
            name: value if isinstance(value, str) else "resolved-at-deploy"
            for name, value in synth.env(spec.name).items()
        }
        for group in EnvironmentSettings.__subclasses__():
            group.from_env(given)  # raises ConfigError naming what the function could not use
