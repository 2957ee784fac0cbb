"""The standing resilience suite (issue 11): a fault before and after every AWS call of each operation, then the
client's retry, then the whole table checked for partial states.

Each operation runs once unharmed while every AWS call its handler makes is counted (botocore `before-call` /
`after-call` hooks on the default session, which every client the handlers create inherits). Then, in a fresh
moto world per point, it runs again with one fault at call i, before the call (nothing reached AWS) or after it
(AWS did the work, the answer was lost; not tried after a read, where it is the fault before), as a server error (ClientError) or a connection error, and the client
retries as it would: the same Idempotency-Key for API calls, redelivery for the stream, the schedule and the
queue. A call added to a handler later is a new injection point without touching this file.

Whole means: each run's event log is contiguous and matches its head, every interrupt item has its run head and
agrees with it (or, put by a creation whose transaction never came, is read by nothing and expires: docs/adr/0139),
no idempotency record is left in flight, no interrupt is resolved twice, and the operation's own
outcome happened exactly once. `pytest -s` prints the points tried and the partial states found per operation.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from moto import mock_aws
from moto.dynamodb.models import dynamodb_backends

from interlude import sdk_clients, wiring
from interlude.adapters import batch
from interlude.adapters.keyring_store import ensure_key_ring
from interlude.composition import Services
from interlude.domain import clock, formats
from interlude.domain.audit import AuditDraft
from interlude.domain.models.tenants import DEFAULT_RETENTION_DAYS, TenantSettings
from interlude.engine.tasks import task_id
from interlude.local import lambda_runtime
from interlude.local.http_gateway import to_event
from interlude.local.schedules import create_local_deadline_resources
from interlude.local.sqs_pump import create_queues, export_queue_urls, to_event_record
from interlude.rules import run_search
from interlude.rules.audit import HEAD_LAG_ENTRIES, entry_hash
from interlude.rules.retention import DAY_S
from interlude.store import attributes as a
from interlude.store import audit as audit_log
from interlude.store.due_index import DueIndex
from interlude.store.effects import EffectStore
from interlude.store.facade import Store
from interlude.store.idempotency import IN_PROGRESS
from interlude.store.idempotency import SORT_KEY as IDEM_SK
from interlude.store.inbox import due_of, run_interrupts
from interlude.store.layout import INTERRUPT_SK_PREFIX, RUN_SK, run_id_of, run_pk
from interlude.store.provisioning import create_tables, entries_table_beside
from tests.integration.conftest import new_api_key
from tests.support.local_stack import FIXTURES, wire
from tests.support.moto_world import current_account
from tests.support.receiver import Receiver
from tests.support.stream import Stream, dispatch

TABLE = "interlude-test"
ENTRIES_TABLE = entries_table_beside(TABLE)
TENANT = "t1"
MAX_RETRIES = 4
LONG_MS = 600_000
PAST_LONG_S = 602
VISIBILITY_S = 120.0  # past any delivery lease (connect + total timeout + the worker's margin)
FAULTS: dict[str, Callable[[str], Exception]] = {
    "server": lambda op: ClientError({"Error": {"Code": "InternalServerError", "Message": "injected"}}, op),
    "throttle": lambda op: ClientError(
        {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "injected"}}, op
    ),
    "connection": lambda _: EndpointConnectionError(endpoint_url="https://127.0.0.1:1"),
}
# Before a call: a server error and a connection error. After it (the work done, the answer lost): the same two.
KINDS = ("server", "connection")
# Calls that change nothing. A fault after one of them is the fault before it: the handler gets the same exception
# from the same call, and the table, queues, schedules and secrets hold what they held (the call only read), so
# the retry starts from the same world. Only their "before" points are tried.
READS = frozenset({"DynamoDB.GetItem", "DynamoDB.BatchGetItem", "DynamoDB.Query", "DynamoDB.Scan",
                   "Secrets Manager.GetSecretValue"})  # fmt: skip
TALLY: dict[str, tuple[int, int]] = {}


@dataclass
class Injector:
    """Counts the AWS calls made while armed and raises one fault at the chosen call."""

    calls: list[str] = field(default_factory=list)
    armed: bool = False
    at: tuple[int, str, str] | None = None  # (call index, "before" | "after", fault kind)
    fired: bool = False

    def before(self, model: Any, **_: Any) -> None:
        if not self.armed:
            return
        self.calls.append(f"{model.service_model.service_id}.{model.name}")
        self._maybe_fire(len(self.calls) - 1, "before", model.name)

    def after(self, model: Any, **_: Any) -> None:
        if self.armed:
            self._maybe_fire(len(self.calls) - 1, "after", model.name)

    def _maybe_fire(self, index: int, when: str, operation: str) -> None:
        if self.at is not None and not self.fired and self.at[:2] == (index, when):
            self.fired = True
            raise FAULTS[self.at[2]](operation)


@dataclass
class World:
    services: Services
    api_key: str
    receiver: Receiver
    stream: Stream
    clock_file: Path
    faults: Injector
    tenant: str = TENANT
    # The retentionDays each attempt's tenant is given (None: the default).
    retention_days: int | None = None
    clients: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        """The checks' own client for `service`, made once per world (a boto3 client costs ≈ 20 ms of CPU)."""
        if service not in self.clients:
            self.clients[service] = boto3.client(service)
        return self.clients[service]

    def api(self, method: str, path: str, body: Any = None, key: str | None = None) -> dict[str, Any]:
        headers = {"authorization": f"Bearer {self.api_key}", "content-type": "application/json"}
        if key is not None:
            headers["idempotency-key"] = key
        raw = b"" if body is None else json.dumps(body).encode()
        return lambda_runtime.invoke("api", to_event(method, path, headers, raw, "127.0.0.1"))

    def register(self, name: str, **config: Any) -> str:
        definition = json.loads((FIXTURES / f"{name}.json").read_text())
        definition["nodes"][0]["config"].update(config)
        assert self.api("PUT", f"/workflows/{definition['id']}", definition)["statusCode"] == 201
        return definition["id"]

    def start(self, workflow: str, **extra: Any) -> str:
        created = self.api("POST", "/runs", {"workflowId": workflow, **extra})
        assert created["statusCode"] == 201, created
        return json.loads(created["body"])["runId"]

    def settle(self) -> None:
        """Deliver the stream to dispatch until it is quiet (the event source mapping's job), unharmed."""
        while fresh := self.stream.take():
            assert dispatch(fresh) == {"batchItemFailures": []}

    def events(self, run_id: str) -> list[dict[str, Any]]:
        return self.services.store.read_events(run_id)


# A world of its own per operation: faults are injected into every AWS call of its default session.
@contextmanager
def world(tmp_path: Path) -> Iterator[World]:
    receiver = Receiver().start()
    with pytest.MonkeyPatch.context() as mp, mock_aws():
        env = {
            wiring.TABLE_NAME_ENV: TABLE,
            wiring.ENTRIES_TABLE_NAME_ENV: ENTRIES_TABLE,
            "PUBLIC_BASE_URL": "https://interlude.example.com",
            "INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS": "1",
            "INTERLUDE_CALLBACK_BACKOFF_BASE_S": "0",
            "INTERLUDE_CALLBACK_CONNECT_TIMEOUT_S": "2",
            "INTERLUDE_CALLBACK_TOTAL_TIMEOUT_S": "4",
            "KEY_RING_SECRET": "interlude-test/token-keys",
        }
        for name, value in env.items():
            mp.setenv(name, value)
        clock_file = tmp_path / f"clock-{uuid.uuid4().hex}"
        clock.reset(clock_file)
        mp.setenv(clock.CLOCK_FILE_ENV, str(clock_file))
        lambda_runtime.fresh_instances()
        # A session of this world's own, which every client of the functions comes from: the faults are injected there.
        sdk_clients.forget_clients()
        faults = Injector()
        events = sdk_clients.session().get_component("event_emitter")
        events.register("before-call", faults.before)
        events.register("after-call", faults.after)
        create_tables(boto3.client("dynamodb"), TABLE, ENTRIES_TABLE)
        urls = create_queues(boto3.client("sqs"), TABLE)
        for queue in wiring.QUEUES:
            mp.setenv(queue.url_env, urls[queue.name])
        export_queue_urls(urls)
        for name, value in create_local_deadline_resources().items():
            mp.setenv(name, value)
        ensure_key_ring(env["KEY_RING_SECRET"])
        services = Services(Store(TABLE, ENTRIES_TABLE))
        try:
            yield World(services, new_api_key(services, tenant=TENANT), receiver, Stream(TABLE), clock_file, faults)
        finally:
            lambda_runtime.fresh_instances()
            events.unregister("before-call", faults.before)
            events.unregister("after-call", faults.after)
            receiver.close()


# -- what whole means --------------------------------------------------------------------------------


def tenant_items(w: World, tenant: str) -> list[dict[str, Any]]:
    """Every item of the tenant in both tables (docs/adr/0161), read from moto's tables by partition key: a Scan read
    the whole table, which grows by a tenant per attempt (a third of a long operation's time went to it)."""
    backend = dynamodb_backends[current_account()][w.client("dynamodb").meta.region_name]
    prefix = f"T#{tenant}#"
    return [a.plain(item.to_json()["Attributes"]) for name in (TABLE, ENTRIES_TABLE)
            for pk, by_sk in backend.get_table(name).items.items() if pk.value.startswith(prefix)
            for item in by_sk.values()]  # fmt: skip


def partial_states(w: World) -> list[str]:
    """Every way the tenant's part of the table is not whole, across every run in it."""
    items = tenant_items(w, w.tenant)
    problems = [f"idempotency record left in flight: {i['pk'][:40]}" for i in items
                if i["sk"] == IDEM_SK and i.get("status") == IN_PROGRESS]  # fmt: skip
    heads = {i["pk"] for i in items if i["sk"] == RUN_SK}
    for item in items:
        if item["sk"].startswith((INTERRUPT_SK_PREFIX, wiring.EVENT_ITEM_PREFIX)) and item["pk"] not in heads:
            problems += headless_item_problems(w, item)
    problems += headless_items_never_expiring(items, heads)
    problems += unwritten_gates_entries_never_expiring(items, heads)
    for pk in heads:
        run_id = run_id_of(pk)
        assert run_id is not None
        state, _ = w.services.store.get_run(run_id)
        events = w.events(run_id)
        if [e["sequence"] for e in events] != list(range(state.nextSeq)):
            problems.append(f"{run_id}: event sequences {[e['sequence'] for e in events]} for nextSeq {state.nextSeq}")
        resolved = [e["payload"].get("interruptId") for e in events if e["type"] == "interrupt.resolved"]
        if len(resolved) != len(set(resolved)):
            problems.append(f"{run_id}: an interrupt resolved twice")
        # Each item's status as every reader takes it: its own (format 1), or its close's event (format 3).
        open_items = {d["interruptId"] for d in run_interrupts(w.services.store.client, TABLE, run_id) if d["status"] == "open"}
        open_in_head = {oi.interruptId for oi in state.interrupts.values()}
        if open_items != open_in_head:
            problems.append(f"{run_id}: open interrupt items {open_items} but the head holds {open_in_head}")
    return problems + audit_partial_states(w, items)


def headless_item_problems(w: World, item: dict[str, Any]) -> list[str]:
    """How a gate's item or an event batch without its run head is not whole. A new run's gates are put before the
    transaction that creates it (docs/adr/0139), and from 0.7.0 its event batch (docs/adr/0165): one whose transaction
    never came leaves them, whole only if they go by themselves (the run's provisional expiry, or its search entries'
    when that was near from the start: docs/adr/0147) and no reader shows them (each trusts them only with its head;
    the outbox drops such a batch once its head can no longer come)."""
    kind = "interrupt item" if item["sk"].startswith(INTERRUPT_SK_PREFIX) else "event batch"
    where = f"{item['pk']} {item['sk']}"
    run_id = run_id_of(item["pk"])
    assert run_id is not None
    days = (w.retention_days or DEFAULT_RETENTION_DAYS) + run_search.SEARCH_ENTRY_MARGIN_DAYS
    if wiring.TTL_ATTRIBUTE not in item:
        problems = [f"{kind} without its run head, never expiring: {where}"]
    else:
        left = int(item[wiring.TTL_ATTRIBUTE]) - clock.now().timestamp()
        problems = [] if left <= days * DAY_S else [f"{kind} without its run head, expiring in {left:.0f} s: {where}"]
    principal = w.services.keys.authenticate(f"Bearer {w.api_key}")
    listed = [*w.services.inbox.inbox(principal, 100, {}, None)["interrupts"],
              *w.services.inbox.inbox(principal, 100, {"runId": run_id}, None)["interrupts"]]  # fmt: skip
    if any(i["runId"] == run_id for i in listed):
        problems.append(f"{kind} without its run head, listed in the inbox: {where}")
    if (got := w.api("GET", f"/runs/{wire(run_id)}"))["statusCode"] != 404:
        problems.append(f"{kind} without its run head, its run answered {got['statusCode']}: {where}")
    return problems


def headless_items_never_expiring(items: list[dict[str, Any]], heads: set[str]) -> list[str]:
    """Items of a run without its head (a create stopped before its transaction left them: its gates, its listing,
    search and inbox entries, each naming the run) that would stay for ever: every one must expire by itself
    (docs/adr/0139, 0147, 0154), whether or not a reader ever meets it."""

    def run_of(item: dict[str, Any]) -> str | None:
        named = item.get("runId")
        return named if isinstance(named, str) else run_id_of(item["pk"])

    return [
        f"item of a run without its head, never expiring: {i['pk']} {i['sk']}"
        for i in items
        if (run := run_of(i)) is not None and run_pk(run) not in heads and wiring.TTL_ATTRIBUTE not in i
    ]


def unwritten_gates_entries_never_expiring(items: list[dict[str, Any]], heads: set[str]) -> list[str]:
    """Inbox entries of a run that has its head, of a gate it never wrote, that would stay for ever: every one must
    expire by itself (docs/adr/0154)."""
    return [
        f"inbox entry of a gate never written, never expiring: {i['pk']} {i['sk']}"
        for i in unwritten_gates_entries(items, heads)
        if wiring.TTL_ATTRIBUTE not in i
    ]


def unwritten_gates_entries(items: list[dict[str, Any]], heads: set[str]) -> list[dict[str, Any]]:
    """Inbox entries of a run that has its head, of a gate it never wrote: a transition that opens one puts them
    before its transaction; stopped in between, or refused, it leaves them, and its retry opens the gate raised at
    another instant, under other keys."""
    written = {
        f"{at}#{gate['interruptId']}"
        for gate in items
        if gate["sk"].startswith(INTERRUPT_SK_PREFIX)
        for at in (gate.get("raisedAt"), due_of(gate.get("deadline")))
        if at is not None
    }
    return [
        i for i in items if f"#{wiring.INBOX.prefix}#" in i["pk"] and run_pk(i["runId"]) in heads and i["sk"] not in written
    ]


def audit_partial_states(w: World, items: list[dict[str, Any]]) -> list[str]:
    """Every way the tenant's audit chains are not whole: an entry missing, past its head (more than a head that may
    lag leaves there: docs/adr/0172) or not chained to the one before, or one event batch's draft chained twice."""
    problems: list[str] = []
    heads = {i["pk"].rsplit("#", 1)[1]: i for i in items if i["sk"] == audit_log.HEAD_SK}
    lag = HEAD_LAG_ENTRIES - 1 if formats.AUDIT_HEAD_LAGS_WRITTEN else 0
    for chain, head in heads.items():
        pk = audit_log.log_pk(w.tenant, int(chain))
        entries = sorted((i for i in items if i["pk"] == pk and i["sk"].startswith(audit_log.ENTRY_SK_PREFIX)), key=lambda i: i["sk"])
        documents = [json.loads(i["entry"]) for i in entries]
        at = int(head["seq"])
        if [d["seq"] for d in documents] != list(range(1, len(documents) + 1)) or not at <= len(documents) <= at + lag:
            problems.append(f"chain {chain}: entries {[d['seq'] for d in documents]} for head {head['seq']}")
        if any(d["prevHash"] != entry_hash(before) for before, d in zip(documents, documents[1:], strict=False)):
            problems.append(f"chain {chain}: an entry not chained to the one before")
        if 0 < at <= len(documents) and entry_hash(documents[at - 1]) != head["hash"]:
            problems.append(f"chain {chain}: its head does not hold its entry's hash")
        sources = [i["source"] for i in entries if "source" in i]
        if len(sources) != len(set(sources)):
            problems.append(f"chain {chain}: an event batch's draft chained twice")
    return problems


def api_until_answered(w: World, method: str, path: str, body: Any, key: str) -> dict[str, Any]:
    """A client retrying with the same key until it hears a final answer."""
    for _ in range(MAX_RETRIES):
        got = w.api(method, path, body, key)
        error = json.loads(got["body"]).get("error") if got["statusCode"] >= 400 else None
        if got["statusCode"] < 500 and error != "idempotency_in_flight":
            return got
    return got


def redelivered(invoke: Callable[[], Any], failed: Callable[[Any], bool], wait: Callable[[], None] = int) -> Any:
    """An at-least-once source handing the same input over again (after `wait`) until the handler takes it."""
    got: Any = None
    for _ in range(MAX_RETRIES):
        try:
            got = invoke()
        except Exception as exc:
            got = exc
        else:
            if not failed(got):
                return got
        wait()
    raise AssertionError(f"the handler never took the redelivered input: {got}")


# -- the operations ----------------------------------------------------------------------------------


@dataclass
class Operation:
    """setup (unharmed) → act (under the fault, then retried by its client) → check (its own outcome)."""

    setup: Callable[[World], dict[str, Any]]
    act: Callable[[World, dict[str, Any]], Any]
    check: Callable[[World, dict[str, Any], Any], list[str]]


def _gate(w: World) -> dict[str, Any]:
    return {"run": w.start(w.register("conformance-approval")), "key": uuid.uuid4().hex + "-resilience"}


def _runs(w: World) -> int:
    return sum(i["sk"] == RUN_SK for i in tenant_items(w, w.tenant))


def _create_setup(w: World) -> dict[str, Any]:
    workflow = w.register("conformance-approval")
    return {"workflow": workflow, "key": uuid.uuid4().hex + "-resilience", "runs": _runs(w)}


def _create_act(w: World, ctx: dict[str, Any]) -> Any:
    return api_until_answered(w, "POST", "/runs", {"workflowId": ctx["workflow"]}, ctx["key"])


def _create_check(w: World, ctx: dict[str, Any], got: Any) -> list[str]:
    if got["statusCode"] != 201:
        return [f"createRun answered {got['statusCode']} {got['body'][:120]}"]
    again = w.api("POST", "/runs", {"workflowId": ctx["workflow"]}, ctx["key"])
    problems = [] if again["body"] == got["body"] else ["createRun replay differs from the answer"]
    started = _runs(w) - ctx["runs"]
    return problems + ([] if started == 1 else [f"{started} runs for one createRun"])


def _resolved(w: World, run_id: str) -> list[dict[str, Any]]:
    return [e["payload"] for e in w.events(run_id) if e["type"] == "interrupt.resolved"]


def _resolve_act(w: World, ctx: dict[str, Any]) -> Any:
    body = {"resumeValue": {"action": "accept"}}
    return api_until_answered(w, "POST", f"/runs/{wire(ctx['run'])}/interrupts/gate", body, ctx["key"])


def _resolve_check(w: World, ctx: dict[str, Any], got: Any) -> list[str]:
    problems = [] if got["statusCode"] == 200 else [f"resolve answered {got['statusCode']} {got['body'][:120]}"]
    count = len(_resolved(w, ctx["run"]))
    problems += [] if count == 1 else [f"{count} resolutions for one resolve"]
    # The decided gate's inbox entries leave when its record reaches dispatch, whatever stopped the request.
    w.settle()
    left = [
        i for i in tenant_items(w, w.tenant) if f"#{wiring.INBOX.prefix}#" in i["pk"] and i.get("runId") == ctx["run"]
    ]
    return problems + ([] if not left else [f"{len(left)} inbox entries left for the decided gate"])


def _vote_setup(w: World) -> dict[str, Any]:
    return {"run": w.start(w.register("conformance-interrupt-quorum")), "key": uuid.uuid4().hex + "-resilience"}


def _vote_check(w: World, ctx: dict[str, Any], got: Any) -> list[str]:
    if got["statusCode"] != 200:
        return [f"vote answered {got['statusCode']} {got['body'][:120]}"]
    state, _ = w.services.store.get_run(ctx["run"])
    votes = state.interrupts["gate"].votes if "gate" in state.interrupts else []
    return [] if len(votes) == 1 else [f"{len(votes)} votes recorded for one vote"]


def _cancel_act(w: World, ctx: dict[str, Any]) -> Any:
    return api_until_answered(w, "POST", f"/runs/{wire(ctx['run'])}/cancel", {"reason": "drill"}, ctx["key"])


def _cancel_check(w: World, ctx: dict[str, Any], got: Any) -> list[str]:
    if got["statusCode"] != 200:
        return [f"cancel answered {got['statusCode']} {got['body'][:120]}"]
    ends = [e for e in w.events(ctx["run"]) if e["type"] == "run.cancelled"]
    return [] if len(ends) == 1 else [f"{len(ends)} run.cancelled events for one cancel"]


def _schedule_inputs(w: World, run_id: str) -> list[dict[str, Any]]:
    """The target input of every schedule that fires a deadline of the run: its own (a task's check), or its bucket's
    (ADR 0132: one for each of the run's deadlines its partition of the due index lists)."""
    scheduler = w.client("scheduler")
    index = DueIndex(TABLE, w.client("dynamodb"))
    inputs = []
    for listed in scheduler.list_schedules(GroupName=wiring.LOCAL_SCHEDULE_GROUP)["Schedules"]:
        got = scheduler.get_schedule(Name=listed["Name"], GroupName=wiring.LOCAL_SCHEDULE_GROUP)
        body = json.loads(got["Target"]["Input"])
        if body.get("runId") == run_id:
            inputs.append(body)
        elif "dueSecond" in body:
            inputs += [body for listed in index.due(body["dueSecond"], body["shard"]) if listed["runId"] == run_id]
    return inputs


def _notices(w: World, run_id: str) -> list[dict[str, Any]]:
    """Take the callback queue's visible messages; those of the run, as event-source records."""
    sqs = w.client("sqs")
    url = os.environ[wiring.queue("callbacks").url_env]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    mine = []
    while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        mine += [to_event_record(m, arn) for m in got if run_id in m["Body"] or wire(run_id) in m["Body"]]
    return mine


def _dispatch_setup(w: World) -> dict[str, Any]:
    w.settle()
    workflow = w.register("conformance-approval-timeout", timeoutMs=LONG_MS)
    run_id = w.start(workflow, callbackUrl=w.receiver.url())
    return {"run": run_id, "records": w.stream.take()}


def _dispatch_act(w: World, ctx: dict[str, Any]) -> Any:
    return redelivered(lambda: dispatch(ctx["records"]), lambda got: bool(got["batchItemFailures"]))


def _dispatch_check(w: World, ctx: dict[str, Any], got: Any) -> list[str]:
    schedules = len(_schedule_inputs(w, ctx["run"]))
    problems = [] if schedules == 1 else [f"{schedules} schedules for one deadline"]
    return problems + ([] if _notices(w, ctx["run"]) else ["the interrupt's callback notice was never queued"])


def _audit_setup(w: World) -> dict[str, Any]:
    """Two runs whose chains differ, decided (each decision's entry a draft on its event batch): their records, for
    the appender (docs/adr/0128)."""
    w.settle()
    workflow = w.register("conformance-approval")
    runs: dict[int, str] = {}
    records: list[dict] = []
    log = w.services.store.audit_log
    while len(runs) < 2:
        run_id = w.start(workflow)
        # A run on a chain already chosen, or on one that holds an entry already (the attempt's new API key's, on the
        # chain its id draws), is left out with its records: every attempt then hands the appender the same two runs'
        # records on two new chains, whatever number of runs it took to find them, and makes the same calls.
        started = w.stream.take()
        chain = audit_log.chain_of_member(run_id)
        if chain not in runs and log.head(w.tenant, chain).seq == 0:
            runs[chain] = run_id
            records += started
    for run_id in runs.values():
        body = {"resumeValue": {"action": "accept"}}
        assert w.api("POST", f"/runs/{wire(run_id)}/interrupts/gate", body)["statusCode"] == 200
    return {"runs": list(runs.values()), "records": records + w.stream.take()}


def _audit_marked_setup(w: World) -> dict[str, Any]:
    """The same, on chains that already hold an entry and are on the checkpoint sweep's list (marked), as a busy
    tenant's are: each chain's entries are put one by one, then its head moved by one UpdateItem (docs/adr/0135), so
    a fault between them leaves entries past the head for the record's next delivery to adopt."""
    ctx = _audit_setup(w)
    log = w.services.store.audit_log
    for run_id in ctx["runs"]:
        earlier = AuditDraft(w.tenant, "interrupt.voted", {"subjectId": "earlier"}, {"runId": run_id}, clock.iso(clock.now()), {})
        log.append_drafts(w.tenant, audit_log.chain_of_member(run_id), [(earlier, f"earlier/{run_id}")], time.time())
    return ctx


def _audit_act(w: World, ctx: dict[str, Any]) -> Any:
    # The batch's runs one after the other (dispatch runs them on threads side by side): every attempt then makes the
    # same calls in the same order, so a fault at call i is the same fault each time.
    side_by_side = batch.side_by_side
    batch.side_by_side = lambda job, items, workers: [job(item) for item in items]
    try:
        return _dispatch_act(w, ctx)
    finally:
        batch.side_by_side = side_by_side


def _audit_check(w: World, ctx: dict[str, Any], got: Any) -> list[str]:
    problems = []
    log = w.services.store.audit_log
    for run_id in ctx["runs"]:
        chain = audit_log.chain_of_member(run_id)
        tail = log.tails(w.tenant, {chain: log.head(w.tenant, chain)})[chain]
        entries = [e for _, e in log.entries(w.tenant, chain, 1, tail.seq)]
        decided = [e for e in entries if e["action"] == "interrupt.decided" and e["target"]["runId"] == run_id]
        problems += [] if len(decided) == 1 else [f"{len(decided)} entries for the decision of {run_id}"]
    return problems


def _timeout_setup(w: World) -> dict[str, Any]:
    run_id = w.start(w.register("conformance-approval-timeout", timeoutMs=LONG_MS))
    w.settle()
    (body,) = _schedule_inputs(w, run_id)
    clock.advance(w.clock_file, PAST_LONG_S)
    return {"run": run_id, "input": body}


def _timeout_act(w: World, ctx: dict[str, Any]) -> Any:
    return redelivered(lambda: lambda_runtime.invoke("timeouts", ctx["input"]), lambda _: False)


def _timeout_check(w: World, ctx: dict[str, Any], got: Any) -> list[str]:
    resolved = _resolved(w, ctx["run"])
    if len(resolved) != 1 or resolved[0].get("action") != "timeout":
        return [f"the deadline resolved the gate {len(resolved)} times: {resolved}"]
    return []


def _callback_setup(w: World) -> dict[str, Any]:
    run_id = w.start(w.register("conformance-approval"), callbackUrl=w.receiver.url())
    w.settle()
    (record,) = _notices(w, run_id)
    return {"run": run_id, "record": record}


def _callback_act(w: World, ctx: dict[str, Any]) -> Any:
    # SQS hands a message back only once its visibility timeout ran out, which the worker sets to at least the
    # delivery lease of a claim it could not finish; the worker's clock moves on by that much between deliveries.
    worker = lambda_runtime.handler_module("callbacks").worker()
    later = [0.0]
    worker.clock = lambda: time.time() + later[0]

    def visibility_timeout_passes() -> None:
        later[0] += VISIBILITY_S

    return redelivered(
        lambda: lambda_runtime.invoke("callbacks", {"Records": [ctx["record"]]}),
        lambda got: bool(got["batchItemFailures"]),
        visibility_timeout_passes,
    )


def _callback_check(w: World, ctx: dict[str, Any], got: Any) -> list[str]:
    delivered = [
        hit for hit in w.receiver.hits if wire(ctx["run"]).encode() in hit.body or ctx["run"].encode() in hit.body
    ]
    attempts = w.services.delivery_records.attempts(ctx["run"])
    problems = [] if delivered else ["the notice never reached the receiver"]
    if not any(at.get("status") == "succeeded" for at in attempts):
        problems.append(f"no delivered attempt recorded: {attempts}")
    return problems


def _bundle_setup(w: World) -> dict[str, Any]:
    """A run whose gate is decided as it ends: the decision's and the end's notices, one message (format 10)."""
    run_id = w.start(w.register("conformance-approval"), callbackUrl=w.receiver.url())
    w.settle()
    _notices(w, run_id)  # the gate's own notice, taken
    decided = w.api("POST", f"/runs/{wire(run_id)}/interrupts/gate", {"resumeValue": {"action": "accept"}})
    assert decided["statusCode"] == 200, decided
    w.settle()
    (record,) = _notices(w, run_id)
    assert len(json.loads(record["body"])["notices"]) == 2
    return {"run": run_id, "record": record}


def _bundle_check(w: World, ctx: dict[str, Any], got: Any) -> list[str]:
    sent = {json.loads(hit.body)["type"] for hit in w.receiver.hits if wire(ctx["run"]).encode() in hit.body or ctx["run"].encode() in hit.body}
    problems = [] if sent == {"interrupt.resolved", "run.completed"} else [f"the receiver got {sorted(sent)}"]
    succeeded = {at["type"] for at in w.services.delivery_records.attempts(ctx["run"]) if at.get("status") == "succeeded"}
    if succeeded != {"interrupt.resolved", "run.completed"}:
        problems.append(f"delivered attempts recorded for {sorted(succeeded)}")
    return problems


def _action_setup(w: World) -> dict[str, Any]:
    order = uuid.uuid4().hex
    definition = {
        "id": "refund",
        "name": "Refund after approval",
        "nodes": [
            {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Refund?"}},
            {"id": "refund", "typeId": "core.http", "config": {"url": w.receiver.url(), "body": {"order": order}}},
            # The action's completion opens a gate: its inbox entries are put before that transaction (docs/adr/0154).
            {"id": "confirm", "typeId": "core.approvalGate", "config": {"title": "Refunded?"}},
        ],
        "edges": [
            {"id": "g-r", "sourceNodeId": "gate", "targetNodeId": "refund"},
            {"id": "r-c", "sourceNodeId": "refund", "targetNodeId": "confirm"},
        ],
    }
    assert w.api("PUT", "/workflows/refund", definition)["statusCode"] == 201
    run_id = w.start("refund")
    w.services.decisions.resolve_interrupt(
        w.services.keys.authenticate(f"Bearer {w.api_key}"), run_id, "gate", {"action": "accept"}
    )
    w.settle()
    sqs = w.client("sqs")
    url = os.environ[wiring.queue("actions").url_env]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    mine = []
    while got := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        mine += [m for m in got if json.loads(m["Body"])["runId"] == run_id]
    (message,) = mine
    return {"run": run_id, "order": order, "record": to_event_record(message, arn)}


def _long_open_action_setup(w: World) -> dict[str, Any]:
    """The action worker's run kept open past retentionDays + 60 days before its action completes: its items' and its
    search entries' expiries are near, so the gate the action opens takes one from the transition's instant
    (docs/adr/0154, store/transitions.gates_expiry)."""
    ctx = _action_setup(w)
    waited = (w.retention_days or DEFAULT_RETENTION_DAYS) + run_search.SEARCH_ENTRY_MARGIN_DAYS - run_search.LISTING_KEPT_DAYS
    clock.advance(w.clock_file, (waited + 1) * DAY_S)
    return ctx


def _action_act(w: World, ctx: dict[str, Any]) -> Any:
    # As for callbacks: a message comes back once the lease its claim hid it for has run out.
    worker = lambda_runtime.handler_module("actions").worker()
    later = [0.0]
    worker.clock = lambda: time.time() + later[0]

    def lease_passes() -> None:
        later[0] += VISIBILITY_S

    return redelivered(
        lambda: lambda_runtime.invoke("actions", {"Records": [ctx["record"]]}),
        lambda got: bool(got["batchItemFailures"]),
        lease_passes,
    )


def _action_check(w: World, ctx: dict[str, Any], got: Any) -> list[str]:
    calls = [hit for hit in w.receiver.hits if ctx["order"].encode() in hit.body]
    keys = {hit.headers.get("idempotency-key") for hit in calls}
    completed = [e for e in w.events(ctx["run"]) if e["type"] == "node.completed" and e.get("nodeId") == "refund"]
    ledger = EffectStore(w.services.store).ledger(ctx["run"])
    problems = [] if calls else ["the action never reached the receiver"]
    problems += [] if len(keys) == 1 else [f"{len(keys)} Idempotency-Keys for one effect"]
    problems += [] if len(completed) == 1 else [f"the action's node completed {len(completed)} times"]
    if [r["state"] for r in ledger] != ["completed"]:
        problems.append(f"effect records {ledger}")
    return problems


# -- task workers: made by the outbox, claimed, completed (issue 31: plain writes in an order, not transactions) --

TASK_WORKFLOW = {
    "id": "drafts",
    "name": "drafts",
    "nodes": [
        {
            "id": "draft",
            "typeId": "core.task",
            "config": {"taskType": "summarise", "heartbeatTimeoutSeconds": 10, "retry_config": {"initial_interval": 0}},
        }
    ],
    "edges": [],
}


def _task_run(w: World) -> dict[str, Any]:
    assert w.api("PUT", "/workflows/drafts", TASK_WORKFLOW)["statusCode"] == 201
    worker = new_api_key(w.services, subject="worker", tenant=w.tenant, scopes=["tasks:work"])
    return {"run": w.start("drafts"), "worker": worker}


def _task_call(w: World, ctx: dict[str, Any], path: str, body: Any) -> dict[str, Any]:
    """A worker's call, sent again while it answers 5xx (what a worker does)."""
    headers = {"authorization": f"Bearer {ctx['worker']}", "content-type": "application/json"}
    for _ in range(MAX_RETRIES):
        got = lambda_runtime.invoke("api", to_event("POST", path, headers, json.dumps(body).encode(), "127.0.0.1"))
        if got["statusCode"] < 500:
            return got
    return got


def _claim(w: World, ctx: dict[str, Any]) -> dict[str, Any]:
    return _task_call(w, ctx, "/tasks:claim", {"queues": ["summarise"], "waitSeconds": 0})


def _task_item(w: World, run_id: str) -> Any:
    return w.services.tasks.tasks.get(task_id(run_id, "draft", 1))


def _lapsed_then_claimed(w: World, ctx: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """A claim whose answer was lost holds the task until its check lapses it: the check fires, the task is claimed
    again. ([problems], the claim's answer)."""
    task = _task_item(w, ctx["run"])
    checks = [b for b in _schedule_inputs(w, ctx["run"]) if b.get("purpose") == "task" and b["due"] == task.check_at]
    if not checks:
        return [f"a claimed task with no check pending at {task.check_at}"], {}
    clock.advance(w.clock_file, task.check_at - clock.now().timestamp() + 1)
    lambda_runtime.invoke("timeouts", checks[0])
    return [], _claim(w, ctx)


def _task_dispatch_setup(w: World) -> dict[str, Any]:
    w.settle()
    ctx = _task_run(w)
    return {**ctx, "records": w.stream.take()}


def _task_dispatch_check(w: World, ctx: dict[str, Any], got: Any) -> list[str]:
    claimed = _claim(w, ctx)
    if claimed["statusCode"] != 200:
        return [f"the task the outbox made is not handed out: {claimed['statusCode']} {(claimed['body'] or '')[:120]}"]
    again = _claim(w, ctx)
    return [] if again["statusCode"] == 204 else [f"a second claim answered {again['statusCode']}"]


def _task_ready_setup(w: World) -> dict[str, Any]:
    ctx = _task_run(w)
    w.settle()
    return ctx


def _task_claim_check(w: World, ctx: dict[str, Any], got: Any) -> list[str]:
    problems: list[str] = []
    if got["statusCode"] == 204:  # taken by a claim whose answer was lost
        problems, got = _lapsed_then_claimed(w, ctx)
    if problems or got["statusCode"] != 200:
        return problems or [f"the ready task was never handed out: {got['statusCode']} {(got['body'] or '')[:120]}"]
    again = _claim(w, ctx)
    return [] if again["statusCode"] == 204 else [f"a task handed out twice ({again['statusCode']})"]


def _task_claimed_setup(w: World) -> dict[str, Any]:
    ctx = _task_ready_setup(w)
    claimed = _claim(w, ctx)
    assert claimed["statusCode"] == 200, claimed
    return {**ctx, "token": json.loads(claimed["body"])["taskToken"]}


def _task_complete_act(w: World, ctx: dict[str, Any]) -> Any:
    return _task_call(w, ctx, f"/tasks/{wire(ctx['token'])}/complete", {"output": {"summary": "s"}})


def _task_complete_check(w: World, ctx: dict[str, Any], got: Any) -> list[str]:
    if got["statusCode"] not in (200, 409):
        return [f"complete answered {got['statusCode']} {got['body'][:120]}"]
    # A completion recorded but not landed (409 to the retry) lands when the claim's check fires.
    clock.advance(w.clock_file, 3600)
    for body in _schedule_inputs(w, ctx["run"]):
        lambda_runtime.invoke("timeouts", body)
    w.settle()
    done = [e for e in w.events(ctx["run"]) if e["type"] == "node.completed" and e.get("nodeId") == "draft"]
    problems = [] if len(done) == 1 else [f"the task's node completed {len(done)} times"]
    state, _ = w.services.store.get_run(ctx["run"])
    return problems + ([] if state.status == "completed" else [f"the run is {state.status}"])


OPERATIONS: dict[str, Operation] = {
    "createRun": Operation(_create_setup, _create_act, _create_check),
    "resolve": Operation(_gate, _resolve_act, _resolve_check),
    "vote": Operation(_vote_setup, _resolve_act, _vote_check),
    "cancel": Operation(_gate, _cancel_act, _cancel_check),
    "dispatch": Operation(_dispatch_setup, _dispatch_act, _dispatch_check),
    # A fault after the decisions, before their drafts are chained, and between the batch's two chains' writes.
    "audit appender": Operation(_audit_setup, _audit_act, _audit_check),
    "audit appender, chains marked": Operation(_audit_marked_setup, _audit_act, _audit_check),
    "timeout worker": Operation(_timeout_setup, _timeout_act, _timeout_check),
    "callback worker": Operation(_callback_setup, _callback_act, _callback_check),
    "callback worker, a transition's notices": Operation(_bundle_setup, _callback_act, _bundle_check),
    "action worker": Operation(_action_setup, _action_act, _action_check),
    "task made by the outbox": Operation(_task_dispatch_setup, _dispatch_act, _task_dispatch_check),
    "task claim": Operation(_task_ready_setup, _claim, _task_claim_check),
    "task complete": Operation(_task_claimed_setup, _task_complete_act, _task_complete_check),
}


def attempt(w: World, op: Operation, at: tuple[int, str, str] | None) -> tuple[list[str], list[str]]:
    """One run of the operation on fresh inputs (a new tenant, run and key) by a cold Lambda instance, so every
    attempt makes the same calls as the first; (its AWS calls, the partial states)."""
    w.tenant = f"t{uuid.uuid4().hex[:12]}"
    w.api_key = new_api_key(w.services, tenant=w.tenant)
    if w.retention_days is not None:
        w.services.tenants.put_settings(w.tenant, TenantSettings(retentionDays=w.retention_days), "resilience")
    ctx = op.setup(w)
    lambda_runtime.fresh_instances()
    w.faults.calls.clear()
    w.faults.at, w.faults.fired, w.faults.armed = at, False, True
    try:
        got = op.act(w, ctx)
    except AssertionError as exc:
        return list(w.faults.calls), [f"at {at}: {exc}"]
    finally:
        w.faults.armed = False
    calls = list(w.faults.calls)
    if at is not None and not w.faults.fired:
        return calls, [f"the fault at {at} never fired (the first attempt made {calls})"]
    return calls, op.check(w, ctx, got) + partial_states(w)


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_a_fault_at_every_aws_call_then_the_retry_leaves_the_state_whole(name, tmp_path):
    found = faults_everywhere(name, tmp_path)
    assert found == []


# The operations that write a new run's event batch, or dispatch it.
CREATING = ("createRun", "dispatch")


@pytest.mark.parametrize("name", CREATING)
def test_with_a_new_runs_batch_put_before_its_transaction_a_fault_anywhere_leaves_the_state_whole(
    name, tmp_path, monkeypatch
):
    """The writer of docs/adr/0165 (formats.CREATE_BATCH_PUT_BEFORE_WRITTEN, from 0.7.0), switched on here."""
    monkeypatch.setattr(formats, "CREATE_BATCH_PUT_BEFORE_WRITTEN", True)
    found = faults_everywhere(name, tmp_path)
    assert found == []


@pytest.mark.parametrize("name", ["audit appender", "audit appender, chains marked"])
def test_with_the_audit_chains_head_left_behind_a_fault_anywhere_leaves_the_chains_whole(name, tmp_path, monkeypatch):
    """The writer of docs/adr/0172 (formats.AUDIT_HEAD_LAGS_WRITTEN, from 0.9.0), switched on here: on the
    marked chains each decision's entry is put past the head, which stays."""
    monkeypatch.setattr(formats, "AUDIT_HEAD_LAGS_WRITTEN", True)
    found = faults_everywhere(name, tmp_path)
    assert found == []


def faults_everywhere(name: str, tmp_path: Path) -> list[str]:
    """The operation's partial states with a fault before and after each of its AWS calls in turn, then its retry."""
    op = OPERATIONS[name]
    with world(tmp_path) as w:
        calls, clean = attempt(w, op, None)
        assert clean == [], clean
        assert calls, "the operation made no AWS call to inject at"
        found: list[str] = []
        tried = 0
        for index, call in enumerate(calls):
            for when in ("before",) if call in READS else ("before", "after"):
                for kind in KINDS:
                    tried += 1
                    _, problems = attempt(w, op, (index, when, kind))
                    found += [f"{call} #{index} {when} ({kind}): {p}" for p in problems]
    TALLY[name] = (tried, len(found))
    print(f"\nresilience {name}: {len(calls)} AWS calls, {tried} injection points, {len(found)} partial states")
    return found


def test_a_create_stopped_between_its_gates_put_and_its_transaction_leaves_nothing_readable(tmp_path):
    """The point between a new run's plain puts (its gate among its index entries) and the transaction that creates it
    (docs/adr/0139): the process stops there, the client's retry creates the run, and what the first attempt put is
    a gate without its run head that nothing reads and that expires (partial_states says so), in a tenant keeping its
    runs the default 90 days and in one keeping them a week (its runs' items' provisional expiry near from the start:
    docs/adr/0147)."""
    op = OPERATIONS["createRun"]
    with world(tmp_path) as w:
        calls, clean = attempt(w, op, None)
        assert clean == [], clean
        at = calls.index("DynamoDB.TransactWriteItems")
        assert calls[at - 1] == "DynamoDB.BatchWriteItem"
        for days in (None, 7):
            w.retention_days = days
            _, problems = attempt(w, op, (at, "before", "connection"))
            assert problems == []
            items = tenant_items(w, w.tenant)
            heads = {i["pk"] for i in items if i["sk"] == RUN_SK}
            left = [i for i in items if i["sk"].startswith(INTERRUPT_SK_PREFIX) and i["pk"] not in heads]
            assert len(left) == 1
            assert len(heads) == 1
            # Beside its gate, its inbox entries (one per family the gate is listed under) are left, each expiring
            # with the gate (docs/adr/0154): nothing of the stopped create stays for ever (partial_states says so).
            orphan = run_id_of(left[0]["pk"])
            entries = [i for i in items if "#INBOX#" in i["pk"] and i.get("runId") == orphan]
            assert entries
            assert {i[wiring.TTL_ATTRIBUTE] for i in entries} == {left[0][wiring.TTL_ATTRIBUTE]}


def test_a_transition_of_a_long_open_run_stopped_before_its_transaction_leaves_entries_that_expire(tmp_path):
    """The point between a later transition's plain puts (the inbox entries of the gate it opens) and its transaction,
    in a run open longer than its search entries' expiry allows (a long-open run is allowed): stopped there, the retry
    opens the gate at another instant, and what the first attempt put expires by itself (partial_states), however old
    the run (docs/adr/0154)."""
    op = Operation(_long_open_action_setup, _action_act, _action_check)
    with world(tmp_path) as w:
        calls, clean = attempt(w, op, None)
        assert clean == [], clean
        at = next(i for i, call in enumerate(calls) if call == "DynamoDB.TransactWriteItems" and calls[i - 1] == "DynamoDB.BatchWriteItem")
        _, problems = attempt(w, op, (at, "before", "connection"))
        assert problems == []
        items = tenant_items(w, w.tenant)
        left = unwritten_gates_entries(items, {i["pk"] for i in items if i["sk"] == RUN_SK})
        assert left, "the stopped transition left no entry"
        # Not near: the daily sweep leaves them, and they go by themselves.
        near = run_search.near_expiries(clock.now().timestamp())
        assert all(int(i[wiring.TTL_ATTRIBUTE]) >= near for i in left), left
