"""One moto world per test process, shared by the in-process integration tests, and a fresh tenant for each test.

Starting moto, loading botocore's service models into a new session and creating the table, queues, schedule group
and secrets cost seconds a test; tenant isolation is a product guarantee, so tests that each act as a tenant of their
own can share one world safely. The world is made once, as the local stack makes its own (interlude.local.stack):
both tables, every queue of wiring.QUEUES, the schedule group, the key ring and audit key secrets, a verified sender,
the audit anchors' bucket. Between two tests it forgets what the previous test left in flight, which no tenant boundary separates: the table's
stream records, the queued messages, the schedules and the mail sent (moto has no API to trim a stream or empty an
outbox, and lets a queue be purged once a minute, so this reaches into its models). The table keeps every tenant's
items, as a deployed table does.

A test that needs a world of its own (the table itself under test: creating it, scanning all of it, counting every
item or stream record, a sweep across tenants, faults injected into every call) opens `private_account()`, or a
plain `mock_aws()`: while the shared world runs, each opens an AWS account of its own (moto keeps every account's
resources apart, MOTO_ACCOUNT_ID naming the account it serves), as empty as a new moto world, forgotten at the end.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.core.base_backend import BackendDict
from moto.core.models import MockAWS

from interlude import wiring
from interlude.adapters.audit_anchor import ensure_locked_bucket
from interlude.adapters.audit_key import ensure_signing_key
from interlude.adapters.keyring_store import ensure_key_ring
from interlude.config.notify import SES_FROM_ADDRESS_ENV
from interlude.local import LOCAL_REGION
from interlude.local.schedules import create_local_deadline_resources
from interlude.local.sqs_pump import create_queues
from interlude.store.provisioning import create_tables, entries_table_beside

TABLE = "interlude-test"
ENTRIES_TABLE = entries_table_beside(TABLE)
KEY_RING_SECRET = "interlude-test/token-keys"
AUDIT_KEY_SECRET = "interlude-test/audit-key"
SENDER = "approvals@example.com"
ACCOUNT_ENV = "MOTO_ACCOUNT_ID"

_tenants = itertools.count(1)
_accounts = itertools.count(1)


def current_account() -> str:
    """The account moto serves this process's calls from now."""
    return os.environ.get(ACCOUNT_ENV, DEFAULT_ACCOUNT_ID)


def new_tenant() -> str:
    """A tenant no other test of this process has used (short: item sizes count its bytes)."""
    return f"tn{next(_tenants)}"


@dataclass
class World:
    """What one test sees of a moto world: the tables, the queues (wiring name -> URL), its own tenant, and the
    environment the functions find them through."""

    table: str
    entries_table: str
    queues: dict[str, str]
    env: dict[str, str]
    tenant: str = field(default_factory=new_tenant)
    other_tenant: str = field(default_factory=new_tenant)


def create_world(table: str = TABLE) -> World:
    """The local stack's resources, named for the tests, in the current account."""
    serialise_moto()
    entries_table = create_tables(boto3.client("dynamodb"), table)[1]
    queues = create_queues(boto3.client("sqs"), table)
    secrets = boto3.client("secretsmanager")
    ensure_key_ring(KEY_RING_SECRET, client=secrets)
    ensure_signing_key(AUDIT_KEY_SECRET, client=secrets)
    boto3.client("ses").verify_email_identity(EmailAddress=SENDER)
    # Bucket names are global across accounts: each world's are its own.
    buckets = {spec.env: f"{table}-{spec.name.lower()}-{current_account()}" for spec in wiring.BUCKETS}
    for name in buckets.values():
        ensure_locked_bucket(name, retention_days=1)
    env = {
        wiring.TABLE_NAME_ENV: table,
        wiring.ENTRIES_TABLE_NAME_ENV: entries_table,
        wiring.KEY_RING_SECRET.env: KEY_RING_SECRET,
        wiring.AUDIT_KEY_SECRET.env: AUDIT_KEY_SECRET,
        SES_FROM_ADDRESS_ENV: SENDER,
        **{queue.url_env: queues[queue.name] for queue in wiring.QUEUES},
        **create_local_deadline_resources(),
        **buckets,
    }
    return World(table, entries_table, queues, env)


_moto_lock = threading.RLock()


def serialise_moto() -> None:
    """Every call into this process's in-process moto runs under one lock, as the local stack's server runs each request
    (interlude.local.moto_server): moto's backends are not thread-safe, and a function that runs a batch's runs on
    threads of its own (dispatch) must meet a service whose calls are atomic, as AWS's are. Idempotent."""
    from moto.core.botocore_stubber import BotocoreStubber

    if getattr(BotocoreStubber.__call__, "serialised", False):
        return
    original = BotocoreStubber.__call__

    def serialised(self: Any, event_name: str, request: Any, **kwargs: Any) -> Any:
        with _moto_lock:
            return original(self, event_name, request, **kwargs)

    serialised.serialised = True  # type: ignore[attr-defined]
    BotocoreStubber.__call__ = serialised  # type: ignore[method-assign]


# -- the process's shared world ------------------------------------------------------------------------------------

_shared: MockAWS | None = None
_shared_world: World | None = None


def _shared_resources() -> World:
    global _shared, _shared_world
    if _shared is None:
        _shared = mock_aws()
        _shared.start()
        _install_private_accounts()
    if _shared_world is None:
        with _account(DEFAULT_ACCOUNT_ID):
            _shared_world = create_world()
    return _shared_world


def shared_world() -> World:
    """The process's world, made with the first call (moto then stays on for the rest of the process), seen as a
    fresh tenant, with nothing in flight from an earlier test."""
    made = _shared_resources()
    _forget_in_flight(made)
    return World(made.table, made.entries_table, dict(made.queues), dict(made.env))


def check_left_intact(world: World) -> None:
    """Fail the test that removed part of the shared world (a fault it injected belongs in a world of its own); the
    next test gets a new world."""
    global _shared_world
    missing = _missing(world)
    if missing:
        _forget_account(DEFAULT_ACCOUNT_ID)
        _shared_world = None
        raise AssertionError(
            f"the test removed {', '.join(missing)} from the shared moto world: mark it `private_world`"
        )


def _missing(world: World, account: str = DEFAULT_ACCOUNT_ID) -> list[str]:
    """What of the world's resources is gone (read from moto's models: no call a test could be charged with)."""
    from moto.dynamodb.models import dynamodb_backends
    from moto.s3.models import s3_backends
    from moto.scheduler.models import scheduler_backends
    from moto.secretsmanager.models import secretsmanager_backends
    from moto.sqs.models import sqs_backends

    tables = dynamodb_backends[account][LOCAL_REGION].tables
    queues = sqs_backends[account][LOCAL_REGION].queues
    secrets = secretsmanager_backends[account][LOCAL_REGION].secrets
    groups = scheduler_backends[account][LOCAL_REGION].schedule_groups
    buckets = s3_backends[account]["aws"].buckets
    group = world.env[wiring.SCHEDULES.environment[0]]
    missing = [f"the table {name}" for name in (world.table, world.entries_table) if name not in tables]
    missing += [f"the queue {url}" for url in world.queues.values() if url.rsplit("/", 1)[1] not in queues]
    missing += [
        f"the secret {name}"
        for name in (KEY_RING_SECRET, AUDIT_KEY_SECRET)
        if name not in secrets or secrets[name].is_deleted()
    ]
    missing += [f"the schedule group {group}"] if group not in groups else []
    missing += [f"the bucket {world.env[b.env]}" for b in wiring.BUCKETS if world.env[b.env] not in buckets]
    return missing


def _forget_in_flight(world: World, account: str = DEFAULT_ACCOUNT_ID) -> None:
    """Drop the stream records, queued messages, schedules and sent mail an earlier test left (the items stay)."""
    from moto.dynamodb.models import dynamodb_backends
    from moto.scheduler.models import scheduler_backends
    from moto.ses.models import ses_backends
    from moto.sqs.models import sqs_backends

    shard = dynamodb_backends[account][LOCAL_REGION].get_table(world.table).stream_shard
    # Sequence numbers stay increasing: the next record is numbered after the last one dropped.
    shard.starting_sequence_number += len(shard.items)
    shard.items = []
    for queue in sqs_backends[account][LOCAL_REGION].queues.values():
        queue._messages = []
        queue._pending_messages = set()
    for group in scheduler_backends[account][LOCAL_REGION].schedule_groups.values():
        group.schedules.clear()
    ses_backends[account][LOCAL_REGION].sent_messages.clear()


# -- worlds of their own -------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _account(account: str) -> Iterator[str]:
    before = os.environ.get(ACCOUNT_ENV)
    os.environ[ACCOUNT_ENV] = account
    try:
        yield account
    finally:
        if before is None:
            os.environ.pop(ACCOUNT_ENV, None)
        else:
            os.environ[ACCOUNT_ENV] = before


@contextlib.contextmanager
def private_account() -> Iterator[str]:
    """An empty AWS account for the block (moto on for it), forgotten at its end: a world no other test sees."""
    _shared_resources()
    account = f"{900000000000 + next(_accounts)}"
    try:
        with _account(account):
            yield account
    finally:
        _forget_account(account)


def _forget_account(account: str) -> None:
    from moto.s3.models import s3_backends

    for backends in list(BackendDict._instances):
        backends.pop(account, None)
    # S3 names its buckets across accounts (moto: in a table of its own).
    for name, (_, owner) in list(s3_backends.bucket_accounts.items()):
        if owner == account:
            del s3_backends.bucket_accounts[name]


def _install_private_accounts() -> None:
    """Make every `mock_aws()` opened while the shared world runs a `private_account()`: as moto would without a
    shared world, it starts empty and its resources are gone at its end (files that keep a world of their own, and
    tests written before the shared world, keep their meaning)."""
    start, stop = MockAWS.start, MockAWS.stop

    def start_in_own_account(self: MockAWS, reset: bool = True) -> None:
        start(self, reset)
        if self is not _shared:
            opened = private_account()
            opened.__enter__()
            self._interlude_account = opened

    def stop_own_account(self: MockAWS, remove_data: bool = True) -> None:
        opened: Any = self.__dict__.pop("_interlude_account", None)
        if opened is not None:
            opened.__exit__(None, None, None)
        stop(self, remove_data)

    MockAWS.start = start_in_own_account
    MockAWS.stop = stop_own_account
