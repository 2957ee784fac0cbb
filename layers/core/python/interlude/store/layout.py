"""The table's key layout: the partition and sort keys of the run, workflow, key and console items.

Item layout (keys are strings; every item carries its tenant in pk, an API key's and a live connection's in its record):
  run head     T#{tenant}#R#{run}        RUN              state JSON, status, version (store/runs.py reads it,
                                                          store/transitions.py moves it)
  event batch  T#{tenant}#R#{run}        E#{lastSeq:012}  the RunEventDocs one transition wrote (v 9: an event that
                                                          repeats a large gate text names its interrupt item
                                                          instead: store/head_parts.py); closedEntries: the
                                                          inbox entries of the interrupts it closed (dispatch
                                                          deletes them: store/inbox.py)
  interrupt    T#{tenant}#R#{run}        I#{key}          payload, votes, raisedSeq; written once, when its gate
                                                          opens (v 3: open while the run head holds it, closed by
                                                          the close's event: store/gate_closes.py; format 1 also
                                                          held status and resolution); listed while open by the
                                                          inbox entries of store/inbox.py; a new run's put just
                                                          before the transaction that creates it, a later one's
                                                          in the transaction (store/transitions.py); v 12: its
                                                          payload deflated against its node's configuration in
                                                          workflowVersion, payloadAgainst (store/gate_payloads.py)
  workflow     T#{tenant}#W#{workflow}   V#{version:08}   immutable definition (store/workflows.py; a v-12 gate
                                                          reads its node back: never rewritten)
  latest       T#{tenant}#W#{workflow}   LATEST           the latest version's number (createRun reads only this)
  modulex wf   T#{tenant}#W#{workflow}   MODULEX          a ModuleX-face workflow's record (store/modulex_records.py)
  catalogue    T#{tenant}#WFS            {workflow}       a listed workflow: its face, latest version, summary
                                                          (store/catalogue.py)
  api key      K#{keyId}                 KEY              secret hash, tenant, subject, scopes; revokedAt
                                                          listed per tenant on the inbox index (gsi1pk
                                                          T#{tenant}#KEYS, gsi1sk {createdAt}#{keyId}): store/api_keys.py
  console      T#{tenant}#CONSOLE#{sid}  SESSION          keyId: an open console session (issue 26, S2), deleted at
  session                                                 sign-out; its ttl is when it ends anyway
  run entry    T#{tenant}#RUNS#{shard:02}  {createdAt}#{run}  the run listing's entry (runId, workflowId), written
                                                          once, just before the run (store/item_index.py)
  bookmark     T#{tenant}#RUNMARK#{listing}  {offset:012}  where a ModuleX run listing goes on at that offset (a
                                                          cursor), with a ttl (faces/modulex/workflows.py)
  idempotency  T#{ns}#IDEM#{op}#{key}    IDEM             store/idempotency.py; committed with the effect when
                                                          the write carries an AnsweredRecord
  live         LIVE#{connectionId}       CONN             an open WebSocket connection (wiring.LIVE_API): tenant, keyId,
  connection                                              the runs it follows; listed per tenant on the inbox index
                                                          (gsi1pk T#{tenant}#LIVE) to count them; ttl: API Gateway's
                                                          2-hour limit (store/live.py)
  followers    T#{tenant}#FOLLOW#{run}   FOLLOWERS        the connections following the run, {connectionId: keyId}:
                                                          read with each event batch's run head by the outbox, which
                                                          sends them the batch while each key is valid (app/live.py);
                                                          ttl: its latest subscription's + API Gateway's 2 hours
  -- the second table (wiring.ENTRIES_TABLE, docs/adr/0161): a moved family's items may be in either table
     (MOVED_FAMILIES: where this release writes a new one, where its reads look); a mark (TABLE_MARK = SECOND)
     names the second, no mark the first; every other family is in the first. Migration 0011 moves the open
     gates' inbox entries to the second, after which reads look there alone (docs/adr/0170)
  inbox entry  T#{tenant}#INBOX#…        {at}#{interruptId}  either table, a gate's all in one: its head's open
                                                          interrupt and its item mark it (entriesTable), a closing
                                                          batch's closedEntries mark each key (store/inbox.py)
  delivery     T#{tenant}#R#{run}        N#{noticeId}[+]  either table: its queued message marks it, a replay
  record                                                  queues it again marked where it found it
                                                          (store/deliveries.py)
The other families keep their layout beside their code: the inbox (store/inbox.py), tasks (store/tasks.py), the
audit chains (store/audit.py), the limits' counters (store/limits.py), effects, deliveries and notifications
(store/effects.py, deliveries.py, notifications.py), waiters and grants (store/interactions.py). What each costs and
where its ceiling is: docs/scale.md, "Access patterns".
"""

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from interlude import wiring
from interlude.domain.formats import ENTRIES_TABLE as ENTRIES_TABLE_FORMAT
from interlude.domain.formats import ENTRIES_TABLE_WRITTEN, FORMAT_FIELD

# -- the tables: which holds each family that moved to the second (docs/adr/0161)

FIRST = "first"
SECOND = "entries"
# The attribute (of an item, or a message) that names the table a moved family's item was written in: SECOND, or
# absent (the first table). An event batch's closedEntries names it as a third element of a key.
TABLE_MARK = "table"


class Placement(NamedTuple):
    """Where a moved family's new items are written, and the tables its reads look in."""

    written: str
    # Every table an item may be in while the deployment may hold them in either (those this release writes, and
    # those the release before wrote).
    either: tuple[str, ...]
    # The migration (its id) that moves every item still in another table to `written`'s, after which reads look there
    # alone; None: none does, reads look in `either` for ever.
    moved_by: str | None = None

    def read(self, moved: bool = False) -> tuple[str, ...]:
        """The tables a read looks in; `moved`: `moved_by` is done in the deployment (store/checkpoints.finished)."""
        return (self.written,) if moved and self.moved_by is not None else self.either


# The migration that moves the open gates' inbox entries from the first table to the second (docs/adr/0170).
ENTRIES_MOVED = "0011"
# Reads look in both tables while a deployment may hold items in either: the inbox's until ENTRIES_MOVED is done, the
# delivery records' until they expire (docs/adr/0161); new items go to the second once this release writes format 11
# (domain/formats.ENTRIES_TABLE_WRITTEN).
_WRITTEN = SECOND if ENTRIES_TABLE_WRITTEN else FIRST
INBOX_ENTRIES = Placement(written=_WRITTEN, either=(FIRST, SECOND), moved_by=ENTRIES_MOVED if ENTRIES_TABLE_WRITTEN else None)
DELIVERY_RECORDS = Placement(written=_WRITTEN, either=(FIRST, SECOND))
MOVED_FAMILIES = {"inbox entry": INBOX_ENTRIES, "delivery record": DELIVERY_RECORDS}


def mark_of(where: str) -> str | None:
    """The mark naming table `where` (None for the first); where_of reads it back."""
    return SECOND if where == SECOND else None


def marked(where: str) -> dict[str, Any]:
    """The mark (plain) naming table `where`: none for the first."""
    mark = mark_of(where)
    return {TABLE_MARK: mark} if mark else {}


def where_of(mark: object) -> str:
    """The table a mark names (SECOND, or the first for no mark); a mark this release does not know is refused."""
    if mark is None or mark == FIRST:
        return FIRST
    if mark == SECOND:
        return SECOND
    raise ValueError(f"unknown table mark {mark!r}")


def marked_message(message: dict[str, Any], where: str) -> dict[str, Any]:
    """A delivery's queued message naming the table its record is in (format 11: a mark, none for the first)."""
    if where == FIRST:
        return {k: v for k, v in message.items() if k != TABLE_MARK}
    written_in = max(int(message.get(FORMAT_FIELD) or 1), ENTRIES_TABLE_FORMAT)
    return {**message, FORMAT_FIELD: written_in, **marked(where)}


def message_table(message: Mapping[str, Any]) -> str:
    """The table a delivery's record is in, as its queued message names it (no mark: the first)."""
    return where_of(message.get(TABLE_MARK))


# What a delivery's record is created with to expire (`{"ttl": …}`, or `{}`: none), as the dispatch that queued its
# message read the run's head: the worker creates the record with it instead of reading the head first (ADR 0178).
# A message without it (queued by a replay, or by a release before 0.10.0) has the worker read the head.
CREATED_EXPIRY = "createdExpiry"


def message_created_expiry(message: Mapping[str, Any]) -> tuple[int, ...] | None:
    """What a delivery's queued message says its record is created with to expire (`(ttl,)`, or `()`: none); None
    where it does not say, or says what this release does not read."""
    said = message.get(CREATED_EXPIRY)
    if not isinstance(said, dict) or set(said) - {wiring.TTL_ATTRIBUTE}:
        return None
    ttl = said.get(wiring.TTL_ATTRIBUTE)
    if ttl is None:
        return ()
    return (ttl,) if isinstance(ttl, int) and not isinstance(ttl, bool) else None


# -- the run partition: head, event batches, interrupts (and the deliveries, notifications and ledger of its effects)

RUN_SK = "RUN"
INTERRUPT_SK_PREFIX = "I#"
# The run head's record that a retention turn is whole when the run's items alone cannot say so (store/expiry.py).
RETAINED = "retentionStamped"
# The family part of a run partition's key (`T#{tenant}#R#{run}`).
RUN_PARTITION = "R"


def run_pk(run_id: str) -> str:
    tenant, opaque = run_id.split("/", 1)
    return f"T#{tenant}#{RUN_PARTITION}#{opaque}"


def run_id_of(pk: str) -> str | None:
    """run_pk's inverse; None for a partition key that is not a run's."""
    parts = pk.split("#")
    if len(parts) != 4 or parts[0] != "T" or parts[2] != RUN_PARTITION:
        return None
    return f"{parts[1]}/{parts[3]}"


def tenant_of_pk(pk: str) -> str:
    """The tenant of a tenant's partition key (`T#{tenant}#…`)."""
    return pk.split("#", 2)[1]


def interrupt_sk(key: str) -> str:
    return f"{INTERRUPT_SK_PREFIX}{key}"


def event_sk(last_seq: int) -> str:
    """An event batch is keyed by the last sequence it holds."""
    return f"{wiring.EVENT_ITEM_PREFIX}{last_seq:012d}"


# The highest event batch key: a Query from a sequence to here reads every batch after it.
LAST_EVENT_SK = event_sk(10**12 - 1)

# -- workflows: versions, the latest-version pointer, a ModuleX workflow's record, the catalogue

WORKFLOW_VERSION_SK_PREFIX = "V#"
# The pointer to a workflow's latest version: a few bytes, written in the same transaction as the version.
WORKFLOW_LATEST_SK = "LATEST"
MODULEX_WORKFLOW_SK = "MODULEX"


def workflow_pk(tenant: str, workflow_id: str) -> str:
    return f"T#{tenant}#W#{workflow_id}"


def workflow_version_sk(version: int) -> str:
    return f"{WORKFLOW_VERSION_SK_PREFIX}{version:08d}"


def catalogue_pk(tenant: str) -> str:
    return f"T#{tenant}#WFS"


def listing_bookmark_pk(tenant: str, listing: str) -> str:
    return f"T#{tenant}#RUNMARK#{listing}"


def listing_bookmark_sk(offset: int) -> str:
    return f"{offset:012d}"


# -- API keys and console sessions

API_KEY_SK = "KEY"
API_KEY_PK_PREFIX = "K#"
CONSOLE_SESSION_SK = "SESSION"


def api_key_pk(key_id: str) -> str:
    return f"{API_KEY_PK_PREFIX}{key_id}"


def keys_index_pk(tenant: str) -> str:
    """A tenant's keys on the inbox GSI (the index is overloaded: this partition value is the tenant's own)."""
    return f"T#{tenant}#KEYS"


def tenant_keys_query(table: str, tenant: str) -> dict[str, Any]:
    """The Query of the tenant's keys, oldest first: their listing on the inbox index (store/api_keys.py)."""
    index = wiring.INBOX_INDEX
    return {
        "TableName": table,
        "IndexName": index.name,
        "KeyConditionExpression": "#gpk = :gpk",
        "ExpressionAttributeNames": {"#gpk": index.partition_key},
        "ExpressionAttributeValues": {":gpk": {"S": keys_index_pk(tenant)}},
    }


def console_session_pk(tenant: str, session_id: str) -> str:
    return f"T#{tenant}#CONSOLE#{session_id}"


# -- following runs live (wiring.LIVE_API)

LIVE_CONNECTION_PK_PREFIX = "LIVE#"
LIVE_CONNECTION_SK = "CONN"
FOLLOWERS_SK = "FOLLOWERS"


def live_connection_pk(connection_id: str) -> str:
    # Not under the tenant: API Gateway's $disconnect names the connection alone (the item names its tenant).
    return f"{LIVE_CONNECTION_PK_PREFIX}{connection_id}"


class KeyedIds(NamedTuple):
    """The items among a tenant's that are keyed by their own id rather than under the tenant, by that id."""

    connections: list[str]
    api_keys: list[str]


def keyed_ids(keys: Iterable[dict[str, Any]]) -> KeyedIds:
    """The live connections and API keys that `keys` (items' keys, as DynamoDB answers them) name."""
    pks = [key[wiring.PARTITION_KEY]["S"] for key in keys]
    return KeyedIds(
        [pk.removeprefix(LIVE_CONNECTION_PK_PREFIX) for pk in pks if pk.startswith(LIVE_CONNECTION_PK_PREFIX)],
        [pk.removeprefix(API_KEY_PK_PREFIX) for pk in pks if pk.startswith(API_KEY_PK_PREFIX)],
    )


def live_index_pk(tenant: str) -> str:
    """A tenant's open connections on the inbox GSI (overloaded as for its keys)."""
    return f"T#{tenant}#LIVE"


def followers_pk(run_id: str) -> str:
    tenant, opaque = run_id.split("/", 1)
    return f"T#{tenant}#FOLLOW#{opaque}"
