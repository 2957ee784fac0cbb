"""A ModuleX workflow definition, and its translation onto the engine's OpenWOP definition.

    {"metadata": {...}, "config": {...}, "state_schema": {...},
     "nodes": [{"id", "type", "name", "x", "y", "<type>_config": {...}}, ...],
     "edges": [{"source", "target"}, ...], "entry_point": "__start__"}

Interlude runs three ModuleX node types — `interrupt`, `conditional` (expression routing) and `transformer` —
as the engine types `modulex.interrupt`, `modulex.conditional` and `modulex.transformer`. The others
(llm, agent, tool, knowledge, guardrails, function) need models, tools or code Interlude does not host,
and are refused at validation with a message that says so.

Node ids run on the engine in escaped form (references.engine_id); the translated definition keeps the
ModuleX ids, types and names under metadata["interlude.modulex"] so frames can speak ModuleX again.
Edges become `any_success` edges: a ModuleX node runs whenever an edge into it fires (LangGraph's rule),
and a conditional's branches not taken are skipped by the engine's routing.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from interlude.domain.ids import AUTHOR_ID_RE
from interlude.faces.modulex import nodes
from interlude.faces.modulex.references import engine_id

RUNNABLE_TYPES = ("interrupt", "conditional", "transformer")
REFUSED_TYPES = ("llm", "agent", "tool", "knowledge", "guardrails", "function")
START_NAMES = frozenset({"__start__", "START", "start"})
START_NODE = "__start__"
META_KEY = "interlude.modulex"


class Invalid(Exception):
    """The definition cannot run; `errors` are FastAPI-style {loc, msg, type} items."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__("; ".join(e["msg"] for e in errors))
        self.errors = errors


def _err(loc: list[Any], msg: str, kind: str = "value_error") -> dict[str, Any]:
    return {"loc": loc, "msg": msg, "type": kind}


class _Tolerant(BaseModel):
    # ModuleX's own models ignore fields they do not know (builder UIs add canvas fields), and so do we.
    model_config = ConfigDict(extra="ignore")


class MxNode(_Tolerant):
    id: str = Field(min_length=1, max_length=100)
    type: str
    name: str | None = None
    description: str | None = None
    enabled: bool = True
    x: float
    y: float
    retry_config: dict[str, Any] | None = None
    interrupt_config: dict[str, Any] | None = None
    conditional_config: dict[str, Any] | None = None
    transformer_config: dict[str, Any] | None = None


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
    recursion_limit: int | None = Field(default=None, ge=1, le=10000)


class MxWorkflow(_Tolerant):
    metadata: MxMetadata = Field(default_factory=MxMetadata)
    config: MxConfig = Field(default_factory=MxConfig)
    nodes: list[MxNode] = Field(min_length=1, max_length=500)
    edges: list[MxEdge] = Field(default_factory=list, max_length=2000)
    entry_point: str = "__start__"


def _pydantic_errors(exc: ValidationError, prefix: list[Any]) -> list[dict[str, Any]]:
    return [
        _err(prefix + list(e["loc"]), e["msg"], e["type"]) for e in exc.errors(include_url=False, include_input=False)
    ]


def _node_config(i: int, node: MxNode, errors: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
    """(engine typeId, engine config) for a runnable node; records errors otherwise."""
    loc: list[Any] = ["body", "workflow", "nodes", i]
    if node.type in REFUSED_TYPES:
        errors.append(
            _err(
                loc + ["type"],
                f"node {node.id!r} is a {node.type!r} node, which Interlude does not run: Interlude runs only "
                f"{', '.join(RUNNABLE_TYPES)} nodes (no models, tools, knowledge bases or code)",
            )
        )
        return None
    if node.type not in RUNNABLE_TYPES:
        errors.append(_err(loc + ["type"], f"node {node.id!r} has unknown type {node.type!r}"))
        return None
    raw = getattr(node, f"{node.type}_config")
    if node.type == "interrupt":
        if raw is None:
            errors.append(_err(loc + ["interrupt_config"], f"interrupt node {node.id!r} has no interrupt_config"))
            return None
        # output_key is a deprecated no-op: the resume value always lands under the node id.
        config = {k: v for k, v in raw.items() if k in ("message", "resume_schema", "examples", "data_keys")}
        if config.get("message") is None:
            config.pop("message", None)
        model: type[BaseModel] = nodes.InterruptConfig
    elif node.type == "conditional":
        if raw is None:
            errors.append(_err(loc + ["conditional_config"], f"conditional node {node.id!r} has no conditional_config"))
            return None
        kind = raw.get("condition_type") or "expression"
        if kind != "expression":
            errors.append(
                _err(
                    loc + ["conditional_config", "condition_type"],
                    f"conditional node {node.id!r} uses condition_type {kind!r}; Interlude runs expression "
                    "conditionals only (no LLM routing, no loops)",
                )
            )
            return None
        branch_keys = ("id", "name", "source", "operator", "value", "condition", "target")
        config = {
            "condition_type": "expression",
            "expression_branches": [
                {k: v for k, v in b.items() if k in branch_keys} if isinstance(b, dict) else b
                for b in raw.get("expression_branches") or []
            ],
            "routes": raw.get("routes") or {},
        }
        for key in ("expression", "default_target"):
            if raw.get(key) is not None:
                config[key] = raw[key]
        model = nodes.ConditionalConfig
    else:
        config = {k: v for k, v in (raw or {}).items() if k in ("source", "operations") and v is not None}
        config["operations"] = [
            {k: v for k, v in op.items() if k in ("type", "field", "params") and v is not None}
            if isinstance(op, dict)
            else op
            for op in config.get("operations") or []
        ]
        model = nodes.TransformerConfig
    try:
        parsed = model.model_validate(config)
    except ValidationError as exc:
        errors.extend(_pydantic_errors(exc, loc + [f"{node.type}_config"]))
        return None
    problems: list[str] = []
    if isinstance(parsed, nodes.ConditionalConfig):
        problems = nodes.check_conditional(parsed)
    elif isinstance(parsed, nodes.TransformerConfig):
        problems = nodes.check_transformer(parsed)
    for problem in problems:
        errors.append(_err(loc + [f"{node.type}_config"], f"node {node.id!r}: {problem}"))
    return (f"modulex.{node.type}", parsed.model_dump(mode="json", exclude_none=True)) if not problems else None


def translate(raw: Any) -> dict[str, Any]:
    """The OpenWOP workflow definition (a dict, ready for WorkflowDefinition) of a ModuleX definition."""
    if not isinstance(raw, dict):
        raise Invalid([_err(["body", "workflow"], "workflow must be an object")])
    try:
        wf = MxWorkflow.model_validate(raw)
    except ValidationError as exc:
        raise Invalid(_pydantic_errors(exc, ["body", "workflow"])) from None
    errors: list[dict[str, Any]] = []
    ids = [n.id for n in wf.nodes]
    known = set(ids)
    for i, node in enumerate(wf.nodes):
        if node.id in START_NAMES or node.id in nodes.END_TARGETS:
            errors.append(_err(["body", "workflow", "nodes", i, "id"], f"node id {node.id!r} is reserved"))
        elif not AUTHOR_ID_RE.match(engine_id(node.id)):
            errors.append(_err(["body", "workflow", "nodes", i, "id"], f"node id {node.id!r} is too long"))
        if ids.count(node.id) > 1 and ids.index(node.id) == i:
            errors.append(_err(["body", "workflow", "nodes", i, "id"], f"duplicate node id {node.id!r}"))

    translated: list[dict[str, Any]] = []
    info: dict[str, dict[str, Any]] = {}
    conditionals: dict[str, list[str]] = {}
    for i, node in enumerate(wf.nodes):
        if not node.enabled:
            # A disabled node passes the run through without doing anything.
            type_id, config = "core.noop", {}
        else:
            got = _node_config(i, node, errors)
            if got is None:
                continue
            type_id, config = got
        entry: dict[str, Any] = {"id": engine_id(node.id), "typeId": type_id, "config": config}
        if node.name:
            entry["name"] = node.name
        if node.description:
            entry["description"] = node.description
        translated.append(entry)
        info[engine_id(node.id)] = {"id": node.id, "type": node.type, "name": node.name or node.id}
        if type_id == "modulex.conditional":
            targets = nodes.ConditionalConfig.model_validate(config).targets()
            conditionals[node.id] = targets
            for target in targets:
                if target not in known and target not in nodes.END_TARGETS:
                    errors.append(
                        _err(
                            ["body", "workflow", "nodes", i, "conditional_config"],
                            f"conditional node {node.id!r} routes to {target!r}, which names no node",
                        )
                    )

    edges: list[tuple[str, str]] = []
    entries: list[str] = []
    for j, edge in enumerate(wf.edges):
        loc: list[Any] = ["body", "workflow", "edges", j]
        if edge.condition or edge.route_map:
            errors.append(_err(loc, "conditions on edges are not supported; route with a conditional node"))
            continue
        if edge.target in nodes.END_TARGETS:
            continue
        if edge.source in START_NAMES:
            if edge.target in known:
                entries.append(edge.target)
            else:
                errors.append(_err(loc + ["target"], f"edge target {edge.target!r} names no node"))
            continue
        for end in ("source", "target"):
            if getattr(edge, end) not in known:
                errors.append(_err(loc + [end], f"edge {end} {getattr(edge, end)!r} names no node"))
        if edge.source in conditionals and edge.target not in conditionals[edge.source]:
            errors.append(
                _err(
                    loc,
                    f"edge {edge.source!r} -> {edge.target!r} leaves a conditional node for a node none of its "
                    "branches names; a conditional's routes live in its conditional_config",
                )
            )
        edges.append((edge.source, edge.target))
    for source, targets in conditionals.items():
        edges.extend((source, t) for t in targets if t not in nodes.END_TARGETS)
    edges = list(dict.fromkeys(e for e in edges if e[0] in known and e[1] in known))

    if wf.entry_point not in START_NAMES:
        if wf.entry_point not in known:
            errors.append(_err(["body", "workflow", "entry_point"], f"entry_point {wf.entry_point!r} names no node"))
        entries = [wf.entry_point]
    targets_of_edges = {t for _, t in edges}
    if not entries:
        entries = [n for n in ids if n not in targets_of_edges]
        if not entries and not errors:
            errors.append(_err(["body", "workflow", "edges"], "every node has an incoming edge, so none can start"))
    for i, node_id in enumerate(ids):
        if node_id not in targets_of_edges and node_id not in entries:
            errors.append(
                _err(["body", "workflow", "nodes", i], f"node {node_id!r} is unreachable: no edge leads to it")
            )
    if errors:
        raise Invalid(errors)

    out_edges = [
        {"sourceNodeId": engine_id(s), "targetNodeId": engine_id(t), "triggerRule": "any_success"} for s, t in edges
    ]
    if any(e in targets_of_edges for e in entries) or len(set(entries)) > 1:
        # The engine starts at nodes no edge enters; a looped-back (or several) entry needs a start node.
        start = engine_id(START_NODE)
        translated.insert(0, {"id": start, "typeId": "core.noop", "name": "start"})
        out_edges += [
            {"sourceNodeId": start, "targetNodeId": engine_id(e), "triggerRule": "any_success"}
            for e in dict.fromkeys(entries)
        ]
    meta: dict[str, Any] = {"nodes": info}
    if wf.metadata.name:
        meta["name"] = wf.metadata.name
    if wf.metadata.version:
        meta["version"] = wf.metadata.version
    if wf.config.recursion_limit:
        meta["recursionLimit"] = wf.config.recursion_limit
    definition: dict[str, Any] = {"nodes": translated, "edges": out_edges, "metadata": {META_KEY: meta}}
    if wf.metadata.name:
        definition["name"] = wf.metadata.name
    if wf.metadata.description:
        definition["description"] = wf.metadata.description
    return definition


def content_id(definition: dict[str, Any]) -> str:
    """The workflow id an inline definition is stored under: its content, so the same definition is stored once."""
    digest = hashlib.sha256(json.dumps(definition, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return f"modulex-inline-{digest[:40]}"
