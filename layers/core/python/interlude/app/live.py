"""Following a run live over the WebSocket API (issue 31 item 4, ADR 0143): nothing waits while a client does.

A client connects (its key authenticated and admitted as for the SSE route, by the edge: api/live.py), then sends
`subscribe` naming a run and, optionally, the last sequence it has (`after`, as SSE's Last-Event-ID). The connection is
recorded as a follower of the run first, and the log after `after` is read and sent second: an event that commits
in between is in the replay and may come again from the outbox, never missed (a subscription that finds the run's
followers at their limit first drops those whose connections are gone). From then on the outbox sends each
event batch of the run as it commits (`on_events`, an outbox handler in `dispatch`), through API Gateway's management
API; a connection that has gone (GoneException) is dropped, with its followers of every run. When the run ends,
its followers are dropped after its last batch is sent: a run that runs again is followed by subscribing again. Each
batch goes to a follower only while the key its connection opened with is valid, read as every request reads it: a
key revoked or expired since is told so (`error`) instead, and its subscription ends, within the bound a revocation
reaches requests in.

A replay carries at most budgets.MAX_ANSWER_BYTES of events, as one SSE request does: `subscribed` says where it stops
(`lastSequence`) and whether the log holds more (`more`: subscribe again with `after` = `lastSequence`).

Each message is JSON with a `type`: `subscribed` {runId, after, following, lastSequence, more}, `events` {runId,
events: [RunEventDoc]}, `tooLarge` {runId, sequence} (an event larger than API Gateway's frame: read it over HTTP),
`unsubscribed` {runId}, `error` {code, message, details?, runId?}. Events come in order of their `sequence`, at least once: a client skips
what it has, and one that finds a gap (a batch that failed and goes again later) subscribes again with `after` set
to the last it has.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from interlude import wiring
from interlude.domain.budgets import MAX_ANSWER_BYTES, first_page
from interlude.domain.clock import Clock, iso
from interlude.domain.errors import DomainError, Forbidden, Unauthenticated
from interlude.domain.ids import tenant_of, to_wire
from interlude.engine.events import RUN_END_EVENTS

if TYPE_CHECKING:
    from interlude.app.ports import Connections, LiveRecords, RunRecords
    from interlude.domain.models.run import RunState
    from interlude.rules import auth
    from interlude.store.live import Follower, LiveConnection


class LiveLimits(NamedTuple):
    """docs/limits.md, "Following runs live": each refused with interlude.quota_exceeded naming it."""

    connections_per_tenant: int
    followers_per_run: int
    runs_per_connection: int = wiring.LIVE_API.runs_per_connection
    # The events one subscription's replay sends (compact JSON), as one SSE request's: the rest on a subscribe again.
    replay_bytes: int = MAX_ANSWER_BYTES


def quota_exceeded(quota: str, limit: int, message: str) -> Forbidden:
    return Forbidden(message, {"quota": quota, "limit": limit}, code="interlude.quota_exceeded")


class LiveFollowing:
    def __init__(
        self,
        records: LiveRecords,
        runs: RunRecords,
        connections: Callable[[], Connections],
        clock: Clock,
        limits: LiveLimits,
        key_holder: Callable[[str, str], auth.Principal],
        held_followers: Callable[[str], list[Follower] | None] = lambda run_id: None,
    ) -> None:
        self.records = records
        self.runs = runs
        # Made at the first send: a batch of a run nobody follows makes no client.
        self.connections = connections
        self.clock = clock
        self.limits = limits
        # Who (key id, tenant) acts as, refused (a DomainError) once the key is revoked or expired: Keys.
        # connected_principal, through the cache every request's key is read through.
        self.key_holder = key_holder
        # A run's followers as dispatch read them with its batch (app/dispatch.HeldRuns); None: read them here.
        self.held_followers = held_followers

    def connect(self, principal: auth.Principal, connection_id: str) -> None:
        """Record the connection of an authenticated, admitted key holding the SSE route's scope."""
        now = self.clock()
        epoch = int(now.timestamp())
        limit = self.limits.connections_per_tenant
        if self.records.open_connections(principal.tenant, epoch) >= limit:
            raise quota_exceeded(
                "liveConnections", limit, f"this tenant holds its limit of {limit} open live connections"
            )
        expires = epoch + wiring.LIVE_API.connection_ttl_s
        self.records.open_connection(principal.tenant, connection_id, principal.key_id, iso(now), expires)

    def connection(self, connection_id: str) -> LiveConnection:
        connection = self.records.live_connection(connection_id)
        if connection is None:
            raise Unauthenticated("this connection is not open (it expired or was closed): connect again")
        return connection

    def subscribe(self, connection: LiveConnection, state: RunState, after: int) -> None:
        """Follow `state`'s run (as the edge read it for the caller) from sequence `after` on (-1: from the start)."""
        run_id = state.runId
        following = not state.terminal
        if following:
            expires = int(self.clock().timestamp()) + wiring.LIVE_API.connection_ttl_s
            limits = self.limits
            refused = self.records.follow(
                connection, run_id, limits.runs_per_connection, limits.followers_per_run, expires
            )
            if refused == "runFollowers" and self._drop_dead_followers(run_id, connection.connection_id):
                refused = self.records.follow(
                    connection, run_id, limits.runs_per_connection, limits.followers_per_run, expires
                )
            if refused == "runFollowers":
                limit = limits.followers_per_run
                raise quota_exceeded(refused, limit, f"this run has its limit of {limit} live followers")
            if refused is not None:
                limit = limits.runs_per_connection
                raise quota_exceeded(
                    refused, limit, f"this connection follows its limit of {limit} runs: unsubscribe from one"
                )
        # After the follower is written: what commits from now on is sent by the outbox too. Read strongly: a batch
        # that committed just before the follower was written, whose dispatch read the followers without it, is sent
        # only here.
        logged = self.runs.read_events(run_id, after, holder=state, consistent=True)
        if following and any(event.get("type") in RUN_END_EVENTS for event in logged):
            # The run ended after the edge read it: its last batch may have gone before the follower was written, and
            # nothing else would drop the follower. The log holds the end (this replay, or the next subscription's).
            following = False
            self.records.unfollow(connection.connection_id, run_id)
        events = first_page(logged, self.limits.replay_bytes) if logged else logged
        subscribed = {
            "type": "subscribed",
            "runId": to_wire(run_id),
            "after": after,
            "following": following,
            "lastSequence": events[-1]["sequence"] if events else after,
            "more": len(events) < len(logged),
        }
        if self.send(connection.connection_id, subscribed):
            self._send_events(connection.connection_id, run_id, events)

    def _drop_dead_followers(self, run_id: str, own: str) -> bool:
        """Drop the run's followers whose connections are gone, as a push that found them gone would (a client that
        left without a $disconnect reaching us holds a place until then): those whose items are gone or expired, then
        those API Gateway says are gone. Whether any place was freed. Only at the run's limit: a read of its
        followers, one BatchGetItem and a GetConnection per follower whose item is there."""
        others = [follower.connection_id for follower in self.records.followers(run_id) if follower.connection_id != own]
        recorded = self.records.recorded_connections(others, int(self.clock().timestamp()))
        connections = self.connections()
        dead = [c for c in others if c not in recorded or not connections.is_open(c)]
        for connection_id in dead:
            self.records.drop_follower(run_id, connection_id)
            self.records.close_connection(connection_id)
        return bool(dead)

    def unsubscribe(self, connection: LiveConnection, run_id: str) -> None:
        self.records.unfollow(connection.connection_id, run_id)
        self.send(connection.connection_id, {"type": "unsubscribed", "runId": to_wire(run_id)})

    def disconnect(self, connection_id: str) -> None:
        self.records.close_connection(connection_id)

    def on_events(self, run_id: str, events: list[dict[str, Any]]) -> None:
        """The outbox handler: the batch to every connection that follows the run (idempotent as a handler must be:
        a batch sent again is one its followers skip by sequence)."""
        followers = self.held_followers(run_id)
        if followers is None:
            followers = self.records.followers(run_id)
        if not followers:
            return
        ended = any(event.get("type") in RUN_END_EVENTS for event in events)
        tenant = tenant_of(run_id)
        for connection_id, key_id in followers:
            try:
                self.key_holder(key_id, tenant)
            except DomainError as refused:
                # As the key's next request or message is refused: nothing more of the run is sent to it.
                self.error(connection_id, refused.code, refused.message, refused.details, run_id)
                self.records.unfollow(connection_id, run_id)
                continue
            if not self._send_events(connection_id, run_id, events):
                # Gone (its $disconnect may never come): the connection is dropped whole, its place in the tenant's
                # count and every run's follower with it; this run's too, should its item be gone already.
                self.records.drop_follower(run_id, connection_id)
                self.records.close_connection(connection_id)
            elif ended:
                self.records.unfollow(connection_id, run_id)

    def error(self, connection_id: str, code: str, message: str, details: Any, run_id: str | None) -> None:
        body: dict[str, Any] = {"type": "error", "code": code, "message": message}
        if details:
            body["details"] = details
        if run_id is not None:
            body["runId"] = to_wire(run_id)
        self.send(connection_id, body)

    def send(self, connection_id: str, message: dict[str, Any]) -> bool:
        return self.connections().send(connection_id, _encoded(message))

    def _send_events(self, connection_id: str, run_id: str, events: list[dict[str, Any]]) -> bool:
        """False when the connection is gone."""
        connections = self.connections()
        return all(connections.send(connection_id, data) for data in event_messages(to_wire(run_id), events))


def event_messages(wire_run_id: str, events: list[dict[str, Any]]) -> Iterator[bytes]:
    """`events` in as few messages as API Gateway bills: each at most LIVE.message_bytes unless one event is larger
    (alone then, up to the frame's limit; beyond it announced by its sequence)."""
    live = wiring.LIVE_API
    head = _encoded({"type": "events", "runId": wire_run_id, "events": []})
    batch: list[bytes] = []
    size = len(head)
    for event in events:
        encoded = _encoded(event)
        if len(head) + len(encoded) > live.max_message_bytes:
            if batch:
                yield _joined(head, batch)
                batch, size = [], len(head)
            yield _encoded({"type": "tooLarge", "runId": wire_run_id, "sequence": event.get("sequence")})
            continue
        if batch and size + len(encoded) + 1 > live.message_bytes:
            yield _joined(head, batch)
            batch, size = [], len(head)
        batch.append(encoded)
        size += len(encoded) + 1
    if batch:
        yield _joined(head, batch)


def _encoded(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def _joined(head: bytes, encoded_events: list[bytes]) -> bytes:
    # The head ends in `[]}`: the events go between its brackets, each encoded once.
    return head[:-2] + b",".join(encoded_events) + b"]}"
