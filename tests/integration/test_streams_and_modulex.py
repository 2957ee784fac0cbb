"""The SSE stream and the ModuleX face through the real `api` handler in-process, against moto's DynamoDB:
framing, cursors, mode refusal, terminal close, every refusal's status, and one log seen from both faces."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from interlude import wiring
from interlude.api.idempotency import request_digest
from interlude.app.runs import Runs
from interlude.composition import Services
from interlude.domain.ids import from_wire
from interlude.local import lambda_runtime
from interlude.local.http_gateway import to_event
from interlude.store.facade import Store
from tests.integration.conftest import new_api_key
from tests.support.local_stack import wire
from tests.support.modulex_example import worked_example
from tests.support.moto_world import ENTRIES_TABLE, TABLE

GATE = {
    "nodes": [
        {"id": "draft", "typeId": "core.transform", "config": {"outputs": {"title": "{{inputs.title}}"}}},
        {"id": "review", "typeId": "core.approvalGate", "config": {"title": "Publish {{draft.title}}?"}},
        {"id": "publish", "typeId": "core.noop"},
    ],
    "edges": [
        {"sourceNodeId": "draft", "targetNodeId": "review"},
        {"sourceNodeId": "review", "targetNodeId": "publish"},
    ],
}


@pytest.fixture
def aws(world, monkeypatch):
    # Short bounds: a request on a quiet run ends within a second (the production defaults are 20 s / 0.5 s).
    monkeypatch.setenv("INTERLUDE_STREAM_HOLD_SECONDS", "0.6")
    monkeypatch.setenv("INTERLUDE_STREAM_LINGER_SECONDS", "0.05")
    monkeypatch.setenv("INTERLUDE_STREAM_RETRY_MS", "150")
    return Services(Store(TABLE, ENTRIES_TABLE))


def issue(services: Services, tenant: str | None = None, scopes=wiring.ALL_SCOPES, **extra) -> str:
    return new_api_key(services, extra.pop("subject", "admin"), tenant, scopes, **extra)


@pytest.fixture
def key(aws) -> str:
    return issue(aws)


class Reply:
    def __init__(self, raw: dict[str, Any]) -> None:
        self.status = raw["statusCode"]
        self.headers = {k.lower(): v for k, v in (raw.get("headers") or {}).items()}
        self.text = raw.get("body") or ""

    def json(self) -> Any:
        return json.loads(self.text)

    def frames(self) -> list[dict[str, Any]]:
        """SSE blocks as dicts of their fields (comments under ':'), data JSON-decoded."""
        out = []
        for block in self.text.split("\n\n"):
            if not block.strip():
                continue
            fields: dict[str, Any] = {}
            for line in block.split("\n"):
                name, _, value = line.partition(": ") if not line.startswith(":") else (":", "", line[2:])
                fields[name] = json.loads(value) if name == "data" else value
            out.append(fields)
        return out

    def events(self) -> list[dict[str, Any]]:
        return [f for f in self.frames() if "data" in f]


def call(method: str, path: str, key: str | None, body: Any = None, **headers: str) -> Reply:
    h = {
        "content-type": "application/json",
        "host": "127.0.0.1",
        **{k.replace("_", "-"): v for k, v in headers.items()},
    }
    if key:
        h["authorization"] = f"Bearer {key}"
    raw = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    return Reply(lambda_runtime.invoke("api", to_event(method, path, h, raw, "127.0.0.1")))


def openwop_run(key: str, workflow: dict = GATE) -> str:
    assert call("PUT", "/workflows/gated", key, workflow).status == 201
    created = call("POST", "/runs", key, {"workflowId": "gated", "inputs": {"title": "Hello"}})
    assert created.status == 201, created.text
    return created.json()["runId"]


def modulex_run(key: str, **body: Any) -> str:
    got = call("POST", "/workflows/run", key, {"workflow": worked_example(), "input": {"request": "a refund"}, **body})
    assert got.status == 200, got.text
    return got.json()["run_id"]


# -- OpenWOP stream ----------------------------------------------------------------------------------


def test_frames_carry_sequence_type_and_the_run_event_doc(key):
    run_id = openwop_run(key)
    got = call("GET", f"/runs/{wire(run_id)}/events", key, accept="text/event-stream")
    assert got.status == 200
    assert got.headers["content-type"].startswith("text/event-stream")
    assert got.headers["openwop-version"] == "2.0"
    frames = got.frames()
    assert frames[0] == {":": "interlude run events; streamMode=updates"}
    events = got.events()
    assert [e["event"] for e in events] == [
        "run.started",
        "node.completed",
        "interrupt.requested",
        "approval.requested",
        "node.suspended",
    ]
    for e in events:
        assert e["id"] == str(e["data"]["sequence"])
        assert e["event"] == e["data"]["type"]
        assert e["data"]["runId"] == run_id
    assert frames[-1] == {"retry": "150"}  # the run is not finished: a bounded close with a reconnect hint


def test_debug_mode_carries_every_event_and_updates_leaves_out_node_started(key):
    run_id = openwop_run(key)
    debug = [e["event"] for e in call("GET", f"/runs/{wire(run_id)}/events?streamMode=debug", key).events()]
    assert debug == [
        "run.started",
        "node.started",
        "node.completed",
        "node.started",
        "interrupt.requested",
        "approval.requested",
        "node.suspended",
    ]
    mixed = call("GET", f"/runs/{wire(run_id)}/events?streamMode=updates,debug", key).events()
    assert [(e["event"], e["data"]["type"]) for e in mixed][:2] == [
        ("updates", "run.started"),
        ("debug", "node.started"),
    ]


def test_last_event_id_is_an_exclusive_cursor_and_the_stream_closes_after_the_terminal_event(key):
    run_id = openwop_run(key)
    first = call("GET", f"/runs/{wire(run_id)}/events?streamMode=debug", key).events()
    assert (
        call("POST", f"/runs/{wire(run_id)}/interrupts/review", key, {"resumeValue": {"action": "accept"}}).status
        == 200
    )
    cursor = first[-1]["id"]
    rest = call("GET", f"/runs/{wire(run_id)}/events?streamMode=debug", key, last_event_id=cursor)
    seqs = [int(e["id"]) for e in rest.events()]
    assert seqs[0] == int(cursor) + 1
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert rest.events()[-1]["event"] == "run.completed"
    assert "retry" not in rest.text.split("run.completed", 1)[1]  # closed after the terminal event, no retry hint
    # A cursor at (or past) the end of a finished run: closed at once, without a frame.
    for at in (seqs[-1], 999):
        done = call("GET", f"/runs/{wire(run_id)}/events", key, last_event_id=str(at))
        assert done.status == 200
        assert done.events() == []
        assert "retry:" not in done.text


def test_values_mode_sends_a_snapshot_after_updates_and_first_on_resume(key):
    run_id = openwop_run(key)
    got = call("GET", f"/runs/{wire(run_id)}/events?streamMode=values", key).events()
    assert [e["event"] for e in got] == ["state.snapshot"]
    assert got[0]["data"]["status"] == "waiting-approval"
    assert got[0]["data"]["currentNodeId"] == "review"
    assert got[0]["id"] == "6"
    call("POST", f"/runs/{wire(run_id)}/interrupts/review", key, {"resumeValue": {"action": "accept"}})
    resumed = call("GET", f"/runs/{wire(run_id)}/events?streamMode=values", key, last_event_id="6").events()
    assert [e["data"]["status"] for e in resumed] == ["completed"]


def test_buffer_ms_batches_and_flushes_at_suspension(key):
    run_id = openwop_run(key)
    got = call("GET", f"/runs/{wire(run_id)}/events?bufferMs=250&resumable=true", key).events()
    assert [e["event"] for e in got] == ["batch"]
    assert [d["type"] for d in got[0]["data"]][-1] == "node.suspended"
    assert got[0]["id"] == "6"


@pytest.mark.parametrize("mode", ["messages", "values,updates", "bogus", "updates,,debug", "UPDATES"])
@pytest.mark.parametrize("accept", ["text/event-stream", "application/json"])
def test_an_unserved_stream_mode_is_400_before_content_negotiation(key, mode, accept):
    run_id = openwop_run(key)
    got = call("GET", f"/runs/{wire(run_id)}/events?streamMode={mode}", key, accept=accept)
    assert got.status == 400
    assert got.json()["error"] == "unsupported_stream_mode"
    assert got.json()["details"]["supported"] == ["updates", "debug", "values"]
    assert got.json()["details"]["requested"] == mode


def test_an_unserved_stream_mode_is_repeated_in_its_refusal_only_so_far(key):
    run_id = openwop_run(key)
    asked = "debug," * 1000
    got = call("GET", f"/runs/{wire(run_id)}/events?streamMode={asked}", key)
    assert got.status == 400
    refusal = got.json()
    assert refusal["details"]["requested"] == asked[:40] + "…"
    assert len(got.text) < 600


@pytest.mark.parametrize(
    ("query", "header"),
    [("bufferMs=5001", None), ("bufferMs=x", None), ("", "-1"), ("", "abc"), ("resumable=maybe", None), ("resumable=1", None)],
)
def test_bad_buffer_ms_or_last_event_id_is_a_validation_error(key, query, header):
    run_id = openwop_run(key)
    extra = {"last_event_id": header} if header else {}
    got = call("GET", f"/runs/{wire(run_id)}/events?{query}", key, **extra)
    assert (got.status, got.json()["error"]) == (400, "validation_error")


def test_stream_authorization_comes_first(aws, key, other_tenant):
    run_id = openwop_run(key)
    reader = issue(aws, scopes=["runs:create"])
    assert call("GET", f"/runs/{wire(run_id)}/events", reader).json()["error"] == "forbidden"
    foreign = issue(aws, tenant=other_tenant)
    got = call("GET", f"/runs/{wire(run_id)}/events", foreign, last_event_id="abc")
    assert (got.status, got.json()["error"]) == (403, "id_tenant_mismatch")
    assert call("GET", f"/runs/{wire(run_id)}/events", None).status == 401


def test_create_run_points_events_url_at_the_stream_under_the_configured_base(key, monkeypatch):
    assert call("PUT", "/workflows/gated", key, GATE).status == 201
    created = call("POST", "/runs", key, {"workflowId": "gated"}).json()
    # No PUBLIC_BASE_URL (a bare handler): the domain API Gateway records it served, never a forwarded header.
    assert created["eventsUrl"] == f"https://127.0.0.1/runs/{wire(created['runId'])}/events"
    monkeypatch.setenv("PUBLIC_BASE_URL", "https://interlude.example.com/")
    lambda_runtime.fresh_instances()  # a function reads its environment when it starts: a new instance
    created = call("POST", "/runs", key, {"workflowId": "gated"}, **{"X-Forwarded-Host": "evil.example"}).json()
    assert created["eventsUrl"] == f"https://interlude.example.com/runs/{wire(created['runId'])}/events"


# -- ModuleX face -----------------------------------------------------------------------------------


def test_worked_example_through_the_modulex_face(key):
    created = call("POST", "/workflows/run", key, {"workflow": worked_example(), "input": {"request": "a refund"}})
    body = created.json()
    assert body["status"] == "interrupted"
    assert body["run_id"] == body["thread_id"]
    assert "/" not in body["run_id"]
    assert (body["workflow_source"], body["workflow_name"], body["workflow_version"]) == (
        "request",
        "Approve before sending",
        "1.0.0",
    )
    run_id = body["run_id"]
    listen = call("GET", f"/workflows/listen/{run_id}", key, accept="text/event-stream")
    assert listen.headers["content-type"].startswith("text/event-stream")
    frames = listen.events()
    assert all(set(f) == {"id", "data"} for f in frames[:-1])  # data-only frames: no `event:` line
    kinds = [f["data"]["type"] for f in frames]
    assert kinds == ["metadata", "node_started", "node_update", "node_started", "interrupt", "interrupted"]
    # The bounded close of a waiting run: `interrupted` (the SDKs stop on it), its reconnect hint on that frame, never
    # in a block of its own (modulex-python 1.0 reads a data-less block as one more `message` event with data None).
    assert listen.frames() == frames
    assert set(frames[-1]) == {"retry", "data"}
    assert frames[-1]["data"]["data"]["node_ids"] == ["node_approval"]
    state = call("GET", f"/workflows/state/{run_id}", key).json()
    assert state["next"] == ["node_approval"]
    assert state["metadata"]["status"] == "interrupted"
    assert state["state"]["node_draft"].startswith("Dear customer, about a refund")
    resumed = call("POST", f"/workflows/resume/{run_id}", key, {"run_id": run_id, "resume_value": {"approved": True}})
    assert resumed.json()["status"] == "resumed"
    after = [f["data"]["type"] for f in call("GET", f"/workflows/listen/{run_id}", key, last_event_id="5").events()]
    assert after[:2] == ["resumed", "node_update"]
    assert after[-1] == "done"
    assert "heartbeat" not in after


def test_modulex_errors_are_detail_bodies_with_exact_statuses(aws, key, tenant, other_tenant):
    run_id = modulex_run(key)
    reviewer = issue(aws, scopes=["approvals:respond", "runs:read"], subject="reviewer")
    owner = issue(aws, scopes=["approvals:respond"], subject="owner", roles=["owner"])
    foreign = issue(aws, tenant=other_tenant)
    resume = {"run_id": run_id, "resume_value": {"approved": True}}
    cases = [
        (call("POST", "/workflows/run", None, {"workflow_id": "x"}), 401, "unauthenticated"),
        (call("POST", "/workflows/run", reviewer, {"workflow_id": "x"}), 403, "forbidden"),
        (call("POST", "/workflows/run", key, {"workflow_id": "x"}, x_organization_id="someone-else"), 403, "forbidden"),
        (call("POST", "/workflows/run", key, {"workflow_id": "nope"}), 400, "validation_error"),
        (call("POST", "/workflows/run", key, {"workflow_id": "a", "workflow": {}}), 400, "validation_error"),
        (call("POST", "/workflows/run", key, {"workflow": {"nodes": []}}), 422, "interlude.workflow_unprocessable"),
        (call("POST", f"/workflows/resume/{run_id}", reviewer, resume), 403, "forbidden"),
        (call("POST", f"/workflows/resume/{run_id}", key, {"run_id": run_id}), 400, "validation_error"),
        (call("POST", f"/workflows/resume/{run_id}", key, {"resume_value": 1}), 400, "validation_error"),
        (call("POST", f"/workflows/resume/{run_id}", key, {**resume, "workflow_id": "other"}), 400, "validation_error"),
        (call("POST", f"/workflows/resume/{run_id}", foreign, resume), 404, "not_found"),
        (call("GET", f"/workflows/listen/{run_id}", foreign), 404, "not_found"),
        (call("GET", f"/workflows/state/{run_id}", foreign), 404, "not_found"),
        (call("POST", f"/workflows/cancel/{run_id}", foreign), 404, "not_found"),
        (call("GET", f"/workflows/listen/{run_id}", key, x_organization_id=other_tenant), 404, "not_found"),
        (call("GET", f"/workflows/listen/{tenant}~2FAAAAAAAAAAAAAAAAAAAAAAAA", key), 404, "not_found"),
        (call("GET", "/workflows/state/not-a-run-id", key), 404, "not_found"),
    ]
    for got, status, code in cases:
        assert (got.status, got.headers.get("x-interlude-error")) == (status, code), got.text
        assert set(got.json()) == {"detail"}
    # No existence leak: another organisation's run and a run that does not exist answer alike.
    assert cases[11][0].json() == cases[15][0].json()
    # An owner-role key may resume; so may the admin key (keys:admin).
    assert call("POST", f"/workflows/resume/{run_id}", owner, resume).status == 200
    again = call("POST", f"/workflows/resume/{run_id}", key, resume)
    assert (again.status, again.headers["x-interlude-error"]) == (400, "interlude.run_state_invalid")
    cancel_done = call("POST", f"/workflows/cancel/{run_id}", key)
    assert (cancel_done.status, cancel_done.headers["x-interlude-error"]) == (400, "interlude.run_state_invalid")


def test_unknown_node_types_answer_422_with_a_fastapi_detail_list(key):
    workflow = worked_example()
    workflow["nodes"][0] = {"id": "node_draft", "type": "vision", "x": 0, "y": 0}
    got = call("POST", "/workflows/run", key, {"workflow": workflow})
    assert got.status == 422
    detail = got.json()["detail"]
    assert detail[0]["loc"] == ["body", "workflow", "nodes", 0, "type"]
    assert "has unknown type 'vision'" in detail[0]["msg"]


def test_cancel_and_cancelled_frame(key):
    run_id = modulex_run(key)
    got = call("POST", f"/workflows/cancel/{run_id}", key, {"reason": "changed my mind"})
    assert got.json() == {
        "status": "cancellation_requested",
        "run_id": run_id,
        "reason": "changed my mind",
        "message": "Run cancelled",
    }
    last = call("GET", f"/workflows/listen/{run_id}", key).events()[-1]["data"]
    assert last["type"] == "cancelled"
    assert last["data"] == {"reason": "changed my mind"}


def test_rejected_openwop_gate_is_an_error_frame_on_the_modulex_face(key):
    run_id = openwop_run(key)
    call("POST", f"/runs/{wire(run_id)}/interrupts/review", key, {"resumeValue": {"action": "reject"}})
    last = call("GET", f"/workflows/listen/{wire(run_id)}", key).events()[-1]["data"]
    assert last["type"] == "error"
    assert last["error_type"] == "approval_rejected"
    assert last["data"]["node_id"] == "review"


def test_a_run_started_on_openwop_is_observed_and_resumed_on_modulex(key):
    run_id = openwop_run(key)
    frames = [f["data"] for f in call("GET", f"/workflows/listen/{wire(run_id)}", key).events()]
    interrupt = next(f for f in frames if f["type"] == "interrupt")["data"]
    assert interrupt["message"] == "Publish Hello?"
    assert interrupt["resume_schema"]["required"] == ["action"]
    resumed = call(
        "POST", f"/workflows/resume/{wire(run_id)}", key, {"run_id": wire(run_id), "resume_value": {"action": "accept"}}
    )
    assert resumed.status == 200, resumed.text
    openwop = call("GET", f"/runs/{wire(run_id)}/events?streamMode=debug", key, last_event_id="6").events()
    assert [e["event"] for e in openwop][0] == "interrupt.resolved"
    assert openwop[-1]["event"] == "run.completed"
    assert openwop[0]["data"]["payload"]["resumeValue"]["action"] == "accept"


def test_a_run_started_on_modulex_is_observed_and_resolved_on_openwop(key):
    run_id = modulex_run(key)
    events = call("GET", f"/runs/{run_id}/events", key).events()
    requested = next(e["data"] for e in events if e["event"] == "interrupt.requested")
    node_id = requested["nodeId"]
    assert node_id == "node~5Fapproval"
    got = call("POST", f"/runs/{run_id}/interrupts/{node_id}", key, {"resumeValue": {"approved": False, "notes": "no"}})
    assert got.json()["status"] == "completed"
    frames = [f["data"] for f in call("GET", f"/workflows/listen/{run_id}", key).events()]
    assert [f["node"] for f in frames if f["type"] == "node_update"][-1] == "node_end_rejected"
    assert frames[-1]["data"]["final_state"]["node_end_rejected"] == {"notes": "no"}


def test_a_modulex_run_and_its_resume_keep_their_numbers_as_written_for_the_pages(key, aws):
    started = json.dumps({"workflow": worked_example()})[:-1] + ', "input": {"request": "a refund", "amount": 1.50}}'
    got = call("POST", "/workflows/run", key, started.encode())
    assert got.status == 200, got.text
    run_id = got.json()["run_id"]
    resumed = f'{{"run_id": "{run_id}", "resume_value": {{"approved": true, "notes": "ok", "fee": 2.50}}}}'
    assert call("POST", f"/workflows/resume/{run_id}", key, resumed.encode()).status == 200
    state, _ = aws.store.get_run(from_wire(run_id))
    assert state.writtenNumbers == {"1.5": "1.50", "2.5": "2.50"}
    assert state.inputs["amount"] == 1.5


def test_modulex_routes_do_not_shadow_openwop_workflow_routes(key, tenant):
    assert call("PUT", "/workflows/state", key, GATE).status == 201  # a workflow may be called "state"
    assert call("GET", "/workflows/state", key).json()["workflowId"] == "state"
    assert call("PUT", "/workflows/run", key, GATE).status == 201
    assert call("GET", "/workflows/run", key).json()["workflowId"] == "run"
    # ... while the three-segment ModuleX routes stay ModuleX.
    assert set(call("GET", f"/workflows/state/{tenant}~2FAAAAAAAAAAAAAAAAAAAAAAAA", key).json()) == {"detail"}


def test_a_retried_modulex_run_with_an_idempotency_key_starts_one_run(key):
    body = {"workflow": worked_example(), "input": {"request": "once"}}
    idem = "modulex-run-0123456789abcdef"
    first = call("POST", "/workflows/run", key, body, idempotency_key=idem)
    second = call("POST", "/workflows/run", key, body, idempotency_key=idem)
    assert first.status == second.status == 200
    assert first.json()["run_id"] == second.json()["run_id"]
    assert second.headers["openwop-idempotent-replay"] == "true"


def test_an_unexpected_failure_answers_in_the_face_of_its_route(aws, key, monkeypatch):
    run_id = modulex_run(key)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Runs, "load_run", broken)
    # A ModuleX route: {detail}, the code in X-Interlude-Error, nothing of the bug.
    got = call("GET", f"/workflows/state/{run_id}", key)
    assert (got.status, got.headers.get("x-interlude-error")) == (500, "internal_error")
    assert got.json() == {"detail": "internal error"}
    assert "openwop-version" not in got.headers
    # An OpenWOP route: the envelope, with the request's correlation id.
    openwop = call("GET", f"/runs/{wire(run_id)}", key)
    assert openwop.status == 500
    assert openwop.headers["openwop-version"] == "2.0"
    body = openwop.json()
    assert (body["error"], body["message"], set(body["details"])) == (
        "internal_error",
        "internal error",
        {"correlationId"},
    )


def test_idempotency_refusals_on_modulex_routes_are_detail_bodies(aws, key, tenant):
    body = {"workflow": worked_example(), "input": {"request": "once"}}
    idem = "modulex-refusal-0123456789abcdef"
    assert call("POST", "/workflows/run", key, body, idempotency_key=idem).status == 200
    cases = [
        # The same key with another body.
        (
            call("POST", "/workflows/run", key, {**body, "input": {}}, idempotency_key=idem),
            409,
            "idempotency_key_mismatch",
        ),
        (call("POST", "/workflows/run", key, body, idempotency_key="short"), 400, "idempotency_key_invalid"),
        # No credential: refused before the key is looked at, with the challenge.
        (call("POST", "/workflows/run", None, body, idempotency_key=idem), 401, "unauthenticated"),
    ]
    for got, status, code in cases:
        assert (got.status, got.headers.get("x-interlude-error")) == (status, code), got.text
        assert set(got.json()) == {"detail"}
        assert "openwop-idempotent-replay" not in got.headers
    assert cases[2][0].headers["www-authenticate"] == 'Bearer realm="interlude"'
    # The first request still running (its claim held): 409 in flight, with when to retry.
    held = "modulex-in-flight-0123456789abcdef"
    raw = json.dumps(body).encode()
    digest = request_digest("modulexRun", {}, raw)
    aws.idempotency.claim(tenant, "modulexRun", held, digest, now_ms=int(time.time() * 1000), lease_ms=60_000)
    in_flight = call("POST", "/workflows/run", key, body, idempotency_key=held)
    assert (in_flight.status, in_flight.headers.get("x-interlude-error")) == (409, "idempotency_in_flight")
    assert in_flight.json() == {"detail": "a request with this Idempotency-Key is still in progress"}
    assert in_flight.headers["retry-after"] == "1"
