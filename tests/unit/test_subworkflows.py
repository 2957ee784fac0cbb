"""core.subWorkflow in the engine: a visit names its child and waits, the child's outcome lands on it once, its
limits fail the node instead of leaving a run that cannot finish, and a cascaded cancel says so
(engine/subworkflows.py, engine/run.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from interlude.domain.models.run import RunState
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine import run as engine
from interlude.engine.actions import ACTION_REQUESTED
from interlude.engine.subworkflows import (
    CHILD_REQUESTED,
    MAX_CHILDREN_PER_RUN,
    MAX_DEPTH,
    MAX_MAPPING_ENTRIES,
    child_outcome,
    child_run_id,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
RUN_ID = "t1/runrunrunrunrunrun01"


def definition(**config: object) -> WorkflowDefinition:
    sub = {"workflowId": "child", "inputs": {"order": "{{inputs.orderId}}"}, **config}
    sub = {k: v for k, v in sub.items() if v is not None}
    return WorkflowDefinition.model_validate(
        {
            "id": "w",
            "name": "w",
            "nodes": [
                {"id": "spawn", "typeId": "core.subWorkflow", "config": sub},
                {"id": "after", "typeId": "core.transform", "config": {"outputs": {"got": "{{spawn.answer}}"}}},
            ],
            "edges": [{"id": "e", "sourceNodeId": "spawn", "targetNodeId": "after"}],
            "variables": [{"name": "orderId", "type": "string"}, {"name": "note", "type": "string"}],
        }
    )


def state(**fields: object) -> RunState:
    return RunState.model_validate(
        {
            "runId": RUN_ID,
            "tenant": "t1",
            "workflowId": "w",
            "workflowVersion": 1,
            "owner": {},
            "inputs": {"orderId": "o-1"},
            "createdAt": "2026-12-01T12:00:00Z",
            **fields,
        }
    )


def test_a_visit_names_its_child_and_waits_running():
    t = engine.start(state(), definition(), NOW)

    child = child_run_id(RUN_ID, "spawn", 1)
    assert child.startswith("t1/")
    assert (t.state.status, t.state.nodes["spawn"].status) == ("running", "running")
    assert t.state.children == [child]
    assert t.state.actions["spawn"].request == {"workflowId": "child", "inputs": {"order": "o-1"}}
    requested = [e for e in t.events if e.type == CHILD_REQUESTED]
    assert [e.payload for e in requested] == [{"nodeId": "spawn", "childRunId": child, "visit": 1, "workflowId": "child"}]
    # The actions worker is never asked to run a child.
    assert not [e for e in t.events if e.type == ACTION_REQUESTED]


def test_the_childs_outputs_become_the_nodes_output_once():
    waiting = engine.start(state(), definition(), NOW).state
    child = state(runId=child_run_id(RUN_ID, "spawn", 1), status="completed", outputs={"gate": {"answer": 42}})
    outcome = child_outcome(child)
    assert outcome == {"output": {"gate": {"answer": 42}}}

    done = engine.finish_action(waiting, definition(), "spawn", 1, {"output": {"answer": 42}}, NOW)
    assert done.state.status == "completed"
    assert done.state.outputs["after"] == {"got": 42}
    again = engine.finish_action(done.state, definition(), "spawn", 1, {"output": {"answer": 0}}, NOW)
    assert again.events == []


def test_a_failed_or_cancelled_child_fails_the_node_with_its_code():
    waiting = engine.start(state(), definition(), NOW).state
    failed = state(status="failed", error={"code": "approval_rejected", "message": "no"})
    outcome = child_outcome(failed)
    assert outcome["error"]["code"] == "interlude.subworkflow_failed"
    assert outcome["error"]["details"]["childError"] == {"code": "approval_rejected", "message": "no"}
    landed = engine.finish_action(waiting, definition(), "spawn", 1, outcome, NOW)
    assert (landed.state.status, landed.state.error["code"]) == ("failed", "interlude.subworkflow_failed")

    assert child_outcome(state(status="cancelled"))["error"]["code"] == "interlude.subworkflow_cancelled"


def test_a_child_past_the_depth_limit_fails_its_node_instead_of_waiting():
    t = engine.start(state(depth=MAX_DEPTH), definition(), NOW)

    assert t.state.status == "failed"
    assert t.state.error["code"] == "interlude.subworkflow_limit_exceeded"
    assert t.state.actions == {}
    assert t.state.children == []


def test_a_run_past_its_children_limit_fails_the_node():
    full = [f"t1/child{i:020d}" for i in range(MAX_CHILDREN_PER_RUN)]
    t = engine.start(state(children=full), definition(), NOW)

    assert t.state.error["code"] == "interlude.subworkflow_limit_exceeded"
    assert t.state.error["details"]["budget"] == "children"


def problems_of(**config: object) -> dict[str, str]:
    return {p["path"]: p["message"] for p in engine.check_config(definition(**config))}


def test_a_detached_child_is_refused_at_registration():
    problems = problems_of(propagateCancellation=False)

    assert "detached child" in problems["nodes/0/config/propagateCancellation"]


def test_input_mapping_seeds_the_child_from_parent_variables_and_leaves_unset_ones_to_the_child():
    t = engine.start(state(), definition(inputs={}, inputMapping={"order": "orderId", "note": "note"}), NOW)

    # `note` is declared by the parent but the run was not given it: the child's own default stays in force.
    assert t.state.actions["spawn"].request["inputs"] == {"order": "o-1"}


def test_mappings_are_checked_at_registration():
    undeclared = problems_of(inputs={}, inputMapping={"order": "nosuch"})
    assert "'nosuch' is not a variable this workflow declares" in undeclared["nodes/0/config/inputMapping/order"]
    twice = problems_of(inputMapping={"order": "orderId"})
    assert "set by both `inputs` and `inputMapping`" in twice["nodes/0/config"]
    for bad_path in ("", "gate.", ".x", "a..b"):
        assert "nodes/0/config/outputMapping" in problems_of(outputMapping={"answer": bad_path})
    assert "nodes/0/config/inputMapping" in problems_of(inputs={}, inputMapping={"": "orderId"})
    too_many = {f"k{i}": "gate.x" for i in range(MAX_MAPPING_ENTRIES + 1)}
    assert "nodes/0/config/outputMapping" in problems_of(outputMapping=too_many)
    assert problems_of(inputs={}, inputMapping={"order": "orderId"}, outputMapping={"answer": "gate.x"}) == {}


def test_output_mapping_makes_the_nodes_output_exactly_the_mapped_fields():
    mapped = definition(outputMapping={"answer": "answer.order", "who": "gate.by.0"})
    waiting = engine.start(state(), mapped, NOW).state
    assert waiting.actions["spawn"].request["outputMapping"] == {"answer": "answer.order", "who": "gate.by.0"}
    child = {"answer": {"order": "o-1", "internal": 1}, "gate": {"by": ["ann"]}}

    done = engine.finish_action(waiting, mapped, "spawn", 1, {"output": child}, NOW)

    assert done.state.outputs["spawn"] == {"answer": "o-1", "who": "ann"}
    assert done.state.outputs["after"] == {"got": "o-1"}


def test_a_mapped_path_the_child_lacks_fails_the_node_with_its_own_code():
    mapped = definition(outputMapping={"answer": "answer.order", "x": "nowhere.y"})
    waiting = engine.start(state(), mapped, NOW).state

    landed = engine.finish_action(waiting, mapped, "spawn", 1, {"output": {"answer": {"order": "o-1"}}}, NOW)

    assert landed.state.status == "failed"
    assert landed.state.error["code"] == "interlude.subworkflow_output_missing"
    assert landed.state.error["details"] == {"missing": ["nowhere.y"]}
    # A failed child stays a failed child: the mapping never hides its error.
    failed = engine.finish_action(waiting, mapped, "spawn", 1, child_outcome(state(status="failed")), NOW)
    assert failed.state.error["code"] == "interlude.subworkflow_failed"


def test_a_cascaded_cancel_names_its_parent_and_a_direct_one_does_not():
    waiting = engine.start(state(), definition(), NOW).state

    cascaded = engine.cancel(waiting, NOW, None, None, parent_run_id="t1/parent")
    payload = [e.payload for e in cascaded.events if e.type == "run.cancelled"][0]
    assert (payload["reason"], payload["parentRunId"]) == ("parent-cancelled", "t1/parent")
    assert cascaded.state.actions == {}

    direct = engine.cancel(waiting, NOW, "operator", "admin")
    assert "parentRunId" not in [e.payload for e in direct.events if e.type == "run.cancelled"][0]


# The two discovery families as capabilities.schema.json (OpenWOP v2, @046ac537) closes them, reduced to the
# members Interlude writes: a capability record (status/since/until/witness, `until` required unless stable) with
# subWorkflow's one facet, and multiAgent's executionModel (version required) with crossHostCausation.
RECORD = {
    "status": {"enum": ["stable", "experimental", "deprecated"]},
    "since": {"type": "string", "pattern": r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$"},
    "until": {"type": "string", "pattern": r"^((0|[1-9][0-9]*)\.(0|[1-9][0-9]*)|\d{4}-\d{2}-\d{2})$"},
    "witness": {"enum": ["witnessable-unaided", "witnessable-gated", "seam-gated", "claims-check", "negative-existence"]},
}
UNTIL_UNLESS_STABLE = [
    {"if": {"properties": {"status": {"const": "stable"}}}, "then": {"not": {"required": ["until"]}}},
    {"if": {"properties": {"status": {"enum": ["experimental", "deprecated"]}}}, "then": {"required": ["until"]}},
]
FAMILIES = {
    "subWorkflow": {
        "type": "object",
        "additionalProperties": False,
        "required": ["status", "since", "witness"],
        "properties": {**RECORD, "inputMapping": {"type": "boolean"}},
        "allOf": UNTIL_UNLESS_STABLE,
    },
    "multiAgent": {
        "type": "object",
        "additionalProperties": False,
        "required": ["status", "since", "witness"],
        "properties": {
            **RECORD,
            "executionModel": {
                "type": "object",
                "required": ["version"],
                "properties": {
                    "version": {"type": "integer", "minimum": 1, "maximum": 6},
                    "crossHostCausation": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "hostId": {"type": "string", "minLength": 1},
                            "ancestryEndpointSupported": {"type": "boolean"},
                        },
                    },
                },
            },
        },
        "allOf": UNTIL_UNLESS_STABLE,
    },
}


def test_the_advertised_families_fit_the_discovery_schema(monkeypatch):
    from jsonschema import Draft202012Validator

    from interlude.app.subworkflows import HOST_ID, SUBWORKFLOW_CAPABILITY, ancestry_capability
    from interlude.config import settings

    monkeypatch.setenv("TABLE_NAME", "t")

    monkeypatch.setenv("ENTRIES_TABLE_NAME", "t-entries")
    settings.cache_clear()
    multi_agent = ancestry_capability()
    assert multi_agent is not None
    for name, record in (("subWorkflow", SUBWORKFLOW_CAPABILITY), ("multiAgent", multi_agent)):
        assert list(Draft202012Validator(FAMILIES[name]).iter_errors(record)) == [], name
    # The suite reads crossHostCausation only at version >= 3; the hostId is the one ancestry answers name.
    assert multi_agent["executionModel"]["version"] >= 3
    assert multi_agent["executionModel"]["crossHostCausation"] == {"hostId": HOST_ID, "ancestryEndpointSupported": True}
    monkeypatch.setenv("INTERLUDE_ANCESTRY_ENDPOINT", "off")
    settings.cache_clear()
    assert ancestry_capability() is None
    settings.cache_clear()
