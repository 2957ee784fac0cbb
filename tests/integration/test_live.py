"""Following a run live over the WebSocket API (ADR 0143): the real api function's $connect, message and $disconnect
routes in API Gateway's event shapes, and the real dispatch handler sending each event batch, through the local
gateway's management API (the functions' own botocore client), against moto. A connection here is the gateway's
record of one: what the functions send to it is what a client would receive."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from interlude import wiring
from interlude.app.live import LiveFollowing, LiveLimits
from interlude.composition import services as handler_services
from interlude.domain.errors import Forbidden
from interlude.domain.ids import mint_opaque, tenant_bound, to_wire
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local.lambda_runtime import fresh_instances
from interlude.local.live_gateway import LiveGateway, request_context
from interlude.store import attributes as a
from interlude.store.layout import LIVE_CONNECTION_SK, live_connection_pk, run_pk
from interlude.store.limits import rate_pk
from interlude.store.live import LiveStore
from tests.integration.conftest import InProcessApi, new_api_key, signed_in, tenant_of_test
from tests.support.local_stack import FIXTURES
from tests.support.moto_world import ENTRIES_TABLE, TABLE
from tests.support.stream import dispatch_runs

GATE_EVENTS = ["run.started", "node.started", "interrupt.requested", "approval.requested", "node.suspended"]
END_EVENTS = ["interrupt.resolved", "approval.granted", "node.resumed", "node.completed", "run.completed"]


class Connection:
    """What the gateway sends to one open connection, as the client would read it."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.closed = False

    def send(self, text: str) -> None:
        self.received.append(json.loads(text))

    def close(self) -> None:
        """Closed by the management API's DELETE (the client's side of it is no matter here)."""
        self.closed = True

    def events(self) -> list[dict[str, Any]]:
        return [event for message in self.received if message["type"] == "events" for event in message["events"]]

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [message for message in self.received if message["type"] == kind]


class Live:
    def __init__(self, gateway: LiveGateway) -> None:
        self.gateway = gateway
        self.api = InProcessApi()
        self.count = 0
        self.disconnected = threading.Event()

    def connect(self, api_key: str | None, protocols: list[str] | None = None) -> tuple[str, dict[str, Any]]:
        """(connection id, the $connect route's answer); the connection is open when it answered 200."""
        self.count += 1
        connection_id = f"conn{self.count}="
        headers = {"Host": "127.0.0.1", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
        if protocols:
            headers["Sec-WebSocket-Protocol"] = ", ".join(protocols)
        answer = self.api.invoke(
            {"headers": headers, "isBase64Encoded": False, "requestContext": self._context(connection_id, "$connect", "CONNECT")}
        )
        if answer["statusCode"] == 200:
            self.gateway.open[connection_id] = Connection()  # type: ignore[assignment]
        return connection_id, answer

    def connection(self, connection_id: str) -> Connection:
        return self.gateway.open[connection_id]  # type: ignore[return-value]

    def say(self, connection_id: str, **message: Any) -> None:
        body = json.dumps(message)
        context = {**self._context(connection_id, str(message.get("action")), "MESSAGE"), "messageId": "m"}
        assert self.api.invoke({"body": body, "isBase64Encoded": False, "requestContext": context}) == {"statusCode": 200}

    def disconnect(self, connection_id: str) -> None:
        self.gateway.open.pop(connection_id, None)
        context = self._context(connection_id, "$disconnect", "DISCONNECT")
        assert self.api.invoke({"isBase64Encoded": False, "requestContext": context}) == {"statusCode": 200}

    def _context(self, connection_id: str, route_key: str, kind: str) -> dict[str, Any]:
        return request_context(connection_id, route_key, kind, "127.0.0.1")


@pytest.fixture
def live(world, monkeypatch) -> Iterator[Live]:
    api = InProcessApi()
    disconnected = threading.Event()

    def invoke(event: dict[str, Any]) -> Any:
        answer = api.invoke(event)
        if event["requestContext"]["eventType"] == "DISCONNECT":
            disconnected.set()  # a real client's connection closed: its $disconnect is done
        return answer

    gateway = LiveGateway(invoke).start()
    monkeypatch.setenv(wiring.LIVE_API.endpoint_env, gateway.endpoint)
    following = Live(gateway)
    following.disconnected = disconnected
    yield following
    gateway.stop()


def gated_run(services) -> str:
    admin = signed_in(services)
    definition = json.loads((FIXTURES / "conformance-approval.json").read_text())
    services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
    state = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": definition["id"]}))
    return state.runId


def resolve(services, run_id: str) -> None:
    services.decisions.resolve_interrupt(signed_in(services), run_id, "gate", {"action": "accept"})


class Sink:
    """A connection that is always open and keeps nothing."""

    def send(self, connection_id: str, data: bytes) -> bool:
        return True


def followers(run_id: str) -> list[str]:
    return [follower.connection_id for follower in LiveStore(TABLE, ENTRIES_TABLE).followers(run_id)]


def test_a_follower_has_the_log_replayed_then_each_batch_as_it_commits_and_is_dropped_when_the_run_ends(services, live):
    run_id = gated_run(services)
    dispatch_runs(TABLE, run_id)
    connection_id, answer = live.connect(new_api_key(services, scopes=["runs:read"]))
    assert answer == {"statusCode": 200}
    live.say(connection_id, action="subscribe", runId=to_wire(run_id))
    connection = live.connection(connection_id)
    assert connection.received[0] == {
        "type": "subscribed",
        "runId": to_wire(run_id),
        "after": -1,
        "following": True,
        "lastSequence": 4,
        "more": False,
    }
    assert [e["type"] for e in connection.events()] == GATE_EVENTS
    assert followers(run_id) == [connection_id]

    resolve(services, run_id)
    dispatch_runs(TABLE, run_id)
    assert [e["type"] for e in connection.events()] == GATE_EVENTS + END_EVENTS
    assert [e["sequence"] for e in connection.events()] == list(range(10))
    # The run ended: its followers are dropped with its last batch, and the connection follows nothing.
    assert followers(run_id) == []
    record = LiveStore(TABLE, ENTRIES_TABLE).live_connection(connection_id)
    assert record is not None
    assert record.runs == frozenset()


def test_a_subscription_after_a_sequence_replays_only_what_follows_it_and_a_finished_run_is_not_followed(services, live):
    run_id = gated_run(services)
    resolve(services, run_id)
    connection_id, _ = live.connect(new_api_key(services, scopes=["runs:read"]))
    live.say(connection_id, action="subscribe", runId=to_wire(run_id), after=6)
    connection = live.connection(connection_id)
    assert connection.received[0]["following"] is False
    assert [e["sequence"] for e in connection.events()] == [7, 8, 9]
    assert followers(run_id) == []


def test_connect_is_refused_as_the_sse_route_refuses_a_request(services, live):
    _, answer = live.connect(None)
    assert answer["statusCode"] == 401
    assert json.loads(answer["body"])["error"] == "unauthenticated"
    _, answer = live.connect(new_api_key(services, scopes=["workflows:read"]))
    assert answer["statusCode"] == 403
    assert json.loads(answer["body"])["details"] == {"scopeRequired": "runs:read"}


# A safety net for a recv that would otherwise wait for ever: no assertion is timed.
RECEIVE_S = 30


def browser_protocols(*keys: str) -> list[Any]:
    """What a browser offers: `new WebSocket(url, ["interlude.live.v1", "interlude.key." + key])`."""
    live = wiring.LIVE_API
    return [live.protocol, *(live.key_protocol + key for key in keys)]


def test_a_browser_connects_with_its_key_as_a_subprotocol_and_the_answer_echoes_the_protocol_not_the_key(
    services, live
):
    """Browsers cannot set Authorization on a handshake (ADR 0146): the real client offers what a browser offers,
    through the local gateway, which passes the $connect answer's subprotocol on as API Gateway does."""
    run_id = gated_run(services)
    key = new_api_key(services, scopes=["runs:read"])
    with connect(live.gateway.url, subprotocols=browser_protocols(key), open_timeout=RECEIVE_S) as browser:
        assert browser.subprotocol == wiring.LIVE_API.protocol
        browser.send(json.dumps({"action": "subscribe", "runId": to_wire(run_id)}))
        subscribed = json.loads(browser.recv(timeout=RECEIVE_S))
        assert (subscribed["type"], subscribed["following"]) == ("subscribed", True)
        replayed = json.loads(browser.recv(timeout=RECEIVE_S))
        assert [e["type"] for e in replayed["events"]] == GATE_EVENTS
        assert len(followers(run_id)) == 1
    assert live.disconnected.wait(RECEIVE_S)
    assert followers(run_id) == []  # its $disconnect dropped it


@pytest.mark.parametrize(
    ("protocols", "authorization", "status", "error"),
    [
        (["wrong-key"], False, 401, "unauthenticated"),
        (["valid-key"], True, 400, "validation_error"),  # two credentials: Authorization and a key subprotocol
        (["valid-key", "valid-key"], False, 400, "validation_error"),
        ([], False, 403, "forbidden"),  # a key without runs:read
    ],
)
def test_a_handshake_with_a_key_subprotocol_is_refused_as_the_sse_route_refuses_a_request(
    services, live, protocols, authorization, status, error
):
    valid = new_api_key(services, scopes=["runs:read"] if protocols else ["workflows:read"])
    keys = [valid if name == "valid-key" else name for name in protocols] or [valid]
    headers = {"Authorization": f"Bearer {valid}"} if authorization else None
    with pytest.raises(InvalidStatus) as refused:
        connect(live.gateway.url, subprotocols=browser_protocols(*keys), additional_headers=headers)
    assert refused.value.response.status_code == status
    body = json.loads(refused.value.response.body)
    assert body["error"] == error
    if status == 400:
        assert body["details"] == {"field": "Sec-WebSocket-Protocol", "protocols": [wiring.LIVE_API.protocol]}


def test_a_key_subprotocol_without_the_protocol_to_echo_is_refused_and_authorization_alone_echoes_it_when_offered(
    services, live
):
    key = new_api_key(services, scopes=["runs:read"])
    _, answer = live.connect(None, protocols=[wiring.LIVE_API.key_protocol + key])
    assert answer["statusCode"] == 400
    assert json.loads(answer["body"])["details"] == {
        "field": "Sec-WebSocket-Protocol",
        "protocols": [wiring.LIVE_API.protocol],
    }
    _, answer = live.connect(key, protocols=["other", wiring.LIVE_API.protocol])
    assert answer == {"statusCode": 200, "headers": {"Sec-WebSocket-Protocol": wiring.LIVE_API.protocol}}
    _, answer = live.connect(key, protocols=["other"])
    assert answer == {"statusCode": 200}


def test_each_message_is_authorized_with_the_connections_key_and_the_run_read_as_the_route_reads_it(
    services, other_tenant, live
):
    run_id = gated_run(services)
    foreign = new_api_key(services, scopes=["runs:read"], tenant=other_tenant)
    connection_id, _ = live.connect(foreign)
    live.say(connection_id, action="subscribe", runId=to_wire(run_id))
    live.say(connection_id, action="follow", runId=to_wire(run_id))
    live.say(connection_id, action="subscribe", runId=to_wire(run_id), after="7")
    errors = live.connection(connection_id).of_type("error")
    assert [(e["code"], e.get("details")) for e in errors] == [
        ("id_tenant_mismatch", None),
        ("validation_error", {"field": "action", "actions": list(wiring.LIVE_API.actions)}),
        ("validation_error", {"field": "after"}),
    ]
    assert followers(run_id) == []

    key = new_api_key(services, subject="reader", scopes=["runs:read"])
    connection_id, _ = live.connect(key)
    principal = services.keys.authenticate(f"Bearer {key}")
    services.keys.revoke_key(principal.tenant, principal.key_id)
    fresh_instances()  # the api function's instance: every instance's cache of the key expires within 5 s
    live.say(connection_id, action="subscribe", runId=to_wire(run_id))
    assert [e["code"] for e in live.connection(connection_id).of_type("error")] == ["unauthenticated"]


def test_a_malformed_frame_a_missing_run_and_a_closed_connection_are_each_answered_with_their_error(services, live):
    connection_id, _ = live.connect(new_api_key(services, scopes=["runs:read"]))
    live.api.invoke(
        {
            "body": "{not json",
            "isBase64Encoded": False,
            "requestContext": {**request_context(connection_id, "$default", "MESSAGE", "127.0.0.1"), "messageId": "m"},
        }
    )
    live.say(connection_id, action="subscribe")
    missing = to_wire(tenant_bound(signed_in(services).tenant, mint_opaque()))
    live.say(connection_id, action="subscribe", runId=missing)
    LiveStore(TABLE, ENTRIES_TABLE).close_connection(connection_id)  # its $disconnect handled before a message still on its way
    live.say(connection_id, action="subscribe", runId=missing)
    errors = live.connection(connection_id).of_type("error")
    assert [(e["code"], e.get("details"), e.get("runId")) for e in errors] == [
        ("validation_error", {"actions": list(wiring.LIVE_API.actions)}, None),
        ("validation_error", {"field": "runId"}, None),
        ("not_found", None, missing),
        ("unauthenticated", None, missing),
    ]


@pytest.mark.parametrize(
    "body",
    [
        '{"action": "subscribe", "runId": "r", "after": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"action": "subscribe", "runId": "r", "after": NaN}',
        '{"action": "subscribe", "runId": "r", "runId": "s"}',
    ],
    ids=["nested", "nan", "key-twice"],
)
def test_a_message_a_request_body_could_not_be_is_answered_with_its_error(services, live, body):
    connection_id, _ = live.connect(new_api_key(services, scopes=["runs:read"]))
    context = {**request_context(connection_id, "$default", "MESSAGE", "127.0.0.1"), "messageId": "m"}
    assert live.api.invoke({"body": body, "isBase64Encoded": False, "requestContext": context}) == {"statusCode": 200}
    errors = live.connection(connection_id).of_type("error")
    assert [(e["code"], e.get("details")) for e in errors] == [("validation_error", {"actions": list(wiring.LIVE_API.actions)})]


def test_a_revoked_keys_subscriptions_end_at_the_next_batch_as_its_requests_are_refused(services, live):
    """docs/configuration.md, "Keys: revocation and expiry": a revoked key is refused everywhere within 5 s, so what
    its connection follows stops too: the batch after the revocation is not sent to it, an error is."""
    run_id = gated_run(services)
    dispatch_runs(TABLE, run_id)
    key = new_api_key(services, subject="reader", scopes=["runs:read"])
    connection_id, _ = live.connect(key)
    live.say(connection_id, action="subscribe", runId=to_wire(run_id))
    connection = live.connection(connection_id)
    principal = services.keys.authenticate(f"Bearer {key}")
    services.keys.revoke_key(principal.tenant, principal.key_id)
    fresh_instances()  # dispatch's instance: its cache of the key expires within 5 s

    resolve(services, run_id)
    dispatch_runs(TABLE, run_id)
    assert [e["type"] for e in connection.events()] == GATE_EVENTS
    assert [(e["code"], e["runId"]) for e in connection.of_type("error")] == [("unauthenticated", to_wire(run_id))]
    assert followers(run_id) == []
    record = LiveStore(TABLE, ENTRIES_TABLE).live_connection(connection_id)
    assert record is not None
    assert record.runs == frozenset()


def test_the_tenants_connections_and_a_runs_followers_are_limited(services, live, monkeypatch):
    monkeypatch.setenv("INTERLUDE_LIVE_CONNECTIONS_PER_TENANT", "2")
    monkeypatch.setenv("INTERLUDE_LIVE_FOLLOWERS_PER_RUN", "1")
    run_id = gated_run(services)
    key = new_api_key(services, scopes=["runs:read"])
    first, _ = live.connect(key)
    second, _ = live.connect(key)
    _, refused = live.connect(key)
    assert refused["statusCode"] == 403
    body = json.loads(refused["body"])
    assert (body["error"], body["details"]) == ("interlude.quota_exceeded", {"quota": "liveConnections", "limit": 2})

    live.say(first, action="subscribe", runId=to_wire(run_id))
    live.say(second, action="subscribe", runId=to_wire(run_id))
    # The run's one follower's connection is open (its item there, GetConnection answering): the subscription is refused.
    (error,) = live.connection(second).of_type("error")
    assert (error["code"], error["details"]) == ("interlude.quota_exceeded", {"quota": "runFollowers", "limit": 1})
    assert followers(run_id) == [first]

    # A connection that closes frees its place, and its follower's.
    live.disconnect(first)
    assert followers(run_id) == []
    live.say(second, action="subscribe", runId=to_wire(run_id))
    assert followers(run_id) == [second]
    third, answer = live.connect(key)
    assert answer == {"statusCode": 200}


def test_a_replay_stops_at_its_bound_and_says_where_the_next_subscription_goes_on_from(services, world):
    """As an SSE request stops at 4 MiB (budgets.MAX_ANSWER_BYTES), so does a replay: here at 700 bytes,
    a few of the gate's five events; each subscription again after `lastSequence` goes on, none sends an event twice."""
    sent: list[dict[str, Any]] = []

    class Sink:
        def send(self, connection_id: str, data: bytes) -> bool:
            sent.append(json.loads(data))
            return True

    limits = LiveLimits(10, 10, 10, replay_bytes=700)
    following = LiveFollowing(
        LiveStore(TABLE, ENTRIES_TABLE), services.store, Sink, services.clock, limits, services.keys.connected_principal
    )
    following.connect(signed_in(services), "c1=")
    run_id = gated_run(services)
    replays: list[tuple[Any, ...]] = []
    after = -1
    while not replays or replays[-1][2]:
        sent.clear()
        following.subscribe(following.connection("c1="), services.store.get_run(run_id)[0], after)
        subscribed, *messages = sent
        sequences = [e["sequence"] for m in messages for e in m["events"]]
        assert subscribed["following"] is True
        assert subscribed["lastSequence"] == (sequences[-1] if sequences else after)
        replays.append((after, sequences, subscribed["more"]))
        after = subscribed["lastSequence"]
    assert len(replays) >= 3
    assert [sequence for _, sequences, _ in replays for sequence in sequences] == list(range(5))
    assert [more for _, _, more in replays] == [True] * (len(replays) - 1) + [False]
    assert followers(run_id) == ["c1="]  # one follower all along


def test_a_run_at_its_limit_drops_the_followers_whose_connections_are_gone_before_it_refuses_one(
    services, live, monkeypatch
):
    """A client that left without a $disconnect reaching the api function, and one whose connection's item expired
    (API Gateway closed it after 2 hours; TTL deletes the item within days), held their places until a push found
    them gone: now the subscription that finds the run full frees them first."""
    monkeypatch.setenv("INTERLUDE_LIVE_FOLLOWERS_PER_RUN", "2")
    run_id = gated_run(services)
    key = new_api_key(services, scopes=["runs:read"])
    left, expired, stays = (live.connect(key)[0] for _ in range(3))
    for connection_id in (left, expired):
        live.say(connection_id, action="subscribe", runId=to_wire(run_id))
    del live.gateway.open[left]  # the management API answers 410 for it
    services.store.client.update_item(
        TableName=TABLE,
        Key=a.key(live_connection_pk(expired), LIVE_CONNECTION_SK),
        UpdateExpression="SET #t = :past",
        ExpressionAttributeNames={"#t": wiring.TTL_ATTRIBUTE},
        ExpressionAttributeValues={":past": a.n(int(services.clock().timestamp()) - 1)},
    )

    live.say(stays, action="subscribe", runId=to_wire(run_id))
    assert live.connection(stays).of_type("error") == []
    assert followers(run_id) == [stays]
    # The gone connection is dropped whole (its place in the tenant's count too), as a push finding it gone drops it.
    assert LiveStore(TABLE, ENTRIES_TABLE).live_connection(left) is None
    # (A run full of open connections refuses: test_the_tenants_connections_and_a_runs_followers_are_limited.)


def test_a_connection_follows_at_most_its_limit_of_runs(services, world):
    sent: list[bytes] = []

    class Sink:
        def send(self, connection_id: str, data: bytes) -> bool:
            sent.append(data)
            return True

    following = LiveFollowing(
        LiveStore(TABLE, ENTRIES_TABLE), services.store, Sink, services.clock, LiveLimits(10, 10, 1), services.keys.connected_principal
    )
    principal = signed_in(services)
    following.connect(principal, "c1=")
    connection = following.connection("c1=")
    first, second = gated_run(services), gated_run(services)
    following.subscribe(connection, services.store.get_run(first)[0], -1)
    with pytest.raises(Forbidden) as refused:
        following.subscribe(following.connection("c1="), services.store.get_run(second)[0], -1)
    assert (refused.value.code, refused.value.details) == (
        "interlude.quota_exceeded",
        {"quota": "runsPerConnection", "limit": 1},
    )
    # Following the same run again is no second run.
    following.subscribe(following.connection("c1="), services.store.get_run(first)[0], 3)
    following.unsubscribe(following.connection("c1="), first)
    following.subscribe(following.connection("c1="), services.store.get_run(second)[0], -1)
    assert followers(second) == ["c1="]
    assert followers(first) == []


def test_a_run_that_ends_while_its_subscription_is_made_is_not_left_followed(services, world):
    """The run's last batch may be dispatched between the subscriber's read of the run and its follower's write: the
    replay then holds the run's end, and nothing else would drop the follower or free the connection's place."""
    sent: list[dict[str, Any]] = []

    class Sink:
        def send(self, connection_id: str, data: bytes) -> bool:
            sent.append(json.loads(data))
            return True

    following = LiveFollowing(
        LiveStore(TABLE, ENTRIES_TABLE), services.store, Sink, services.clock, LiveLimits(10, 10, 1), services.keys.connected_principal
    )
    following.connect(signed_in(services), "c1=")
    run_id = gated_run(services)
    read_open = services.store.get_run(run_id)[0]
    resolve(services, run_id)
    dispatch_runs(TABLE, run_id)  # the run's last batch: nobody follows it yet

    following.subscribe(following.connection("c1="), read_open, -1)
    assert sent[0]["following"] is False
    assert sent[-1]["events"][-1]["type"] == "run.completed"
    assert followers(run_id) == []
    assert following.connection("c1=").runs == frozenset()
    # Its place is free: the connection's one run may be another.
    following.subscribe(following.connection("c1="), services.store.get_run(gated_run(services))[0], -1)


def test_the_replay_reads_the_log_strongly_so_a_batch_dispatch_sent_before_the_follower_showed_is_in_it(services, world):
    """dispatch reads a run's followers eventually consistent: a batch that commits as a client subscribes may miss
    a follower written a moment before, and then only the replay, read after that write, holds it. An eventually
    consistent read of the log could miss that batch too (a run's last: the client would wait for ever)."""
    following = LiveFollowing(
        LiveStore(TABLE, ENTRIES_TABLE), services.store, Sink, services.clock, LiveLimits(10, 10, 10), services.keys.connected_principal
    )
    following.connect(signed_in(services), "c1=")
    run_id = gated_run(services)
    reads: list[dict[str, Any]] = []

    def log_read(params: dict[str, Any], **_: Any) -> None:
        if params.get("ExpressionAttributeValues", {}).get(":pk") == {"S": run_pk(run_id)}:
            reads.append(params)

    client = services.store.client
    client.meta.events.register("provide-client-params.dynamodb.Query", log_read)
    try:
        following.subscribe(following.connection("c1="), services.store.get_run(run_id)[0], -1)
    finally:
        client.meta.events.unregister("provide-client-params.dynamodb.Query", log_read)
    assert [read.get("ConsistentRead") for read in reads] == [True]


def test_a_gone_connection_is_dropped_by_the_batch_that_finds_it_gone(services, live):
    run_id = gated_run(services)
    stays, _ = live.connect(new_api_key(services, scopes=["runs:read"]))
    goes, _ = live.connect(new_api_key(services, scopes=["runs:read"]))
    for connection_id in (stays, goes):
        live.say(connection_id, action="subscribe", runId=to_wire(run_id))
    other_run = gated_run(services)
    live.say(goes, action="subscribe", runId=to_wire(other_run))
    del live.gateway.open[goes]  # closed without a $disconnect reaching the api function: API Gateway answers 410
    dispatch_runs(TABLE, run_id)
    assert followers(run_id) == [stays]
    # The connection is dropped whole: its place in the tenant's count and its following of every run.
    assert LiveStore(TABLE, ENTRIES_TABLE).live_connection(goes) is None
    assert followers(other_run) == []
    # The batch the replay held is sent again (at least once): the client skips it by sequence.
    assert [e["sequence"] for e in live.connection(stays).events()] == [0, 1, 2, 3, 4] * 2


def test_without_a_websocket_api_the_outbox_reads_no_followers(services, monkeypatch):
    monkeypatch.delenv(wiring.LIVE_API.endpoint_env, raising=False)
    assert services.live.on_events not in services.outbox


class DynamoCalls:
    """The DynamoDB operations made through these clients, by name; but the tenant's request counter's (a lease taken
    every few requests of any kind, at the instance's pace: store/limits.py), priced with the requests."""

    def __init__(self, *clients: Any) -> None:
        self.ops: list[str] = []
        for client in clients:
            client.meta.events.register("before-parameter-build.dynamodb", self.called)

    def called(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        key = params.get("Key") or params.get("Item") or {}
        if not str((key.get("pk") or {}).get("S", "")).startswith(rate_pk(tenant_of_test())):
            self.ops.append(model.name)

    def take(self) -> list[str]:
        taken, self.ops = sorted(self.ops), []
        return taken


def test_what_following_a_run_costs_in_table_calls(services, live):
    """bench/cost_per_million.py prices following a run over the WebSocket API from these calls (LIVE_FOLLOWING_CALLS
    there), made by a warm api function (the key and the tenant's settings read before) for a run's first follower,
    and by the outbox (the followers read here alone; in dispatch, with the batch's run heads)."""
    from bench.cost_per_million import LIVE_FOLLOWING_CALLS

    run_id = gated_run(services)
    key = new_api_key(services, scopes=["runs:read"])
    warm, _ = live.connect(key)
    warm_run = gated_run(services)
    live.say(warm, action="subscribe", runId=to_wire(warm_run))
    live.say(warm, action="unsubscribe", runId=to_wire(warm_run))
    live.disconnect(warm)
    function = handler_services()
    calls = DynamoCalls(function.store.client)
    connection_id, _ = live.connect(key)
    measured = {"connect": calls.take()}
    live.say(connection_id, action="subscribe", runId=to_wire(run_id))
    measured["subscribe"] = calls.take()
    resolve(services, run_id)
    function.live.on_events(run_id, services.store.read_events(run_id, 4))
    measured["the run's last batch, to its one follower"] = calls.take()
    function.live.on_events(run_id, services.store.read_events(run_id, 4))
    measured["a batch of a run nobody follows"] = calls.take()
    assert live.connection(connection_id).events()[-1]["type"] == "run.completed"
    live.disconnect(connection_id)
    measured["disconnect"] = calls.take()
    assert measured == LIVE_FOLLOWING_CALLS


def test_dispatch_reads_a_runs_followers_with_its_batch_not_on_their_own(services, live):
    run_id = gated_run(services)
    dispatch_runs(TABLE, run_id)
    connection_id, _ = live.connect(new_api_key(services, scopes=["runs:read"]))
    live.say(connection_id, action="subscribe", runId=to_wire(run_id))
    own_reads: list[str] = []

    def read_alone(params: dict[str, Any], model: Any, **_: Any) -> None:
        named = [(params.get("Key") or {}).get("pk"), (params.get("ExpressionAttributeValues") or {}).get(":p")]
        if model.name in ("GetItem", "Query") and any("#FOLLOW#" in str((v or {}).get("S")) for v in named):
            own_reads.append(model.name)

    handler_services().store.client.meta.events.register("before-parameter-build.dynamodb", read_alone)
    resolve(services, run_id)
    dispatch_runs(TABLE, run_id)
    assert live.connection(connection_id).events()[-1]["type"] == "run.completed"
    assert own_reads == []
