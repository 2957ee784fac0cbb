"""Each Lambda entry point imports what every one of its invocations uses, and leaves the rest for first use.

Imported in a fresh interpreter, as Lambda does: the API function loads no callback worker, JSON Schema
machinery or OpenAPI builder; the callbacks function no engine and no run model; and no function builds a
pydantic model's validator before a request needs it. What it costs is measured by bench/cold_import.py; these
tests keep the modules out (a timing test could not say which import came back).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("handler", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
built = []
if "pydantic" in sys.modules:
    from pydantic import BaseModel

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    built = [c.__qualname__ for c in subclasses(BaseModel) if c.__module__.startswith("interlude") and c.__pydantic_complete__]
from interlude.coldstart import deferred
# A module registered for first use (interlude/coldstart.py) and not used yet is not loaded.
print(json.dumps({"modules": sorted(n for n, m in sys.modules.items() if not deferred(m)), "built": built}))
"""

# The engine's run rules and its node types' registry: what moves a run (the services that move one import them; the
# composition builds those where a run moves).
ENGINE_RUN_RULES = ["interlude.engine.run", "interlude.engine.registry", "interlude.engine.gates", "interlude.engine.growth"]

# Modules each function must not load at import; a prefix names a package and everything in it.
NOT_AT_IMPORT = {
    "api": [
        # Clients come from botocore's session (interlude/sdk_clients.py): boto3 brings s3transfer and multiprocessing
        "boto3",
        "s3transfer",
        "interlude.adapters.delivery",  # the callback worker, its pinned HTTP client and signing
        "jsonschema",  # JSON Schemas load on first validation
        "interlude.api.openapi",  # /openapi.json is built when first asked for
        "interlude.app.dispatch",  # the outbox runs in the dispatch function
        "standardwebhooks",
        # Powertools' other resolvers (its event_handler package imports them all; interlude/coldstart.py)
        "aws_lambda_powertools.event_handler.appsync",
        "aws_lambda_powertools.event_handler.bedrock_agent",
        "asyncio",  # AppSync's resolver brings it
        # event data classes the HTTP resolver does not use (its package __init__ imports them all)
        "aws_lambda_powertools.utilities.data_classes.sqs_event",
        "aws_lambda_powertools.utilities.data_classes.code_pipeline_job_event",
        "interlude.faces",  # the ModuleX node types load when a ModuleX node is first run or checked
        "interlude.app.streams",  # the SSE routes' following
        "interlude.store.webhooks",  # the webhook routes' store and secrets
        "interlude.adapters.subscription_secrets",
        "interlude.store.deliveries",  # GET /runs/{runId}/deliveries
        "jinja2",  # the pages' templates load with the first page rendered
        "markupsafe",
        # Request bodies load with their routes (ADR 0137): the tenant settings' model, which every request reads,
        # is apart from its surfaces' bodies, and the token lifetimes it is bounded by from the token routes' bodies.
        "interlude.domain.models.tenant_requests",
        "interlude.domain.models.principal_requests",
        "interlude.domain.models.tokens",
    ],
    "callbacks": [
        "boto3",  # interlude/sdk_clients.py
        "interlude.engine",
        "interlude.domain.models.run",
        "interlude.app",
        "interlude.api",
        "jsonschema",
        "pydantic",  # a delivery validates no model (a dead letter's retention loads the webhook models)
    ],
    # A record reads its run and runs the outbox; the engine's run rules and node types load only where a record moves
    # a run (a runnable one, a deadline already due, a child, a task's retry), and decisions' directory with a resolve.
    "dispatch": [
        "boto3",  # interlude/sdk_clients.py
        "interlude.api",
        "interlude.adapters.delivery",
        "jsonschema",
        "interlude.rules.egress",
        *ENGINE_RUN_RULES,
        "interlude.app.delegation",
        "interlude.app.directory",
    ],
    # Issue 26, S5: the stream's one job is queueing each item's name on the outbox queue: nothing of the table's
    # layout, the runs or the outbox itself.
    "stream": [
        "boto3",  # interlude/sdk_clients.py
        "interlude.store",
        "interlude.app",
        "interlude.engine",
        "interlude.domain",
        "interlude.composition",
        "pydantic",
        "jsonschema",
    ],
    # A message sends one recipient's notification: it reads the run and the directory, never runs the engine.
    "notify": [
        "boto3",  # interlude/sdk_clients.py; the key ring too (adapters/secret_values.py)
        "aws_lambda_powertools.utilities.parameters",
        "interlude.api",
        "interlude.app",
        "interlude.engine",
        "interlude.faces",
        "interlude.adapters.delivery",  # the callback worker; the pinned HTTP client loads with the first Slack post
        "interlude.rules.egress",  # the egress guard: the first Slack post's too
        # A message names its workflow from the stored definition, unvalidated, and says its request's headline
        # (rules/wording.py): the definition's models, the forms' schema reading and a form's modal load with the
        # first form gate's message.
        "interlude.domain.models.workflow",
        "interlude.rules.answer_schema",
        "interlude.rules.slack_forms",
        "interlude.rules.slack_requests",  # what Slack sends (a click, its signature): the API's, never notify's
        "jsonschema",
        "standardwebhooks",
    ],
    # An action is one HTTP call whose outcome lands on its run (the engine); no callback or notification worker.
    "actions": [
        "boto3",  # interlude/sdk_clients.py
        "interlude.api",
        "interlude.adapters.delivery.worker",
        "interlude.adapters.notify",
        "interlude.app.dispatch",
        "jsonschema",
        "standardwebhooks",
    ],
    # A turn of the table's migrations reads their checkpoints, and loads a migration's module (and the run models,
    # pydantic) only while one is waiting; the whole store and the services load with the first turn that uses them
    # (a retention, search-keys or re-stamp turn, a sweep); the deploy's answer uses neither.
    "migrate": [
        "boto3",  # interlude/sdk_clients.py
        "pydantic",
        "interlude.domain.models",
        "interlude.store.facade",
        "interlude.composition",
        "interlude.app",
        "interlude.engine",
        "interlude.api",
        "jsonschema",
    ],
    # The audit sweep (every minute, in every deployment) reads no run: the service, the engine and pydantic load with
    # the first deadline, reminder or task check.
    "timeouts": [
        "boto3",  # interlude/sdk_clients.py
        "interlude.api",
        "interlude.adapters.delivery",
        "jsonschema",
        "interlude.rules.egress",
        "interlude.app.runs",
        "interlude.engine",
        "interlude.faces",
        "interlude.domain.models",
        "pydantic",
    ],
}


def imported(function: str, then: str = "") -> dict[str, list[str]]:
    """The modules the function's handler loads at import (`then`: code run after the import, before counting)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "layers" / "core" / "python"), os.environ.get("PYTHONPATH", "")]),
        "TABLE_NAME": "cold-imports",
        "ENTRIES_TABLE_NAME": "cold-imports-entries",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    handler = ROOT / "functions" / function / "handler.py"
    probe = PROBE.replace('print(json.dumps({"modules"', then + 'print(json.dumps({"modules"')
    out = subprocess.run(
        [sys.executable, "-c", probe, str(handler)], capture_output=True, text=True, env=env, check=True, timeout=120
    )
    result: dict[str, list[str]] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# What every function loads whatever its list bans: the caught-error counter its handler plugs in (stdlib only).
EVERY_FUNCTION_LOADS = {"interlude.app", "interlude.app.caught"}


def among(modules: list[str] | set[str], banned: list[str]) -> list[str]:
    """The modules that are one of `banned` or inside one of them."""
    return [
        m for m in modules for b in banned if (m == b or m.startswith(b + ".")) and m not in EVERY_FUNCTION_LOADS
    ]


@pytest.mark.parametrize("function", sorted(NOT_AT_IMPORT))
def test_a_function_imports_only_what_its_invocations_use(function):
    got = imported(function)
    loaded = among(got["modules"], NOT_AT_IMPORT[function])
    assert loaded == [], f"functions/{function} imports {loaded} at cold start"
    assert got["built"] == [], f"functions/{function} builds pydantic validators at import: {got['built']}"


# What the SDK, Powertools and the standard library import and no invocation runs (coldstart.defer_unused_modules):
# the SDK's documentation writer and date parser, the distributions' metadata urllib3's HTTP/2 opt-in reads,
# the batch utility's asyncio, gzip, configparser, traceback's colour themes (Python ≥ 3.13).
DEFERRED_EVERYWHERE = [
    "botocore.docs.service",  # the package `__init__`s documentation writer
    "botocore.docs.bcdoc.restdoc",
    "dateutil.parser",
    "importlib.metadata",
    "asyncio",
    "gzip",
    "configparser",
    "_colorize",
]


@pytest.mark.parametrize("function", sorted(NOT_AT_IMPORT))
def test_a_function_defers_what_the_libraries_import_and_it_never_runs(function):
    assert among(imported(function)["modules"], DEFERRED_EVERYWHERE) == []


def test_what_is_deferred_loads_at_its_first_use():
    """A deferred module answers its first use: a worker's first message that formats a traceback, or needs asyncio."""
    got = imported(
        "notify",
        then="import asyncio, traceback\n"
        "assert asyncio.iscoroutinefunction(asyncio.sleep)\n"
        "try:\n    raise ValueError('x')\nexcept ValueError as e:\n    assert 'ValueError' in ''.join(traceback.format_exception(e))\n",
    )
    assert "asyncio" in got["modules"]


def test_the_api_function_still_answers_what_it_left_for_first_use():
    """The modules left out load when a route needs them: the OpenAPI document and JSON Schemas are there."""
    got = imported(
        "api",
        then='from interlude.api.openapi import document\n'
        'assert document()["paths"]\n'
        'from interlude.domain import schemas\n'
        'assert schemas.validator("configurable.schema.json") is not None\n',
    )
    assert "jsonschema" in got["modules"]


def test_each_route_module_registers_the_operations_the_api_function_loads_it_for():
    """api/app.py imports a route module when a request's path matches one of its routes: its table must name,
    for every route of wiring.ROUTES, the module that registers it (a route missing from it still answers, by
    loading every module, but costs every cold start that hits it the whole API)."""
    from interlude import wiring
    from interlude.api import app, routes

    app.load_all_routes()
    registered = {operation: module.removeprefix("interlude.api.") for operation, module in routes.REGISTERED.items()}
    assert registered == app.MODULE_OF
    assert {r.operation for r in wiring.ROUTES} == set(app.MODULE_OF)


# What a resolve leaves to the other run routes: the run lifecycle (createRun's inputs and callback checks, the run
# search keys), the snapshots, the run routes' request bodies.
NOT_FOR_A_RESOLVE = [
    "boto3",
    "interlude.api.runs",
    "interlude.domain.models.responses",  # the run routes' answers (a resolve's: domain/models/answers/decisions.py)
    "interlude.app.lifecycle",
    "interlude.app.snapshots",
    "interlude.domain.models.requests",
    # The tenant, principal and token surfaces' request bodies (ADR 0137): a resolve reads the settings and the
    # directory's entries, not what their routes take.
    "interlude.domain.models.tenant_requests",
    "interlude.domain.models.principal_requests",
    "interlude.domain.models.tokens",
    "interlude.rules.run_search",
    "interlude.rules.inputs",
    "interlude.rules.callback_url",
    # The built-in node types a decision on an approval neither runs nor checks (engine/registry.py LATER_BUILT_INS,
    # ADR 0151), and the directory's models, read where a gate names a group, role or delegate (app/facts.py).
    "interlude.engine.gates",
    "interlude.engine.actions",
    "interlude.engine.tasks",
    "interlude.domain.models.principals",
]


def test_a_request_loads_only_the_route_modules_its_path_matches():
    got = imported("api", then='from interlude.api import app\napp.load_routes("POST", "/runs/r-1/interrupts/gate")\n')
    modules = set(got["modules"])
    assert "interlude.api.run_decisions" in modules
    assert not modules & {"interlude.api.console.routes", "interlude.api.modulex", "interlude.api.tokens", "interlude.api.inbox"}
    assert among(modules, NOT_FOR_A_RESOLVE) == []


def test_what_a_resolve_leaves_out_answers_when_asked():
    """A tenant with no limits of its own builds no TenantLimits validator (its settings' limits are constructed), an
    approval's short resume value compiles no credential pattern, and the node types registered for first lookup
    (engine/registry.py) load with it: the same types, each from its module's own declaration, as when every one is
    listed."""
    got = imported(
        "api",
        then="from interlude.api import app\napp.load_routes('POST', '/runs/r-1/interrupts/gate')\n"
        "from interlude.domain.models.tenants import TenantLimits, TenantSettings\n"
        "settings = TenantSettings.model_construct()\n"
        "assert not TenantLimits.__pydantic_complete__ and settings.limits.model_dump() == {}\n"
        "assert TenantSettings.model_validate({}).limits == settings.limits == TenantLimits()\n"
        "from interlude.rules.interrupts import secrets\n"
        "assert secrets.credential_material({'action': 'accept'}) is None\n"
        "assert secrets._value_res.cache_info().currsize == 0 and secrets.credential_material('Bearer abcdefghijklmnop')\n"
        "from interlude.engine import registry\n"
        "later = [m for m, _ in registry.LATER_BUILT_INS.values() if m in sys.modules]\n"
        "assert later == [], later\n"
        "assert registry.node_type('core.http').type_id == 'core.http' and registry.is_gate('core.credentialGate')\n"
        "import importlib\n"
        "for type_id, (module, types) in registry.LATER_BUILT_INS.items():\n"
        "    declared = {t.type_id: t for t in getattr(importlib.import_module(module), types)}\n"
        "    assert registry.node_type(type_id) is declared[type_id], type_id\n"
        "    assert {t for t, (m, _) in registry.LATER_BUILT_INS.items() if m == module} == set(declared), module\n"
        "assert set(registry.LATER_BUILT_INS) <= set(registry.known_type_ids())\n",
    )
    assert {"interlude.engine.gates", "interlude.engine.actions", "interlude.engine.tasks"} <= set(got["modules"])


def test_jinja2_loads_with_the_first_page_rendered_not_with_the_page_routes():
    """The token routes' module holds the approval page and the JSON token routes: a JSON call never loads the
    template engine, the first page rendered does."""
    got = imported(
        "api",
        then='import sys\nfrom interlude.api import app\napp.load_routes("GET", "/interrupts/ow2.x")\n'
        'assert "interlude.api.tokens" in sys.modules and "jinja2" not in sys.modules\n'
        'from interlude.api.page import approval\napproval.document("A page", "", "nonce")\n',
    )
    assert "jinja2" in got["modules"]


def test_every_route_module_imports_only_the_powertools_resolver_it_uses():
    """interlude/coldstart.py keeps Powertools' event_handler package from importing every resolver; a route module that
    imported a name from the package itself (`from aws_lambda_powertools.event_handler import Response`) would run
    the package's __init__ again, and this fails."""
    got = imported("api", then="from interlude.api import app\napp.load_all_routes()\n")
    modules = set(got["modules"])
    assert "aws_lambda_powertools.event_handler.api_gateway" in modules
    assert not modules & {"asyncio", "aws_lambda_powertools.event_handler.appsync"}


def test_the_powertools_package_is_whole_for_any_other_importer():
    """The skipped __init__ runs when a name of the package is asked for: the resolver class is the same one."""
    got = imported(
        "api",
        then="from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, AppSyncResolver, Response\n"
        "from aws_lambda_powertools import event_handler\n"
        "from interlude.api import http\n"
        "assert type(http.app) is APIGatewayHttpResolver and http.Response is Response\n"
        "assert sorted(event_handler.__all__) == sorted(n for n in event_handler.__all__ if hasattr(event_handler, n))\n",
    )
    assert "aws_lambda_powertools.event_handler.appsync" in got["modules"]


# What runs with the package `__init__`s and modules the API leaves unrun (interlude/coldstart.py): importlib.metadata's
# (urllib3's HTTP/2 opt-in, pydantic's plugin loader), botocore's documentation writer's, its reST writer's (a client's
# lazy docstrings), dateutil's date parser's (botocore's timestamps and credential expiries as text).
UNRUN_INITS = [
    "zipfile",
    "csv",
    "importlib.metadata._meta",
    "botocore.docs.service",
    "botocore.docs.client",
    "botocore.docs.bcdoc.docstringparser",
    "botocore.docs.bcdoc.style",
    "html.parser",
    "dateutil.parser._parser",
    "dateutil.parser.isoparser",
]


# Modules the API registers unrun (interlude/coldstart.py), each with a name its body defines: absent while unrun.
UNRUN_MODULES = {
    "configparser": "RawConfigParser",
    "gzip": "GzipFile",
    "dateutil.parser": "parser",
    "botocore.docs.bcdoc.restdoc": "DocumentStructure",
}


def ran(modules: dict[str, str]) -> str:
    """Code that asserts none of `modules` ran its body."""
    return f"ran = [m for m, name in {modules!r}.items() if name in vars(sys.modules[m])]\nassert ran == [], ran\n"


def test_a_resolve_runs_no_package_init_it_never_uses():
    """A resolve's modules (its route module, a model's first validator, a DynamoDB client) with the SDK's and
    pydantic's unused package `__init__`s and modules left unrun."""
    got = imported(
        "api",
        then="from interlude.api import app\napp.load_routes('POST', '/runs/r-1/interrupts/gate')\n"
        "from interlude.domain.models.tenants import TenantSettings\nTenantSettings.model_validate({})\n"
        + ran(UNRUN_MODULES)
        # botocore's own models are gzipped JSON (a function reads the layer's plain copy: interlude/adapters/sdk_data.py)
        + "from interlude import sdk_clients\nsdk_clients.client('dynamodb')\n"
        + ran({m: name for m, name in UNRUN_MODULES.items() if m != "gzip"}),
    )
    assert {"urllib3.http2.probe", "botocore.docs.docstring", "pydantic.plugin._loader"} <= set(got["modules"])
    assert among(got["modules"], UNRUN_INITS) == []


def test_the_packages_left_unrun_are_whole_for_any_other_caller():
    """Their names answer as the packages ship them: a name their `__init__` defines runs it, once."""
    got = imported(
        "api",
        then="import importlib.metadata, urllib3.http2, botocore.docs\n"
        "from pydantic.plugin import _loader\n"
        "assert [e for e in _loader.entry_points(group='console_scripts')]\n"
        "assert importlib.metadata.version('pydantic')\n"
        "from urllib3.http2 import inject_into_urllib3\n"
        "assert callable(inject_into_urllib3) and botocore.docs.ServiceDocumenter\n"
        "import botocore.credentials, dateutil.parser\n"
        "assert botocore.credentials.parse('2026-12-06T12:00:00Z').hour == 12\n"
        "assert dateutil.parser.parse('2026-12-06').day == 6 and dateutil.parser.isoparse('2026-12-06').month == 12\n"
        "from interlude import sdk_clients\n"
        "assert 'get_item(' in sdk_clients.client('dynamodb').get_item.__doc__.expandtabs()\n"
        "from botocore.docs.bcdoc.restdoc import DocumentStructure, ReSTDocument\n"
        "assert isinstance(DocumentStructure('d'), ReSTDocument)\n"
        "import configparser, gzip\n"
        "assert gzip.decompress(gzip.compress(b'x')) == b'x' and configparser.RawConfigParser().sections() == []\n",
    )
    assert {"importlib.metadata._meta", "botocore.docs.service"} <= set(got["modules"])
    assert {"botocore.docs.bcdoc.docstringparser", "dateutil.parser._parser"} <= set(got["modules"])


def every_model(*imports: str) -> str:
    """Code that imports `imports`, loads every route and node type, and names `models`: each pydantic model class
    Interlude defines (subclasses, deep)."""
    return "".join(f"{line}\n" for line in imports) + (
        "from pydantic import BaseModel\n"
        "from interlude.api import app\n"
        "from interlude.engine.registry import known_type_ids, node_type\n"
        "app.load_all_routes()\n"
        "assert node_type('modulex.llm') and known_type_ids()\n"
        "def subclasses(cls):\n"
        "    for sub in cls.__subclasses__():\n"
        "        yield sub\n"
        "        yield from subclasses(sub)\n"
        "models = [c for c in subclasses(BaseModel) if c.__module__.startswith('interlude')]\n"
    )


def test_no_model_field_defaults_to_the_list_type():
    """A list field defaults to `new_list`, not `list` (ADR 0130): pydantic asks each default factory's signature when
    it builds a validator, and `list`'s is parsed from its text (≈ 80 µs a field, ≈ 2 ms the first time)."""
    imported(
        "api",
        then=every_model("from interlude.faces.modulex import definition")
        + "listed = [f'{m.__qualname__}.{n}' for m in models for n, f in m.model_fields.items() if f.default_factory is list]\n"
        "assert len(models) > 100 and not listed, listed\n",
    )


# Their services take types imported for checking only (TYPE_CHECKING), which a signature evaluated at definition
# would need at runtime on 3.11; no cold start but a ModuleX route's loads them.
POSTPONED_ANNOTATIONS_KEPT = {"interlude.faces.modulex.operations", "interlude.faces.modulex.workflows"}


def test_models_are_defined_with_the_runtimes_own_annotations():
    """A module that defines pydantic models does not postpone its annotations (`from __future__ import
    annotations`, ADR 0137): pydantic would compile and evaluate each field's annotation from its text at class
    creation, where the functions' Python (3.14) hands it the evaluated annotation (≈ a quarter of a model's cost)."""
    imported(
        "api",
        then=every_model("import __future__")
        + "postponed = {m.__module__ for m in models if vars(sys.modules[m.__module__]).get('annotations') is"
        " __future__.annotations}\n"
        f"assert len(models) > 100 and postponed == {POSTPONED_ANNOTATIONS_KEPT!r}, postponed\n",
    )


def test_a_resolves_named_tuples_are_made_from_their_field_types():
    """A NamedTuple a cold resolve defines is not declared under postponed annotations (ADR 0157): `typing` checks
    each field's type as the class is made, and a field given as text is compiled into a code object first, one
    `compile()` a field (≈ 0.1 M instructions each; ≈ 146 fields, ≈ 1.5 % of a cold resolve, before this test)."""
    imported(
        "api",
        then="import __future__\n"
        "from interlude.api import app\n"
        "app.load_routes('POST', '/runs/r-1/interrupts/gate')\n"
        "from interlude.composition import services\n"
        "services()\n"
        "named = [c for m in list(sys.modules) if m.startswith('interlude') for c in vars(sys.modules[m]).values()"
        " if isinstance(c, type) and issubclass(c, tuple) and hasattr(c, '_fields') and c.__module__ == m]\n"
        "assert len(named) > 30, named\n"
        "as_text = [f'{c.__module__}.{c.__qualname__}.{f}' for c in named for f, t in c.__annotations__.items()"
        " if isinstance(t, str) or type(t).__name__ == 'ForwardRef']\n"
        "postponed = {c.__module__ for c in named if vars(sys.modules[c.__module__]).get('annotations') is"
        " __future__.annotations}\n"
        "assert as_text == [] and postponed == set(), (as_text, postponed)\n",
    )


TIMEOUTS_RUN_PATH = ["interlude.app.runs", "interlude.engine", "interlude.domain.models.run", "pydantic"]
SWEEP = """
import types
from moto import mock_aws
mock_aws().start()
import boto3
from interlude.adapters.audit_key import ensure_signing_key
from interlude.config import settings
from interlude.domain.audit import AuditDraft
from interlude.rules import audit as rules
from interlude.store.provisioning import create_tables
create_tables(boto3.client("dynamodb"), "cold-imports")
ensure_signing_key(settings().audit_key_secret)
module.audit().writes.transact([], AuditDraft("t1", "key.created", {"subjectId": "op"}, {"keyId": "k1"}, "2026-12-01T00:00:00Z"))
rules.CHECKPOINT_INTERVAL_SECONDS = 0
context = types.SimpleNamespace(
    function_name="timeouts", memory_limit_in_mb=256, invoked_function_arn="arn:aws:lambda:us-east-1:0:function:t",
    aws_request_id="r-1",
)
swept = module.lambda_handler({"sweep": "audit-checkpoints"}, context)
assert swept == {"checkpoints": 1}, swept
assert [h.checkpoint_seq for h in module.audit().chains.heads("t1").values()] == [1]
"""


def test_the_timeouts_sweep_checkpoints_without_loading_a_run_path():
    """The sweep through the real handler (moto) signs a pending chain's checkpoint and loads none of what a
    deadline needs; a deadline's first invocation loads those (below)."""
    got = imported("timeouts", then=SWEEP)
    assert among(got["modules"], TIMEOUTS_RUN_PATH) == []


def test_the_timeouts_run_path_loads_the_service_on_first_use():
    got = imported(
        "timeouts",
        then="module.run_services()\nfrom interlude.engine.registry import node_type\nassert node_type('modulex.llm')\n",
    )
    # compose() registered the ModuleX node types in that process (lazily: they load at the first lookup)
    assert {"interlude.app.runs", "interlude.engine.run", "interlude.faces.modulex.nodetypes"} <= set(got["modules"])


def test_a_path_matches_the_routes_api_gateway_would_match_it_to():
    """Each route's path with its parameters filled (and with a trailing '/') loads the module that registers it;
    an empty parameter, an extra or a missing segment, or another method loads nothing for it."""
    import re

    from interlude import wiring
    from interlude.api import app

    for r in wiring.ROUTES:
        path = re.sub(r"{\w+}", "p~2Fq", r.path)
        module = app.MODULE_OF[r.operation]
        assert module in app.modules_for(r.method, path), (r.method, path)
        assert module in app.modules_for(r.method, path + "/"), (r.method, path + "/")
    assert app.modules_for("POST", "/runs/r-1/interrupts/gate") == {"run_decisions"}
    assert app.modules_for("DELETE", "/runs/r-1/interrupts/gate") == set()
    assert app.modules_for("POST", "/runs//interrupts/gate") == set()
    assert app.modules_for("POST", "/runs/r-1/interrupts/gate/more") == set()
    assert app.modules_for("POST", "/runs/r-1/interrupts") == set()
    assert app.modules_for("POST", "/runs/r-1/interrupts/gate//") == set()


def test_the_modulex_node_types_load_when_a_modulex_node_is_first_looked_up():
    """compose() registers them lazily: unknown typeIds and the engine's own types load nothing; the first modulex.*
    typeId loads them all, and the list of known typeIds (the unknown-typeId refusal) names them."""
    got = imported(
        "api",
        then="import sys\n"
        "from interlude.engine import registry\n"
        "assert registry.node_type('core.noop') is not None and registry.node_type('nope.x') is None\n"
        "assert not [m for m in sys.modules if m.startswith('interlude.faces')]\n"
        "assert registry.node_type('modulex.transformer') is not None\n"
        "assert registry.is_gate('modulex.interrupt') and not registry.is_gate('modulex.llm')\n"
        "assert 'modulex.conditional' in registry.known_type_ids()\n",
    )
    assert "interlude.faces.modulex.nodetypes" in got["modules"]


# What the run routes (createRun, getRun, poll, cancel) leave to the requests that use it: discovery's
# capabilities (sub-workflows, webhook limits), the SSE routes, the webhook and delivery stores.
NOT_FOR_A_RUN_REQUEST = [
    "interlude.app.subworkflows",
    "interlude.app.actions",
    "interlude.domain.models.webhooks",
    "interlude.app.streams",
    "interlude.store.webhooks",
    "interlude.adapters.subscription_secrets",
    "interlude.store.deliveries",
    "interlude.faces",
    "interlude.domain.models.answers",  # the other route areas' answer models (domain/models/responses.py)
]


def test_a_run_request_loads_the_run_routes_and_not_what_other_requests_use():
    got = imported("api", then="from interlude.api import app\napp.load_routes('POST', '/runs')\n")
    modules = set(got["modules"])
    assert "interlude.api.runs" in modules
    assert among(modules, NOT_FOR_A_RUN_REQUEST) == []


# What the dispatch function's first record loads (every record runs the whole outbox; the handlers that move runs or
# read task items load with the first record that concerns them), and what it must not: the workers behind the
# outbox's queues (callbacks, notifications) and the task routes' body models.
NOT_IN_OUTBOX = [
    "interlude.adapters.notify.worker",
    "interlude.adapters.delivery.worker",
    "interlude.adapters.delivery.pinned_http",
    "interlude.rules.tokens",
    "interlude.domain.models.tasks",
    "interlude.domain.models.responses",
    "interlude.api",
    "jsonschema",
]


def test_the_dispatch_outbox_loads_no_worker_behind_its_queues():
    got = imported("dispatch", then="from interlude.composition import services\nservices().outbox\n")
    modules = set(got["modules"])
    assert {"interlude.adapters.notify.outbox", "interlude.adapters.delivery.outbox", "interlude.adapters.scheduler.outbox"} <= modules
    assert among(modules, NOT_IN_OUTBOX) == []


def test_the_event_data_classes_package_answers_every_name_it_exports():
    """interlude/coldstart.py loads a data class's submodule when the resolver asks the package for it by name; any
    other importer still gets every name the package exports, the same objects as its submodules define."""
    got = imported(
        "api",
        then="from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2, SQSEvent\n"
        "from aws_lambda_powertools.utilities import data_classes\n"
        "from aws_lambda_powertools.utilities.data_classes import sqs_event, api_gateway_proxy_event\n"
        "assert SQSEvent is sqs_event.SQSEvent and APIGatewayProxyEventV2 is api_gateway_proxy_event.APIGatewayProxyEventV2\n"
        "assert all(hasattr(data_classes, n) for n in data_classes.__all__)\n",
    )
    assert "aws_lambda_powertools.utilities.data_classes.code_pipeline_job_event" in got["modules"]


@pytest.mark.parametrize("function", ["api", "stream", "dispatch", "callbacks", "timeouts", "actions", "notify"])
def test_a_function_collects_garbage_again_once_imported(function):
    """The handler keeps the cyclic collector off while it imports and freezes what the import made
    (interlude/coldstart.py): invocations run with the collector on, and what the import made is not walked again."""
    got = imported(
        function,
        then="import gc\nassert gc.isenabled()\nassert gc.get_freeze_count() > 10_000, gc.get_freeze_count()\n",
    )
    assert "interlude.coldstart" in got["modules"]


def test_an_inbox_page_loads_its_own_answers_and_no_other_areas():
    got = imported("api", then="from interlude.api import app\napp.load_routes('GET', '/interrupts')\n")
    modules = set(got["modules"])
    assert {"interlude.api.inbox", "interlude.domain.models.answers.inbox"} <= modules
    answers = sorted(among(modules, ["interlude.domain.models.answers"]))
    assert answers == ["interlude.domain.models.answers", "interlude.domain.models.answers.inbox"]


def test_responses_finds_every_area_answer_by_name():
    """api/contract.py names every answer as `responses.X`; the other areas' models are found in their modules."""
    from interlude.domain.models import responses
    from interlude.domain.models.answers import inbox, subworkflows

    assert responses.Inbox is inbox.Inbox
    assert responses.RunAncestry is subworkflows.RunAncestry
    with pytest.raises(AttributeError):
        _ = responses.NoSuchAnswer


OPENWOP_WORKFLOW_PUT = """
import json, types
from moto import mock_aws
mock_aws().start()
import boto3
from interlude import wiring
from interlude.composition import Services
from interlude.domain.models.requests import CreateKeyRequest
from interlude.store.facade import Store
from interlude.store.provisioning import create_tables
key = Services(Store(*create_tables(boto3.client("dynamodb"), "cold-imports"), boto3.client("dynamodb"))).keys.issue_key(
    "t1", CreateKeyRequest(subjectId="admin", scopes=list(wiring.ALL_SCOPES))
)
definition = {"id": "w1", "name": "w", "version": "1.0", "nodes": [{"id": "n", "typeId": "core.noop"}], "edges": []}
context = types.SimpleNamespace(
    function_name="api", memory_limit_in_mb=256, invoked_function_arn="arn:aws:lambda:us-east-1:0:function:a",
    aws_request_id="r-1",
)
for method, body in (("PUT", json.dumps(definition)), ("GET", None)):
    event = {
        "version": "2.0", "routeKey": "$default", "rawPath": "/workflows/w1", "rawQueryString": "", "body": body,
        "headers": {"authorization": "Bearer " + key["apiKey"], "content-type": "application/json"},
        "requestContext": {"http": {"method": method, "path": "/workflows/w1", "sourceIp": "127.0.0.1"},
                           "requestId": "r-1", "stage": "$default"},
        "isBase64Encoded": False,
    }
    answer = module.lambda_handler(event, context)
    assert answer["statusCode"] in (200, 201), answer
"""


def test_an_openwop_workflow_is_registered_and_read_without_the_modulex_face():
    """PUT and GET /workflows/{id} ask whether the id is a ModuleX workflow's (one read); for an OpenWOP id the
    ModuleX routes and face stay unloaded (tests/integration covers the ModuleX ids on the same path)."""
    got = imported("api", then=OPENWOP_WORKFLOW_PUT)
    modules = set(got["modules"])
    assert "interlude.api.runs" in modules
    assert among(modules, ["interlude.faces", "interlude.api.modulex", "interlude.api.modulex_workflows"]) == []


def test_the_dispatch_outbox_loads_no_engine_run_rules():
    """The outbox's handlers read runs (deadlines, notices, notifications) and move one only on rarer records: the
    first record loads the outbox, not the engine's run rules; a runnable run's advance loads them."""
    got = imported("dispatch", then="from interlude.composition import services\nservices().outbox\n")
    assert among(got["modules"], ENGINE_RUN_RULES) == []
    got = imported("dispatch", then="module.services().lifecycle\n")
    assert "interlude.engine.registry" in got["modules"]


# What an action's message does not use: the directory, delegations and the tenant's decision facts (a resolve's).
NOT_FOR_AN_ACTION = ["interlude.app.delegation", "interlude.app.directory", "interlude.domain.models.principals"]


def test_the_actions_function_loads_no_decision_reading():
    got = imported("actions", then="module.worker()\n")
    assert among(got["modules"], NOT_FOR_AN_ACTION) == []


# What Powertools' batch utility imports from its event data classes (the stream and queue records' modules and what
# they import: `sqs_event` asks the package for `S3Event`, `kinesis_stream_event` imports the CloudWatch Logs event);
# interlude/coldstart.py registers the package so its __init__, which imports about forty, does not run.
BATCH_DATA_CLASSES = {
    "common",
    "shared_functions",
    "dynamo_db_stream_event",
    "kafka_event",
    "kinesis_stream_event",
    "cloud_watch_logs_event",
    "sqs_event",
    "sns_event",
    "s3_event",
    "event_bridge_event",
}
DATA_CLASSES = "aws_lambda_powertools.utilities.data_classes"
WORKERS = ["dispatch", "callbacks", "actions", "notify"]


@pytest.mark.parametrize("function", WORKERS)
def test_a_worker_loads_only_the_event_data_classes_the_batch_utility_uses(function):
    got = imported(function)
    loaded = {m.removeprefix(DATA_CLASSES + ".") for m in got["modules"] if m.startswith(DATA_CLASSES + ".")}
    assert {"sqs_event", "dynamo_db_stream_event"} <= loaded
    assert loaded <= BATCH_DATA_CLASSES, f"functions/{function} loads {sorted(loaded - BATCH_DATA_CLASSES)}"


SHIPPED_NAMES = f"""
import json
import {DATA_CLASSES} as package
print(json.dumps({{n: getattr(v, "__module__", None) for n, v in vars(package).items() if not n.startswith("__")}}))
"""


@pytest.mark.parametrize("function", WORKERS)
def test_a_workers_event_data_classes_package_answers_every_name_powertools_ships_it_with(function):
    """Every name the package has when imported as Powertools ships it (its __init__ run) answers in a worker's process
    too, from the module that defines it: asked of the package, or imported from it."""
    shipped = subprocess.run(
        [sys.executable, "-c", SHIPPED_NAMES], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    names: dict[str, str | None] = json.loads(shipped.strip().splitlines()[-1])
    assert {"SQSEvent", "S3Event", "DynamoDBStreamEvent", "APIGatewayProxyEventV2", "event_source"} <= set(names)
    got = imported(
        function,
        then="import json\n"
        f"from {DATA_CLASSES} import DynamoDBStreamEvent, SQSEvent\n"
        f"from {DATA_CLASSES}.sqs_event import SQSEvent as defined\n"
        "assert SQSEvent is defined\n"
        f"import {DATA_CLASSES} as package\n"
        f"shipped = json.loads({shipped.strip()!r})\n"
        "here = {n: getattr(getattr(package, n), '__module__', None) for n in shipped}\n"
        "assert here == shipped, {n: (here[n], m) for n, m in shipped.items() if here[n] != m}\n",
    )
    assert f"{DATA_CLASSES}.code_pipeline_job_event" in got["modules"]


# Q1: what a stream record never runs. Key checks and the decision rules (the notify outbox reads a raised approval's
# eligible approvers on the first record, but nothing in the function decides), the API's rate limits and the tenant
# settings they read, the task and effect stores (only a task's or an effect route's), the credential-material patterns.
NOT_AT_DISPATCH_IMPORT = [
    "interlude.rules.interrupts.decide",
    "interlude.rules.interrupts.delegation",
    "interlude.rules.interrupts.secrets",
    "interlude.app.limits",
    "interlude.app.tenants",
    "interlude.domain.models.tenants",
]
NOT_FOR_A_STREAM_RECORD = [
    "interlude.rules.interrupts.secrets",
    "interlude.app.limits",
    "interlude.store.tasks",
    "interlude.store.effects",
]


def test_the_dispatch_function_loads_no_key_check_decision_or_limit_rules():
    assert among(imported("dispatch")["modules"], NOT_AT_DISPATCH_IMPORT) == []
    got = imported("dispatch", then="from interlude.composition import services\nservices().outbox\n")
    assert among(got["modules"], NOT_FOR_A_STREAM_RECORD) == []


def test_the_api_checks_a_key_without_the_decision_rules():
    """A key check (rules/auth.py) loads no decision rules; the resolve route loads them and the credential-material
    patterns a resolve uses. The tenant limits every request is admitted by load with the import."""
    modules = imported("api")["modules"]
    assert among(modules, ["interlude.rules.interrupts.decide"]) == []
    assert "interlude.app.limits" in modules
    got = imported("api", then="from interlude.api import app\napp.load_routes('POST', '/runs/r-1/interrupts/gate')\n")
    assert {"interlude.rules.interrupts.decide", "interlude.rules.interrupts.secrets"} <= set(got["modules"])


# What an action's message never runs, at import or with its first message (the worker, the engine's run rules its
# outcome lands through): the API's key and limit rules, the decision rules (a resolve's), the tenant settings' models.
NOT_FOR_AN_ACTIONS_MESSAGE = [
    "interlude.rules.interrupts.decide",
    "interlude.rules.interrupts.secrets",
    "interlude.rules.interrupts.delegation",
    "interlude.app.limits",
    "interlude.app.tenants",
    "interlude.domain.models.tenants",
]


def test_an_actions_message_loads_no_key_limit_or_decision_rules():
    got = imported("actions", then="module.worker()\nfrom interlude.engine import run\nassert run.finish_action\n")
    assert "interlude.engine.run" in got["modules"]
    assert among(got["modules"], NOT_FOR_AN_ACTIONS_MESSAGE) == []


SEEDED_RING = """
from interlude.adapters import keyring_store, secret_values
secret_values._client()
class Seeded:
    def get_secret_value(self, SecretId):
        return {"SecretString": '{"seed": "%s"}' % ("a" * 44)}
assert keyring_store.load_key_ring("ring", client=Seeded()).current_kid == "k0"
"""


def test_a_notify_message_reads_its_key_ring_without_boto3():
    """The key ring is read with the function's own SDK session (adapters/secret_values.py): its first message makes
    no boto3 session and loads neither boto3 nor Powertools' parameter providers (docs/adr/0163)."""
    got = imported("notify", then="module.worker()\n" + SEEDED_RING)
    assert "interlude.adapters.secret_values" in got["modules"]
    assert among(got["modules"], ["boto3", "s3transfer", "aws_lambda_powertools.utilities.parameters"]) == []


# What a function that moves no run never writes (store/transitions.py and store/transactions.py load them, where a
# run moves or an entry is appended): the inbox index and its shards, Idempotency-Key records, the audit log and its canonical JSON.
RUN_WRITERS_ONLY = [
    "interlude.store.inbox",
    "interlude.store.sharded",
    "interlude.store.idempotency",
    "interlude.store.audit",
    "interlude.rules.audit",
    "interlude.domain.audit",
    "rfc8785",
]


@pytest.mark.parametrize("function", ["callbacks", "notify"])
def test_a_function_that_moves_no_run_loads_no_run_writers_store(function):
    got = imported(function, then="module.worker()\n")
    assert among(got["modules"], RUN_WRITERS_ONLY) == []
