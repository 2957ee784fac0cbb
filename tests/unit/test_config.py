"""One configuration style (issue 27, item 9): every variable is declared in interlude.config, read once per process,
and a missing or malformed one stops a function's cold start with a message naming it."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from interlude import config, wiring
from interlude.config import ConfigError, Settings
from interlude.config.actions import ActionSettings
from interlude.config.delivery import DeliverySettings
from interlude.config.local import CliSettings, LocalStackSettings
from interlude.config.notify import NotifySettings
from interlude.engine import actions as engine_actions

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "layers" / "core" / "python" / "interlude"
# interlude.config reads the environment for everything, the CLI's shell variables and the local stack's switches
# (config.local) included, and writes the functions' environment for the local stack.
MAY_READ_THE_ENVIRONMENT = ("config",)
# Both tables named, as every function's environment names them.
TABLES = {"TABLE_NAME": "t", "ENTRIES_TABLE_NAME": "e"}
IMPORT_HANDLER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("handler", sys.argv[1])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
"""


def environment_reads(path: Path) -> list[int]:
    """Lines of `path` that read the process environment (os.environ, os.getenv, or either imported by name)."""
    names = ("environ", "getenv")
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr in names and getattr(node.value, "id", None) == "os":
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            lines += [node.lineno for alias in node.names if alias.name in names]
    return lines


def test_no_module_outside_config_reads_the_environment():
    found = [
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] not in MAY_READ_THE_ENVIRONMENT
        for line in environment_reads(path)
    ]
    assert found == []
    # The scan sees a read where there is one.
    assert environment_reads(PACKAGE / "config" / "reading.py")


def cold_start(function: str, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTERLUDE_") and k not in TABLES}
    env |= {"PYTHONPATH": str(PACKAGE.parent), "AWS_DEFAULT_REGION": "us-east-1", **variables}
    handler = ROOT / "functions" / function / "handler.py"
    return subprocess.run(
        [sys.executable, "-c", IMPORT_HANDLER, str(handler)], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("function", "variable", "value", "reason"),
    [
        ("api", "INTERLUDE_STEP_BUDGET", "many", "not a whole number"),
        ("callbacks", "INTERLUDE_CALLBACK_BACKOFF_CAP_S", "4h", "not a number"),
        ("dispatch", "CREATED_SECRETS_TAGS", "team=a", "not a JSON object of strings"),
        ("timeouts", "INTERLUDE_ANCESTRY_ENDPOINT", "maybe", "a switch is one of"),
        ("actions", "INTERLUDE_ACTION_LEASE_MARGIN_S", "soon", "not a number"),
        ("notify", "INTERLUDE_NOTIFY_MAX_ATTEMPTS", "eight", "not a whole number"),
        ("stream", "INTERLUDE_VALIDATE_EVENTS", "yes", "a switch is one of"),
        ("migrate", "INTERLUDE_KEY_RING_CACHE_SECONDS", "1m", "not a whole number"),
    ],
)
def test_a_malformed_variable_stops_the_cold_start_naming_it(function, variable, value, reason):
    started = cold_start(function, **TABLES, **{variable: value})
    assert started.returncode != 0
    assert f"ConfigError: {variable}={value!r}: {reason}" in started.stderr


def test_a_cold_start_names_every_problem_of_every_group_at_once():
    started = cold_start("notify", INTERLUDE_NOTIFY_MAX_ATTEMPTS="eight")
    assert started.returncode != 0
    last = started.stderr.strip().splitlines()[-1]
    assert last.endswith(
        "TABLE_NAME is not set; ENTRIES_TABLE_NAME is not set; INTERLUDE_NOTIFY_MAX_ATTEMPTS='eight': not a whole number"
    )
    assert cold_start("notify", **TABLES).returncode == 0


def test_a_cold_start_without_the_second_tables_name_stops_rather_than_use_the_first():
    started = cold_start("dispatch", TABLE_NAME="t")
    assert started.returncode != 0
    assert started.stderr.strip().splitlines()[-1].endswith("ENTRIES_TABLE_NAME is not set")


def test_every_problem_of_a_group_is_named_at_once():
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({"INTERLUDE_STEP_BUDGET": "x", "INTERLUDE_STREAM_RETRY_MS": "1.5"})
    assert str(refused.value) == (
        "TABLE_NAME is not set; ENTRIES_TABLE_NAME is not set; INTERLUDE_STEP_BUDGET='x': not a whole number; "
        "INTERLUDE_STREAM_RETRY_MS='1.5': not a whole number"
    )


def test_values_are_parsed_by_type_and_an_empty_variable_is_unset():
    read = DeliverySettings.from_env(
        {
            "PUBLIC_BASE_URL": "https://approvals.example.com/",
            "INTERLUDE_CALLBACK_MAX_ATTEMPTS": "1",
            "INTERLUDE_CALLBACK_BACKOFF_CAP_S": str(12 * 3600),
            "INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS": "on",
            "INTERLUDE_CALLBACK_CA_FILE": "",
        }
    )
    assert read.public_base_url == "https://approvals.example.com"
    assert read.max_attempts == 1
    assert read.backoff_cap_s == 12 * 3600  # SQS's longest visibility timeout
    assert read.allow_loopback is True
    assert read.ca_file is None
    # The actions' CA bundle falls back to the callbacks' one.
    assert ActionSettings.from_env({"INTERLUDE_CALLBACK_CA_FILE": "/ca.pem"}).ca_file == "/ca.pem"
    both = {"INTERLUDE_ACTION_CA_FILE": "/actions.pem", "INTERLUDE_CALLBACK_CA_FILE": "/ca.pem"}
    assert ActionSettings.from_env(both).ca_file == "/actions.pem"


def test_the_key_cache_bound_is_a_number_of_seconds_within_its_range_or_the_cold_start_stops():
    """The API-key revocation bound (docs/configuration.md): 5 s unless the deployment chose, 0 (every request reads
    its key) to 60; out of range it is refused, not held at the nearest end, as the construct refuses it at synth."""
    assert Settings.from_env(TABLES).key_cache_seconds == 5.0
    assert Settings.from_env({**TABLES, "INTERLUDE_KEY_CACHE_SECONDS": "0.25"}).key_cache_seconds == 0.25
    assert Settings.from_env({**TABLES, "INTERLUDE_KEY_CACHE_SECONDS": "0"}).key_cache_seconds == 0
    for raw, says in (("90", "must be 0-60 seconds, not 90"), ("-1", "must be 0-60 seconds, not -1"), ("5s", "not a number")):
        with pytest.raises(ConfigError) as refused:
            Settings.from_env({**TABLES, "INTERLUDE_KEY_CACHE_SECONDS": raw})
        assert str(refused.value) == f"INTERLUDE_KEY_CACHE_SECONDS={raw!r}: {says}"


@pytest.mark.parametrize(
    ("group", "variable", "value", "says"),
    [
        (Settings, "INTERLUDE_STREAM_HOLD_SECONDS", "25.5", "at most 25, not 25.5"),
        (DeliverySettings, "INTERLUDE_CALLBACK_MAX_ATTEMPTS", "0", "at least 1, not 0"),
        (DeliverySettings, "INTERLUDE_CALLBACK_BACKOFF_CAP_S", "43201", "at most 43200, not 43201"),
        (NotifySettings, "INTERLUDE_NOTIFY_MAX_ATTEMPTS", "-1", "at least 1, not -1"),
        (NotifySettings, "INTERLUDE_NOTIFY_BACKOFF_CAP_S", str(24 * 3600), "at most 43200, not 86400"),
        (ActionSettings, "INTERLUDE_ACTION_BACKOFF_CAP_S", "43200.5", "at most 43200, not 43200.5"),
    ],
)
def test_a_value_outside_its_bounds_is_refused_naming_the_bound_not_held_at_it(group, variable, value, says):
    """A value the operator chose is never silently changed (docs/adr/0205): before, each of these was taken as its
    bound (a stream hold of 60 s held 25 s, 0 attempts made 1)."""
    with pytest.raises(ConfigError) as refused:
        group.from_env({**TABLES, variable: value})
    assert str(refused.value) == f"{variable}={value!r}: {says}"


def test_a_value_outside_its_bounds_stops_the_cold_start():
    started = cold_start("api", **TABLES, INTERLUDE_STREAM_HOLD_SECONDS="60")
    assert started.returncode != 0
    assert "ConfigError: INTERLUDE_STREAM_HOLD_SECONDS='60': at most 25, not 60" in started.stderr
    assert cold_start("api", **TABLES, INTERLUDE_STREAM_HOLD_SECONDS="25").returncode == 0


@pytest.mark.parametrize(
    ("group", "queue_name", "variable", "function"),
    [
        (DeliverySettings, "callbacks", "INTERLUDE_CALLBACK_MAX_ATTEMPTS", "callbacks"),
        (NotifySettings, "notifications", "INTERLUDE_NOTIFY_MAX_ATTEMPTS", "notify"),
    ],
)
def test_attempts_beyond_their_queues_receives_stop_the_cold_start(group, queue_name, variable, function):
    """A round of more attempts than the queue's redrive allows its message would be given up before its last ones:
    a callback notice's and a notification's alike."""
    bound = wiring.queue(queue_name).max_receive_count
    assert group.from_env({variable: str(bound)}).max_attempts == bound
    with pytest.raises(ConfigError) as refused:
        group.from_env({variable: str(bound + 1)})
    assert str(refused.value) == (
        f"{variable}='{bound + 1}': at most {bound} (the {queue_name} queue's receives before its dead letters), "
        f"not {bound + 1}"
    )
    started = cold_start(function, **TABLES, **{variable: str(bound + 1)})
    assert started.returncode != 0
    assert f"{variable}='{bound + 1}': at most {bound}" in started.stderr


def test_callback_attempts_and_backoff_cap_whose_waits_outlast_the_queues_retention_stop_the_cold_start():
    """Every wait of a round may be the cap (a receiver's Retry-After): the round's waits must end while its message
    is kept, with a visibility timeout to spare, or its last attempts are lost with the message."""
    queue = wiring.queue("callbacks")
    within = queue.retention_s - queue.visibility_timeout_s
    # The longest cap a round of the default attempts can wait at each time.
    cap = within // (wiring.CALLBACK_MAX_ATTEMPTS - 1)
    kept = DeliverySettings.from_env({"INTERLUDE_CALLBACK_BACKOFF_CAP_S": str(cap)})
    assert (kept.max_attempts, kept.backoff_cap_s) == (wiring.CALLBACK_MAX_ATTEMPTS, cap)
    with pytest.raises(ConfigError) as refused:
        DeliverySettings.from_env({"INTERLUDE_CALLBACK_BACKOFF_CAP_S": str(cap + 1)})
    assert str(refused.value).startswith(
        f"INTERLUDE_CALLBACK_MAX_ATTEMPTS={wiring.CALLBACK_MAX_ATTEMPTS} with INTERLUDE_CALLBACK_BACKOFF_CAP_S={cap + 1}"
    )
    assert f"must be at most {within} s, the callbacks queue's message retention" in str(refused.value)
    # Fewer attempts leave room for the longest cap SQS allows.
    few = {"INTERLUDE_CALLBACK_MAX_ATTEMPTS": "3", "INTERLUDE_CALLBACK_BACKOFF_CAP_S": str(12 * 3600)}
    assert DeliverySettings.from_env(few).backoff_cap_s == 12 * 3600
    # The shipped defaults, and the most attempts the queue allows under the default cap, fit.
    assert DeliverySettings.from_env({}).max_attempts == wiring.CALLBACK_MAX_ATTEMPTS
    most = {"INTERLUDE_CALLBACK_MAX_ATTEMPTS": str(queue.max_receive_count)}
    assert DeliverySettings.from_env(most).max_attempts == queue.max_receive_count
    started = cold_start("callbacks", **TABLES, INTERLUDE_CALLBACK_BACKOFF_CAP_S=str(12 * 3600))
    assert started.returncode != 0
    assert "INTERLUDE_CALLBACK_BACKOFF_CAP_S=43200: their worst-case wait" in started.stderr


def test_notification_attempts_and_backoff_cap_whose_waits_outlast_their_queues_retention_are_refused():
    """A notification's round runs within its message's retention, as a callback notice's does."""
    queue = wiring.queue("notifications")
    bound = queue.max_receive_count
    within = queue.retention_s - queue.visibility_timeout_s
    cap = within // (bound - 1)
    most = {"INTERLUDE_NOTIFY_MAX_ATTEMPTS": str(bound), "INTERLUDE_NOTIFY_BACKOFF_CAP_S": str(cap)}
    assert NotifySettings.from_env(most).backoff_cap_s == cap
    with pytest.raises(ConfigError) as refused:
        NotifySettings.from_env({**most, "INTERLUDE_NOTIFY_BACKOFF_CAP_S": str(cap + 1)})
    assert str(refused.value).startswith(
        f"INTERLUDE_NOTIFY_MAX_ATTEMPTS={bound} with INTERLUDE_NOTIFY_BACKOFF_CAP_S={cap + 1}"
    )
    assert f"must be at most {within} s, the notifications queue's message retention" in str(refused.value)
    # The shipped attempts fit under the longest cap SQS allows.
    longest_cap = {"INTERLUDE_NOTIFY_BACKOFF_CAP_S": str(12 * 3600)}
    assert NotifySettings.from_env(longest_cap).max_attempts == wiring.NOTIFY_MAX_ATTEMPTS


def test_an_action_backoff_cap_whose_waits_outlast_the_actions_queues_retention_stops_the_cold_start():
    """A core.http node may ask for up to wiring.ACTION_MAX_ATTEMPTS attempts, each wait up to the cap (a Retry-After):
    the cap must let the longest round end while the actions queue keeps its message."""
    queue = wiring.queue("actions")
    within = queue.retention_s - queue.visibility_timeout_s
    cap = within // (wiring.ACTION_MAX_ATTEMPTS - 1)
    assert ActionSettings.from_env({"INTERLUDE_ACTION_BACKOFF_CAP_S": str(cap)}).backoff_cap_s == cap
    with pytest.raises(ConfigError) as refused:
        ActionSettings.from_env({"INTERLUDE_ACTION_BACKOFF_CAP_S": str(cap + 1)})
    assert str(refused.value) == (
        f"core.http maxAttempts={wiring.ACTION_MAX_ATTEMPTS} with INTERLUDE_ACTION_BACKOFF_CAP_S={cap + 1}: their "
        f"worst-case wait ({wiring.ACTION_MAX_ATTEMPTS - 1} x {cap + 1} s = {(wiring.ACTION_MAX_ATTEMPTS - 1) * (cap + 1)} "
        f"s) must be at most {within} s, the actions queue's message retention less one visibility timeout; lower "
        f"INTERLUDE_ACTION_BACKOFF_CAP_S to at most {cap} s"
    )
    # The engine refuses a definition asking for more attempts than the bound assumes.
    assert engine_actions.MAX_ATTEMPTS == wiring.ACTION_MAX_ATTEMPTS
    started = cold_start("actions", **TABLES, INTERLUDE_ACTION_BACKOFF_CAP_S=str(12 * 3600))
    assert started.returncode != 0
    assert "INTERLUDE_ACTION_BACKOFF_CAP_S=43200: their worst-case wait" in started.stderr


def test_a_function_environment_is_judged_before_deploying_as_its_cold_start_would_read_it():
    """What the construct asks at synthesis (config.refusals): every group's refusals, a value known only once
    deployed (None) counted as set and left unjudged."""
    deployed = {"TABLE_NAME": None, "ENTRIES_TABLE_NAME": None, "CALLBACK_QUEUE_URL": None}
    assert config.refusals(deployed) == []
    assert config.refusals({}) == ["TABLE_NAME is not set", "ENTRIES_TABLE_NAME is not set"]
    refused = config.refusals(
        {**deployed, "INTERLUDE_CALLBACK_BACKOFF_CAP_S": "40000", "INTERLUDE_STREAM_HOLD_SECONDS": "60"}
    )
    assert [problem.split(":")[0] for problem in refused] == [
        "INTERLUDE_STREAM_HOLD_SECONDS='60'",
        "INTERLUDE_CALLBACK_MAX_ATTEMPTS=10 with INTERLUDE_CALLBACK_BACKOFF_CAP_S=40000",
    ]
    # Each is what the cold start itself says.
    with pytest.raises(ConfigError) as started:
        DeliverySettings.from_env({"INTERLUDE_CALLBACK_BACKOFF_CAP_S": "40000"})
    assert str(started.value) == refused[1]
    # Attempts known only once deployed: a cap that outlasts the default attempts may fit them, so it is not refused.
    unknown_attempts = {"INTERLUDE_CALLBACK_MAX_ATTEMPTS": None, "INTERLUDE_CALLBACK_BACKOFF_CAP_S": "40000"}
    assert config.refusals({**deployed, **unknown_attempts}) == []


def test_the_cli_and_the_local_stack_read_their_variables_as_every_group_does():
    shell = CliSettings.from_env({"INTERLUDE_URL": "http://127.0.0.1:9", "INTERLUDE_PORT": "9000", "INTERLUDE_DEBUG": "yes"})
    assert (shell.url, shell.api_key, shell.port, shell.debug) == ("http://127.0.0.1:9", "", 9000, True)
    assert CliSettings.from_env({"INTERLUDE_DEBUG": ""}).debug is False
    switches = LocalStackSettings.from_env({"INTERLUDE_LOCAL_CALLBACK_DELIVERY": "off", "INTERLUDE_LOCAL_INSTANCES": "1"})
    assert (switches.callback_delivery, switches.instances, switches.queue_concurrency) == (False, 1, 2)
    with pytest.raises(ConfigError) as refused:
        LocalStackSettings.from_env({"INTERLUDE_LOCAL_CALLBACK_DELIVERY": "maybe", "INTERLUDE_LOCAL_INSTANCES": "four"})
    assert "INTERLUDE_LOCAL_CALLBACK_DELIVERY='maybe'" in str(refused.value)
    assert "INTERLUDE_LOCAL_INSTANCES='four': not a whole number" in str(refused.value)


def test_settings_are_read_once_per_process_until_forgotten(monkeypatch):
    monkeypatch.setenv("TABLE_NAME", "first")
    monkeypatch.setenv("ENTRIES_TABLE_NAME", "first-entries")
    read = config.settings()
    monkeypatch.setenv("TABLE_NAME", "second")
    assert config.settings() is read
    config.forget()
    assert config.settings().table_name == "second"


def test_the_variables_a_cold_start_requires_are_exactly_those_without_a_default():
    # scripts/check_layer_imports.py gives each handler these (and no others) before importing it from its layers.
    from interlude.config.reading import EnvironmentSettings, required

    groups = EnvironmentSettings.__subclasses__()
    needed = {name for group in groups for name in required(group)}
    assert {"TABLE_NAME", "ENTRIES_TABLE_NAME"} <= needed
    for group in groups:
        if required(group):
            with pytest.raises(ConfigError):
                group.from_env({})
        else:
            group.from_env({})
        group.from_env(dict.fromkeys(needed, "set"))  # nothing else is needed
