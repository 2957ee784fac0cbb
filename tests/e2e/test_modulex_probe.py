"""A hostile pass over the ModuleX face and its run stream on the real local stack (the real handlers behind a real
HTTP server on 127.0.0.1, over moto), against the ModuleX Interrupt node contract, by three attackers:

* a ModuleX client that follows the contract loosely (`modulex-python`, raw HTTP): resume bodies the contract refuses,
  field by field (wrong types, missing and extra fields, huge values, deep nesting), a thread that is not the run's,
  that never existed or is another organisation's, a run that is not (or no longer) interrupted, refusals that are
  `{detail}` with the contract's status on every route (a wrong media type, a number no peer reads, an
  Idempotency-Key reused for another body included), never the OpenWOP envelope and never a 500;
* a workflow author who controls node configs and `{{node.field}}` templates: references to missing nodes and
  fields, non-string values, values that hold `{{…}}` themselves (never expanded twice), unicode, nested paths and
  list indexes, a rendered message past its limit;
* a client that races and reconnects: resumes and cancels sent at once (one wins, every other gets the answer a late
  one gets: 400), a resume sent again with its Idempotency-Key (answered again, not refused), the listen stream read
  by a standard SSE parser (httpx-sse, what the SDK uses), resumed with `Last-Event-ID` (nothing lost, nothing
  repeated; a cursor past the end), followed while the run ends, of another organisation's run, and a client that
  opens a listen and never reads (the stream's bounds end it; other requests are answered meanwhile); on the live
  WebSocket stream, a message nested past any document and a subscription to another organisation's run.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import uuid
from typing import Any

import httpx
import pytest
import requests
from httpx_sse import connect_sse
from modulex._exceptions import BadRequestError

from tests.support.concurrency import race
from tests.support.local_stack import Api, running_stack, tenant_admin_key
from tests.support.modulex_example import node
from tests.support.modulex_sdk import SHORT_STREAM_BOUNDS, sdk

DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("modulex-probe"), SHORT_STREAM_BOUNDS) as info:
        yield info


@pytest.fixture(scope="module")
def api(stack) -> Api:
    return Api.of(stack)


@pytest.fixture(scope="module")
def stranger(stack) -> Api:
    name = f"mxprobe-{uuid.uuid4().hex[:8]}"
    return Api(stack["baseUrl"], tenant_admin_key(stack, name), name)


def template(node_id: str, x: int, text: str) -> dict[str, Any]:
    return node(node_id, "transformer", x, operations=[{"type": "template", "params": {"template": text}}])


def gated(message: str, before: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """An inline definition: the nodes `before` in a chain, then an interrupt asking `message`, then a last step."""
    nodes = [*(before or []), node("node_ask", "interrupt", 500, message=message), template("node_after", 900, "ok")]
    ids = [n["id"] for n in nodes]
    return {
        "metadata": {"name": f"probe {uuid.uuid4().hex[:6]}", "version": "1.0.0"},
        "nodes": nodes,
        "edges": [{"source": a, "target": b} for a, b in zip(ids, ids[1:], strict=False)],
    }


def start(api: Api, workflow: dict[str, Any], inputs: dict[str, Any] | None = None) -> requests.Response:
    return api.call(
        "POST", "/workflows/run", {"workflow": workflow, "input": inputs or {}}, **{"X-Organization-ID": api.tenant}
    )


def started(api: Api, workflow: dict[str, Any], inputs: dict[str, Any] | None = None) -> str:
    got = start(api, workflow, inputs)
    assert got.status_code == 200, got.text
    return str(got.json()["run_id"])


def listen(api: Api, run_id: str, last: int | None = None) -> list[Any]:
    """One listen, parsed by httpx-sse (the SDK's own parser): every server-sent event of the response."""
    headers = {"Authorization": f"Bearer {api.api_key}"}
    if last is not None:
        headers["Last-Event-ID"] = str(last)
    url = f"{api.base_url}/workflows/listen/{run_id}"
    with httpx.Client(timeout=30) as client, connect_sse(client, "GET", url, headers=headers) as source:
        assert source.response.status_code == 200, source.response.read()
        assert source.response.headers["content-type"].startswith("text/event-stream")
        return list(source.iter_sse())


def typed(events: list[Any]) -> list[str]:
    return [json.loads(e.data)["type"] for e in events]


def interrupt_of(api: Api, run_id: str) -> dict[str, Any]:
    """The interrupt frame's payload, once the run waits on it."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        for event in listen(api, run_id):
            data = json.loads(event.data)
            if data["type"] == "interrupt":
                return dict(data["data"])
    raise AssertionError(f"no interrupt frame on {run_id}")


def resume(api: Api, thread_id: str, body: Any, **headers: str) -> requests.Response:
    return api.call("POST", f"/workflows/resume/{thread_id}", body, **headers)


def refused(reply: requests.Response, status: int) -> str:
    """The ModuleX refusal's code: `{detail}` (never the OpenWOP envelope) with the status the contract gives."""
    assert reply.status_code == status, (reply.status_code, reply.text)
    assert set(reply.json()) == {"detail"}, reply.text
    assert reply.json()["detail"], reply.text
    return reply.headers["X-Interlude-Error"]


# -- resume: bodies the contract refuses, threads that are not the run's ------------------------------------------


def test_resume_refuses_each_malformed_field_as_the_contract_answers(api):
    run_id = started(api, gated("Go on?"))
    interrupt_of(api, run_id)
    good = {"run_id": run_id, "resume_value": {"ok": True}}
    cases: list[tuple[Any, int]] = [
        ([good], 400),  # not an object
        ("resume", 400),
        ({"run_id": run_id}, 400),  # resume_value missing
        ({"run_id": run_id, "resume_value": None}, 400),  # None is no resume value (LangGraph's rule)
        ({"resume_value": {"ok": True}}, 400),  # run_id missing
        ({**good, "run_id": 42}, 404),  # names no run
        ({**good, "run_id": ["a"]}, 404),
        ({**good, "run_id": "x" * 100_000}, 404),
        ({**good, "workflow_id": "w", "workflow": {}}, 400),  # mutually exclusive
        ({**good, "workflow_id": 7}, 422),  # a workflow_id is a string
        ({**good, "workflow_id": "another-workflow"}, 400),
        ({**good, "workflow": "not a definition"}, 422),
        ({**good, "workflow": {"nodes": "none"}}, 422),
        ({**good, "workflow": gated("Another question?")}, 400),  # a definition other than the run's
        ({**good, "resume_value": "v" * 70_000}, 413),  # just past the 64 KiB a value may hold
        ({**good, "resume_value": "v" * 1_500_000}, 413),
    ]
    for body, status in cases:
        refused(resume(api, run_id, body), status)
    deep: Any = {"ok": True}
    for _ in range(200):
        deep = {"d": deep}
    refused(resume(api, run_id, {**good, "resume_value": deep}), 400)
    refused(resume(api, run_id, '{"run_id": "' + run_id + '", "resume_value": '), 400)  # not JSON
    refused(resume(api, run_id, '{"run_id": "a", "run_id": "b", "resume_value": 1}'), 400)  # a key twice
    refused(resume(api, run_id, '{"run_id": "' + run_id + '", "resume_value": NaN}'), 400)
    # A field the contract does not give a resume body is named (a misspelt one would be an answer lost), and the
    # run still waits: nothing above moved it, and a good answer resumes it.
    assert refused(resume(api, run_id, {**good, "camelCaseLeftover": 1}), 422) == "interlude.field_unprocessable"
    assert interrupt_of(api, run_id)["message"] == "Go on?"
    assert resume(api, run_id, {**good, "stream": False}).status_code == 200


def test_resume_names_its_thread_and_run_or_is_the_one_404(api, stranger):
    run_id = started(api, gated("Go on?"))
    other = started(api, gated("Other?"))
    interrupt_of(api, run_id)
    body = {"run_id": run_id, "resume_value": {"ok": True}}
    never = f"{api.tenant}~2F{'A' * 24}"
    assert refused(resume(api, other, body), 404)  # the thread is another run's
    assert refused(resume(api, never, {**body, "run_id": never}), 404)  # a thread that never existed
    assert refused(resume(api, "not~a~wire~id", {**body, "run_id": "not~a~wire~id"}), 404)
    # Another organisation's run: the same 404, whether its key says so or not.
    assert refused(resume(stranger, run_id, body), 404)
    assert refused(resume(stranger, run_id, body, **{"X-Organization-ID": api.tenant}), 404)
    assert refused(resume(api, run_id, body, **{"X-Organization-ID": stranger.tenant}), 404)
    assert interrupt_of(api, run_id)["message"] == "Go on?"


def test_a_resume_of_a_run_that_is_not_waiting_is_400(api):
    run_id = started(api, gated("Go on?"))
    interrupt_of(api, run_id)
    body = {"run_id": run_id, "resume_value": {"ok": True}}
    assert resume(api, run_id, body).status_code == 200
    listen_until_done(api, run_id)
    assert refused(resume(api, run_id, body), 400) == "interlude.run_state_invalid"  # the run ended
    cancelled = started(api, gated("Cancel me?"))
    interrupt_of(api, cancelled)
    assert api.call("POST", f"/workflows/cancel/{cancelled}").status_code == 200
    assert refused(resume(api, cancelled, {**body, "run_id": cancelled}), 400) == "interlude.run_state_invalid"
    assert refused(api.call("POST", f"/workflows/cancel/{cancelled}"), 400) == "interlude.run_state_invalid"


def listen_until_done(api: Api, run_id: str) -> list[Any]:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        events = listen(api, run_id)
        if typed(events)[-1:] == ["done"]:
            return events
    raise AssertionError(f"{run_id} did not finish")


# -- races: one wins, the other is told what a late one is told ----------------------------------------------------


@pytest.mark.parametrize("racers", [2, 6])
def test_resumes_at_once_one_wins_and_every_loser_is_400(api, racers):
    run_id = started(api, gated("Go on?"))
    interrupt_of(api, run_id)
    answers = race(
        *[lambda i=i: resume(api, run_id, {"run_id": run_id, "resume_value": {"n": i}}) for i in range(racers)]
    )
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] + [400] * (racers - 1), [a.text for a in answers]
    for loser in (a for a in answers if a.status_code != 200):
        refused(loser, 400)
    frames = listen_until_done(api, run_id)
    assert typed(frames).count("resumed") == 1


def test_cancels_at_once_one_wins_and_every_loser_is_400(api):
    run_id = started(api, gated("Go on?"))
    interrupt_of(api, run_id)
    answers = race(*[lambda: api.call("POST", f"/workflows/cancel/{run_id}") for _ in range(4)])
    assert sorted(a.status_code for a in answers) == [200, 400, 400, 400], [a.text for a in answers]


# -- templates a workflow author controls ------------------------------------------------------------------------


def test_a_reference_to_a_node_that_does_not_exist_is_refused_at_registration(api):
    reply = start(api, gated("About {{node_nowhere.field}}"))
    assert reply.status_code == 422, reply.text
    assert isinstance(reply.json()["detail"], list)
    assert set(reply.json()) == {"detail"}


def copy_of_input(field: str) -> dict[str, Any]:
    """A first step whose output is the run input with `field` set to the input's `field` (a value as is)."""
    operation = {"type": "set", "field": field, "params": {"value": f"{{{{input.{field}}}}}"}}
    return node("node_source", "transformer", 0, operations=[operation])


def test_references_render_once_as_text(api):
    held = {
        "text": "{{input.secret}} {{node_source}}",
        "n": 3,
        "flag": False,
        "nested": {"list": [{"name": "zoë ✓ 漢字"}]},
    }
    message = (
        "t={{node_source.held.text}} n={{node_source.held.n}} f={{node_source.held.flag}} "
        "name={{ node_source.held.nested.list.0.name }} missing=[{{node_source.held.absent}}] "
        "obj={{node_source.held.nested}} in={{input.who}}"
    )
    inputs = {"secret": "SECRET", "who": "{{input.secret}}", "held": held}
    run_id = started(api, gated(message, [copy_of_input("held")]), inputs)
    shown = interrupt_of(api, run_id)["message"]
    assert shown == (
        't={{input.secret}} {{node_source}} n=3 f=false name=zoë ✓ 漢字 missing=[] obj={"list":[{"name":"zoë ✓ 漢字"}]} '
        "in={{input.secret}}"
    )


def test_a_message_whose_rendering_passes_the_limit_ends_the_run_in_error(api):
    message = "{{node_source.big}}" * 40  # 2 MB if it were built
    run_id = started(api, gated(message, [copy_of_input("big")]), {"big": "x" * 50_000})
    deadline = time.monotonic() + DEADLINE_S
    kinds: list[str] = []
    while time.monotonic() < deadline and not {"error", "interrupt"} & set(kinds):
        kinds = typed(listen(api, run_id))
    assert "error" in kinds, kinds
    assert "interrupt" not in kinds, kinds
    state = api.call("GET", f"/workflows/state/{run_id}").json()
    assert state["metadata"]["status"] == "failed", state


# -- the listen stream ---------------------------------------------------------------------------------------------


def test_the_listen_stream_resumes_after_last_event_id_without_loss_or_repeat(api):
    run_id = started(api, gated("Go on?"))
    interrupt_of(api, run_id)
    # A frame without `id:` keeps the last one (the SSE rule a parser follows): the closing `interrupted` repeats it.
    first = [e for e in listen(api, run_id) if json.loads(e.data)["type"] != "interrupted"]
    ids = [int(e.id) for e in first]
    assert ids == sorted(set(ids))
    assert resume(api, run_id, {"run_id": run_id, "resume_value": {"ok": True}}).status_code == 200
    whole = listen_until_done(api, run_id)
    rest = listen(api, run_id, last=ids[-1])
    assert [e.id for e in rest] == [e.id for e in whole if e.id and int(e.id) > ids[-1]]
    assert typed(rest)[0] == "resumed"
    assert typed(rest)[-1] == "done"
    assert listen(api, run_id, last=int(whole[-1].id)) == []  # nothing after the end, and no heartbeat either
    # Every frame is data-only JSON on one `data:` line, its type inside (the SDKs' convention B).
    for event in whole:
        assert event.event == "message"
        assert json.loads(event.data)["type"]


def test_last_event_id_that_is_not_a_sequence_is_400_detail(api):
    run_id = started(api, gated("Go on?"))
    for bad in ("-1", "abc", "1.5", "9" * 400):
        reply = requests.get(
            f"{api.base_url}/workflows/listen/{run_id}",
            headers={"Authorization": f"Bearer {api.api_key}", "Last-Event-ID": bad},
            timeout=30,
        )
        assert refused(reply, 400)


def test_a_waiting_run_s_listen_ends_with_interrupted_that_carries_the_retry_hint(api):
    run_id = started(api, gated("Go on?"))
    interrupt_of(api, run_id)
    events = listen(api, run_id)
    assert typed(events)[-1] == "interrupted"
    assert events[-1].retry == 100
    assert all(e.retry is None for e in events[:-1])


def test_a_run_that_ends_while_followed_ends_the_stream_with_done(api):
    run_id = started(api, gated("Go on?"))
    interrupt_of(api, run_id)
    timer = threading.Timer(0.3, lambda: resume(api, run_id, {"run_id": run_id, "resume_value": {"ok": 1}}))
    timer.start()
    try:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            kinds = typed(listen(api, run_id))
            if kinds[-1] == "done":
                break
    finally:
        timer.join()
    assert kinds[-1] == "done"
    assert "heartbeat" not in kinds


def test_another_organisation_s_run_stream_is_404_detail(api, stranger):
    run_id = started(api, gated("Go on?"))
    for who, headers in ((stranger, {}), (api, {"X-Organization-ID": stranger.tenant})):
        reply = requests.get(
            f"{api.base_url}/workflows/listen/{run_id}",
            headers={"Authorization": f"Bearer {who.api_key}", "Accept": "text/event-stream", **headers},
            timeout=30,
        )
        refused(reply, 404)


def test_a_client_that_never_reads_holds_nothing(api):
    run_id = started(api, gated("Go on?"))
    interrupt_of(api, run_id)
    host, port = api.base_url.removeprefix("http://").split(":")
    silent = socket.create_connection((host, int(port)))
    try:
        request = (
            f"GET /workflows/listen/{run_id} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {api.api_key}\r\n"
            "Accept: text/event-stream\r\n\r\n"
        )
        silent.sendall(request.encode())
        began = time.monotonic()
        # Meanwhile, the stack answers everyone else at once.
        assert api.call("GET", f"/workflows/state/{run_id}").status_code == 200
        assert time.monotonic() - began < 5
        # And the silent client's answer is whole and ended within the stream's bounds, waiting to be read.
        time.sleep(2.5)
        silent.settimeout(5)
        received = b""
        while b"\r\n\r\n" not in received or len(received.split(b"\r\n\r\n", 1)[1]) < content_length(received):
            chunk = silent.recv(65536)
            assert chunk, received
            received += chunk
        assert received.startswith(b"HTTP/1.1 200")
    finally:
        silent.close()


def content_length(received: bytes) -> int:
    head = received.split(b"\r\n\r\n", 1)[0].decode()
    return next(int(line.split(":")[1]) for line in head.split("\r\n") if line.lower().startswith("content-length"))


# -- errors on the ModuleX surface --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body", "headers", "status"),
    [
        ("POST", "/workflows/run", "{", {}, 400),
        ("POST", "/workflows/run", {"workflow_id": "a", "workflow": {}}, {}, 400),
        ("POST", "/workflows/run", {"llm_config": {}}, {}, 422),  # a field a run body does not hold (ADR 0199)
        ("POST", "/workflows/run", {"workflow_id": "no-such-workflow"}, {}, 400),
        ("POST", "/workflows/run", {"workflow_id": "a"}, {"X-Organization-ID": "elsewhere"}, 403),
        ("POST", "/workflows/run", {"workflow": {"nodes": [{"id": "a", "type": "agent", "x": 0, "y": 0}]}}, {}, 422),
        ("GET", "/workflows/state/demo~2FAAAAAAAAAAAAAAAAAAAAAAAA", None, {}, 404),
        ("POST", "/workflows/cancel/nothing-here", None, {}, 404),
        ("POST", "/workflows/cancel/nothing-here", "[1]", {}, 400),
        ("POST", "/workflows/resume/nothing-here", {"run_id": "nothing-here", "resume_value": 1}, {}, 404),
        ("POST", "/workflows/listen/x", None, {}, 405),
        ("GET", "/workflows/resume/x", None, {}, 405),
    ],
)
def test_refusals_on_the_modulex_surface_are_detail_with_the_contract_s_status(
    api, method, path, body, headers, status
):
    refused(api.call(method, path, body, **headers), status)


def test_an_unauthenticated_modulex_call_is_401_detail(api):
    for key in ("", "mx_live_not_a_key"):
        reply = requests.post(
            f"{api.base_url}/workflows/resume/x",
            json={"run_id": "x", "resume_value": 1},
            headers={"Authorization": f"Bearer {key}"} if key else {},
            timeout=30,
        )
        refused(reply, 401)


def test_the_sdk_hears_a_race_loser_as_a_bad_request(api):
    run_id = started(api, gated("Go on?"))
    interrupt_of(api, run_id)

    async def scenario() -> list[Any]:
        async with sdk(api) as first, sdk(api) as second:
            return await asyncio.gather(
                first.executions.resume(run_id, run_id, {"n": 1}),
                second.executions.resume(run_id, run_id, {"n": 2}),
                return_exceptions=True,
            )

    outcomes = asyncio.run(scenario())
    assert sum(1 for o in outcomes if getattr(o, "status", None) == "resumed") == 1, outcomes
    assert sum(1 for o in outcomes if isinstance(o, BadRequestError)) == 1, outcomes


def test_huge_and_odd_fields_of_run_and_cancel_are_refused_as_detail(api):
    workflow = gated("Go on?")
    for body, status in (
        ({"workflow": workflow, "input": {"x": "y" * 200_000}}, 413),
        ({"workflow": workflow, "input": []}, 422),
        ({"workflow": {**workflow, "config": {"recursion_limit": 10**40 + 1}}}, 422),
    ):
        refused(api.call("POST", "/workflows/run", body), status)
    run_id = started(api, workflow)
    interrupt_of(api, run_id)
    refused(api.call("POST", f"/workflows/cancel/{run_id}", {"reason": "r" * 300_000}), 400)
    for body in ({"reason": 5}, {"reason": ["no"]}):
        refused(api.call("POST", f"/workflows/cancel/{run_id}", body), 422)
    # A field the cancel body does not hold is told, as a run's, resume's or workflow's (ADR 0207), and nothing happens.
    extra = api.call("POST", f"/workflows/cancel/{run_id}", {"reason": "done", "extra": 1})
    assert refused(extra, 422) == "interlude.field_unprocessable"
    assert extra.json()["detail"] == [
        {"loc": ["body", "extra"], "msg": "extra: not a field of a cancel body, which holds reason", "type": "extra_forbidden"}
    ]
    assert api.call("POST", f"/workflows/cancel/{run_id}", {"reason": "done"}).status_code == 200


def test_a_resume_sent_again_with_its_idempotency_key_is_answered_again_not_refused(api):
    run_id = started(api, gated("Go on?"))
    interrupt_of(api, run_id)
    body = {"run_id": run_id, "resume_value": {"ok": True}}
    key = {"Idempotency-Key": uuid.uuid4().hex}
    first = resume(api, run_id, body, **key)
    again = resume(api, run_id, body, **key)
    assert (first.status_code, again.status_code) == (200, 200), again.text
    assert again.json() == first.json()
    assert refused(resume(api, run_id, body, **{"Idempotency-Key": uuid.uuid4().hex}), 400)
    assert typed(listen_until_done(api, run_id)).count("resumed") == 1


def test_odd_thread_ids_and_cursors_past_the_end(api):
    run_id = started(api, gated("Go on?"))
    interrupt_of(api, run_id)
    for thread in ("%E2%9C%93", "a" * 2000, f"{run_id}~2F..", "..%2F..%2Fworkflows"):
        refused(resume(api, thread, {"run_id": run_id, "resume_value": 1}), 404)
    waiting = listen(api, run_id, last=10**6)
    assert typed(waiting) == ["heartbeat"]


def test_transport_level_refusals_of_a_resume_are_detail(api):
    run_id = started(api, gated("Go on?"))
    interrupt_of(api, run_id)
    body = {"run_id": run_id, "resume_value": {"ok": True}}
    refused(resume(api, run_id, json.dumps(body), **{"Content-Type": "text/plain"}), 415)
    for number in ("1e400", "9" * 5000):  # no JSON number Python could not hold faithfully
        refused(resume(api, run_id, f'{{"run_id": "{run_id}", "resume_value": {number}}}'), 400)
    key = {"Idempotency-Key": uuid.uuid4().hex}
    assert resume(api, run_id, body, **key).status_code == 200
    reused = resume(api, run_id, {**body, "resume_value": {"ok": False}}, **key)
    assert refused(reused, 409) == "idempotency_key_mismatch"


def test_a_live_message_nested_past_any_document_is_answered_with_its_error(api, stack, stranger):
    """The live stream's WebSocket: a message no request body could be is refused on the connection, which stays open
    (it closed with 1011 when parsing it recursed out), and another organisation's run is not followed."""
    from websockets.sync.client import connect

    run_id = started(api, gated("Go on?"))
    theirs = started(stranger, gated("Theirs?"))
    deep = '{"action": "subscribe", "runId": "x", "after": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with connect(stack["liveUrl"], additional_headers={"Authorization": f"Bearer {api.api_key}"}) as live:
        live.send(deep)
        assert json.loads(live.recv(timeout=30))["code"] == "validation_error"
        live.send(json.dumps({"action": "subscribe", "runId": theirs}))
        assert json.loads(live.recv(timeout=30))["code"] in ("not_found", "id_tenant_mismatch")
        live.send(json.dumps({"action": "subscribe", "runId": run_id}))
        assert json.loads(live.recv(timeout=30))["type"] == "subscribed"
