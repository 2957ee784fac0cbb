"""A hostile concurrency pass over the core promise: a run continues exactly once when many answers race, and is
rejected on time when nobody answers.

Two kinds of probe, both through the real code on the shared moto world (every call into moto serialised, as the local
stack's server serialises them: tests/support/moto_world.serialise_moto):

* threads: several callers released at once by a barrier, each with services of its own (as separate Lambda
  instances are), the interpreter switching threads often, so their reads and conditional writes interleave;
* interleavings made on purpose: a competitor's whole call run between the reads of a caller and its first write
  (`before_first`), so the caller loses its race every time, through the real api handler, and its answer is what the
  route documents, never a 500.

What is probed: resolves of one gate on the run+node, token, approval-page form, ModuleX and Slack surfaces, the
losers' answers, and the effects of the winner (one interrupt.resolved event, one audit entry, one callback notice
delivered once, usage billed once) through the real dispatch handler with its records delivered twice; a resolve
racing a cancel, a claim, a delegation and the deadline firing (the timeouts worker either side of the answer); quorum
votes of several approvers at once; a task's completion and heartbeat racing its lease check, a second claim and its
run's cancel; one Idempotency-Key sent twice at once; dispatch batches holding several runs and several records of one
run, each record twice, redelivered after a partial failure; a kept external event and the gates raised at once
(dispatch's threads); children of one parent ending side by side; gates of several runs timing out in one bucket (the
timeouts worker's threads); the expiring cache every instance keeps, from many threads.
"""

from __future__ import annotations

import contextvars
import hashlib
import itertools
import json
import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import pytest
from moto.core.botocore_stubber import BotocoreStubber

from interlude import wiring
from interlude.adapters.keyring_store import load_key_ring
from interlude.api.contract import error_codes
from interlude.api.errors import status_for_code
from interlude.app.tokens import TokenSurface
from interlude.composition import Services
from interlude.domain.errors import DomainError
from interlude.domain.models.requests import CancelRunRequest, CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local import lambda_runtime
from interlude.local.http_gateway import to_event
from interlude.store.facade import Store
from interlude.store.layout import run_pk
from interlude.store.tenants import TenantRecords
from tests.integration import test_slack_interactivity as slack_tests
from tests.integration.conftest import clear_of_a_month_end, new_api_key, signed_in
from tests.integration.test_audit import everything as audit_chains
from tests.integration.test_deadlines import LONG_MS, PAST_LONG_S
from tests.integration.test_streams_and_modulex import Reply
from tests.support.concurrency import race
from tests.support.local_stack import FIXTURES, wire
from tests.support.moto_world import ENTRIES_TABLE, KEY_RING_SECRET, TABLE
from tests.support.queues import drain
from tests.support.receiver import delivering_to_loopback
from tests.support.stream import Stream

RACERS = 10


# -- the machinery ---------------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def often_switched() -> Iterator[None]:
    """Threads switch every 50 µs instead of every 5 ms: racers' calls interleave within a few of them."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(5e-5)
    yield
    sys.setswitchinterval(before)


@pytest.fixture
def delivering(world, monkeypatch) -> dict[str, str]:
    for name, value in {"PUBLIC_BASE_URL": "https://interlude.example.com", **delivering_to_loopback(3)}.items():
        monkeypatch.setenv(name, value)
    return world.queues


def instance() -> Services:
    """Services of their own, as a separate Lambda instance has (its own clients and caches)."""
    return Services(Store(TABLE, ENTRIES_TABLE))


def token_surface() -> TokenSurface:
    """The signed-token surface of an instance of its own, over the world's key ring."""
    return instance().token_surface(lambda force: load_key_ring(KEY_RING_SECRET, force_fetch=force))


def mint(key: str, run_id: str, node_id: str = "gate") -> str:
    minted = call("POST", f"/runs/{wire(run_id)}/interrupts/{node_id}/tokens", key, {"intent": "resolve"})
    assert minted.status == 201, minted.text
    return str(minted.json()["token"])


WRITES = ("TransactWriteItems", "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem")


@contextmanager
def before_first(
    operation: str | tuple[str, ...], competitor: Callable[[], Any], touching: str | None = None
) -> Iterator[list[Any]]:
    """While the block runs, the first DynamoDB `operation` (or any of them) this thread makes runs `competitor()` whole
    just before it reaches moto: the caller read what it read, the competitor commits, then the caller writes. Yields
    what the competitor returned (empty until it ran). With `touching` (a run id), only a request writing that run's
    partition counts: the schedule pump fires whatever else is due first (another test's deadline: no interleaving)."""
    ran: list[Any] = []
    thread = threading.get_ident()
    original = BotocoreStubber.__call__
    names = {f"before-send.dynamodb.{name}" for name in ((operation,) if isinstance(operation, str) else operation)}

    partition = None if touching is None else json.dumps(run_pk(touching))[1:-1].encode()

    def names_the_run(request: Any) -> bool:
        body = request.body or b""
        return partition is None or partition in (body.encode() if isinstance(body, str) else body)

    def interleaved(self: Any, event_name: str, request: Any, **kwargs: Any) -> Any:
        if not ran and threading.get_ident() == thread and event_name in names and names_the_run(request):
            ran.append(None)
            # In a context of its own, as another instance's: what the caller's invocation set (the function running,
            # the request's Idempotency-Key) is not the competitor's.
            try:
                ran[0] = contextvars.Context().run(competitor)
            except Exception as failed:  # noqa: BLE001 - the competitor's own failure, raised after the block
                ran[0] = failed
        return original(self, event_name, request, **kwargs)

    BotocoreStubber.__call__ = interleaved  # type: ignore[method-assign]
    try:
        yield ran
    finally:
        BotocoreStubber.__call__ = original  # type: ignore[method-assign]
    assert ran, f"no {operation} was made: the interleaving never happened"
    if isinstance(ran[0], Exception):
        raise AssertionError("the competitor failed") from ran[0]


def register(services: Services, admin, name: str = "conformance-approval", **config: Any) -> str:
    definition = json.loads((FIXTURES / f"{name}.json").read_text())
    definition["nodes"][0]["config"].update(config)
    workflow_id = f"{name}-{hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:8]}"
    services.workflows.put_workflow(admin, workflow_id, WorkflowDefinition.model_validate({**definition, "id": workflow_id}))
    return workflow_id


def start(services: Services, admin, workflow: str, **extra: Any) -> str:
    return services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": workflow, **extra})).runId


def event_types(services: Services, run_id: str) -> list[str]:
    return [e["type"] for e in services.store.read_events(run_id, consistent=True)]


def codes(outcomes: list[Any]) -> list[str]:
    """Each outcome's refusal code ("ok" for an answer); anything but a DomainError fails the test (it would be a 500)."""
    found = []
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, DomainError):
            raise outcome
        found.append(outcome.code if isinstance(outcome, DomainError) else "ok")
    return found


def audit_actions(services: Services, run_id: str) -> list[str]:
    """The actions of the tenant's audit entries about the run, every chain."""
    entries = [e for chain in audit_chains(services).values() for e in chain]
    return [e["action"] for e in entries if (e.get("target") or {}).get("runId") == run_id]


# -- one gate, many answers ------------------------------------------------------------------------------------------


def test_ten_answers_on_every_surface_at_once_continue_the_run_once(services, admin, delivering, receiver, tenant, clock_file):
    clear_of_a_month_end(clock_file)
    run_id = start(services, admin, register(services, admin), callbackUrl=receiver.url())
    stream = Stream(TABLE)
    stream.settle()
    drain(delivering)
    raised = len(receiver.hits)
    token = mint(new_api_key(services), run_id)
    month = services.clock().strftime("%Y-%m")
    billed = TenantRecords(services.store).usage([tenant], month)[tenant].counts["decisions"]

    def by_run(action: str) -> Callable[[], Any]:
        return lambda: instance().decisions.resolve_interrupt(admin, run_id, "gate", {"action": action})

    def by_token(action: str) -> Callable[[], Any]:
        return lambda: token_surface().resolve(token, {"action": action})[0]

    def by_modulex(action: str) -> Callable[[], Any]:
        body = {"run_id": wire(run_id), "resume_value": {"action": action}}
        return lambda: instance().modulex.resume(admin, wire(run_id), body)

    surfaces = (by_run, by_token, by_modulex)
    outcomes = race(*[surfaces[i % 3]("accept" if i % 2 else "reject") for i in range(RACERS)])
    # A loser is told the gate was decided; a ModuleX resume that read the run after it was, that it is not waiting.
    losers = {"interrupt_already_resolved", "interlude.run_state_invalid"}
    found = codes(outcomes)
    assert found.count("ok") == 1, found
    assert set(found) - {"ok"} <= losers, found

    types = event_types(services, run_id)
    assert types.count("interrupt.resolved") == 1
    assert types[-1] in ("run.completed", "run.failed")
    stream.settle()  # every record to the real dispatch handler, then all of them again, until quiet
    drain(delivering)
    assert audit_actions(services, run_id).count("interrupt.decided") == 1
    notices = [json.loads(h.body)["type"] for h in receiver.hits[raised:]]
    assert notices.count("interrupt.resolved") == 1
    assert len(notices) == 2  # the decision and the end of the run, each delivered once
    assert TenantRecords(services.store).usage([tenant], month)[tenant].counts["decisions"] == billed + 1


SURFACES = {"run": "resolveInterruptByRun", "token-json": "resolveInterruptByToken", "modulex": "modulexResume"}


def documented(operation: str, reply: Answered) -> str:
    """The refusal's code, checked to be one the route declares, answered with the status its face gives it."""
    route = next(r for r in wiring.ROUTES if r.operation == operation)
    if route.face == "modulex":
        assert set(reply.json()) == {"detail"}, reply.text
        code = reply.headers["x-interlude-error"]
    else:
        code = reply.json()["error"]
    assert code in error_codes(route), (operation, code, error_codes(route))
    assert reply.status == status_for_code(code, route.face), reply.text
    return str(code)


@pytest.mark.parametrize("surface", [*SURFACES, "page-form"])
def test_an_answer_that_loses_between_its_read_and_its_write_gets_the_documented_refusal(services, admin, surface):
    key = new_api_key(services)
    run_id = start(services, admin, register(services, admin))
    token = mint(key, run_id)

    def competitor() -> Any:
        return instance().decisions.resolve_interrupt(admin, run_id, "gate", {"action": "reject"})

    request = requests_of(surface, key, run_id, token)
    with before_first("TransactWriteItems", competitor):
        lost = request()
    if surface == "page-form":
        # The page says the request was decided already, by whom and how (a page, not the JSON envelope).
        assert lost.status == 409, lost.text
        assert lost.headers["content-type"].startswith("text/html")
        assert "already" in lost.text.lower()
    else:
        assert documented(SURFACES[surface], lost) == "interrupt_already_resolved"
        # Whoever asks next is refused as documented too, and nothing moves.
        late = requests_of(surface, key, run_id, token)()
        documented(SURFACES[surface], late)
        if surface == "modulex":
            # The ModuleX contract's answer for a run not waiting, whether the resume lost its race or came late.
            assert (lost.status, late.status) == (400, 400), (lost.text, late.text)
    assert event_types(services, run_id).count("interrupt.resolved") == 1


def requests_of(surface: str, key: str, run_id: str, token: str) -> Callable[[], Any]:
    if surface == "run":
        return lambda: call("POST", f"/runs/{wire(run_id)}/interrupts/gate", key, {"resumeValue": {"action": "accept"}})
    if surface == "token-json":
        return lambda: call("POST", f"/interrupts/{token}", None, {"resumeValue": {"action": "accept"}})
    if surface == "modulex":
        body = {"run_id": wire(run_id), "resume_value": {"action": "accept"}}
        return lambda: call("POST", f"/workflows/resume/{wire(run_id)}", key, body)
    return page_form_post(token)


def page_form_post(token: str) -> Callable[[], Any]:
    """The approval page's Accept, as a browser sends it after opening the page (its proof and cookie)."""
    page = call("GET", f"/interrupts/{token}", None, accept="text/html")
    assert page.status == 200, page.text
    proof = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert proof is not None
    cookies = "; ".join(c.split(";")[0] for c in page.cookies)
    form = f"csrf={proof.group(1)}&action=accept".encode()
    headers = {"content_type": "application/x-www-form-urlencoded", "cookie": cookies, "accept": "text/html"}
    return lambda: call("POST", f"/interrupts/{token}", None, form, **headers)


class Answered(Reply):
    """The api handler's answer, with the cookies it set."""

    def __init__(self, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        self.cookies: list[str] = list(raw.get("cookies") or [])


def call(method: str, path: str, key: str | None, body: Any = None, **headers: str) -> Answered:
    """One request through the real api handler, as the gateway hands it over."""
    sent = {"content-type": "application/json", "host": "127.0.0.1", **{k.replace("_", "-"): v for k, v in headers.items()}}
    if key:
        sent["authorization"] = f"Bearer {key}"
    raw = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    return Answered(lambda_runtime.invoke("api", to_event(method, path, sent, raw, "127.0.0.1")))


def nested_request(request: Callable[[], Answered]) -> Callable[[], Answered]:
    """`request` through the real api handler while another request waits inside it (`before_first`): Powertools keeps
    the request being answered on the resolver's class, so the paused request's is put back once this one is done,
    as its own instance would have kept it. The nested request starts with an empty context, as another instance's
    would: the paused request's principal, once it is in the context, is not the nested request's (whether it was in
    it yet depended on whether the paused request's rate admission wrote, so a cancel was refused 403 now and then)."""
    from aws_lambda_powertools.event_handler.api_gateway import BaseRouter

    from interlude.api.http import app

    def run() -> Answered:
        saved = (getattr(BaseRouter, "current_event", None), getattr(BaseRouter, "lambda_context", None), dict(app.context))
        app.context.clear()
        try:
            return request()
        finally:
            BaseRouter.current_event, BaseRouter.lambda_context = saved[0], saved[1]
            app.context.clear()
            app.context.update(saved[2])

    return run


# -- a resolve against a cancel, a claim, the deadline ---------------------------------------------------------------


def test_a_cancel_and_resolves_at_once_leave_one_outcome(services, admin):
    run_id = start(services, admin, register(services, admin))

    def cancel() -> Any:
        return instance().lifecycle.cancel_run(admin, run_id, CancelRunRequest())

    def resolve() -> Any:
        return instance().decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})

    found = codes(race(*[cancel if i % 2 else resolve for i in range(RACERS)]))
    assert found.count("ok") == 1, found
    assert set(found) <= {"ok", "run_terminal", "interrupt_already_resolved"}
    types = event_types(services, run_id)
    assert types.count("interrupt.resolved") <= 1
    assert types.count("run.cancelled") + types.count("run.completed") == 1
    assert ("interrupt.resolved" in types) == ("run.completed" in types)


def loses_between_read_and_write(requests: tuple[Callable[[], Answered], Callable[[], Answered]]) -> Answered:
    """The second request's answer, the first made (and answered 200) between its read and its transaction."""
    winner, loser = requests
    with before_first("TransactWriteItems", nested_request(winner)) as won:
        lost = loser()
    assert won[0].status == 200, won[0].text
    return lost


@pytest.mark.parametrize("first", ["cancel", "resolve"])
def test_a_cancel_and_a_resolve_that_lose_between_read_and_write_are_refused_as_documented(services, admin, first):
    key = new_api_key(services)
    run_id = start(services, admin, register(services, admin))
    cancel = partial(call, "POST", f"/runs/{wire(run_id)}/cancel", key, {})
    resolve = partial(call, "POST", f"/runs/{wire(run_id)}/interrupts/gate", key, {"resumeValue": {"action": "accept"}})
    lost = loses_between_read_and_write((cancel, resolve) if first == "cancel" else (resolve, cancel))
    if first == "cancel":
        assert documented("resolveInterruptByRun", lost) == "interrupt_already_resolved"
    else:
        assert documented("cancelRun", lost) == "run_terminal"
    types = event_types(services, run_id)
    assert types.count("run.cancelled") + types.count("run.completed") == 1


@pytest.mark.parametrize("first", ["claim", "resolve"])
def test_a_claim_and_a_resolve_that_lose_between_read_and_write_are_refused_as_documented(services, admin, first):
    key = new_api_key(services)
    run_id = start(services, admin, register(services, admin))
    claim = partial(call, "POST", f"/runs/{wire(run_id)}/interrupts/gate/claim", key)
    resolve = partial(call, "POST", f"/runs/{wire(run_id)}/interrupts/gate", key, {"resumeValue": {"action": "accept"}})
    lost = loses_between_read_and_write((claim, resolve) if first == "claim" else (resolve, claim))
    if first == "claim":
        assert lost.status == 200, lost.text  # the claimant decides the gate it claimed
    else:
        assert documented("claimInterrupt", lost) == "interrupt_already_resolved"
    assert event_types(services, run_id).count("interrupt.resolved") == 1


def test_claims_and_resolves_at_once_leave_one_resolution(services, admin):
    run_id = start(services, admin, register(services, admin))
    people = [signed_in(services, f"p{i}") for i in range(RACERS)]

    def claim(who) -> Callable[[], Any]:
        return lambda: instance().claims.move(who, run_id, "gate", "claim")

    def resolve(who) -> Callable[[], Any]:
        return lambda: instance().decisions.resolve_interrupt(who, run_id, "gate", {"action": "accept"})

    found = codes(race(*[claim(p) if i % 2 else resolve(p) for i, p in enumerate(people)]))
    assert set(found) <= {"ok", "interrupt_already_resolved", "forbidden", "interlude.gate_claimed"}, found
    assert event_types(services, run_id).count("interrupt.resolved") == 1


# -- quorum and delegation -------------------------------------------------------------------------------------------


def test_a_quorum_of_approvers_voting_at_once_is_reached_once_with_every_vote(services, admin):
    people = [signed_in(services, f"v{i}") for i in range(RACERS)]
    names = [p.subject["subjectId"] for p in people]
    run_id = start(services, admin, register(services, admin, approversList=names, requiredApprovals=RACERS))

    def vote(who) -> Callable[[], Any]:
        def cast() -> Any:
            # A hot run answers 503 runner_unavailable (Retry-After: 1) once its writer lost too many races in a row
            # (docs/operations.md): its client sends the vote again.
            for _ in range(RACERS):
                try:
                    return instance().decisions.resolve_interrupt(who, run_id, "gate", {"action": "accept"})
                except DomainError as refused:
                    if refused.code != "runner_unavailable":
                        raise
            raise AssertionError("a vote was refused as busy every time")

        return cast

    found = codes(race(*[vote(p) for p in people]))
    assert found == ["ok"] * RACERS, found
    events = services.store.read_events(run_id, consistent=True)
    types = [e["type"] for e in events]
    assert (types.count("interrupt.resolved"), types.count("approval.received")) == (1, RACERS - 1)
    assert [e["sequence"] for e in events] == list(range(len(events)))
    resolved = next(e for e in events if e["type"] == "interrupt.resolved")
    assert resolved["payload"]["decision"] == "granted"
    # No vote lost, none counted twice: each approver's vote is one event, the last of them the resolution.
    voters = [e["payload"]["resolvedBy"]["subjectId"] for e in events if e["type"] in ("approval.received", "interrupt.resolved")]
    assert sorted(voters) == sorted(names), voters


@pytest.mark.parametrize("first", ["vote", "delegation"])
def test_a_delegation_and_the_delegators_own_vote_between_read_and_write_count_one_of_them(services, admin, first):
    from interlude.domain.models.tenants import TenantSettings

    services.tenants.put_settings(admin.tenant, TenantSettings(allowDelegation=True), "admin")
    alice = new_api_key(services, "alice")
    bob, carol = (signed_in(services, name) for name in ("bob", "carol"))
    run_id = start(services, admin, register(services, admin, approversList=["alice", "bob"], requiredApprovals=2))
    vote = partial(call, "POST", f"/runs/{wire(run_id)}/interrupts/gate", alice, {"resumeValue": {"action": "accept"}})
    delegate = partial(call, "POST", f"/runs/{wire(run_id)}/interrupts/gate/delegation", alice, {"delegate": "carol"})
    lost = loses_between_read_and_write((vote, delegate) if first == "vote" else (delegate, vote))
    if first == "vote":
        # Her vote is in: she has nothing left to hand over.
        assert documented("delegateVote", lost) == "interlude.vote_already_cast"
    else:
        # A delegated vote is still the delegator's to cast, whoever casts it first (docs/api.md, "Delegation").
        assert lost.status == 200, lost.text
    # Either way alice's vote is in once: carol has none to cast, and bob's completes the quorum of two, once.
    with pytest.raises(DomainError) as refused:
        instance().decisions.resolve_interrupt(carol, run_id, "gate", {"action": "accept"})
    assert refused.value.code in ("interlude.vote_already_cast", "forbidden")
    instance().decisions.resolve_interrupt(bob, run_id, "gate", {"action": "accept"})
    types = event_types(services, run_id)
    assert (types.count("approval.received"), types.count("interrupt.resolved")) == (1, 1), types


_timing_out_runs = itertools.count()


def timing_out(services: Services, admin) -> tuple[str, int]:
    """(a run at a gate with a deadline that no time the test itself takes reaches, however loaded the machine, the
    seconds the test moves the clock by where that deadline is to pass). At 1.5 s, a slow settle let it pass before
    the race was set up. Each run's deadline is a second later than the one before's: every test starts at the real
    time, so two runs made in one second would be listed in one bucket of the due index (its items are never
    deleted), and a bucket of several deadlines fires them on the pool's threads, not the thread whose write the
    test interleaves with."""
    later = next(_timing_out_runs)
    timeout_ms = LONG_MS + 1000 * later
    run_id = start(services, admin, register(services, admin, "conformance-approval-timeout", timeoutMs=timeout_ms))
    return run_id, PAST_LONG_S + later


def test_a_resolve_whose_write_comes_after_the_deadline_fired_loses_to_the_timeout(services, admin, clock_file):
    from interlude.domain import clock
    from interlude.local.schedules import SchedulePump

    key = new_api_key(services)
    run_id, past_deadline_s = timing_out(services, admin)
    Stream(TABLE).settle()  # the deadline's schedule is made

    def deadline_fires() -> int:
        clock.advance(clock_file, past_deadline_s)
        return SchedulePump(wiring.LOCAL_SCHEDULE_GROUP).pump_once()

    with before_first("TransactWriteItems", deadline_fires) as fired:
        lost = call("POST", f"/runs/{wire(run_id)}/interrupts/gate", key, {"resumeValue": {"action": "accept"}})
    assert fired[0] >= 1
    assert documented("resolveInterruptByRun", lost) == "interrupt_already_resolved"
    assert lost.json()["details"]["resolution"]["action"] == "timeout"
    resolved = [e["payload"] for e in services.store.read_events(run_id, consistent=True) if e["type"] == "interrupt.resolved"]
    assert [r["action"] for r in resolved] == ["timeout"]


@pytest.mark.parametrize("fired", ["meanwhile", "unrecorded"])
def test_a_modulex_resume_that_loses_to_the_deadline_is_told_what_a_late_one_is(services, admin, clock_file, fired):
    """The deadline fires between the resume's read and its write, or passed unrecorded before the resume: either
    way the timeout wins, and the resume hears the contract's 400, as one sent after the timeout was recorded does."""
    from interlude.domain import clock
    from interlude.local.schedules import SchedulePump

    key = new_api_key(services)
    run_id, past_deadline_s = timing_out(services, admin)
    Stream(TABLE).settle()
    body = {"run_id": wire(run_id), "resume_value": {"action": "accept"}}
    resume = partial(call, "POST", f"/workflows/resume/{wire(run_id)}", key, body)
    if fired == "meanwhile":

        def deadline_fires() -> int:
            clock.advance(clock_file, past_deadline_s)
            return SchedulePump(wiring.LOCAL_SCHEDULE_GROUP).pump_once()

        with before_first("TransactWriteItems", deadline_fires):
            lost = resume()
    else:
        clock.advance(clock_file, past_deadline_s)
        lost = resume()
    assert documented("modulexResume", lost) in ("interrupt_already_resolved", "interlude.run_state_invalid")
    late = resume()
    assert documented("modulexResume", late) == "interlude.run_state_invalid"
    assert (lost.status, late.status) == (400, 400), (lost.text, late.text)
    # The deadline's own firing, after the resume recorded the timeout, adds nothing; and the run leaves nothing due
    # for a later test's pump (its bucket would share a second with that test's deadline, fired on pool threads).
    SchedulePump(wiring.LOCAL_SCHEDULE_GROUP).pump_once()
    resolved = [e["payload"] for e in services.store.read_events(run_id, consistent=True) if e["type"] == "interrupt.resolved"]
    assert [r["action"] for r in resolved] == ["timeout"]


def test_a_late_answer_arriving_while_the_timeouts_worker_writes_the_deadline_loses_to_it(services, admin, clock_file):
    from interlude.domain import clock
    from interlude.local.schedules import SchedulePump

    key = new_api_key(services)
    run_id, past_deadline_s = timing_out(services, admin)
    Stream(TABLE).settle()
    clock.advance(clock_file, past_deadline_s)  # past the deadline: nobody answered in time
    resolve = partial(call, "POST", f"/runs/{wire(run_id)}/interrupts/gate", key, {"resumeValue": {"action": "accept"}})
    with before_first("TransactWriteItems", nested_request(resolve), touching=run_id) as answered:
        assert SchedulePump(wiring.LOCAL_SCHEDULE_GROUP).pump_once() >= 1
    late = answered[0]
    assert documented("resolveInterruptByRun", late) == "interrupt_already_resolved", late.text
    assert late.json()["details"] == {"runStatus": "failed"}  # the deadline, recorded first, rejected the run
    events = services.store.read_events(run_id, consistent=True)
    assert [e["payload"]["action"] for e in events if e["type"] == "interrupt.resolved"] == ["timeout"]
    assert [e["sequence"] for e in events] == list(range(len(events)))


# -- tasks -----------------------------------------------------------------------------------------------------------


def task_run(services, admin) -> str:
    definition = {
        "id": "race-drafts",
        "nodes": [
            {"id": "draft", "typeId": "core.task",
             "config": {"taskType": "race-summarise", "heartbeatTimeoutSeconds": 10, "retry_config": {"initial_interval": 0}}},
            {"id": "after", "typeId": "core.transform", "config": {"outputs": {"got": "{{draft.summary}}"}}},
        ],
        "edges": [{"id": "e", "sourceNodeId": "draft", "targetNodeId": "after"}],
    }  # fmt: skip
    services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
    run_id = start(services, admin, "race-drafts")
    Stream(TABLE).settle()  # the task is put on its queue
    return run_id


def claim_task(key: str) -> Answered:
    return call("POST", "/tasks:claim", key, {"queues": ["race-summarise"], "waitSeconds": 0})


def claimed_task(services, admin) -> tuple[str, str, dict]:
    """(a worker's key, the run, the worker's claim of the run's task)."""
    worker = new_api_key(services, subject="worker", scopes=["tasks:work"])
    run_id = task_run(services, admin)
    return worker, run_id, claim_task(worker).json()


def lease_lapsed(clock_file) -> int:
    """The clock past the task's heartbeat timeout (10 s) and the schedules fired: the lease check runs. Answers how
    many fired."""
    from interlude.domain import clock
    from interlude.local.schedules import SchedulePump

    clock.advance(clock_file, 11)
    fired: int = SchedulePump(wiring.LOCAL_SCHEDULE_GROUP).pump_once()
    return fired


def test_a_completion_that_loses_to_the_lease_check_and_a_second_claim_is_refused(services, admin, clock_file):
    worker, run_id, first = claimed_task(services, admin)

    def lapsed_and_taken() -> Answered:
        assert lease_lapsed(clock_file) >= 1
        return nested_request(lambda: claim_task(worker))()

    complete = partial(call, "POST", f"/tasks/{first['taskToken']}/complete", worker, {"output": {"summary": "late"}})
    with before_first(WRITES, lapsed_and_taken) as taken:
        late = complete()
    assert taken[0].status == 200, taken[0].text
    second = taken[0].json()
    assert second["attempt"] == 2
    assert documented("completeTask", late) == "interlude.task_not_claimed"
    done = call("POST", f"/tasks/{second['taskToken']}/complete", worker, {"output": {"summary": "on time"}})
    assert done.status == 200, done.text
    state = services.store.get_run(run_id)[0]
    assert state.outputs["draft"] == {"summary": "on time"}
    assert event_types(services, run_id).count("node.completed") == 2  # the task's and the transform's, once each


def test_a_lease_check_that_loses_to_the_completion_changes_nothing(services, admin, clock_file):
    worker, run_id, first = claimed_task(services, admin)
    complete = partial(call, "POST", f"/tasks/{first['taskToken']}/complete", worker, {"output": {"summary": "done"}})
    with before_first(WRITES, nested_request(complete)) as completed:
        lease_lapsed(clock_file)
    # The completion came before the lease was found lapsed: it stands, and the check retried nothing.
    assert completed[0].status == 200, completed[0].text
    types = event_types(services, run_id)
    assert "node.retried" not in types
    assert services.store.get_run(run_id)[0].outputs["draft"] == {"summary": "done"}
    assert claim_task(worker).status == 204


def test_a_completion_a_heartbeat_and_a_second_claim_at_once_continue_the_run_once(services, admin):
    worker, run_id, first = claimed_task(services, admin)
    principal = instance().keys.authenticate(f"Bearer {worker}")

    def complete(i: int) -> Callable[[], Any]:
        return lambda: instance().tasks.complete(principal, first["taskToken"], {"summary": f"s{i}"})

    found = codes(race(*[complete(i) for i in range(RACERS)]))
    assert found.count("ok") == 1, found
    assert set(found) == {"ok", "interlude.task_not_claimed"}, found
    assert event_types(services, run_id).count("run.completed") == 1


# -- one Idempotency-Key twice at once -------------------------------------------------------------------------------


# A decision's key is committed with its effect (one transaction); a claim's key is claimed first (a PutItem), then the
# effect is written, then the answer (docs/adr/0003).
KEYED = {
    "resolve": ("resolveInterruptByRun", "/interrupts/gate", {"resumeValue": {"action": "accept"}}, "TransactWriteItems"),
    "claim": ("claimInterrupt", "/interrupts/gate/claim", None, "TransactWriteItems"),
    "claim-before-its-key": ("claimInterrupt", "/interrupts/gate/claim", None, "PutItem"),
}


@pytest.mark.parametrize("request_kind", list(KEYED))
def test_a_keyed_request_sent_again_while_the_first_is_in_flight_executes_once(services, admin, request_kind):
    operation, tail, body, write = KEYED[request_kind]
    key = new_api_key(services)
    run_id = start(services, admin, register(services, admin))
    same = partial(call, "POST", f"/runs/{wire(run_id)}{tail}", key, body, idempotency_key="race-probe-one-key-sent-twice")
    with before_first(write, nested_request(same)) as again:
        first = same()
    answers = [first, again[0]]
    executed = [r for r in answers if r.status == 200 and r.headers.get("openwop-idempotent-replay") != "true"]
    assert len(executed) == 1, [(r.status, r.headers, r.text) for r in answers]
    for reply in answers:
        if reply.status != 200:
            assert documented(operation, reply) == "idempotency_in_flight"
            assert int(reply.headers["retry-after"]) >= 1
        elif reply is not executed[0]:
            assert reply.text == executed[0].text
    types = event_types(services, run_id)
    assert types.count("interrupt.resolved" if request_kind == "resolve" else "interlude.gate-assigned") == 1, types
    replayed = same()
    assert (replayed.status, replayed.headers.get("openwop-idempotent-replay")) == (200, "true"), replayed.text
    assert replayed.text == executed[0].text


# -- dispatch: runs side by side, records twice, a batch again after a partial failure -------------------------------


def test_a_batch_of_many_runs_each_record_twice_and_a_failure_redelivered_has_each_effect_once(
    services, admin, delivering, receiver, monkeypatch
):
    from botocore.client import BaseClient
    from botocore.exceptions import ClientError

    from interlude.domain.models.webhooks import RegisterWebhookRequest
    from interlude.store.stream import stream_events
    from tests.support.stream import outbox_event

    subscription = services.webhooks.register(
        admin, RegisterWebhookRequest.model_validate({"url": receiver.url("/subscriber"), "events": ["interrupt.resolved"]})
    )
    workflow = register(services, admin)
    runs = [start(services, admin, workflow, callbackUrl=receiver.url()) for _ in range(4)]
    for i, run_id in enumerate(runs):
        # Each decided by another principal, so each run's audit entry is its own.
        services.decisions.resolve_interrupt(signed_in(services, f"d{i}"), run_id, "gate", {"action": "accept"})
    records = [r for r in Stream(TABLE).take() if (stream_events(r) or ("",))[0] in runs]
    assert len(outbox_event(records)["Records"]) == 2 * len(runs)  # the creation's and the decision's, each run
    doubled = outbox_event(records + records)  # every record twice in the one batch, the copies after

    # The first run's callback notices cannot be queued the first time: its records fail and go again.
    failing, original, faults = runs[0], BaseClient._make_api_call, []

    def failing_once(client: Any, operation: str, params: dict[str, Any]) -> Any:
        if operation == "SendMessageBatch" and not faults and failing in json.dumps(params.get("Entries")):
            faults.append(operation)
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "injected"}}, operation)
        return original(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", failing_once)
    answer = lambda_runtime.invoke("dispatch", doubled)
    failed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
    assert faults
    assert failed
    run_of = {r["dynamodb"]["SequenceNumber"]: (stream_events(r) or ("",))[0] for r in records}
    assert {run_of[m] for m in failed} == {failing}  # the other runs' records stood
    again = {"Records": [r for r in doubled["Records"] if r["messageId"] in failed]}
    assert lambda_runtime.invoke("dispatch", again) == {"batchItemFailures": []}
    assert lambda_runtime.invoke("dispatch", doubled) == {"batchItemFailures": []}  # and the whole batch once more
    drain(delivering, rounds=100)  # every notice and webhook delivery as often as it was queued (three times)

    posted = [(h.path, json.loads(h.body)) for h in receiver.hits]
    notices = [body for path, body in posted if path == "/hook"]
    for run_id in runs:
        own = [n["type"] for n in notices if n["runId"] == run_id]
        assert own == ["interrupt.requested", "interrupt.resolved", "run.completed"], (run_id, own)
    webhooks = [body for path, body in posted if path == "/subscriber"]
    assert sorted(w["runId"] for w in webhooks) == sorted(runs), subscription
    for run_id in runs:
        assert audit_actions(services, run_id).count("interrupt.decided") == 1
        assert services.inbox.inbox(admin, 25, {"runId": run_id}, None)["interrupts"] == []


def test_the_expiring_cache_under_many_threads_keeps_its_bound_and_what_was_last_kept():
    from interlude.domain.expiring import ExpiringCache

    cache: ExpiringCache[int, int] = ExpiringCache(16, lambda: 0.0)

    def churn(offset: int) -> Callable[[], None]:
        def run() -> None:
            for i in range(2000):
                key = (i * 7 + offset) % 40
                cache.keep(key, offset, 60)
                cache.fresh((key + 1) % 40)
                if i % 13 == 0:
                    cache.forget((key + 2) % 40)
                assert len(list(cache)) <= 16

        return run

    outcomes = race(*[churn(n) for n in range(8)])
    assert outcomes == [None] * 8
    assert len(cache) <= 16
    cache.keep(99, 1, 60)
    assert cache.fresh(99) == (1,)


# -- a kept external event and the gates raised at once --------------------------------------------------------------


def waiting_for_payment(services, admin, **config: Any) -> str:
    data = {"eventType": "order.paid", "correlation": {"orderId": "race-1"}}
    nodes = [{"id": "wait", "typeId": "core.interrupt", "config": {"kind": "external-event", "data": data, **config}}]
    workflow = "race-pay-strict" if config else "race-pay"
    services.workflows.put_workflow(admin, workflow, WorkflowDefinition.model_validate({"nodes": nodes, "edges": []}))
    return start(services, admin, workflow)


def raised(services, run_id: str) -> list[dict[str, Any]]:
    return [e for e in services.store.read_events(run_id, consistent=True) if e["type"] == "interrupt.requested"]


def test_a_kept_event_taken_by_two_gates_raised_at_once_resumes_one_of_them(services, admin):
    from interlude.domain.models.tenant_requests import PostEventRequest

    kept = services.external_events.post_event(
        admin, PostEventRequest.model_validate({"eventType": "order.paid", "correlation": {"orderId": "race-1"}})
    )
    assert kept["kept"] is True
    first, second = waiting_for_payment(services, admin), waiting_for_payment(services, admin)

    # The outbox takes both raises side by side (dispatch's runs on threads, or two instances): the second's handler
    # runs whole while the first's has read the kept events and not yet written.
    def second_raise() -> None:
        instance().external_events.resolve_kept_events(second, raised(services, second))

    with before_first(WRITES, second_raise):
        instance().external_events.resolve_kept_events(first, raised(services, first))

    statuses = sorted(services.store.get_run(run_id)[0].status for run_id in (first, second))
    assert statuses == ["completed", "waiting-external"], statuses
    # Delivered again, each raise changes nothing.
    for run_id in (first, second):
        instance().external_events.resolve_kept_events(run_id, raised(services, run_id))
    assert sorted(services.store.get_run(run_id)[0].status for run_id in (first, second)) == statuses


def test_a_kept_event_a_gate_refuses_is_given_back_for_the_next_gate(services, admin):
    from interlude.domain.models.tenant_requests import PostEventRequest

    kept = services.external_events.post_event(
        admin,
        PostEventRequest.model_validate({"eventType": "order.paid", "correlation": {"orderId": "race-1"}, "payload": "x"}),
    )
    strict = {"type": "object", "required": ["payload"], "properties": {"payload": {"type": "integer"}}}
    refusing = waiting_for_payment(services, admin, resumeSchema=strict)
    instance().external_events.resolve_kept_events(refusing, raised(services, refusing))
    taking = waiting_for_payment(services, admin)
    instance().external_events.resolve_kept_events(taking, raised(services, taking))
    assert services.store.get_run(refusing)[0].status == "waiting-external"
    assert services.store.get_run(taking)[0].outputs["wait"]["eventId"] == kept["eventId"]


def test_a_gate_whose_resolve_failed_after_it_took_a_kept_event_uses_it_when_its_record_goes_again(
    services, admin, monkeypatch
):
    from botocore.client import BaseClient
    from botocore.exceptions import ClientError

    from interlude.domain.models.tenant_requests import PostEventRequest

    kept = services.external_events.post_event(
        admin, PostEventRequest.model_validate({"eventType": "order.paid", "correlation": {"orderId": "race-1"}})
    )
    run_id = waiting_for_payment(services, admin)
    original, faults = BaseClient._make_api_call, []

    def resolve_fails_once(client: Any, operation: str, params: dict[str, Any]) -> Any:
        if operation == "TransactWriteItems" and not faults:
            faults.append(operation)
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "injected"}}, operation)
        return original(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", resolve_fails_once)
    with pytest.raises(ClientError):
        instance().external_events.resolve_kept_events(run_id, raised(services, run_id))
    assert faults
    # The record goes again: the event its gate took is its own to use.
    instance().external_events.resolve_kept_events(run_id, raised(services, run_id))
    assert services.store.get_run(run_id)[0].outputs["wait"]["eventId"] == kept["eventId"]


def test_kept_events_and_gates_raised_at_once_in_one_dispatch_batch_pair_off_once_each(services, admin):
    from interlude.domain.models.tenant_requests import PostEventRequest
    from interlude.store.stream import stream_events
    from tests.support.stream import outbox_event

    Stream(TABLE).take()
    posted = [
        services.external_events.post_event(
            admin, PostEventRequest.model_validate({"eventType": "order.paid", "correlation": {"orderId": "race-1"}, "payload": i})
        )
        for i in range(2)
    ]
    runs = [waiting_for_payment(services, admin) for _ in range(RACERS)]
    records = [r for r in Stream(TABLE).take() if (stream_events(r) or ("",))[0] in runs]
    assert lambda_runtime.invoke("dispatch", outbox_event(records)) == {"batchItemFailures": []}
    used = [services.store.get_run(run_id)[0].outputs.get("wait", {}).get("eventId") for run_id in runs]
    taken = [event_id for event_id in used if event_id is not None]
    assert sorted(taken) == sorted(p["eventId"] for p in posted), used


# -- deadlines of one run fired side by side -------------------------------------------------------------------------


def test_gates_of_runs_timing_out_in_one_bucket_end_each_run_once(services, admin, clock_file):
    from interlude.domain import clock
    from interlude.local.schedules import SchedulePump

    gates = [
        {"id": f"gate{i}", "typeId": "core.approvalGate", "config": {"title": f"Gate {i}", "timeoutMs": 5000}}
        for i in (1, 2, 3)
    ]
    services.workflows.put_workflow(admin, "race-timeouts", WorkflowDefinition.model_validate({"nodes": gates, "edges": []}))
    runs = [start(services, admin, "race-timeouts") for _ in range(3)]
    Stream(TABLE).settle()  # their deadlines listed, in one bucket (or two, across a second's edge), its schedule made
    clock.advance(clock_file, 7)
    assert SchedulePump(wiring.LOCAL_SCHEDULE_GROUP).pump_once() >= 1  # the real timeouts handler, deadlines side by side
    for run_id in runs:
        events = services.store.read_events(run_id, consistent=True)
        types = [e["type"] for e in events]
        # The first gate whose deadline is recorded rejects the run; it ends once, the other gates' with it.
        assert (types.count("interrupt.resolved"), types.count("run.failed")) == (1, 1), types
        assert types.count("interrupt.cancelled") + types.count("node.cancelled") >= 2, types
        assert [e["sequence"] for e in events] == list(range(len(events)))
        assert services.store.get_run(run_id)[0].terminal


def test_a_completion_that_loses_to_the_runs_cancel_is_refused_and_lands_nothing(services, admin):
    worker, run_id, first = claimed_task(services, admin)
    key = new_api_key(services)
    cancel = partial(call, "POST", f"/runs/{wire(run_id)}/cancel", key, {})
    with before_first(WRITES, nested_request(cancel)) as cancelled:
        late = call("POST", f"/tasks/{first['taskToken']}/complete", worker, {"output": {"summary": "late"}})
    assert cancelled[0].status == 200, cancelled[0].text
    if late.status != 200:
        documented("completeTask", late)
    state = services.store.get_run(run_id)[0]
    assert state.status == "cancelled"
    assert "draft" not in state.outputs
    types = event_types(services, run_id)
    assert (types.count("run.cancelled"), types.count("node.completed")) == (1, 0), types


def test_a_heartbeat_that_loses_to_the_lease_check_is_refused_and_keeps_nothing(services, admin, clock_file):
    worker, run_id, first = claimed_task(services, admin)

    with before_first(WRITES, partial(lease_lapsed, clock_file)) as fired:
        beat = call("POST", f"/tasks/{first['taskToken']}/heartbeat", worker)
    assert fired[0] >= 1
    assert documented("heartbeatTask", beat) == "interlude.task_not_claimed"
    again = claim_task(worker)
    assert (again.status, again.json()["attempt"]) == (200, 2), again.text
    assert event_types(services, run_id).count("node.retried") == 1


# -- Slack ------------------------------------------------------------------------------------------------------------

slack = slack_tests.slack  # the fixture standing in for slack.com


def test_a_slack_click_that_loses_between_its_read_and_its_write_is_told_so_in_words(services, world, slack):
    tenant = world.tenant
    secret, run_id, message = slack_tests.asked(services, world, slack)

    def competitor() -> Any:
        return instance().decisions.resolve_interrupt(signed_in(services, "bob"), run_id, "review", {"action": "reject"})

    with before_first("TransactWriteItems", competitor):
        status, shown = slack_tests.click(message, "U0ANA", "interlude-approve", slack.url("/actions/1"), secret, tenant)
    # Slack shows a person an error for any status but 200: the clicker is told in words, only to them.
    assert status == 200
    assert shown["response_type"] == "ephemeral"
    assert "already decided" in shown["text"]
    assert event_types(services, run_id).count("interrupt.resolved") == 1


# -- sub-workflows: children ending side by side ---------------------------------------------------------------------


def test_children_ending_in_one_dispatch_batch_complete_their_parent_once(services, admin):
    from interlude.engine.subworkflows import child_run_id
    from interlude.store.stream import stream_events
    from tests.support.stream import outbox_event

    child = {
        "id": "race-child",
        "nodes": [{"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Approve?"}}],
        "edges": [],
    }
    spawns = [{"id": f"spawn{i}", "typeId": "core.subWorkflow", "config": {"workflowId": "race-child"}} for i in range(4)]
    fan_in = {"id": "after", "typeId": "core.transform", "config": {"outputs": {"done": True}}}
    parent = {
        "id": "race-parent",
        "nodes": [*spawns, fan_in],
        "edges": [{"sourceNodeId": s["id"], "targetNodeId": "after", "triggerRule": "all_success"} for s in spawns],
    }
    for definition in (child, parent):
        services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
    run_id = start(services, admin, "race-parent")
    stream = Stream(TABLE)
    stream.settle()
    children = [child_run_id(run_id, s["id"], 1) for s in spawns]
    assert all(services.store.get_run(c)[0].status == "waiting-approval" for c in children)
    for child_id in children:
        services.decisions.resolve_interrupt(admin, child_id, "gate", {"action": "accept"})
    # The children's ends in one batch: their runs side by side, each landing its outcome on the one parent.
    ended = [r for r in stream.take() if (stream_events(r) or ("",))[0] in children]
    assert lambda_runtime.invoke("dispatch", outbox_event(ended + ended)) == {"batchItemFailures": []}
    stream.settle()
    events = services.store.read_events(run_id, consistent=True)
    completed = [e["nodeId"] for e in events if e["type"] == "node.completed"]
    assert sorted(completed) == sorted([*(s["id"] for s in spawns), "after"]), completed
    assert [e["type"] for e in events].count("run.completed") == 1
    assert [e["sequence"] for e in events] == list(range(len(events)))
