"""An OpenWOP workflow definition, in the shape of shared/openwop/fixtures/*.json (closed at PUT /workflows/{id}: an
unknown field is refused there; a stored version read by any release keeps what that release does not know)."""


from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator

from interlude.domain.ids import AUTHOR_ID, MODULEX_METADATA, workflow_display_name
from interlude.domain.models import FrozenStored, new_list

TriggerRule = Literal["all_success", "any_success", "all_complete", "none_failed", "any_failed"]
FAILURE_ADMITTING_RULES: frozenset[str] = frozenset({"all_complete", "any_failed"})

AuthorId = Field(pattern=AUTHOR_ID)


class Position(FrozenStored):
    x: float
    y: float


class Node(FrozenStored):
    id: str = AuthorId
    typeId: str = Field(min_length=1, max_length=128)
    name: str | None = None
    description: str | None = None
    position: Position | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    # Input bindings: {"delayMs": {"type": "variable", "variableName": "delayMs"}} or literals.
    inputs: dict[str, Any] = Field(default_factory=dict)


ConditionType = Literal["expression", "equals", "notEquals", "contains", "regex", "truthy", "falsy"]


class EdgeCondition(FrozenStored):
    """OpenWOP's EdgeCondition (workflow-definition.schema.json): when the edge carries its source's outcome on.
    What each type means, and what registration refuses: engine/conditions.py."""

    type: ConditionType | None = None
    # A path into the source's outcome: `action`, `refineFeedback.scope`, `output.total`, `status`.
    left: str | None = Field(default=None, min_length=1, max_length=256)
    right: Any = None
    expression: str | None = None

    @property
    def kind(self) -> str | None:
        """The type, or `expression` when only an expression is given."""
        return self.type or ("expression" if self.expression is not None else None)


class Edge(FrozenStored):
    id: str | None = None
    sourceNodeId: str = AuthorId
    targetNodeId: str = AuthorId
    sourceOutput: str | None = None
    targetInput: str | None = None
    condition: EdgeCondition | None = None
    label: str | None = None
    triggerRule: TriggerRule = "all_success"

    @property
    def named(self) -> str:
        """How an error names the edge: its id, and where it goes."""
        ends = f"{self.sourceNodeId} -> {self.targetNodeId}"
        return f"edge {self.id!r} ({ends})" if self.id else f"edge {ends}"


class Variable(FrozenStored):
    """A declared input of the workflow: createRun refuses a run whose `inputs` lack a required one or hold a value
    outside its `type` or `schema` (a JSON Schema, draft 2020-12), so no gate is ever shown an unfilled `{{…}}`."""

    name: str = Field(min_length=1, max_length=128)
    type: Literal["string", "number", "integer", "boolean", "object", "array"] | None = None
    description: str | None = None
    required: bool = False
    defaultValue: Any = None
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")

    @field_validator("json_schema")
    @classmethod
    def _a_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            from jsonschema import Draft202012Validator
            from jsonschema.exceptions import SchemaError

            try:
                Draft202012Validator.check_schema(value)
            except SchemaError as exc:
                raise ValueError(f"schema is not a valid JSON Schema: {exc.message}") from None
        return value


class Trigger(FrozenStored):
    id: str
    type: str
    enabled: bool = True
    config: dict[str, Any] = Field(default_factory=dict)


class WorkflowDefinition(FrozenStored):
    id: str | None = Field(default=None, pattern=AUTHOR_ID)
    name: str | None = None
    version: str | None = None
    description: str | None = None
    nodes: list[Node] = Field(min_length=1, max_length=500)
    edges: list[Edge] = Field(default_factory=new_list, max_length=2000)
    triggers: list[Trigger] = Field(default_factory=new_list)
    variables: list[Variable] = Field(default_factory=new_list)
    channels: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)

    @field_validator("nodes")
    @classmethod
    def _unique_node_ids(cls, nodes: list[Node]) -> list[Node]:
        seen: set[str] = set()
        for node in nodes:
            if node.id in seen:
                raise ValueError(f"duplicate node id {node.id!r}")
            seen.add(node.id)
        return nodes

    def edge_problems(self) -> list[dict[str, str]]:
        """Edges that join unknown nodes, or disagree on a node's trigger rule, with the path of each."""
        ids = {n.id for n in self.nodes}
        rules: dict[str, str] = {}
        problems = []
        for i, edge in enumerate(self.edges):
            for end in ("sourceNodeId", "targetNodeId"):
                if getattr(edge, end) not in ids:
                    problems.append({"path": f"edges/{i}/{end}", "message": f"names no node: {getattr(edge, end)!r}"})
            # One trigger rule per node: edges into a node must agree, or the rule would be ambiguous.
            known = rules.setdefault(edge.targetNodeId, edge.triggerRule)
            if known != edge.triggerRule:
                problems.append(
                    {
                        "path": f"edges/{i}/triggerRule",
                        "message": f"edge into {edge.targetNodeId!r} says {edge.triggerRule!r} but another edge into it "
                        f"says {known!r}; a node has one trigger rule",
                    }
                )
        return problems

    def node(self, node_id: str) -> Node:
        return self._index()[node_id]

    def _index(self) -> dict[str, Node]:
        index = self.__dict__.get("_node_index")
        if index is None:
            index = {n.id: n for n in self.nodes}
            self.__dict__["_node_index"] = index
        return index

    def author_id(self, node_id: str) -> str:
        """The id the workflow's author wrote for a node: a ModuleX node runs under an escaped id (`node~5Fdraft`) and
        its definition keeps the author's (`node_draft`); any other node's id is the author's."""
        nodes = (self.metadata.get(MODULEX_METADATA) or {}).get("nodes")
        entry = nodes.get(node_id) if isinstance(nodes, dict) else None
        return str(entry["id"]) if isinstance(entry, dict) and entry.get("id") else node_id

    def engine_node_id(self, node_id: str) -> str:
        """The node a caller names, as the engine runs it: one of the definition's ids as it is, a ModuleX node's id
        as its author wrote it (`node_draft`, issue 28 item 3) as its escaped id; anything else unchanged."""
        if node_id in self._index():
            return node_id
        nodes = (self.metadata.get(MODULEX_METADATA) or {}).get("nodes")
        if not isinstance(nodes, dict):
            return node_id
        return next((k for k, v in nodes.items() if isinstance(v, dict) and v.get("id") == node_id), node_id)

    def step_name(self, node_id: str) -> str:
        """What a person calls a step: its name, else the id its author wrote."""
        node = self._index().get(node_id)
        return node.name if node is not None and node.name else self.author_id(node_id)

    def display_name(self, workflow_id: str) -> str | None:
        return workflow_display_name(self.name, workflow_id)

    def own_run_options(self) -> dict[str, Any]:
        """The run options the definition gives its runs, each taken where a run's request gives none, on either face
        (run_configurable): a ModuleX definition's `config.recursion_limit`, which its translation keeps as
        `recursionLimit` (at most the engine's ceiling: its model refuses more); none for an OpenWOP definition."""
        limit = (self.metadata.get(MODULEX_METADATA) or {}).get("recursionLimit")
        return {} if limit is None else {"recursionLimit": limit}

    def run_configurable(self, requested: dict[str, Any] | None) -> dict[str, Any] | None:
        """The configurable a run of this definition takes: `requested` (None when the run's request or its parent
        gives none) with the definition's own run options where it gives none."""
        return under_request(requested, self.own_run_options())

    def incoming(self, node_id: str) -> list[Edge]:
        return [e for e in self.edges if e.targetNodeId == node_id]

    def outgoing(self, node_id: str) -> list[Edge]:
        return [e for e in self.edges if e.sourceNodeId == node_id]

    def trigger_rule(self, node_id: str) -> str | None:
        edges = self.incoming(node_id)
        return edges[0].triggerRule if edges else None

    def roots(self) -> list[str]:
        targets = {e.targetNodeId for e in self.edges}
        return [n.id for n in self.nodes if n.id not in targets]


def under_request(configurable: dict[str, Any] | None, own: Mapping[str, Any]) -> dict[str, Any] | None:
    """A request's configurable with the run options its workflow gives its runs (`own`) where the request gives none:
    the request's own options win."""
    if not own:
        return configurable
    given = configurable or {"version": 1}
    return {**given, "run": {**own, **(given.get("run") or {})}}
