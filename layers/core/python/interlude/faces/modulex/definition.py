"""A ModuleX workflow definition, and its translation onto the engine's OpenWOP definition.

    {"metadata": {...}, "config": {...}, "state_schema": {...},
     "nodes": [{"id", "type", "name", "x", "y", "<type>_config": {...}}, ...],
     "edges": [{"source", "target"}, ...], "entry_point": "__start__"}

Interlude runs three ModuleX node types — `interrupt`, `conditional` (expression routing) and `transformer` —
as the engine types `modulex.interrupt`, `modulex.conditional` and `modulex.transformer`. The others
(llm, agent, tool, knowledge, guardrails, function) need models, tools or code Interlude does not host: they
become tasks on named queues that the tenant's workers take (`modulex.llm` ..., faces/modulex/tasks.py).

Node ids run on the engine in escaped form (references.engine_id); the translated definition keeps the
ModuleX ids, types and names under metadata["interlude.modulex"] so frames can speak ModuleX again.
Edges become `any_success` edges: a ModuleX node runs whenever an edge into it fires (LangGraph's rule),
and a conditional's branches not taken are skipped by the engine's routing. A guardrails node's `failure_route`
is an edge of its own: the node's failure (its worker fails the task) goes there and nowhere else, and its
success path never enters it (`_failure_edges`).
"""


import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from interlude.domain.ids import AUTHOR_ID_RE, INLINE_WORKFLOW_PREFIX, MODULEX_METADATA
from interlude.domain.models import new_list
from interlude.faces.modulex import nodes, tasks
from interlude.faces.modulex.fields import PYDANTIC_TYPE, JsonBoolean, JsonInteger, JsonNumber, JsonType, is_json
from interlude.faces.modulex.references import engine_id

START_NAMES = frozenset({"__start__", "START", "start"})
START_NODE = "__start__"
META_KEY = MODULEX_METADATA
# The engine id of the node a guardrails node's failure goes through on its way to the failure_route: `~~` is
# never in an escaped ModuleX id (references.engine_id writes `~` as `~7E`), so no author's node can take it.
FAILURE_NODE = "~~on-failure.{index}"


class Invalid(Exception):
    """The definition cannot run; `errors` are FastAPI-style {loc, msg, type} items."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__("; ".join(e["msg"] for e in errors))
        self.errors = errors


def _err(loc: list[Any], msg: str, kind: str = "value_error") -> dict[str, Any]:
    return {"loc": loc, "msg": msg, "type": kind}


class _Problems(list[dict[str, Any]]):
    """The problems found in a definition, each placed under the body field the caller sent it in (`workflow` for an
    inline run, `workflow_schema` for a deployed workflow), so its `loc` and its message name that field as made."""

    def __init__(self, field: str) -> None:
        super().__init__()
        self.field = field

    def at(self, *path: Any) -> list[Any]:
        return ["body", self.field, *path]


class _Tolerant(BaseModel):
    # ModuleX's own models ignore fields they do not know (builder UIs add canvas fields), and so do we.
    model_config = ConfigDict(extra="ignore", defer_build=True)


class MxNode(_Tolerant):
    id: str = Field(min_length=1, max_length=100)
    type: str
    name: str | None = None
    description: str | None = None
    enabled: JsonBoolean = True
    x: JsonNumber
    y: JsonNumber
    retry_config: dict[str, Any] | None = None
    interrupt_config: dict[str, Any] | None = None
    conditional_config: dict[str, Any] | None = None
    transformer_config: dict[str, Any] | None = None
    # Task nodes (faces/modulex/tasks.py): handed to the tenant's workers.
    llm_config: dict[str, Any] | None = None
    tool_config: dict[str, Any] | None = None
    agent_config: dict[str, Any] | None = None
    function_config: dict[str, Any] | None = None
    knowledge_config: dict[str, Any] | None = None
    guardrails_config: dict[str, Any] | None = None


class MxEdge(_Tolerant):
    source: str
    target: str
    condition: dict[str, Any] | None = None
    route_map: dict[str, Any] = Field(default_factory=dict)


class MxMetadata(_Tolerant):
    name: str | None = None
    description: str | None = None
    version: str | None = None


class MxConfig(_Tolerant):
    recursion_limit: JsonInteger | None = Field(default=None, ge=1, le=10000)


class MxWorkflow(_Tolerant):
    metadata: MxMetadata = Field(default_factory=MxMetadata)
    config: MxConfig = Field(default_factory=MxConfig)
    nodes: list[MxNode] = Field(min_length=1, max_length=500)
    edges: list[MxEdge] = Field(default_factory=new_list, max_length=2000)
    entry_point: str = "__start__"


def _pydantic_errors(exc: ValidationError, prefix: list[Any]) -> list[dict[str, Any]]:
    """Each problem at its place, its message naming that place too (modulex-python shows the messages alone)."""
    out = []
    for e in exc.errors(include_url=False, include_input=False):
        loc = prefix + list(e["loc"])
        out.append(_err(loc, f"{'.'.join(str(part) for part in loc[1:])}: {e['msg']}", e["type"]))
    return out


class _Unrunnable(Exception):
    """A node config Interlude cannot run, found before its model validates it."""

    def __init__(self, loc: list[Any], msg: str, kind: str = "value_error") -> None:
        super().__init__(msg)
        self.loc = loc
        self.msg = msg
        self.kind = kind


def _check_json_types(node: MxNode, where: list[str], raw: dict[str, Any], types: dict[str, JsonType]) -> None:
    """Refuse a field of `raw` (at `where` in the node) whose value is not of the JSON type `types` gives it: the
    engine's models would read `"30"` as 30 seconds and `true` as one attempt."""
    for name, kind in types.items():
        value = raw.get(name)
        if value is not None and not is_json(value, kind):
            path = ".".join([*where, name])
            raise _Unrunnable([*where, name], f"node {node.id!r}: {path} must be a JSON {kind}", PYDANTIC_TYPE[kind])


def _interrupt_config(node: MxNode, raw: dict[str, Any]) -> dict[str, Any]:
    # output_key is a deprecated no-op: the resume value always lands under the node id.
    config = {k: v for k, v in raw.items() if k in ("message", "resume_schema", "examples", "data_keys", "field_labels", "audience")}
    if config.get("message") is None:
        config.pop("message", None)
    return config


_BRANCH_KEYS = ("id", "name", "source", "operator", "value", "condition", "target")


def _conditional_config(node: MxNode, raw: dict[str, Any]) -> dict[str, Any]:
    kind = raw.get("condition_type")
    if kind is None:
        kind = "expression"
    if kind != "expression":
        raise _Unrunnable(
            ["conditional_config", "condition_type"],
            f"conditional node {node.id!r} uses condition_type {kind!r}; Interlude runs expression "
            "conditionals only (no LLM routing, no loops)",
        )
    # Each field as sent, its type left to the model to check: `routes: []` is no routes, never read as `{}`.
    config: dict[str, Any] = {"condition_type": "expression"}
    fields = ("expression_branches", "routes", "expression", "default_target")
    config.update({k: raw[k] for k in fields if raw.get(k) is not None})
    if isinstance(config.get("expression_branches"), list):
        config["expression_branches"] = [
            {k: v for k, v in b.items() if k in _BRANCH_KEYS} if isinstance(b, dict) else b
            for b in config["expression_branches"]
        ]
    return config


def _transformer_config(node: MxNode, raw: dict[str, Any]) -> dict[str, Any]:
    config = {k: v for k, v in raw.items() if k in ("source", "operations") and v is not None}
    if isinstance(config.get("operations"), list):  # anything else is left to the model to refuse
        config["operations"] = [
            {k: v for k, v in op.items() if k in ("type", "field", "params") and v is not None}
            if isinstance(op, dict)
            else op
            for op in config["operations"]
        ]
    return config


def _task_config(node: MxNode, raw: dict[str, Any]) -> dict[str, Any]:
    _check_json_types(node, [f"{node.type}_config"], raw, tasks.LIMIT_TYPES)
    _check_json_types(node, ["retry_config"], node.retry_config or {}, tasks.RETRY_TYPES)
    return tasks.task_config(raw, node.retry_config)


def _no_problems(_: Any) -> list[str]:
    return []


class _RunnableType(NamedTuple):
    """How one ModuleX node type becomes an engine node."""

    # Its <type>_config, keeping the fields the engine's model knows; raises _Unrunnable.
    shape: Callable[[MxNode, dict[str, Any]], dict[str, Any]]
    model: type[BaseModel]
    # Problems its validated config would only show at run time.
    check: Callable[[Any], list[str]]
    config_required: bool


_RUNNABLE: dict[str, _RunnableType] = {
    "interrupt": _RunnableType(_interrupt_config, nodes.InterruptConfig, _no_problems, config_required=True),
    "conditional": _RunnableType(
        _conditional_config, nodes.ConditionalConfig, nodes.check_conditional, config_required=True
    ),
    "transformer": _RunnableType(
        _transformer_config, nodes.TransformerConfig, nodes.check_transformer, config_required=False
    ),
    **{
        t: _RunnableType(
            _task_config,
            tasks.ModulexTaskConfig,
            tasks.agent_problems if t == "agent" else _no_problems,
            config_required=False,
        )
        for t in tasks.TASK_NODE_TYPES
    },
}
RUNNABLE_TYPES = tuple(_RUNNABLE)


def _unrunnable_type(node: MxNode) -> str:
    return f"node {node.id!r} has unknown type {node.type!r}; known: {', '.join(RUNNABLE_TYPES)}"


def _node_config(i: int, node: MxNode, errors: _Problems) -> tuple[str, dict[str, Any]] | None:
    """(engine typeId, engine config) for a runnable node; records errors otherwise."""
    loc = errors.at("nodes", i)
    runnable = _RUNNABLE.get(node.type)
    if runnable is None:
        errors.append(_err(loc + ["type"], _unrunnable_type(node)))
        return None
    config_field = f"{node.type}_config"
    raw = getattr(node, config_field)
    try:
        if raw is None and runnable.config_required:
            raise _Unrunnable([config_field], f"{node.type} node {node.id!r} has no {config_field}")
        parsed = runnable.model.model_validate(runnable.shape(node, raw or {}))
    except _Unrunnable as exc:
        errors.append(_err(loc + exc.loc, exc.msg, exc.kind))
        return None
    except ValidationError as exc:
        errors.extend(_pydantic_errors(exc, loc + [config_field]))
        return None
    problems = runnable.check(parsed)
    errors.extend(_err(loc + [config_field], f"node {node.id!r}: {problem}") for problem in problems)
    return None if problems else (f"modulex.{node.type}", parsed.model_dump(mode="json", exclude_none=True))


def _parse(raw: Any, field: str) -> MxWorkflow:
    if not isinstance(raw, dict):
        raise Invalid([_err(["body", field], f"{field} must be an object")])
    try:
        return MxWorkflow.model_validate(raw)
    except ValidationError as exc:
        raise Invalid(_pydantic_errors(exc, ["body", field])) from None


def _check_ids(ids: list[str], errors: _Problems) -> None:
    for i, node_id in enumerate(ids):
        loc = errors.at("nodes", i, "id")
        if node_id in START_NAMES or node_id in nodes.END_TARGETS:
            errors.append(_err(loc, f"node id {node_id!r} is reserved"))
        elif not AUTHOR_ID_RE.fullmatch(engine_id(node_id)):
            errors.append(_err(loc, f"node id {node_id!r} is too long"))
        if ids.count(node_id) > 1 and ids.index(node_id) == i:
            errors.append(_err(loc, f"duplicate node id {node_id!r}"))


@dataclass
class _Translated:
    """The engine nodes of a definition, and what the edges and frames need to know about them."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    # engine node id -> {"id", "type", "name"} in ModuleX terms, for frames.
    info: dict[str, dict[str, Any]] = field(default_factory=dict)
    # ModuleX id of each conditional -> the nodes its branches route to.
    conditionals: dict[str, list[str]] = field(default_factory=dict)
    # ModuleX id of each guardrails node with a failure_route -> that route (a node id or an END target).
    failure_routes: dict[str, str] = field(default_factory=dict)


def _engine_node(node: MxNode, type_id: str, config: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": engine_id(node.id), "typeId": type_id, "config": config}
    if node.name:
        entry["name"] = node.name
    if node.description:
        entry["description"] = node.description
    return entry


def _routes(i: int, node: MxNode, config: dict[str, Any], known: set[str], errors: _Problems) -> list[str]:
    """A conditional's targets; records those that name no node."""
    targets = nodes.ConditionalConfig.model_validate(config).targets()
    errors.extend(
        _err(
            errors.at("nodes", i, "conditional_config"),
            f"conditional node {node.id!r} routes to {target!r}, which names no node",
        )
        for target in targets
        if target not in known and target not in nodes.END_TARGETS
    )
    return targets


def _translate_nodes(mx_nodes: list[MxNode], known: set[str], errors: _Problems) -> _Translated:
    out = _Translated()
    for i, node in enumerate(mx_nodes):
        # A disabled node passes the run through without doing anything.
        got = _node_config(i, node, errors) if node.enabled else ("core.noop", {})
        if got is None:
            continue
        type_id, config = got
        out.nodes.append(_engine_node(node, type_id, config))
        out.info[engine_id(node.id)] = {"id": node.id, "type": node.type, "name": node.name or node.id}
        if type_id == "modulex.conditional":
            out.conditionals[node.id] = _routes(i, node, config, known, errors)
        route = _failure_route(i, node, known, errors)
        if route is not None:
            out.failure_routes[node.id] = route
    return out


def _failure_route(i: int, node: MxNode, known: set[str], errors: _Problems) -> str | None:
    """A guardrails node's failure_route (also of a disabled one, so its target stays reachable only through it);
    records one that names no node. `on_failure` travels to the worker as written: a failure_route is followed
    whenever it is set."""
    route = (node.guardrails_config or {}).get("failure_route") if node.type == "guardrails" else None
    if route is None:
        return None
    loc = errors.at("nodes", i, "guardrails_config", "failure_route")
    if not isinstance(route, str) or (route not in known and route not in nodes.END_TARGETS):
        errors.append(_err(loc, f"guardrails node {node.id!r} routes failures to {route!r}, which names no node"))
        return None
    return route


def _edge_problems(
    loc: list[Any], edge: MxEdge, known: set[str], conditionals: dict[str, list[str]]
) -> list[dict[str, Any]]:
    """What is wrong with an edge between two nodes."""
    problems = [
        _err(loc + [end], f"edge {end} {getattr(edge, end)!r} names no node")
        for end in ("source", "target")
        if getattr(edge, end) not in known
    ]
    if edge.source in conditionals and edge.target not in conditionals[edge.source]:
        problems.append(
            _err(
                loc,
                f"edge {edge.source!r} -> {edge.target!r} leaves a conditional node for a node none of its "
                "branches names; a conditional's routes live in its conditional_config",
            )
        )
    return problems


def _edges(
    mx_edges: list[MxEdge], known: set[str], conditionals: dict[str, list[str]], errors: _Problems
) -> tuple[list[tuple[str, str]], list[str]]:
    """(edges between nodes, including each conditional's routes; nodes the start edges enter)."""
    edges: list[tuple[str, str]] = []
    entries: list[str] = []
    for j, edge in enumerate(mx_edges):
        loc = errors.at("edges", j)
        if edge.condition or edge.route_map:
            errors.append(_err(loc, "conditions on edges are not supported; route with a conditional node"))
        elif edge.target in nodes.END_TARGETS:
            pass  # a node no edge leaves ends its branch already
        elif edge.source not in START_NAMES:
            errors.extend(_edge_problems(loc, edge, known, conditionals))
            edges.append((edge.source, edge.target))
        elif edge.target in known:
            entries.append(edge.target)
        else:
            errors.append(_err(loc + ["target"], f"edge target {edge.target!r} names no node"))
    for source, targets in conditionals.items():
        edges.extend((source, t) for t in targets if t not in nodes.END_TARGETS)
    return list(dict.fromkeys(e for e in edges if e[0] in known and e[1] in known)), entries


def _entries(
    entry_point: str,
    ids: list[str],
    edges: list[tuple[str, str]],
    entries: list[str],
    errors: _Problems,
    failure_routes: dict[str, str],
) -> list[str]:
    """The nodes a run starts at: the entry point, else the start edges' targets, else nodes no edge enters (a
    failure_route enters its target). Records an entry point that names no node and nodes nothing reaches."""
    if entry_point not in START_NAMES:
        if entry_point not in ids:
            errors.append(_err(errors.at("entry_point"), f"entry_point {entry_point!r} names no node"))
        entries = [entry_point]
    targets_of_edges = {t for _, t in edges} | set(failure_routes.values())
    if not entries:
        entries = [n for n in ids if n not in targets_of_edges]
        if not entries and not errors:
            errors.append(_err(errors.at("edges"), "every node has an incoming edge, so none can start"))
    errors.extend(
        _err(errors.at("nodes", i), f"node {node_id!r} is unreachable: no edge leads to it")
        for i, node_id in enumerate(ids)
        if node_id not in targets_of_edges and node_id not in entries
    )
    return entries


def _edge(source: str, target: str, rule: str = "any_success") -> dict[str, Any]:
    return {"sourceNodeId": source, "targetNodeId": target, "triggerRule": rule}


def _failure_edges(failure_routes: dict[str, str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(nodes, edges) that send a guardrails node's failure, and only its failure, to its failure_route.

    The guardrails node gets an `any_failed` edge (the engine then propagates its failure instead of failing the
    run) into a pass-through node of its own, which enters the route with `any_success`, as every ModuleX edge does
    (a node's incoming edges share one trigger rule). On success the pass-through node is skipped, and with it a
    route nothing else enters; on failure the node's other successors are skipped."""
    out_nodes: list[dict[str, Any]] = []
    out_edges: list[dict[str, Any]] = []
    for index, (source, route) in enumerate(failure_routes.items()):
        through = FAILURE_NODE.format(index=index)
        out_nodes.append({"id": through, "typeId": "core.noop", "name": f"on failure of {source}"})
        out_edges.append(_edge(engine_id(source), through, "any_failed"))
        if route not in nodes.END_TARGETS:
            out_edges.append(_edge(through, engine_id(route)))
    return out_nodes, out_edges


def _engine_graph(
    translated: list[dict[str, Any]], edges: list[tuple[str, str]], entries: list[str], failure_routes: dict[str, str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(engine nodes, engine edges), with a start node when the entries are not where the engine starts."""
    failure_nodes, failure_edges = _failure_edges(failure_routes)
    translated = [*translated, *failure_nodes]
    out_edges = [*(_edge(engine_id(s), engine_id(t)) for s, t in edges), *failure_edges]
    targets_of_edges = {t for _, t in edges} | set(failure_routes.values())
    if not any(e in targets_of_edges for e in entries) and len(set(entries)) <= 1:
        return translated, out_edges
    # The engine starts at nodes no edge enters; a looped-back (or several) entry needs a start node.
    start = engine_id(START_NODE)
    start_edges = [_edge(start, engine_id(e)) for e in dict.fromkeys(entries)]
    return [{"id": start, "typeId": "core.noop", "name": "start"}, *translated], out_edges + start_edges


def _definition(
    wf: MxWorkflow, engine_nodes: list[dict[str, Any]], engine_edges: list[dict[str, Any]], info: dict[str, Any]
) -> dict[str, Any]:
    meta: dict[str, Any] = {"nodes": info}
    if wf.metadata.name:
        meta["name"] = wf.metadata.name
    if wf.metadata.version:
        meta["version"] = wf.metadata.version
    if wf.config.recursion_limit:
        meta["recursionLimit"] = wf.config.recursion_limit
    definition: dict[str, Any] = {"nodes": engine_nodes, "edges": engine_edges, "metadata": {META_KEY: meta}}
    if wf.metadata.name:
        definition["name"] = wf.metadata.name
    if wf.metadata.description:
        definition["description"] = wf.metadata.description
    return definition


def translate(raw: Any, field: str = "workflow") -> dict[str, Any]:
    """The OpenWOP workflow definition (a dict, ready for WorkflowDefinition) of a ModuleX definition; `field`: the
    body field the caller sent it in, which each refusal's `loc` and message name."""
    wf = _parse(raw, field)
    errors = _Problems(field)
    ids = [n.id for n in wf.nodes]
    known = set(ids)
    _check_ids(ids, errors)
    translated = _translate_nodes(wf.nodes, known, errors)
    edges, start_targets = _edges(wf.edges, known, translated.conditionals, errors)
    entries = _entries(wf.entry_point, ids, edges, start_targets, errors, translated.failure_routes)
    if errors:
        raise Invalid(errors)
    engine_nodes, engine_edges = _engine_graph(translated.nodes, edges, entries, translated.failure_routes)
    return _definition(wf, engine_nodes, engine_edges, translated.info)


def content_id(definition: dict[str, Any]) -> str:
    """The workflow id an inline definition is stored under: its content, so the same definition is stored once."""
    canonical = json.dumps(definition, sort_keys=True, separators=(",", ":"), allow_nan=False)
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    return f"{INLINE_WORKFLOW_PREFIX}{digest[:40]}"
