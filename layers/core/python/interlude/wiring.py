"""The one declaration of how Interlude is wired: table layout, functions, their triggers and the routes.

The CDK construct (infra/interlude_cdk/), the local stack (interlude.local) and the tests all read this module, so the
deployed shape and the emulated shape cannot drift. Add a function, queue or route here first.
"""

import re
from typing import Any, Literal, NamedTuple, get_args

# The declarations are NamedTuples, not frozen dataclasses: every function imports this module at its cold start, and
# a dataclass generates and compiles its methods at class creation (six per frozen class, about 0.7 ms a class on
# Python 3.11: 8 of the 10 ms this module cost); a NamedTuple is as immutable, and builds in a quarter. Without
# `from __future__ import annotations`: a NamedTuple's field annotations given as strings are each compiled into a
# ForwardRef when its class is made (on Python 3.11, 14 M instructions: 60 % of this module's import).

# --- the tables ------------------------------------------------------------------------------------

TABLE_LOGICAL_NAME = "Table"
OUTPUT_TABLE_NAME = "TableName"
TABLE_NAME_ENV = "TABLE_NAME"
# Both tables' key schema and TTL attribute.
PARTITION_KEY = "pk"
SORT_KEY = "sk"
TTL_ATTRIBUTE = "ttl"
STREAM_VIEW = "NEW_IMAGE"
# The second table (docs/adr/0161): the items a run's transaction condition never reads, written apart from it (the
# inbox entries, the callback and webhook delivery records), so that a lifecycle's writes are shared between two
# tables' 40,000 WRU/s each. Its key schema and TTL are the first's; no stream (nothing of it invokes a function) and no
# global index (those families are read by key and by Query on their partition).
ENTRIES_TABLE_LOGICAL_NAME = "EntriesTable"
OUTPUT_ENTRIES_TABLE_NAME = "EntriesTableName"
ENTRIES_TABLE_NAME_ENV = "ENTRIES_TABLE_NAME"


class GlobalIndex(NamedTuple):
    name: str
    partition_key: str
    sort_key: str


# A tenant's API keys, oldest first (gsi1pk T#{tenant}#KEYS). Named `inbox` for the pending interrupts it listed
# before they moved to INBOX below; renaming a deployed GSI would rebuild it.
INBOX_INDEX = GlobalIndex(name="inbox", partition_key="gsi1pk", sort_key="gsi1sk")
GLOBAL_INDEXES = (INBOX_INDEX,)


class ItemIndex(NamedTuple):
    """An index kept as base-table items rather than a GSI: each entry is its own small item whose partition key is
    `T#{tenant}#{prefix}#{shard:02d}` (interlude.store.item_index). Writes spread over `shards` partitions by a hash
    of the member's id; a page is a merge of newest-first Queries, one per shard, so what a page reads is bounded by
    the page size and the shard count, never by how many entries the index holds. moto's GSI queries read the whole
    table locally; base-table Queries do not (docs/scale.md)."""

    name: str
    prefix: str
    shards: int
    # An index of several families (the inbox: store/inbox.py) puts the family after the prefix,
    # `T#{tenant}#{prefix}#{family}#{shard:02d}`; these families (their first `#` segment) keep one partition each,
    # so a page reads one Query for each, not `shards` (a caller may hold 100 groups): 500 lifecycles/s per family.
    unsharded_families: tuple[str, ...] = ()


# Runs of a tenant, newest first (GET /runs, GET /workflow-runs): one entry per run, written once, in the
# transaction that creates the run (docs/scale.md, "Run listing").
RUN_INDEX = ItemIndex(name="runs", prefix="RUNS", shards=16)
# Pending interrupts (store/inbox.py, store/sharded.py): sk {raisedAt}#{interruptId}; one entry per family an open
# interrupt belongs to (ANY or each approver ref, its workflow, its kind), written around the transitions.
INBOX = ItemIndex(name="inbox-entries", prefix="INBOX", shards=16, unsharded_families=("P", "G", "ROLE"))
# Ready tasks of a queue (issue 15 item 2, store/tasks.py): family = the queue name, sk {notBefore ms}#{task}; a
# claim reads at most queues x shards Queries of a few entries each, whatever the queue holds.
TASK_QUEUES = ItemIndex(name="task-queues", prefix="TASKQ", shards=4)
# Run search (issue 29 item 1, rules/run_search.py): family = a tag `TAG#{tag}`, a searchable metadata value
# `MD#{key}#{value}` or a title word `TOK#{word}`; sk {createdAt}#{run} as the run listing's, so one cursor serves
# both. Entries are written when the run is created (and a word's when a gate titled with it opens), never updated.
RUN_SEARCH = ItemIndex(name="run-search", prefix="RUNX", shards=16)
ITEM_INDEXES = (RUN_INDEX, INBOX, TASK_QUEUES, RUN_SEARCH)


class TableSpec(NamedTuple):
    """One table of a deployment, as the construct, the local stack and the tests create it (pk/sk strings, TTL
    attribute TTL_ATTRIBUTE, on demand unless a deployment provisions it: InterludeProps.table_capacity)."""

    logical_name: str
    # The stack output holding its name (the `interlude` CLI's --stack finds it there).
    output: str
    # The functions' environment variable holding its name.
    env: str
    # Its stream's view type (None: no stream).
    stream_view: str | None
    global_indexes: tuple[GlobalIndex, ...]


TABLE = TableSpec(TABLE_LOGICAL_NAME, OUTPUT_TABLE_NAME, TABLE_NAME_ENV, STREAM_VIEW, GLOBAL_INDEXES)
ENTRIES_TABLE = TableSpec(ENTRIES_TABLE_LOGICAL_NAME, OUTPUT_ENTRIES_TABLE_NAME, ENTRIES_TABLE_NAME_ENV, None, ())
TABLES = (TABLE, ENTRIES_TABLE)


def key_attributes(spec: TableSpec = TABLE) -> list[tuple[str, str]]:
    """Every attribute that appears in the table's key schemas, with its DynamoDB type ("S" throughout)."""
    names = [PARTITION_KEY, SORT_KEY]
    for index in spec.global_indexes:
        names += [index.partition_key, index.sort_key]
    return [(name, "S") for name in names]


# Partitions written only by Put (never updated or deleted): the tenants' audit logs (interlude.store.audit). Every
# function's role is denied these actions on them (IAM's dynamodb:LeadingKeys), so append-only holds below the
# application too; an entry is Put only where none exists (a condition IAM cannot express; the store's).
APPEND_ONLY_PARTITIONS = ("T#*#AUDIT#*",)
# Hash chains per tenant in the audit log (interlude.store.audit): an entry goes to the chain its run (or key) hashes
# to, each chain with its own head, sequence and checkpoints, so a tenant's appends contend only within a chain.
# docs/scale.md, "The audit chains": 128 chains x ~40-100 serialised appends/s each >= 5,000 decisions/s per tenant.
# Changing it moves later entries of a run to another chain (verification walks every chain; nothing breaks).
AUDIT_CHAINS = 128
# The audit listing's reads of a page's chains run this many at a time (docs/adr/0173): the DynamoDB client's
# connection pool (botocore's default, 10), which more threads would only queue on.
AUDIT_LISTING_WORKERS = 10
# BatchWriteItem too: the inbox entries' writers hold it, and its DeleteRequest would otherwise bypass the deny.
APPEND_ONLY_DENIED_ACTIONS = ("dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem")
# The one function that may remove (never change) items of those partitions: a tenant's deletion removes its whole
# audit log with everything else it holds (issue 30 item 6). Its role is denied UpdateItem there like every other.
APPEND_ONLY_REMOVERS = ("admin",)


def append_only_denied_actions(function_name: str) -> tuple[str, ...]:
    """What the function's role is denied on the append-only partitions."""
    if function_name in APPEND_ONLY_REMOVERS:
        return ("dynamodb:UpdateItem",)
    return APPEND_ONLY_DENIED_ACTIONS

# The stream feeds `dispatch` with new event-log items only (sk begins with "E#").
EVENT_ITEM_PREFIX = "E#"
# Which stream records invoke `dispatch`, in Lambda's event-filtering syntax: the deployed event source mapping
# sends it as is (interlude_cdk), the local stream pump matches records against it (interlude.store.stream), so
# run heads, interrupts, index entries, counters and idempotency rows never invoke the function. An event item
# also names the inbox entries its transition closed (store/inbox.py), which `dispatch` deletes: a narrower filter
# must still pass every item that names some.
STREAM_FILTER: dict[str, object] = {
    "eventName": ["INSERT"],
    "dynamodb": {"NewImage": {SORT_KEY: {"S": [{"prefix": EVENT_ITEM_PREFIX}]}}},
}

# --- functions -------------------------------------------------------------------------------------


class Function(NamedTuple):
    name: str
    # Module path under functions/<name>/ whose `lambda_handler` is the entry point.
    handler: str
    # MB, and with it the function's share of a vCPU (one at 1,769 MB): billed per GB-second. A function that mostly
    # waits on another's server is sized down to what its CPU and the goal's concurrency still allow (docs/adr/0171);
    # a deployment may tune it (interlude_cdk.InterludeProps.memory_mb).
    memory_mb: int = 512
    timeout_s: int = 29
    # DynamoDB actions this function's role is granted on the table (least privilege).
    table_actions: tuple[str, ...] = ()
    # And on the second table (ENTRIES_TABLE): the verbs the families kept there (inbox entries, delivery records)
    # need from this function, each one it has on the first table for those items; none if it touches neither.
    entries_table_actions: tuple[str, ...] = ()
    reads_stream: bool = False
    description: str = ""
    # Queues (QUEUES names) this function may send to; each one's URL arrives in the queue's `url_env`.
    sends_to: tuple[str, ...] = ()
    # The queue whose messages invoke this function (an SQS event source reporting batch item failures).
    consumes: str | None = None
    # Secrets Manager grants on every secret under a name prefix: (SECRET_PREFIXES key, actions).
    secret_grants: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # PUBLIC_BASE_URL (the API's base URL, for links in answers and outgoing notices) is set in its environment.
    needs_public_base_url: bool = False
    # Concurrency held back for this function alone (None: none), so held API requests cannot starve it.
    # A deployment may override it (interlude_cdk.InterludeProps.reserved_concurrency).
    reserved_concurrency: int | None = None
    # Messages per invocation from the queue it `consumes` (the event source's batch size; the local pump's too).
    batch_size: int = 1
    # The event source's MaximumConcurrency on the queue it `consumes` (None: the construct's default); never above its
    # reservation (interlude_cdk.InterludeProps.sqs_max_concurrency overrides it).
    max_concurrency: int | None = None
    # Sends e-mail through SES (issue 14): granted ses:SendEmail/SendRawEmail on the deployment's from-identity and
    # configuration set, whose names arrive in SES_FROM_ADDRESS / SES_CONFIGURATION_SET.
    sends_email: bool = False
    # Actions granted on "*" because IAM scopes them to no resource (listings: secretsmanager:ListSecrets,
    # scheduler:ListSchedules); what is found is acted on under the function's other, scoped grants.
    unscoped_actions: tuple[str, ...] = ()


# SQS → callbacks settings, shared by the event source mapping and the local pump.
CALLBACK_BATCH_SIZE = 4
# The queue between the stream and dispatch (the outbox), and its batch: what a quiet tenant's item waits for behind a
# busy one's is at most one batch of this many items, taken side by side by run (docs/scale.md, "Fairness across
# tenants"; docs/adr/0111). No batching window: at the goal's pace a receive finds a full batch without one, and at a
# quiet pace a window would only hold each record back (bench/ceiling.py prints the batch's figures).
OUTBOX_QUEUE = "outbox"
OUTBOX_BATCH_SIZE = 10
# dispatch's concurrency, from the per-deployment goal (2,000 lifecycles/s): bench/ceiling.py prints what the goal
# needs from the measured seconds a lifecycle holds dispatch at full batches (≈ 116 ms for lifecycle (a): 232) and
# checks this covers it; about 30% above that, as callbacks' is, for the CPU a busier or quieter host measures
# (docs/adr/0158). Its queue's maximum and, where a deployment states its account's quota,
# its reservation: the one place it is set.
OUTBOX_CONCURRENCY = 300
# callbacks' concurrency, from the same goal (issue 31): a batch's notices are delivered side by side by run, and
# bench/ceiling.py prints what the goal needs from the measured seconds a lifecycle's notices hold the function at full
# batches and checks this covers it. No reservation: notices wait in their queue, not in the account's pool.
CALLBACK_CONCURRENCY = 250
# timeouts' reservation, from the same goal (issue 31): one deadline per invocation (Scheduler invokes it once per
# schedule), so bench/ceiling.py prints what 2,000 timed-out gates a second need from the measured seconds lifecycle (c)
# holds it (≈ 32 ms: 64 at the last measurement) and checks this covers it, with room for the audit sweep and
# reminders. Reserved where a deployment states its account quota, so held API requests cannot make deadlines late.
TIMEOUTS_CONCURRENCY = 80

FUNCTIONS: tuple[Function, ...] = (
    Function(
        name="api",
        handler="handler.lambda_handler",
        description="Every HTTP route (OpenWOP v2 and ModuleX faces)",
        # Every link an answer holds (token urls, eventsUrl, statusUrl) is built from it, never from the request.
        needs_public_base_url=True,
        # A replay queues the dead letter it reopens again (interlude.app.replay); a settings change that declares
        # metadata keys searchable queues the job that indexes older runs under them (interlude.app.search_keys), and
        # a change of retentionDays its re-stamp job's first turn (interlude.app.retention.Restamp).
        sends_to=("callbacks", "notifications", "migrations"),
        table_actions=(
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:Query",
            "dynamodb:ConditionCheckItem",
            # The inbox index's entries (written around each transition), the interrupts an inbox page names and the
            # run heads a run listing page shows (GET /runs, GET /workflow-runs).
            "dynamodb:BatchWriteItem",
            "dynamodb:BatchGetItem",
        ),
        # Inbox entries: written around each transition and deleted when stale (BatchWriteItem), put again by a
        # claim's, release's or assignment's transaction (PutItem: store/transitions.transition_items, the one Put
        # into this table, for a gate-assigned event, which only app/claims.py makes); read by an inbox page (Query).
        # Delivery records: listed (Query), read by a replay where it finds one and by a notice's attempts (GetItem:
        # store/deliveries.located, attempts) and reopened by the replay (UpdateItem: store/leases). No BatchGetItem:
        # neither 0.5.0 nor this release batch-reads this table (ADR 0161).
        entries_table_actions=(
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:Query",
            "dynamodb:BatchWriteItem",
        ),
        # Webhook subscriptions (issue 14): a secret is created at POST /webhooks, replaced at rotate-secret, read
        # to keep the previous one through the overlap, and deleted with its subscription.
        secret_grants=(
            (
                "SUBSCRIPTION_SECRET_PREFIX",
                (
                    "secretsmanager:GetSecretValue",
                    "secretsmanager:CreateSecret",
                    "secretsmanager:TagResource",
                    "secretsmanager:PutSecretValue",
                    "secretsmanager:DeleteSecret",
                ),
            ),
            # PUT /tenant/notifications/slack writes the tenant's Slack credential (issue 14); no answer carries it.
            # POST /slack/{tenant}/interactions reads a bot token to open the decision modal (views.open, issue 28
            # item 6), the one call to Slack a "Decide with a comment…" click makes inside Slack's 3 seconds.
            (
                "SLACK_SECRET_PREFIX",
                (
                    "secretsmanager:GetSecretValue",
                    "secretsmanager:PutSecretValue",
                    "secretsmanager:CreateSecret",
                    "secretsmanager:TagResource",
                ),
            ),
            # PUT /tenant/notifications/slack/signing-secret writes the Slack app's signing secret; POST
            # /slack/{tenant}/interactions reads it to verify a click (issue 28 item 6).
            (
                "SLACK_SIGNING_SECRET_PREFIX",
                (
                    "secretsmanager:GetSecretValue",
                    "secretsmanager:PutSecretValue",
                    "secretsmanager:CreateSecret",
                    "secretsmanager:TagResource",
                ),
            ),
        ),
    ),
    Function(
        name="stream",
        handler="handler.lambda_handler",
        memory_mb=256,
        description="Table stream consumer: hands each new event-log item to the outbox queue, grouped by tenant",
        reads_stream=True,
        # Nothing but the stream and one queue: a forward costs one SendMessageBatch per ten records, so the one
        # ordered lane every tenant shares is never held up by any tenant's side effects (docs/scale.md).
        sends_to=(OUTBOX_QUEUE,),
        # STREAM_PARALLELIZATION concurrent batches per stream shard, a new table's four shards (more is a very busy
        # table).
        reserved_concurrency=40,
    ),
    Function(
        name="dispatch",
        handler="handler.lambda_handler",
        timeout_s=60,
        description="The outbox: advances runs and runs side effects of each event-log item, fair across tenants",
        consumes=OUTBOX_QUEUE,
        batch_size=OUTBOX_BATCH_SIZE,
        table_actions=(
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:Query",
            "dynamodb:ConditionCheckItem",
            # Transitions write and remove inbox index entries (interlude.store.inbox).
            "dynamodb:BatchWriteItem",
            # A cancelled task's ready entry leaves its queue's index (interlude.store.tasks.TaskStore.drop).
            "dynamodb:DeleteItem",
            # Notifications read the delegations of a gate's approvers in batches
            # (interlude.store.directory.DirectoryStore.get_many).
            "dynamodb:BatchGetItem",
        ),
        # Inbox entries: put around a transition and deleted once an event closes their gate (BatchWriteItem); a
        # retention turn reads the run's delivery records and entries and sets their expiry (Query, UpdateItem:
        # store/retention.items_page, set_item_ttl). No PutItem: only a claim's transaction puts into this table (api).
        entries_table_actions=(
            "dynamodb:UpdateItem",
            "dynamodb:Query",
            "dynamodb:BatchWriteItem",
        ),
        # migrations: a run that ended (or runs again) has its items' expiry set by a retention turn taken here
        # (interlude.app.retention); one with more items than a page goes on from that queue, in the migrate function.
        sends_to=("callbacks", "actions", "notifications", "migrations"),
        needs_public_base_url=True,
        # With SQS fair queues, a busy tenant's items fill at most what is in flight, and a quiet tenant's item takes
        # the next instance that frees. Its queue's maximum concurrency, and its reservation where the deployment
        # states its account's quota (interlude_cdk).
        max_concurrency=OUTBOX_CONCURRENCY,
        reserved_concurrency=OUTBOX_CONCURRENCY,
    ),
    Function(
        name="callbacks",
        handler="handler.lambda_handler",
        # A batch is CALLBACK_BATCH_SIZE attempts of at most 15 s each (one after another for the notices of one run);
        # a bundle's notices are dialled only while the invocation has a dial's bound left (docs/adr/0181).
        timeout_s=90,
        # A notice waits ≈ 100 ms on its POST and reads against ≈ 6 ms of CPU (its TLS handshake included): a larger
        # share of a vCPU would mostly be billed waiting. Not below: at full batches the CPU of a batch's four notices
        # is what holds an instance, and the goal's 2,000 lifecycles/s then needs ≈ 190 of CALLBACK_CONCURRENCY's 250
        # (bench/ceiling.py); a cold start's import and first notice take ≈ 1.4 s at this share (docs/adr/0171).
        memory_mb=256,
        description="Callback notices from the SQS queue to tenant URLs: egress-checked, pinned, signed, retried",
        consumes="callbacks",
        batch_size=CALLBACK_BATCH_SIZE,
        max_concurrency=CALLBACK_CONCURRENCY,
        # Its own queue too: a transition's notices whose next round would outlast their message's receives go on in
        # a copy of it (adapters/delivery/worker.PASSED_ON, ADR 0198).
        sends_to=("callbacks-dlq", "callbacks"),
        table_actions=(
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:Query",
            # A webhook replay reads its event; a gate's text a format-9 event holds in its interrupt item is read
            # back in one BatchGetItem (interlude.store.head_parts.event_payloads, ADR 0134).
            "dynamodb:BatchGetItem",
            # A suspended tenant's notice is kept for its resume in a transaction that checks the tenant is still
            # suspended (store/tenants.TenantRecords.hold).
            "dynamodb:ConditionCheckItem",
        ),
        # Delivery records: read before a dial (GetItem), created by the claim and updated with each attempt and its
        # expiry confirmed (UpdateItem: store/leases writes a ledger item, a new one too, with UpdateItem only); a
        # webhook replay lists a run's (Query).
        entries_table_actions=(
            "dynamodb:GetItem",
            "dynamodb:UpdateItem",
            "dynamodb:Query",
        ),
        # TagResource: a secret is created with its deployment's tags (CREATED_SECRETS_TAGS_ENV), which needs it.
        secret_grants=(
            (
                "WEBHOOK_SECRET_PREFIX",
                ("secretsmanager:GetSecretValue", "secretsmanager:CreateSecret", "secretsmanager:TagResource"),
            ),
            # Webhook subscriptions' secrets (issue 14): read to sign each delivery.
            ("SUBSCRIPTION_SECRET_PREFIX", ("secretsmanager:GetSecretValue",)),
        ),
    ),
    Function(
        name="timeouts",
        handler="handler.lambda_handler",
        description="EventBridge Scheduler target: applies a due deadline (interrupt timeout, delay, run timeout); "
        "sweeps the audit checkpoints",
        # A deadline reads the run head and its workflow and commits one conditional transaction; the audit sweep
        # (RECURRING_SCHEDULES) queries the pending heads and a tenant's unanchored entries.
        table_actions=(
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:ConditionCheckItem",
            "dynamodb:Query",
            # A timeout closes an interrupt: its inbox index entries go (interlude.store.inbox).
            "dynamodb:BatchWriteItem",
            # The audit sweep takes an anchored chain off the pending index: a conditional Delete of its marker
            # (interlude.store.audit.AuditLog.settle).
            "dynamodb:DeleteItem",
            # Reminders read the delegations of a gate's approvers in batches
            # (interlude.store.directory.DirectoryStore.get_many).
            "dynamodb:BatchGetItem",
        ),
        # A timeout closes a gate, an escalation changes one: their inbox entries go or are put around the transition
        # (BatchWriteItem). No PutItem: neither assigns the gate (only a claim's transaction puts into this table: api).
        entries_table_actions=("dynamodb:BatchWriteItem",),
        reserved_concurrency=TIMEOUTS_CONCURRENCY,
        # A reminder's schedule (issue 14) fires here too: it queues the reminders of the gate it names. The daily
        # retention sweep's schedule queues the sweep's first turn on the migrations queue. The audit sweep hands the
        # work a tenant's resume left held back to its queue (interlude.app.tenant_lifecycle.hand_back_left).
        sends_to=(OUTBOX_QUEUE, "callbacks", "actions", "notifications", "migrations"),
        # The held notices it hands back carry decision links minted then (ADR 0190).
        needs_public_base_url=True,
    ),
    Function(
        name="actions",
        handler="handler.lambda_handler",
        # One action per invocation: an attempt of at most 30 s (core.http timeoutMs), its secret read and the run's
        # transition. A crash or a timeout costs that one action a lease, never a batch.
        timeout_s=60,
        description="Gated actions (core.http) from the SQS queue: effect-recorded, egress-checked, pinned, retried",
        consumes="actions",
        batch_size=1,
        # The effect record and the run's ledger (conditional transactions), the run head and its workflow, the
        # run's transition. One Query: whether a tenant without a record holds a key (store/tenant_standing.py).
        table_actions=(
            "dynamodb:GetItem",
            "dynamodb:Query",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:ConditionCheckItem",
            # The transition runs on past the action: a gate it reaches opens there, its inbox index entries with it
            # (interlude.store.inbox).
            "dynamodb:BatchWriteItem",
            # A run head that holds an open gate's text in its interrupt item (format 4: any text that would carry the
            # head over a KB, ADR 0153) is read back with it in one BatchGetItem (interlude.store.head_parts).
            "dynamodb:BatchGetItem",
        ),
        # A gate the transition reaches opens with its inbox entries (BatchWriteItem).
        entries_table_actions=("dynamodb:BatchWriteItem",),
        # Auth headers by reference: read, never written.
        secret_grants=(("ACTION_SECRET_PREFIX", ("secretsmanager:GetSecretValue",)),),
        reserved_concurrency=10,
    ),
    Function(
        name="notify",
        handler="handler.lambda_handler",
        # A batch is CALLBACK_BATCH_SIZE notifications, each at most one e-mail and one Slack post of 15 s.
        timeout_s=150,
        # A notification waits on SES or Slack and its reads (≈ 60 ms and more) against ≈ 15 ms of CPU: sized as
        # callbacks; a person reads the mail, so a cold start's ≈ 1.7 s at this share is not what they wait on
        # (docs/adr/0171).
        memory_mb=256,
        description="Notifications (issue 14): personal decision links by e-mail (SES) and Slack; retried, dead-lettered",
        consumes="notifications",
        batch_size=CALLBACK_BATCH_SIZE,
        sends_to=("notifications-dlq",),
        table_actions=(
            "dynamodb:GetItem",
            # A mail tells the gate's whole text: a format-4 head keeps only its digest, read with the interrupt item
            # that holds it (store/head_parts, ADR 0127).
            "dynamodb:BatchGetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:Query",
            # A suspended tenant's notification is kept for its resume in a transaction that checks the tenant is still
            # suspended (store/tenants.TenantRecords.hold).
            "dynamodb:ConditionCheckItem",
        ),
        secret_grants=(("SLACK_SECRET_PREFIX", ("secretsmanager:GetSecretValue",)),),
        needs_public_base_url=True,
        sends_email=True,
    ),
    Function(
        name="migrate",
        handler="handler.lambda_handler",
        # A turn takes pages until two minutes are left, then queues the next turn (interlude.migrations).
        timeout_s=900,
        description="The table's migrations (backfills) and finished runs' retention, taken turn by turn from its queue",
        consumes="migrations",
        batch_size=1,
        # The daily sweep queues a replayed delivery or notification whose replay stopped before its send.
        sends_to=("migrations", "callbacks", "notifications"),
        # Checkpoints (Query, UpdateItem), the pages of a Scan, which index items are missing and the status of the runs
        # the retention sweep finds listed without an expiry (BatchGetItem), the missing index items'
        # puts (BatchWriteItem); a workflow's latest version and record (Query, GetItem), its pointer and catalogue entry
        # (PutItem), a key's listing (UpdateItem). A run's retention (interlude.app.retention): its head (GetItem), its
        # partition's pages (Query), each item's ttl (UpdateItem); the tenant's settings (GetItem). A directory entry's
        # Slack user item (migrations/0008): claimed (PutItem) in a transaction that checks the entry is as read
        # (ConditionCheckItem).
        table_actions=(
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:ConditionCheckItem",
            "dynamodb:Query",
            "dynamodb:Scan",
            "dynamodb:BatchGetItem",
            "dynamodb:BatchWriteItem",
        ),
        # The inbox entries' backfills read and write the first table only (store/migrations.py); 0010 deletes
        # approval-kind entries in both (BatchWriteItem); 0011 puts the open gates' entries here in the transaction
        # that marks their gates (PutItem: ADR 0170) and deletes their leftovers (BatchWriteItem). A run's retention
        # sets its delivery records' and entries' expiry (Query, UpdateItem); the daily sweep reads a replayed delivery
        # (GetItem) it queues again, and passes over the second table (Scan: its delivery records,
        # migrations/sweeps.records_sweep). No BatchGetItem: no path of 0.6.0 or this release sends one to this table
        # (ADR 0161).
        entries_table_actions=(
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:Query",
            "dynamodb:Scan",
            "dynamodb:BatchWriteItem",
        ),
    ),
)


# Issue 30 item 6: the operator surface of a managed deployment. No route, queue or schedule invokes it: the operator's
# IAM principal does (lambda:InvokeFunction on this one function, `interlude tenants --stack NAME`), so no tenant key
# reaches it. It creates, lists, suspends, resumes and deletes tenants and reads their usage
# (interlude.app.tenant_lifecycle); its grants are what those need, checked against every call the suite makes.
OPERATOR_FUNCTION = "admin"
# The secret-name prefixes a tenant's deletion removes secrets under (wiring.SECRET_PREFIXES keys).
TENANT_SECRET_PREFIXES = (
    "WEBHOOK_SECRET_PREFIX",
    "SUBSCRIPTION_SECRET_PREFIX",
    "SLACK_SECRET_PREFIX",
    "SLACK_SIGNING_SECRET_PREFIX",
    "ACTION_SECRET_PREFIX",
)
FUNCTIONS += (
    Function(
        name=OPERATOR_FUNCTION,
        handler="handler.lambda_handler",
        # A call takes what it can until a minute is left (a deletion or a resume goes on at the next call).
        timeout_s=900,
        description="The operator surface (invoked by IAM, no route): tenants created, listed, suspended, resumed, "
        "deleted with all their data; usage per tenant and month",
        table_actions=(
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
            "dynamodb:Query",
            "dynamodb:ConditionCheckItem",
            # A tenant's deletion reads the whole table for its items (they live under many partition keys) and
            # deletes them in batches; the usage parts of a month are read in one batch.
            "dynamodb:Scan",
            "dynamodb:BatchWriteItem",
            "dynamodb:BatchGetItem",
        ),
        # A tenant's deletion reads the second table whole too and deletes the tenant's items there in batches.
        entries_table_actions=("dynamodb:Scan", "dynamodb:BatchWriteItem"),
        # A resume hands the work held while the tenant was suspended back to the queue it came from (a callback
        # notice with a decision link minted anew: the run's head and its creating key read, the key ring's link).
        sends_to=(OUTBOX_QUEUE, "callbacks", "actions", "notifications"),
        needs_public_base_url=True,
        # A deletion finds the tenant's secrets under each prefix (ListSecrets) and deletes them.
        secret_grants=tuple((key, ("secretsmanager:DeleteSecret",)) for key in TENANT_SECRET_PREFIXES),
        unscoped_actions=("secretsmanager:ListSecrets", "scheduler:ListSchedules"),
    ),
)


# The function each deploy invokes once the stack is in place (a CloudFormation trigger; the local stack invokes it
# as it starts): it queues the first turn of the table's migrations (interlude.migrations), which its queue goes on
# with until none is left.
DEPLOY_TRIGGER = "migrate"


def function(name: str) -> Function:
    return next(f for f in FUNCTIONS if f.name == name)


# Stream → dispatch settings, shared by the event source mapping and the local pump.
STREAM_BATCH_SIZE = 25
# Batches of one stream shard forwarded at once (the mapping's ParallelizationFactor, 1-10; a partition key's records
# stay in order): the forward is a queue send the outbox does not order by, and one batch at a time per shard held a
# new table's four shards near 300 lifecycles/s (bench/ceiling.py).
STREAM_PARALLELIZATION = 10
STREAM_MAX_RETRIES = 10
# A record older than this goes to the stream's dead-letter queue instead of being retried: well inside the
# stream's 24 h retention, so a stuck outbox never loses records to the stream trimming them silently.
STREAM_MAX_RECORD_AGE_S = 6 * 3600

# --- queues (callback delivery, actions) --------------------------------------------------------------------


class Queue(NamedTuple):
    name: str
    # Environment variable that carries the queue's URL to the functions that use it.
    url_env: str
    retention_s: int = 4 * 24 * 3600
    visibility_timeout_s: int = 30
    # Where SQS moves a message received more than max_receive_count times (0: no redrive).
    dead_letter: str | None = None
    max_receive_count: int = 0


# Attempts per callback notice (the worker dead-letters after the last one; see interlude.adapters.delivery).
CALLBACK_MAX_ATTEMPTS = 10
# Attempts per notification (issue 14).
NOTIFY_MAX_ATTEMPTS = 8
# The most attempts a core.http node may ask for (its `maxAttempts`, engine.actions): the actions settings' bound on
# how long a round may wait (config.actions) takes the worst a definition may choose.
ACTION_MAX_ATTEMPTS = 10
# What an SQS event source mapping needs on its queue (what CDK's SqsEventSource grants, nothing more).
QUEUE_CONSUME_ACTIONS = (
    "sqs:ReceiveMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueUrl",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
)

# Receives of an outbox message before SQS moves it to the outbox's dead letters: the stream mapping's retries.
OUTBOX_MAX_RECEIVES = STREAM_MAX_RETRIES
# How long dispatch waits for the head of a new run whose event batch it read without one (docs/adr/0165): a create
# may put its batch before the transaction that writes the head (from 0.7.0), so the batch can reach dispatch first.
# The head commits within the creating invocation, which began before the batch's events were stamped and lasts at
# most the api function's timeout (every create with a freshly minted run id is an API request); twice that leaves
# room for two functions' clocks. A batch older than this without its head is an orphan: its create crashed between
# the put and the transaction, or was refused and did not take it back; it is dropped, never dispatched.
NEW_RUN_BATCH_WAIT_S = 2 * function("api").timeout_s
# How long dispatch hides such a batch's message before the queue hands it out again after its first receive, twice
# as long after each next one (app/dispatch.head_wait_retry_s): soon, for a head nearly always commits within
# milliseconds of the batch, and past the wait within a few of the message's receives, never its dead letters.
NEW_RUN_BATCH_FIRST_RETRY_S = 2

QUEUES: tuple[Queue, ...] = (
    # The outbox (issue 26, S5): one message per new event-log item, `MessageGroupId` = its tenant, so SQS fair
    # queues serve a quiet tenant's items before a busy tenant's backlog. A message names the item (its key and
    # stream sequence number), never carries its events; one dispatch fails every time (a bug, a poison item) goes
    # to the dead letters as it is.
    Queue(name="outbox-dlq", url_env="OUTBOX_DLQ_URL", retention_s=14 * 24 * 3600),
    Queue(
        name=OUTBOX_QUEUE,
        url_env="OUTBOX_QUEUE_URL",
        # Kept as long as the stream keeps a record it could not hand over (STREAM_MAX_RECORD_AGE_S) and then some.
        retention_s=4 * 24 * 3600,
        # 6x dispatch's timeout (AWS's guidance for SQS event sources).
        visibility_timeout_s=360,
        dead_letter="outbox-dlq",
        max_receive_count=OUTBOX_MAX_RECEIVES,
    ),
    # Dead letters carry the notice's identity and delivery history, never its body, token or signing secret; a
    # message failing on its last receive, the message as queued without its decision links (ADR 0185).
    Queue(name="callbacks-dlq", url_env="CALLBACK_DLQ_URL", retention_s=14 * 24 * 3600),
    Queue(
        name="callbacks",
        url_env="CALLBACK_QUEUE_URL",
        # At least 6x the callbacks function's timeout (AWS's guidance for SQS event sources).
        visibility_timeout_s=540,
        dead_letter="callbacks-dlq",
        # A safety net only: the worker dead-letters a notice itself after CALLBACK_MAX_ATTEMPTS, and a message that
        # fails on its last receive (a crash every time) without its links; SQS redrives only what the worker could
        # not even take up (an invocation that died) after twice as many receives. The worker's receive budget is
        # this (adapters/delivery/worker.MAX_RECEIVES): a transition's notices, one round after another, go on in a
        # copy of their message before a round would outlast it (ADR 0198).
        max_receive_count=2 * CALLBACK_MAX_ATTEMPTS,
    ),
    # Actions whose worker could not finish them (a crash every time, an outcome that cannot be committed): the
    # message as queued (run, node, visit, effect id; never a request, a body or a secret).
    Queue(name="actions-dlq", url_env="ACTION_DLQ_URL", retention_s=14 * 24 * 3600),
    Queue(
        name="actions",
        url_env="ACTION_QUEUE_URL",
        # 6x the actions function's timeout (AWS's guidance for SQS event sources); the worker hides a message it
        # works on for the claim's lease instead, so a crashed attempt is taken over after the lease, not this.
        visibility_timeout_s=360,
        dead_letter="actions-dlq",
        # Retries of the action itself are counted by its effect record (core.http maxAttempts, at most
        # ACTION_MAX_ATTEMPTS); the redrive catches a message that crashes the worker every time.
        max_receive_count=2 * ACTION_MAX_ATTEMPTS,
    ),
    # Issue 14: one message per recipient per purpose (raised, reminder n, escalation) of an interrupt visit.
    Queue(name="notifications-dlq", url_env="NOTIFICATION_DLQ_URL", retention_s=14 * 24 * 3600),
    Queue(
        name="notifications",
        url_env="NOTIFICATION_QUEUE_URL",
        visibility_timeout_s=900,
        dead_letter="notifications-dlq",
        max_receive_count=2 * NOTIFY_MAX_ATTEMPTS,
    ),
    # Issue 30: a message is a turn of the migrations to take (the deploy's, or the one a turn leaves for the next).
    Queue(name="migrations-dlq", url_env="MIGRATION_DLQ_URL", retention_s=14 * 24 * 3600),
    Queue(
        name="migrations",
        url_env="MIGRATION_QUEUE_URL",
        # 6x the migrate function's timeout (AWS's guidance for SQS event sources).
        visibility_timeout_s=6 * 900,
        dead_letter="migrations-dlq",
        # A turn that fails three times (its migration's error each time) is left for an operator: the checkpoint
        # keeps where it stopped, and `interlude migrate` goes on from there once the cause is fixed.
        max_receive_count=3,
    ),
)


def queue(name: str) -> Queue:
    return next(q for q in QUEUES if q.name == name)


def queues_in_creation_order() -> list[Queue]:
    """QUEUES with every dead-letter queue before the queues that redrive to it (it must exist to be named)."""
    ordered: list[Queue] = []
    pending = list(QUEUES)
    while pending:
        created = {q.name for q in ordered}
        ready = next(q for q in pending if q.dead_letter is None or q.dead_letter in created)
        ordered.append(ready)
        pending.remove(ready)
    return ordered


# Webhook signing secrets, one per tenant: `{prefix}{tenant}` (see interlude.adapters.delivery.signing).
# Function.secret_grants names prefixes by these keys, which are also the environment variables carrying them.
# Action auth secrets, one per tenant and name: `{prefix}{tenant}/{name}` (core.http secretHeaders), made by the
# tenant's operator; the actions function only reads them. Slack credentials, one per tenant (issue 14).
SECRET_PREFIXES = {
    "WEBHOOK_SECRET_PREFIX": "interlude/webhooks/",
    "ACTION_SECRET_PREFIX": "interlude/actions/",
    # One secret per webhook subscription (POST /webhooks, issue 14): `{prefix}{tenant}/{opaque}`.
    "SUBSCRIPTION_SECRET_PREFIX": "interlude/subscriptions/",
    "SLACK_SECRET_PREFIX": "interlude/slack/",
    # The tenant's Slack app signing secret (issue 28 item 6): apart from the credential, so the api function that
    # verifies clicks with it reads no bot token.
    "SLACK_SIGNING_SECRET_PREFIX": "interlude/slack-signing/",
}


# A function that creates secrets under a prefix (CreateSecret among its secret_grants) creates them under the
# deployment's customer-managed KMS key when it has one (the key's ARN here; unset: Secrets Manager's AWS-managed
# key), and with the deployment's tags (a JSON object here): they are never part of the stack, and a teardown
# finds them by tag.
CREATED_SECRETS_KMS_KEY_ENV = "CREATED_SECRETS_KMS_KEY_ARN"
CREATED_SECRETS_TAGS_ENV = "CREATED_SECRETS_TAGS"


def creates_secrets(spec: Function) -> bool:
    return any("secretsmanager:CreateSecret" in actions for _, actions in spec.secret_grants)


def deployed_secret_prefix(key: str, deployment: str) -> str:
    """A deployment's own prefix (`interlude/<deployment>/webhooks/`): stacks sharing an account never share secrets."""
    return SECRET_PREFIXES[key].replace("interlude/", f"interlude/{deployment}/", 1)

# --- secrets (generated at deploy, never in the template) -----------------------------------------


class Secret(NamedTuple):
    name: str  # construct id
    # Environment variable that carries the secret's ARN to its readers.
    env: str
    # Functions granted SECRET_READ_ACTIONS on exactly this secret.
    readers: tuple[str, ...]
    description: str = ""


SECRET_READ_ACTIONS = ("secretsmanager:GetSecretValue",)
# The interrupt token key ring (interlude.adapters.keyring_store); `interlude tokens rotate|retire` edit it.
KEY_RING_SECRET = Secret(
    name="TokenKeyRing",
    env="KEY_RING_SECRET",
    # dispatch mints the resolve token a callback notice carries (interlude.adapters.delivery.outbox).
    # notify mints each recipient's personal decision link (issue 14).
    # admin mints anew, at a tenant's resume, the links of the notices held without them while it was suspended;
    # timeouts does so for a resume it takes over (the audit sweep: interlude.app.tenant_lifecycle.hand_back_left).
    readers=("api", "dispatch", "notify", "timeouts", OPERATOR_FUNCTION),
    description="Interlude interrupt token key ring: the current kid signs, every kid held verifies",
)
# The audit checkpoint signing key (interlude.adapters.audit_key): signs audit checkpoints and nothing else.
AUDIT_KEY_SECRET = Secret(
    name="AuditSigningKey",
    env="AUDIT_KEY_SECRET",
    # timeouts: the periodic checkpoint sweep (AUDIT_CHECKPOINT_SWEEP). dispatch: the appender on the stream
    # checkpoints a chain its append makes due, as an append in a request does (docs/adr/0128).
    readers=("api", "dispatch", "timeouts"),
    description="Interlude audit checkpoint signing key (Ed25519 seed); public key in discovery",
)
SECRETS: tuple[Secret, ...] = (KEY_RING_SECRET, AUDIT_KEY_SECRET)

# --- buckets (S3) --------------------------------------------------------------------------------------------


class Bucket(NamedTuple):
    """An S3 bucket with Object Lock: every object version is kept, unchangeable, for the retention the deployment
    chooses (interlude_cdk.InterludeProps). interlude_cdk.audit_anchor builds it; the local stack makes it in moto."""

    name: str  # construct id
    # Environment variable that carries the bucket's name to its writers and readers.
    env: str
    # The key prefix every object goes under, and the grants name.
    prefix: str
    # Functions granted BUCKET_WRITE_ACTIONS, and BUCKET_READ_ACTIONS, on the bucket's objects under `prefix`.
    writers: tuple[str, ...]
    readers: tuple[str, ...]
    description: str = ""


BUCKET_WRITE_ACTIONS = ("s3:PutObject",)
BUCKET_READ_ACTIONS = ("s3:GetObject",)
# A reader may list the bucket under `prefix` too: without it S3 answers a missing object 403, not 404.
BUCKET_LIST_ACTIONS = ("s3:ListBucket",)
# Issue 26 S6: each tenant's audit anchor, `{prefix}{tenant}.json` (interlude.adapters.audit_anchor): every chain's head
# and last checkpoint, signed with the audit key, put by the checkpoint sweep (AUDIT_CHECKPOINT_SWEEP, the timeouts
# function) and read by GET /audit/verify (api) and by the sweep (whether it still holds every pending chain's head:
# ADR 0122). The table's writers hold no other S3 action: none can rewrite it.
AUDIT_ANCHOR_BUCKET = Bucket(
    name="AuditAnchors",
    env="AUDIT_ANCHOR_BUCKET",
    prefix="audit-anchors/",
    writers=("timeouts",),
    readers=("api", "timeouts"),
    description="Interlude audit anchors: each tenant's chain heads and last checkpoints, signed; Object Lock",
)
BUCKETS: tuple[Bucket, ...] = (AUDIT_ANCHOR_BUCKET,)

# --- following a run live (API Gateway WebSocket API, ADR 0143) ---------------------------------------------


class LiveApi(NamedTuple):
    """A WebSocket API on which a client follows runs: it connects with an API key (as the SSE route takes it),
    subscribes to runs by message and is sent each event batch as it commits, by dispatch from the outbox, through
    the API's management endpoint (post_to_connection). No function waits while a client does
    (interlude.app.live)."""

    name: str  # construct id
    # The function every route of the API invokes (its $connect, $disconnect and message routes).
    function: str
    # Functions that manage connections, each granted execute-api:ManageConnections on this API's stage for the
    # management API's methods named here alone: POST sends to a connection, GET reads whether it is open, DELETE
    # closes it.
    managers: dict[str, tuple[str, ...]]
    # Carries the management endpoint (https://{api}.execute-api.{region}.amazonaws.com/{stage}) to `managers`; unset:
    # no WebSocket API, nothing is pushed and the outbox reads no subscription.
    endpoint_env: str
    stage: str
    # The message routes, by the `action` a message names (the API's route selection: $request.body.action).
    actions: tuple[str, ...]
    # API Gateway closes a connection after 2 hours whatever it does: a connection's items expire then (and a
    # little after, for clocks), so an item whose $disconnect never came leaves by TTL.
    connection_ttl_s: int
    # Runs one connection follows at once (its item lists them, so $disconnect finds each subscription).
    runs_per_connection: int
    # A message a client receives carries at most this much of the log: API Gateway bills a message per 32 KB.
    message_bytes: int
    # Its largest frame: an event larger than this is announced by its sequence only (read it over HTTP).
    max_message_bytes: int
    # A browser cannot set Authorization on a handshake: it offers the key as the subprotocol `{key_protocol}{key}`
    # beside `protocol`, the one $connect echoes (a browser drops a connection whose answer names none it offered).
    protocol: str = "interlude.live.v1"
    key_protocol: str = "interlude.key."


LIVE_API = LiveApi(
    name="LiveApi",
    function="api",
    # The api function sends a replay and, at a run's limit of followers, reads whether each is open; dispatch sends
    # each batch; admin closes a deleted tenant's connections.
    managers={"api": ("POST", "GET"), "dispatch": ("POST",), "admin": ("DELETE",)},
    endpoint_env="LIVE_ENDPOINT",
    stage="live",
    actions=("subscribe", "unsubscribe"),
    connection_ttl_s=2 * 3600 + 300,
    runs_per_connection=20,
    message_bytes=32 * 1024,
    max_message_bytes=128 * 1024,
)
MANAGE_CONNECTIONS_ACTION = "execute-api:ManageConnections"

# --- routes ----------------------------------------------------------------------------------------
# Each route is declared here once, whole. API Gateway's routes and throttle classes (interlude_cdk), the local server,
# the handler's registration and the import of its module (interlude.api.routes, interlude.api.app), Idempotency-Key
# (interlude.api.idempotency) and the contract (interlude.api.contract: the OpenAPI document, the declared refusals)
# are all derived from it. Adding a route is a Route here and a handler under `@route(operation)` in its module.


# The protocol a route speaks, which decides the shape of its refusals (interlude.api.errors): the OpenWOP
# envelope {error, message, details?} or ModuleX {detail}.
Face = Literal["openwop", "modulex"]
# How a write keeps Idempotency-Key (interlude.api.idempotency); a route with none is a read and ignores the header.
# "with-effect": its effect is one TransactWriteItems, which commits the key's record and answer with it.
# "claimed": the record is claimed under a lease and the answer stored after (the route says why, when not plain).
Idempotency = Literal["with-effect", "claimed"]
# The routes by which an interrupt is decided, by the surface their Decisions are counted under (interlude.api.app).
DecisionSurface = Literal["run", "token", "modulex"]
JSON = "application/json"
# A PATCH route's body: a JSON merge patch (RFC 7396); application/json is taken as the same.
MERGE_PATCH = "application/merge-patch+json"
HTML = "text/html"
SSE = "text/event-stream"


class Ref(NamedTuple):
    """A value held above this module (a page limit, an id pattern, an enum), by dotted name: the API edge reads it as
    it builds the contract (interlude.api.contract), so wiring imports none of it. `text` formats it into a string;
    a tuple or a Literal type reads as the list of its values."""

    name: str
    text: str = ""


class Answer(NamedTuple):
    """A success response. Its body: a model (by dotted name, imported at the API edge), or a JSON schema (a body
    that is no model: SSE text, an HTML page), or one of several models (a route two faces share)."""

    status: int
    description: str
    model: str | None = None
    schema: dict[str, Any] | None = None
    media: tuple[str, ...] = (JSON,)
    headers: tuple[str, ...] = ()
    one_of: tuple[str, ...] = ()


class Param(NamedTuple):
    """A query or header parameter (a route's path parameters are the ones its path names)."""

    name: str | Ref  # a Ref to several names: one parameter each
    where: Literal["query", "header"]
    schema: dict[str, Any]
    description: str | Ref = ""


# A custom method (`:fork`) right after a path parameter, at the end of the path.
_CUSTOM_METHOD_AFTER_PARAMETER = re.compile(r"\}:[a-z][a-z-]*$")


class Route(NamedTuple):
    method: str
    path: str  # API Gateway syntax: /runs/{runId}
    operation: str
    scope: str | None  # None: no API key (discovery, token surfaces)
    summary: str
    # The module of interlude.api whose `@route(operation)` registers the handler; a request imports it when its path
    # first matches one of the module's routes.
    module: str
    idempotency: Idempotency | None = None
    face: Face = "openwop"
    # A console route: the API operation it performs. Its request must hold that operation's scope (the console's
    # session stands for an API key; interlude.api.http.scope_of), so the two cannot drift apart.
    acts_as: str | None = None
    # The contract: its success answers; the error codes beyond those the route implies (interlude.api.contract);
    # the body's model (dotted name), whether the body may be left out (cancel's reason, a mint's defaults) and
    # whether it may come as a form (the approval page's); the query and header parameters; whether refusals may
    # also come as an HTML page (a browser on a token surface, the console).
    answers: tuple[Answer, ...] = ()
    errors: tuple[str, ...] = ()
    request: str | None = None
    optional_body: bool = False
    form: bool = False
    params: tuple[Param, ...] = ()
    html_errors: bool = False
    # Holds its request open (long-poll, SSE) for up to the function's timeout: throttled as a class of its own,
    # since each one occupies an api invocation for its whole hold.
    held: bool = False
    decides: DecisionSurface | None = None
    # Its answer carries a credential (an API key's secret, a decision link, a signing secret, a task token): no cache
    # keeps it (interlude.api.routes), and a replay of it under Idempotency-Key answers the key that asked alone
    # (interlude.api.idempotency.namespace_of).
    credential: bool = False

    @property
    def mutating(self) -> bool:
        """A write: it keeps Idempotency-Key, and is throttled as one."""
        return self.idempotency is not None

    @property
    def keyed_in_handler(self) -> bool:
        """A console form: its credential is what its handler reads (the session; at sign-in, the key the form
        carries), so the handler applies Idempotency-Key once that credential, its scope and the form's proof hold,
        keyed where the credential is (the session's tenant, as an API key's route is in the key's; a sign-in, in the
        signing-in key's own namespace); never before, where a replay would answer a request with no credential."""
        return self.mutating and self.module == CONSOLE_MODULE

    @property
    def body_limited(self) -> bool:
        """Its body is refused past the request body limit before its handler runs (interlude.api.routes): every
        write, one that reads no body (a retry, a claim, a deletion) too. A route whose refusals are pages (the
        console, the approval page) refuses an oversize body as a page, in its handler."""
        return self.mutating and not self.html_errors

    @property
    def gateway_path(self) -> str:
        """The path as API Gateway declares it. A parameter spans its whole path segment there, so an OpenWOP custom
        method after one (`/runs/{runId}:fork`) is declared as the parameter's route alone (`/runs/{runId}`), which
        the routes it carries share; the api function tells them apart by the path."""
        return _CUSTOM_METHOD_AFTER_PARAMETER.sub("}", self.path)

    @property
    def gateway_key(self) -> str:
        """API Gateway's route key: "METHOD /path"."""
        return f"{self.method} {self.gateway_path}"


# Refusals several routes declare. A run named by the path: another tenant's (403, or ModuleX's 404), none, or one
# that kept changing (retry).
RUN_ERRORS = ("validation_error", "id_tenant_mismatch", "not_found", "runner_unavailable")
DECISION_ERRORS = ("not_found", "interrupt_already_resolved", "interlude.vote_already_cast", "forbidden", "payload_too_large")
# A subscription named by the path: another tenant's is 403, none is 404.
WEBHOOK_ERRORS = ("validation_error", "id_tenant_mismatch", "not_found")
# A dead letter sent again (issue 30 item 5): it is not dead (any more), or was sent again the most times one is.
REPLAY_ERRORS = ("interlude.not_dead_lettered", "interlude.replay_limit_reached")
RECOVERY_ERRORS = ("interlude.recovery_too_large", "interlude.recovery_running")
# A task token (interlude.app.tasks): not one Interlude issued, another tenant's, or holding no task: its claim ended,
# it never held one, or it names no task, all answered alike (task_not_claimed is also the answer when the run no longer
# waits for the task: details.status "cancelled", told only to the task's latest claim).
TASK_ERRORS = ("interlude.task_token_invalid", "id_tenant_mismatch", "interlude.task_not_claimed")
TOKEN_ERRORS = ("interrupt_token_invalid", "interrupt_expired", "not_found", "interrupt_already_resolved", "runner_unavailable")
SSE_EVENTS = Answer(200, "Server-sent events, then a retry hint", schema={"type": "string"}, media=(SSE,))
LAST_EVENT_ID = Param("Last-Event-ID", "header", {"type": "string"}, "Resume after this event sequence")
ORGANIZATION = Param("X-Organization-ID", "header", {"type": "string"}, "Must name the key's tenant when sent")
WORKFLOW_ID = {"type": "string", "pattern": Ref("interlude.domain.ids.AUTHOR_ID")}
CURSOR = Param("cursor", "query", {"type": "string"}, "where the previous page ended")
NOT_MODIFIED = "Unchanged since the ETag sent in If-None-Match"

# The operator console (interlude.api.console): HTML pages, a 303 to the sign-in page without a session, and every
# refusal as a page with its status (401 when the session's key was revoked or expired).
CONSOLE_PAGE = Answer(200, "The page", schema={"type": "string", "description": "A console page"}, media=(HTML,))
CONSOLE_REDIRECT = Answer(
    303, "Elsewhere in the console (sign in first)", schema={"type": "string"}, media=(HTML,), headers=("Location",)
)
SIGNED_IN_ERRORS = ("unauthenticated", "forbidden", "rate_limited", "validation_error")
CONSOLE_FORM_ERRORS = (*SIGNED_IN_ERRORS, "payload_too_large")


# fmt: off
# The route module of the operator console's pages and forms (interlude.api.console.routes).
CONSOLE_MODULE = "console.routes"


def console_route(
    method: str,
    path: str,
    operation: str,
    summary: str,
    *answers: Answer,
    errors: tuple[str, ...] = SIGNED_IN_ERRORS,
    params: tuple[Param, ...] = (),
    acts_as: str | None = None,
) -> Route:
    """A console page (GET) or form (POST: a write), in interlude.api.console.routes."""
    return Route(
        method, path, operation, None, summary, module=CONSOLE_MODULE,
        idempotency="claimed" if method == "POST" else None, acts_as=acts_as,
        answers=answers or (CONSOLE_PAGE, CONSOLE_REDIRECT), errors=errors, params=params, html_errors=True,
    )


# Where people browse, by the route module (Route.module) whose page refuses a request there that no route answers or
# whose handler failed (interlude.api.http.REFUSAL_PAGES); every answer there carries the pages' headers
# (interlude.api.page.headers). The paths: the service's address opened in a browser and the console's own; the
# prefixes: every path in the console, and the approval links people open (one a mail or chat tool has damaged, a
# slash or more appended; `GET /interrupts` itself is the API's inbox).
PAGE_PATHS = {"/": CONSOLE_MODULE, "/console": CONSOLE_MODULE}
PAGE_PREFIXES = {"/console/": CONSOLE_MODULE, "/interrupts/": "tokens"}


def page_module(path: str) -> str | None:
    """The route module whose pages `path` is among (PAGE_PATHS, PAGE_PREFIXES); None: the API's."""
    if path in PAGE_PATHS:
        return PAGE_PATHS[path]
    return next((module for prefix, module in PAGE_PREFIXES.items() if path.startswith(prefix)), None)


LIVE = Param("live", "query", {"type": "string", "enum": ["on", "off"]}, "whether the page reloads itself while runs go on")
CONSOLE_ROUTES: tuple[Route, ...] = (
    console_route("GET", "/", "consoleRoot", "The service's address in a browser: to the console", CONSOLE_REDIRECT, errors=()),
    console_route("GET", "/console", "consoleHome", "Console: to the inbox, or to sign in", errors=()),
    console_route("GET", "/console/sign-in", "consoleSignInPage", "Console: the sign-in page", CONSOLE_PAGE, errors=()),
    console_route(
        "POST", "/console/sign-in", "consoleSignIn", "Console: exchange an API key for a session", CONSOLE_PAGE,
        errors=("unauthenticated", "forbidden", "validation_error", "payload_too_large"),
    ),
    console_route(
        "POST", "/console/sign-out", "consoleSignOut", "Console: end the session", CONSOLE_PAGE,
        errors=("forbidden", "validation_error", "payload_too_large"),
    ),
    console_route(
        "GET", "/console/inbox", "consoleInbox", "Console: what the signed-in key may decide, filtered and ordered",
        params=(
            Param("kind", "query", {"type": "string", "enum": Ref("interlude.app.inbox.INTERRUPT_KINDS")}),
            Param("workflowId", "query", WORKFLOW_ID),
            Param("sort", "query", {"type": "string", "enum": ["newest", "oldest", "due"]}),
            CURSOR,
        ),
        acts_as="listInterrupts",
    ),
    console_route(
        "POST", "/console/runs/{runId}/interrupts/{nodeId}", "consoleDecide",
        "Console: decide an interrupt (as the signed-in key, surface console)", CONSOLE_PAGE,
        errors=(*CONSOLE_FORM_ERRORS, *RUN_ERRORS, *DECISION_ERRORS, "interrupt_already_resolved"),
        acts_as="resolveInterruptByRun",
    ),
    *(
        console_route(
            "POST", "/console/runs/{runId}/interrupts/{nodeId}/" + tail, operation, summary, CONSOLE_PAGE,
            errors=(*CONSOLE_FORM_ERRORS, *RUN_ERRORS, "not_found", "interrupt_already_resolved", "interlude.gate_claimed"),
            acts_as=acts_as,
        )
        for tail, operation, summary, acts_as in (
            ("claim", "consoleClaim", "Console: claim an open gate (as the signed-in key)", "claimInterrupt"),
            ("release", "consoleRelease", "Console: release a claimed gate", "releaseInterrupt"),
            ("assignee", "consoleAssign", "Console: assign an open gate to a person, or to nobody", "assignInterrupt"),
        )
    ),
    console_route(
        "GET", "/console/runs", "consoleRuns", "Console: runs, found by GET /runs's filters (blank ones left out), paged",
        params=(
            Param("status", "query", {"type": "string"}, "one or more, comma-separated"),
            Param("workflowId", "query", {"type": "string"}),
            Param("workflowIdPrefix", "query", {"type": "string"}),
            Param("tags", "query", {"type": "string"}, "comma-separated: all of them"),
            Param("q", "query", {"type": "string"}, "words in the run's title"),
            Param("createdAfter", "query", {"type": "string"}, "RFC 3339, or a browser's date-time field (UTC)"),
            Param("createdBefore", "query", {"type": "string"}, "RFC 3339, or a browser's date-time field (UTC)"),
            Param("metadata.{key}", "query", {"type": "string"}, "equality on a metadata key the tenant declares searchable"),
            Param("runId", "query", {"type": "string"}, "open this run"),
            CURSOR,
            LIVE,
        ),
        errors=(*SIGNED_IN_ERRORS, "id_tenant_mismatch"), acts_as="listRuns",
    ),
    console_route(
        "POST", "/console/runs/cancel", "consoleCancelRuns", "Console: cancel the selected runs", CONSOLE_PAGE,
        errors=(*CONSOLE_FORM_ERRORS, *RUN_ERRORS, "run_terminal"), acts_as="bulkCancelRuns",
    ),
    console_route(
        "GET", "/console/runs/{runId}", "consoleRun", "Console: a run, its graph, timeline, gates and deliveries",
        params=(
            Param("after", "query", {"type": "integer", "minimum": -1}, "events after this sequence"),
            Param("step", "query", {"type": "string"}, "show this step's input and output"),
            LIVE,
        ),
        errors=(*SIGNED_IN_ERRORS, *RUN_ERRORS), acts_as="getRun",
    ),
    console_route(
        "POST", "/console/runs/{runId}/fork", "consoleForkRun", "Console: fork a run (replay, or a branch at an event)",
        Answer(201, "The fork's page", schema={"type": "string"}, media=(HTML,)),
        errors=(*CONSOLE_FORM_ERRORS, *RUN_ERRORS, "fork_point_invalid", "interlude.fork_limit_reached", "interlude.quota_exceeded"),
        acts_as="forkRun",
    ),
    console_route(
        "POST", "/console/runs/{runId}/redrive", "consoleRedriveRun", "Console: run a failed run again from its failed node",
        Answer(201, "The new run's page", schema={"type": "string"}, media=(HTML,)),
        errors=(
            *CONSOLE_FORM_ERRORS, *RUN_ERRORS, "run_state_conflict", "fork_point_invalid", "interlude.fork_limit_reached",
            "interlude.quota_exceeded",
        ),
        acts_as="redriveRun",
    ),
    console_route(
        "GET", "/console/workflows", "consoleWorkflows", "Console: workflows",
        params=(Param("workflowId", "query", {"type": "string"}, "open this workflow"),), acts_as="listWorkflows",
    ),
    console_route(
        "GET", "/console/workflows/{workflowId}", "consoleWorkflow", "Console: a workflow's versions, drawn",
        params=(Param("version", "query", {"type": "integer", "minimum": 1}),),
        errors=(*SIGNED_IN_ERRORS, "not_found"), acts_as="getWorkflow",
    ),
    console_route(
        "POST", "/console/workflows/{workflowId}/runs", "consoleStartRun",
        "Console: start a run of the workflow's latest version, its inputs from the form its declared inputs draw",
        Answer(201, "The run started, or what it was started with", schema={"type": "string"}, media=(HTML,)),
        errors=(*CONSOLE_FORM_ERRORS, "not_found", "interlude.quota_exceeded"), acts_as="createRun",
    ),
    console_route("GET", "/console/keys", "consoleKeys", "Console: the tenant's API keys", params=(CURSOR,), acts_as="listKeys"),
    console_route(
        "POST", "/console/keys", "consoleCreateKey", "Console: create an API key",
        Answer(201, "The key, shown once", schema={"type": "string"}, media=(HTML,)),
        errors=CONSOLE_FORM_ERRORS, acts_as="createKey",
    ),
    console_route(
        "POST", "/console/keys/{keyId}/revoke", "consoleRevokeKey", "Console: revoke an API key", CONSOLE_PAGE,
        errors=(*CONSOLE_FORM_ERRORS, "not_found"), acts_as="revokeKey",
    ),
    console_route(
        "GET", "/console/audit", "consoleAudit", "Console: the tenant's audit trail",
        params=(CURSOR,), acts_as="listAuditEntries",
    ),
    console_route(
        "POST", "/console/runs/{runId}/actions/{nodeId}/retry", "consoleRetryAction",
        "Console: a run failed at its HTTP step goes on from there (as the signed-in key)", CONSOLE_PAGE,
        errors=(
            *CONSOLE_FORM_ERRORS, *RUN_ERRORS, "interlude.action_not_retryable", "interlude.replay_limit_reached",
            "interlude.quota_exceeded",
        ),
        acts_as="retryRunAction",
    ),
    # Issue 30 item 5: a run's dead-lettered callback notices and notifications, sent again from its page.
    console_route(
        "POST", "/console/runs/{runId}/deliveries/recover", "consoleRecoverRunDeliveries",
        "Console: send again every dead-lettered callback notice of a run", CONSOLE_PAGE,
        errors=(*CONSOLE_FORM_ERRORS, *RUN_ERRORS, *RECOVERY_ERRORS), acts_as="recoverRunDeliveries",
    ),
    console_route(
        "POST", "/console/runs/{runId}/notifications/recover", "consoleRecoverRunNotifications",
        "Console: send again every dead-lettered notification of a run", CONSOLE_PAGE,
        errors=(*CONSOLE_FORM_ERRORS, *RUN_ERRORS, *RECOVERY_ERRORS), acts_as="recoverRunNotifications",
    ),
    console_route(
        "GET", "/console/dead-letters", "consoleDeadLetters",
        "Console: each webhook subscription's dead-lettered deliveries, to send again", acts_as="listWebhookDeadLetters",
    ),
    console_route(
        "POST", "/console/dead-letters/retry", "consoleRetryDelivery",
        "Console: send a dead-lettered delivery again (the same delivery id)", CONSOLE_PAGE,
        errors=(*CONSOLE_FORM_ERRORS, *WEBHOOK_ERRORS, *REPLAY_ERRORS), acts_as="retryWebhookDelivery",
    ),
)

ROUTES: tuple[Route, ...] = (
    Route(
        "GET", "/.well-known/openwop", "getCapabilities", None, "Discovery document", module="runs",
        answers=(
            Answer(200, "Discovery document", "interlude.domain.models.responses.Capabilities", headers=("Cache-Control", "ETag")),
            Answer(304, NOT_MODIFIED, media=(), headers=("Cache-Control", "ETag")),
        ),
        params=(Param("If-None-Match", "header", {"type": "string"}, "An ETag of an earlier discovery document"),),
    ),
    Route(
        "GET", "/openapi.json", "getOpenApi", None, "This API's OpenAPI document", module="runs",
        answers=(Answer(200, "This document", schema={"type": "object"}),),
    ),
    Route(
        "PUT", "/workflows/{workflowId}", "putWorkflow", "workflows:write", "Register a new workflow version", module="runs",
        # A version-numbered PutItem retried on a taken number; no answer until the number holds.
        idempotency="claimed",
        request="interlude.domain.models.workflow.WorkflowDefinition",
        answers=(
            Answer(201, "The version registered", "interlude.domain.models.responses.WorkflowVersion"),
            Answer(200, "The ModuleX workflow the id names, updated (issue 16)", "interlude.faces.modulex.workflows.ModulexWorkflow"),
        ),
        errors=(
            "runner_unavailable", "interlude.quota_exceeded", "interlude.workflow_unprocessable",
            "interlude.field_unprocessable",
        ),
    ),
    Route(
        "GET", "/workflows/{workflowId}", "getWorkflow", "workflows:read", "Latest workflow version", module="runs",
        answers=(
            Answer(
                200,
                "The latest version; for a ModuleX workflow's id, its ModuleX record; for a ModuleX client (it sends "
                "X-Organization-ID, or a modulex-python / modulex-js User-Agent), any workflow as ModuleX reads it",
                one_of=(
                    "interlude.domain.models.responses.WorkflowVersion",
                    "interlude.faces.modulex.workflows.ModulexWorkflow",
                    "interlude.faces.modulex.workflows.OpenwopWorkflow",
                ),
            ),
        ),
        errors=("not_found",),
    ),
    Route(
        "POST", "/runs", "createRun", "runs:create", "Start a run", module="runs",
        idempotency="with-effect",
        request="interlude.domain.models.requests.CreateRunRequest",
        answers=(Answer(201, "The run started", "interlude.domain.models.responses.RunCreated", headers=("Location",)),),
        errors=("not_found", "interlude.quota_exceeded"),
    ),
    Route(
        "GET", "/runs/{runId}", "getRun", "runs:read", "Run snapshot", module="runs",
        answers=(
            Answer(200, "Run snapshot", schema={"$ref": "#/components/schemas/RunSnapshot"}, headers=("ETag",)),
            Answer(304, NOT_MODIFIED, media=(), headers=("ETag",)),
        ),
        errors=RUN_ERRORS,
        params=(Param("If-None-Match", "header", {"type": "string"}, "An ETag of an earlier snapshot"),),
    ),
    Route(
        "POST", "/runs/{runId}/cancel", "cancelRun", "runs:cancel", "Cancel a run", module="runs",
        idempotency="with-effect",
        request="interlude.domain.models.requests.CancelRunRequest", optional_body=True,
        answers=(Answer(200, "The run cancelled", "interlude.domain.models.responses.RunCancelled"),),
        errors=(*RUN_ERRORS, "run_terminal"),
    ),
    Route(
        "GET", "/runs/{runId}/events/poll", "pollRunEvents", "runs:read", "Long-poll the event log", module="runs",
        held=True,
        answers=(Answer(200, "Events after the cursor (may be none)", "interlude.domain.models.responses.EventPage"),),
        errors=RUN_ERRORS,
        params=(
            Param("afterSequence", "query", {"type": "integer", "minimum": 0, "maximum": 10**12}),
            Param("timeout", "query", {"type": "integer", "minimum": 1, "maximum": 60}, "Seconds to wait"),
        ),
    ),
    Route(
        "POST", "/runs/{runId}/interrupts/{nodeId}", "resolveInterruptByRun", "approvals:respond",
        "Resolve the interrupt a node holds", module="run_decisions",
        idempotency="with-effect", decides="run",
        request="interlude.domain.models.requests.ResolveInterruptRequest",
        answers=(Answer(200, "The decision recorded", "interlude.domain.models.answers.decisions.Resolution"),),
        errors=(*RUN_ERRORS, *DECISION_ERRORS),
    ),
    Route(
        "POST", "/keys", "createKey", "keys:admin", "Create an API key", module="runs",
        idempotency="with-effect", credential=True,
        request="interlude.domain.models.requests.CreateKeyRequest",
        answers=(
            Answer(201, "The key (its secret shown once)", "interlude.domain.models.responses.CreatedKey", headers=("Cache-Control",)),
        ),
    ),
    Route(
        "GET", "/keys", "listKeys", "keys:admin", "The tenant's API keys (metadata, never secrets), paged", module="keys",
        answers=(Answer(200, "The tenant's keys, oldest first (metadata only)", "interlude.domain.models.responses.KeyPage"),),
        errors=("validation_error",),
        params=(
            Param("limit", "query", {"type": "integer", "minimum": 1, "maximum": Ref("interlude.app.keys.MAX_KEYS_LIMIT")}),
            Param("cursor", "query", {"type": "string"}, "cursor of the previous page"),
        ),
    ),
    Route(
        "DELETE", "/keys/{keyId}", "revokeKey", "keys:admin", "Revoke an API key of the tenant", module="keys",
        idempotency="claimed",
        answers=(Answer(200, "The key, revoked", "interlude.domain.models.responses.KeyMetadata"),),
        errors=("not_found",),
    ),
    # Signed-token surfaces (interlude.api.tokens): the token in the path is the credential.
    Route(
        "GET", "/interrupts/{token}", "inspectInterruptByToken", None, "Interrupt payload, or the approval page",
        module="tokens",
        answers=(Answer(200, "The interrupt payload, or the approval page", schema={"type": "object"}),),
        errors=("forbidden", *TOKEN_ERRORS), html_errors=True,
    ),
    Route(
        "POST", "/interrupts/{token}", "resolveInterruptByToken", None, "Resolve through a signed token", module="tokens",
        idempotency="with-effect", decides="token",
        request="interlude.domain.models.requests.ResolveInterruptRequest", form=True,
        answers=(Answer(200, "The decision recorded, or the page saying so", "interlude.domain.models.answers.decisions.Resolution"),),
        errors=(*TOKEN_ERRORS, *DECISION_ERRORS, "validation_error"), html_errors=True,
    ),
    Route(
        "GET", "/runs/{runId}/interrupts/{nodeId}", "getInterruptToken", "runs:read", "An interrupt and a token",
        module="tokens", credential=True,
        answers=(
            Answer(200, "The interrupt and a token for it", "interlude.domain.models.responses.MintedToken", headers=("Cache-Control",)),
        ),
        errors=(*RUN_ERRORS, "interrupt_already_resolved"),
    ),
    Route(
        "POST", "/runs/{runId}/interrupts/{nodeId}/tokens", "mintInterruptToken", "approvals:respond",
        "Mint a token with an intent and a shorter lifetime", module="tokens",
        # No write at all: signing a token has no effect to commit the record with.
        idempotency="claimed", credential=True,
        request="interlude.domain.models.tokens.MintTokenRequest", optional_body=True,
        answers=(
            Answer(201, "A token for the interrupt", "interlude.domain.models.responses.MintedToken", headers=("Cache-Control",)),
        ),
        errors=(*RUN_ERRORS, "interrupt_already_resolved"),
    ),
    Route(
        "POST", "/runs/{runId}/interrupts/{nodeId}/links", "mintInterruptLink", "links:mint",
        "Mint a link that decides as a named directory principal", module="tokens",
        # No write but the audit entry: signing a token has no effect to commit the record with.
        idempotency="claimed", credential=True,
        request="interlude.domain.models.tokens.MintLinkRequest",
        answers=(
            Answer(201, "A link for the interrupt, acting for the principal", "interlude.domain.models.responses.MintedLink",
                   headers=("Cache-Control",)),
        ),
        errors=(*RUN_ERRORS, "interrupt_already_resolved"),
    ),
    Route(
        "GET", "/runs/{runId}/deliveries", "listRunDeliveries", "runs:read", "Callback delivery attempts of a run",
        module="deliveries",
        answers=(Answer(200, "Every delivery attempt", "interlude.domain.models.responses.RunDeliveries"),),
        errors=RUN_ERRORS,
    ),
    # Issue 3 (interlude.api.inbox): the approver inbox, external events, tenant settings and credential grants.
    Route(
        "GET", "/interrupts", "listInterrupts", "approvals:respond", "Pending interrupts the caller may decide",
        module="inbox",
        answers=(Answer(200, "Pending interrupts, newest first", "interlude.domain.models.responses.Inbox"),),
        errors=("validation_error", "id_tenant_mismatch"),
        params=(
            Param("status", "query", {"type": "string", "enum": ["pending"]}),
            Param("limit", "query", {"type": "integer", "minimum": 1, "maximum": Ref("interlude.app.inbox.MAX_INBOX_LIMIT")}),
            Param("kind", "query", {"type": "string", "enum": Ref("interlude.app.inbox.INTERRUPT_KINDS")}),
            Param("workflowId", "query", WORKFLOW_ID),
            Param("runId", "query", {"type": "string"}),
            Param("cursor", "query", {"type": "string"}, "nextCursor of the previous page"),
        ),
    ),
    Route(
        "POST", "/events", "postEvent", "events:write", "Deliver an external event by correlation", module="inbox",
        # One event may resolve waiters on several runs, each its own transaction.
        idempotency="claimed",
        request="interlude.domain.models.tenant_requests.PostEventRequest",
        answers=(Answer(202, "Kept, and the waiting interrupts it resolved", "interlude.domain.models.responses.EventAccepted"),),
        errors=("runner_unavailable",),
    ),
    Route(
        "GET", "/tenant/settings", "getTenantSettings", "keys:admin", "The tenant's settings", module="inbox",
        answers=(Answer(200, "The tenant's settings", "interlude.domain.models.responses.TenantSettingsAnswer"),),
    ),
    Route(
        "PUT", "/tenant/settings", "putTenantSettings", "keys:admin",
        "Replace the tenant's settings whole (a field left out takes its default; PATCH changes only what it names)",
        module="inbox",
        # A plain PutItem of the settings item (last writer wins; a duplicate writes the same).
        idempotency="claimed",
        request="interlude.domain.models.tenants.TenantSettings",
        answers=(Answer(200, "The settings stored, and those they replaced", "interlude.domain.models.responses.TenantSettingsAnswer"),),
    ),
    Route(
        "PATCH", "/tenant/settings", "patchTenantSettings", "keys:admin",
        "Change the fields of the tenant's settings a JSON merge patch names (null: back to the default)",
        module="inbox",
        # A conditional PutItem of the settings item over the settings read (merged again if they changed
        # meanwhile); a duplicate merges the same patch onto its own result, which writes nothing.
        idempotency="claimed",
        request="interlude.domain.models.tenant_requests.TenantSettingsPatch",
        answers=(Answer(200, "The settings stored, and those they replaced", "interlude.domain.models.responses.TenantSettingsAnswer"),),
        errors=("runner_unavailable",),
    ),
    Route(
        "PUT", "/tenant/credential-grants/{provider}", "putCredentialGrant", "keys:admin",
        "Record that the tenant holds a credential grant (never the material)", module="inbox",
        # A plain PutItem of the grant item (last writer wins; a duplicate writes the same).
        idempotency="claimed",
        request="interlude.domain.models.tenant_requests.CredentialGrantRequest",
        answers=(Answer(200, "The grant recorded", "interlude.domain.models.responses.CredentialGrant"),),
        errors=("validation_error",),
    ),
    # Issue 7 (interlude.api.streams, interlude.api.modulex): the SSE event stream, and the ModuleX face.
    Route(
        "GET", "/runs/{runId}/events", "streamRunEvents", "runs:read", "Stream the event log (SSE)", module="streams",
        held=True,
        answers=(SSE_EVENTS,),
        errors=(*RUN_ERRORS, "unsupported_stream_mode"),
        params=(
            Param("streamMode", "query", {"type": "string"}, "updates (default), debug, values, or a mix"),
            Param("bufferMs", "query", {"type": "integer", "minimum": 0, "maximum": 5000}),
            Param("resumable", "query", {"type": "string", "enum": ["true", "false"]}),
            LAST_EVENT_ID,
        ),
    ),
    Route(
        "POST", "/workflows/run", "modulexRun", "runs:create", "ModuleX: start a run", module="modulex", face="modulex",
        idempotency="with-effect",
        request="interlude.faces.modulex.operations.ModulexRunRequest",
        answers=(Answer(200, "The run started", "interlude.faces.modulex.operations.ModulexRunStarted"),),
        errors=("interlude.workflow_unprocessable", "interlude.field_unprocessable", "interlude.quota_exceeded"),
        params=(ORGANIZATION,),
    ),
    Route(
        "GET", "/workflows/listen/{runId}", "modulexListen", "runs:read", "ModuleX: the run's frames (SSE)",
        module="modulex", face="modulex",
        held=True,
        answers=(SSE_EVENTS,),
        errors=RUN_ERRORS,
        params=(LAST_EVENT_ID, ORGANIZATION),
    ),
    Route(
        "POST", "/workflows/resume/{threadId}", "modulexResume", "approvals:respond",
        "ModuleX: answer the run's interrupt (owner/admin key)", module="modulex", face="modulex",
        idempotency="with-effect", decides="modulex",
        request="interlude.faces.modulex.operations.ModulexResumeRequest",
        answers=(Answer(200, "The interrupt answered", "interlude.faces.modulex.operations.ModulexResumed"),),
        errors=(
            *RUN_ERRORS, *DECISION_ERRORS, "interlude.run_state_invalid", "interlude.workflow_unprocessable",
            "interlude.field_unprocessable",
        ),
        params=(ORGANIZATION,),
    ),
    Route(
        "POST", "/workflows/cancel/{runId}", "modulexCancel", "runs:cancel", "ModuleX: cancel a run",
        module="modulex", face="modulex",
        idempotency="with-effect",
        request="interlude.faces.modulex.operations.ModulexCancelRequest", optional_body=True,
        answers=(Answer(200, "The run cancelled", "interlude.faces.modulex.operations.ModulexCancelled"),),
        errors=(*RUN_ERRORS, "interlude.run_state_invalid", "run_terminal", "interlude.field_unprocessable"),
        params=(ORGANIZATION,),
    ),
    Route(
        "GET", "/workflows/state/{threadId}", "modulexState", "runs:read", "ModuleX: the run's state",
        module="modulex", face="modulex",
        answers=(Answer(200, "The run's state", "interlude.faces.modulex.operations.ModulexState"),),
        errors=RUN_ERRORS,
        params=(ORGANIZATION,),
    ),
    # Issue 14 (interlude.api.principals): the tenant's principal directory.
    Route(
        "PUT", "/principals/{principalId}", "putPrincipal", "keys:admin", "Create or replace a directory entry",
        module="principals",
        idempotency="claimed",
        request="interlude.domain.models.principals.PrincipalEntry",
        answers=(
            Answer(201, "The entry created", "interlude.domain.models.responses.PrincipalAnswer"),
            Answer(200, "The entry replaced", "interlude.domain.models.responses.PrincipalAnswer"),
        ),
        errors=("interlude.quota_exceeded", "runner_unavailable"),
    ),
    Route(
        "GET", "/principals/{principalId}", "getPrincipal", "keys:admin", "A directory entry", module="principals",
        answers=(Answer(200, "The entry", "interlude.domain.models.responses.PrincipalAnswer"),),
        errors=("not_found",),
    ),
    Route(
        "DELETE", "/principals/{principalId}", "deletePrincipal", "keys:admin", "Remove a directory entry",
        module="principals",
        idempotency="claimed",
        answers=(Answer(200, "The entry removed", "interlude.domain.models.responses.PrincipalAnswer"),),
        errors=("not_found", "runner_unavailable"),
    ),
    # Issue 16 (interlude.api.run_listing): run listing and bulk cancel.
    Route(
        "GET", "/runs", "listRuns", "runs:read", "The tenant's runs, newest first, paged and filtered",
        module="run_listing",
        answers=(Answer(200, "One page of the tenant's runs, newest first", "interlude.domain.models.responses.RunList"),),
        errors=("validation_error",),
        params=(
            Param(
                "limit", "query", {"type": "integer", "minimum": 1},
                Ref("interlude.app.run_listing.MAX_RUNS_PAGE", "clamped to {}"),
            ),
            Param("cursor", "query", {"type": "string", "minLength": 1, "maxLength": 2048}, "nextCursor of a page"),
            Param("workflowId", "query", WORKFLOW_ID, "exact workflow id"),
            Param(
                "status", "query", {"type": "string", "minLength": 1},
                Ref("interlude.domain.models.run.RunStatus", "one or more of {}, comma-separated: any of them"),
            ),
            # Issue 29 item 1 (rules/run_search.py; limits in docs/limits.md).
            Param(
                "workflowIdPrefix", "query", WORKFLOW_ID, "the start of the workflow id",
            ),
            Param(
                "tags", "query", {"type": "string", "minLength": 1},
                Ref("interlude.rules.run_search.MAX_QUERY_TAGS", "tags the run holds, all of them: at most {}, comma-separated"),
            ),
            Param(
                "metadata.{key}", "query", {"type": "string", "minLength": 1, "maxLength": Ref("interlude.rules.run_search.MAX_METADATA_VALUE_LENGTH")},
                "equality (as text) on a metadata key the tenant declares searchable (settings' searchableMetadata); "
                "one parameter per key, e.g. metadata.customer=acme",
            ),
            Param("createdAfter", "query", {"type": "string", "format": "date-time"}, "created at or after (RFC 3339)"),
            Param("createdBefore", "query", {"type": "string", "format": "date-time"}, "created before (RFC 3339)"),
            Param(
                "q", "query", {"type": "string", "minLength": 1, "maxLength": Ref("interlude.rules.run_search.MAX_QUERY_LENGTH")},
                Ref(
                    "interlude.rules.run_search.MAX_QUERY_WORDS",
                    "words of the run's title (its workflow's id and name, its open gate's title), all of them, at most {}",
                ),
            ),
        ),
    ),
    Route(
        "POST", "/runs:bulk-cancel", "bulkCancelRuns", "runs:cancel", "Cancel up to 100 runs, each on its own",
        module="run_listing",
        # Each id is cancelled in its own transaction; the per-id results are the one answer.
        idempotency="claimed",
        request="interlude.domain.models.requests.BulkCancelRequest",
        answers=(Answer(200, "Each id's outcome, in request order", "interlude.domain.models.responses.BulkCancelAnswer"),),
    ),
    # Issue 29 item 2 (interlude.api.forks): a run forked (OpenWOP forkRun, replay.md), and a failed run redriven from
    # its failed node (a branch at its failure; Interlude's, named in forkRun's style). Both also need runs:read.
    Route(
        "POST", "/runs/{runId}:fork", "forkRun", "runs:create", "Fork a run: replay it, or branch it at a sequence",
        module="forks",
        idempotency="with-effect",
        request="interlude.domain.models.requests.ForkRunRequest",
        answers=(Answer(201, "The fork, started", "interlude.domain.models.responses.RunForked", headers=("Location",)),),
        errors=(*RUN_ERRORS, "fork_point_invalid", "interlude.fork_limit_reached", "interlude.quota_exceeded", "payload_too_large"),
    ),
    Route(
        "POST", "/runs/{runId}:redrive", "redriveRun", "runs:create",
        "Run a failed run again from its failed node, as a new run linked to it", module="forks",
        idempotency="with-effect",
        answers=(Answer(201, "The redriven run, started", "interlude.domain.models.responses.RunForked", headers=("Location",)),),
        errors=(
            *RUN_ERRORS, "run_state_conflict", "fork_point_invalid", "interlude.fork_limit_reached",
            "interlude.quota_exceeded", "payload_too_large",
        ),
    ),
    # Issue 29 item 2: two runs compared (OpenWOP diffRun, RFC 0054; rules/run_diff.py), typically a run and its fork;
    # of the `replay` family, so served while discovery advertises it. runs:read, both runs the key's tenant's.
    Route(
        "GET", "/runs/{runId}:diff", "diffRun", "runs:read", "Compare a run with another: where their logs diverge",
        module="forks",
        params=(Param("against", "query", {"type": "string"}, "the run to compare with (b); required"),),
        answers=(Answer(200, "Where the runs diverge, each event that differs, how their states differ", "interlude.domain.models.responses.RunDiff"),),
        errors=(*RUN_ERRORS, "payload_too_large"),
    ),
    # Issue 15 (interlude.api.effects): the effect records of gated actions (idempotency Layer 2), and the seams.
    Route(
        "GET", "/runs/{runId}/effects", "getRunEffects", "runs:read", "The run's effect records (Layer 2)",
        module="effects",
        answers=(Answer(200, "The run's effect records", "interlude.domain.models.responses.RunEffects"),),
        errors=RUN_ERRORS,
    ),
    # Issue 30 item 4 (interlude.api.runs): a run whole, as one document, to archive before retention removes it.
    Route(
        "GET", "/runs/{runId}/export", "exportRun", "runs:read", "The whole run as one document, to archive",
        module="runs",
        answers=(Answer(200, "The run: snapshot, decisions, effects, events", "interlude.domain.models.answers.export.RunExport"),),
        errors=(*RUN_ERRORS, "payload_too_large"),
        params=(
            Param(
                "afterSequence", "query", {"type": "integer", "minimum": 0, "maximum": 10**12},
                "The events after this sequence (the next page of a document not complete)",
            ),
        ),
    ),
    Route(
        "GET", "/host/effect-seams", "getEffectSeamManifest", "runs:read", "The host's outbound effect seams",
        module="effects",
        answers=(Answer(200, "The effect-seam manifest", "interlude.domain.models.responses.EffectSeamManifest"),),
        # not_found while `replay` is not advertised (api/effects.py, REPLAY_CAPABILITY).
        errors=("not_found",),
    ),
    # Issue 14 item 4 (interlude.api.delegation): an approver hands their vote to another principal (the run's
    # interrupt named by the path, as for a resolve).
    Route(
        "POST", "/runs/{runId}/interrupts/{nodeId}/delegation", "delegateVote", "approvals:respond",
        "Hand the caller's vote on an approval gate to another principal", module="delegation",
        idempotency="claimed",
        request="interlude.domain.models.principal_requests.DelegateVoteRequest",
        answers=(Answer(200, "The delegation recorded on the gate", "interlude.domain.models.principal_requests.VoteDelegated"),),
        errors=(
            *RUN_ERRORS, "interrupt_already_resolved", "interlude.vote_already_cast", "forbidden",
            "interlude.delegation_not_allowed",
        ),
    ),
    # Issue 29 item 3 (interlude.api.claims): who works an open gate. Claiming, releasing or assigning needs what a
    # decision on the gate needs (its scope, and being one who may decide it); nobody's eligibility changes.
    *(
        Route(
            method, "/runs/{runId}/interrupts/{nodeId}/" + tail, operation, "approvals:respond", summary, module="claims",
            idempotency="claimed", request=request,
            answers=(Answer(200, "Who works the gate now", "interlude.domain.models.principal_requests.GateAssignment"),),
            errors=(*RUN_ERRORS, "interrupt_already_resolved", "forbidden", "interlude.gate_claimed"),
        )
        for method, tail, operation, summary, request in (
            ("POST", "claim", "claimInterrupt", "Claim an open gate: the caller works it", None),
            ("DELETE", "claim", "releaseInterrupt", "Release a claimed gate: nobody works it", None),
            (
                "PUT", "assignee", "assignInterrupt", "Assign an open gate to a person, or to nobody",
                "interlude.domain.models.principal_requests.AssignGateRequest",
            ),
        )
    ),
    # Issue 14 (interlude.api.webhooks): OpenWOP webhook subscriptions, tenant-wide.
    Route(
        "POST", "/webhooks", "registerWebhook", "webhooks:manage", "Register a webhook subscription", module="webhooks",
        idempotency="claimed", credential=True,
        request="interlude.domain.models.webhooks.RegisterWebhookRequest",
        answers=(
            Answer(
                201, "The subscription (its secret shown once)", "interlude.domain.models.webhooks.WebhookRegistered",
                headers=("Cache-Control",),
            ),
        ),
        errors=("webhook_url_rejected", "interlude.quota_exceeded"),
    ),
    Route(
        "DELETE", "/webhooks/{webhookId}", "unregisterWebhook", "webhooks:manage", "Unregister a webhook",
        module="webhooks",
        idempotency="claimed",
        answers=(Answer(204, "Unregistered: nothing more is delivered to it", media=()),),
        errors=WEBHOOK_ERRORS,
    ),
    Route(
        "POST", "/webhooks/{webhookId}/rotate-secret", "rotateWebhookSecret", "webhooks:manage",
        "Replace a subscription's secret; the old one signs too through the overlap", module="webhooks",
        idempotency="claimed", credential=True,
        request="interlude.domain.models.webhooks.RotateWebhookSecretRequest", optional_body=True,
        answers=(
            Answer(
                200, "Rotated; the previous secret signs too until it expires",
                "interlude.domain.models.webhooks.WebhookSecretRotated", headers=("Cache-Control",),
            ),
        ),
        errors=(*WEBHOOK_ERRORS, "interlude.rotation_in_overlap"),
    ),
    Route(
        "GET", "/webhooks/{webhookId}/dead-letters", "listWebhookDeadLetters", "webhooks:manage",
        "A subscription's dead-lettered deliveries (content-free), newest first", module="webhooks",
        answers=(
            Answer(
                200, "Dead-lettered deliveries, newest first (content-free)",
                "interlude.domain.models.webhooks.WebhookDeadLetterPage",
            ),
        ),
        errors=WEBHOOK_ERRORS,
        params=(
            Param("limit", "query", {"type": "integer", "minimum": 1}, "clamped to deadLetter.maxPageSize"),
            Param("cursor", "query", {"type": "string", "minLength": 1, "maxLength": 2048}, "nextCursor"),
        ),
    ),
    Route(
        "GET", "/runs/{runId}/notifications", "listRunNotifications", "runs:read", "Who was told what, when, how",
        module="notifications",
        answers=(Answer(200, "Every notification of the run", "interlude.domain.models.responses.RunNotifications"),),
        errors=RUN_ERRORS,
    ),
    Route(
        "PUT", "/tenant/notifications/slack", "putSlackSettings", "keys:admin",
        "Set the tenant's Slack incoming-webhook URL or bot token (stored in Secrets Manager, never returned)",
        module="notifications",
        idempotency="claimed",
        request="interlude.domain.models.principal_requests.SlackSettings",
        answers=(Answer(200, "The credential stored (never returned)", "interlude.domain.models.responses.SlackConfigured"),),
    ),
    Route(
        "PUT", "/tenant/notifications/slack/signing-secret", "putSlackSigningSecret", "keys:admin",
        "Set the signing secret of the tenant's Slack app, which verifies clicks in its messages (never returned)",
        module="notifications",
        idempotency="claimed",
        request="interlude.domain.models.principal_requests.SlackSigningSecret",
        answers=(Answer(200, "The signing secret stored (never returned)", "interlude.domain.models.responses.SlackConfigured"),),
    ),
    # Issue 28 item 6 (interlude.api.slack): the tenant's Slack app's interactivity URL. No API key: the request is
    # authenticated by Slack's signature with the tenant's signing secret, and a click decides as the directory
    # principal its Slack user is. Slack sends no Idempotency-Key (one sent is kept as on the token surfaces: claimed,
    # the tenant in the path its namespace); the decision rules make a click Slack sends twice decide once.
    Route(
        "POST", "/slack/{tenant}/interactions", "slackInteraction", None,
        "Slack interactivity: a click on a message's Approve or Reject button (signed by Slack)", module="slack",
        idempotency="claimed",
        answers=(Answer(200, "Acknowledged: the message as it now reads, or the words shown to the clicker",
                        schema={"type": "object"}),),
        errors=("interlude.slack_signature_invalid", "validation_error", "payload_too_large"),
    ),
    # Issue 16 (interlude.api.modulex_workflows): ModuleX database mode and run rows. GET and PUT
    # /workflows/{workflowId} above answer on the face of the workflow they name (docs/adr/0030, "Two faces on
    # /workflows").
    Route(
        "POST", "/workflows", "modulexCreateWorkflow", "workflows:write", "ModuleX: deploy a workflow",
        module="modulex_workflows", face="modulex",
        # A version-numbered transaction retried on a taken number, as putWorkflow.
        idempotency="claimed",
        request="interlude.faces.modulex.workflows.ModulexWorkflowRequest",
        answers=(Answer(201, "The workflow deployed", "interlude.faces.modulex.workflows.ModulexWorkflow"),),
        errors=(
            "interlude.workflow_unprocessable", "interlude.field_unprocessable", "interlude.quota_exceeded",
            "runner_unavailable",
        ),
        params=(ORGANIZATION,),
    ),
    Route(
        "GET", "/workflows", "listWorkflows", "workflows:read", "Workflows of both faces, paged",
        module="modulex_workflows", face="modulex",
        answers=(
            Answer(200, "One page of the tenant's workflows, both faces", "interlude.faces.modulex.workflows.WorkflowList"),
        ),
        errors=("validation_error",),
        params=(
            Param("page", "query", {"type": "integer", "minimum": 1, "maximum": 10**6}),
            Param(
                "page_size", "query",
                {"type": "integer", "minimum": 1, "maximum": Ref("interlude.app.workflows.MAX_WORKFLOW_PAGE")},
            ),
            Param(
                Ref("interlude.faces.modulex.workflows.LISTING_FILTERS"), "query",
                {"type": "string", "maxLength": Ref("interlude.faces.modulex.workflows.MAX_NAME")},
            ),
            ORGANIZATION,
        ),
    ),
    Route(
        "DELETE", "/workflows/{workflowId}", "modulexDeleteWorkflow", "workflows:write",
        "ModuleX: delete a workflow (its versions stay for its runs)", module="modulex_workflows", face="modulex",
        # A tombstone and a delete; a duplicate finds the workflow gone (404).
        idempotency="claimed",
        answers=(Answer(200, "The workflow deleted", "interlude.faces.modulex.workflows.WorkflowDeleted"),),
        errors=("not_found", "interlude.method_not_allowed"),
        params=(ORGANIZATION,),
    ),
    Route(
        "GET", "/workflow-runs", "modulexListRuns", "runs:read", "ModuleX: the runs, newest first",
        module="modulex_workflows", face="modulex",
        answers=(Answer(200, "The runs, newest first", "interlude.faces.modulex.workflows.RunRows"),),
        errors=("validation_error",),
        params=(
            Param(
                "limit", "query",
                {"type": "integer", "minimum": 1, "maximum": Ref("interlude.faces.modulex.workflows.MAX_RUN_LIMIT")},
            ),
            Param(
                "offset", "query",
                {"type": "integer", "minimum": 0, "maximum": Ref("interlude.faces.modulex.workflows.MAX_RUN_OFFSET")},
            ),
            Param("workflow_id", "query", WORKFLOW_ID),
            Param("status", "query", {"type": "string"}, "a ModuleX or an OpenWOP run status"),
            Param(
                "trigger_type", "query", {"type": "string", "maxLength": Ref("interlude.faces.modulex.workflows.MAX_NAME")},
                "api or subworkflow",
            ),
            ORGANIZATION,
        ),
    ),
    Route(
        "GET", "/workflow-runs/{runPk}", "modulexGetRun", "runs:read", "ModuleX: one run's record",
        module="modulex_workflows", face="modulex",
        answers=(Answer(200, "The run's record", "interlude.faces.modulex.workflows.RunDetail"),),
        errors=RUN_ERRORS,
        params=(ORGANIZATION,),
    ),
)

# Issue 30 item 5 (interlude.api.replay): what failed, sent again. A segment is either a parameter or a literal in
# API Gateway's resource paths, so one unit's retry is a `/retry` segment, a scope's recovery a literal custom method.
REPLAYED = Answer(200, "Queued again as the next attempt of the same unit", "interlude.domain.models.replay.Replayed")
RECOVERED = Answer(200, "Every dead letter of the scope queued again, once", "interlude.domain.models.replay.Recovery")
ROUTES += (
    Route(
        "POST", "/webhooks/{webhookId}/dead-letters/{deliveryId}/retry", "retryWebhookDelivery", "webhooks:manage",
        "Send a dead-lettered delivery again (the same delivery id)", module="replay", idempotency="claimed",
        answers=(REPLAYED,), errors=(*WEBHOOK_ERRORS, *REPLAY_ERRORS),
    ),
    Route(
        "POST", "/webhooks/{webhookId}/dead-letters:recover", "recoverWebhookDeliveries", "webhooks:manage",
        "Send again every delivery of the subscription dead-lettered since a time", module="replay",
        idempotency="claimed", request="interlude.domain.models.replay.RecoverRequest",
        answers=(RECOVERED,), errors=(*WEBHOOK_ERRORS, *RECOVERY_ERRORS),
    ),
    Route(
        "GET", "/webhooks/{webhookId}/recovery", "getWebhookRecovery", "webhooks:manage",
        "Where the subscription's latest recovery stands: dead letters found, queued again, left", module="replay",
        answers=(Answer(200, "The subscription's latest recovery", "interlude.domain.models.replay.Recovery"),),
        errors=WEBHOOK_ERRORS,
    ),
    Route(
        "POST", "/runs/{runId}/deliveries/{deliveryId}/retry", "retryRunDelivery", "webhooks:manage",
        "Send a run's dead-lettered callback notice again (the same id)", module="replay", idempotency="claimed",
        answers=(REPLAYED,), errors=(*RUN_ERRORS, *REPLAY_ERRORS),
    ),
    Route(
        "POST", "/runs/{runId}/deliveries:recover", "recoverRunDeliveries", "webhooks:manage",
        "Send again every dead-lettered callback notice of a run", module="replay", idempotency="claimed",
        answers=(RECOVERED,), errors=(*RUN_ERRORS, *RECOVERY_ERRORS),
    ),
    Route(
        "POST", "/runs/{runId}/notifications/{notificationId}/retry", "retryRunNotification", "webhooks:manage",
        "Send a run's dead-lettered notification again", module="replay", idempotency="claimed",
        answers=(REPLAYED,), errors=(*RUN_ERRORS, *REPLAY_ERRORS),
    ),
    Route(
        "POST", "/runs/{runId}/notifications:recover", "recoverRunNotifications", "webhooks:manage",
        "Send again every dead-lettered notification of a run", module="replay", idempotency="claimed",
        answers=(RECOVERED,), errors=(*RUN_ERRORS, *RECOVERY_ERRORS),
    ),
    Route(
        "POST", "/runs/{runId}/actions/{nodeId}/retry", "retryRunAction", "runs:create",
        "Run a run that failed at its core.http action again from there (the effect record decides the call)",
        module="replay", idempotency="claimed",
        answers=(Answer(200, "The run going on from its action", "interlude.domain.models.replay.ActionRetried"),),
        errors=(*RUN_ERRORS, "interlude.action_not_retryable", "interlude.replay_limit_reached", "interlude.quota_exceeded"),
    ),
)

# Issue 16 item 5 (interlude.api.audit): the tenant's tamper-evident audit log.
ROUTES += (
    Route(
        "GET", "/audit/verify", "verifyAuditLog", "audit:read", "Re-walk a range of the audit log's hash chain",
        module="audit",
        answers=(
            Answer(
                200, "The range re-walked: the chain's and the checkpoints' anomalies",
                "interlude.domain.models.responses.AuditVerification",
            ),
        ),
        # not_found: auditLogIntegrity unadvertised (the checkpoint key cannot be read).
        errors=("validation_error", "not_found"),
        params=(
            Param("fromSeq", "query", {"type": "integer", "minimum": 0, "maximum": 10**12 - 1}, "First entry (required)"),
            Param("toSeq", "query", {"type": "integer", "minimum": 0, "maximum": 10**12 - 1}, "Last entry (required)"),
            Param(
                "chain", "query", {"type": "integer", "minimum": 0, "maximum": AUDIT_CHAINS - 1},
                "Walk this chain only (default: every chain)",
            ),
        ),
    ),
    Route(
        "GET", "/audit", "listAuditEntries", "audit:read", "The tenant's audit entries, newest first", module="audit",
        answers=(Answer(200, "The tenant's audit entries, newest first", "interlude.domain.models.responses.AuditPage"),),
        errors=("validation_error",),
        params=(
            Param("limit", "query", {"type": "integer", "minimum": 1, "maximum": Ref("interlude.app.audit.MAX_PAGE")}),
            Param("cursor", "query", {"type": "string"}, "cursor of the previous page"),
        ),
    ),
)

# Issue 16 item 3 (interlude.api.console): the operator console. No bearer key: a signed session cookie, made at
# sign-in from an API key, stands for it while the session stays open (sign-out ends it) and the key active; every
# page and form holds the scope of the API operation it performs (acts_as).
ROUTES += CONSOLE_ROUTES

# Issue 15 item 3 (interlude.api.subworkflows): a run's immediate parent (core.subWorkflow).
ROUTES += (
    Route(
        "GET", "/runs/{runId}/ancestry", "getRunAncestry", "runs:read", "The run's immediate parent run",
        module="subworkflows",
        answers=(Answer(200, "The run and its immediate parent", "interlude.domain.models.responses.RunAncestry"),),
        errors=RUN_ERRORS,
    ),
)

# Issue 15 item 2 (interlude.api.tasks): the tenant's task workers take, heartbeat and finish task nodes. Their writes
# are conditional writes on the task item, then the run's own transaction: claimed keys.
ROUTES += (
    Route(
        "POST", "/tasks:claim", "claimTask", "tasks:work", "Take a ready task from named queues (long poll)",
        module="tasks",
        # A conditional claim of one task among several reads, no run transaction to join; a replay answers the
        # claimed task again (a lost claim answer is not a lost task).
        idempotency="claimed", held=True, credential=True,
        request="interlude.domain.models.tasks.ClaimTaskRequest",
        answers=(
            Answer(200, "A task, claimed", "interlude.domain.models.tasks.ClaimedTask", headers=("Cache-Control",)),
            Answer(204, "Nothing ready within waitSeconds", media=(), headers=("Cache-Control",)),
        ),
    ),
    Route(
        "POST", "/tasks/{taskToken}/complete", "completeTask", "tasks:work", "Complete a claimed task", module="tasks",
        # The task item's conditional settle, then the run's transaction (the task decides the winner).
        idempotency="claimed",
        request="interlude.domain.models.tasks.CompleteTaskRequest",
        answers=(Answer(200, "Completed", "interlude.domain.models.tasks.TaskSettled"),),
        errors=TASK_ERRORS,
    ),
    Route(
        "POST", "/tasks/{taskToken}/fail", "failTask", "tasks:work", "Fail a claimed task", module="tasks",
        # The task item's conditional settle or requeue, then the run's transaction.
        idempotency="claimed",
        request="interlude.domain.models.tasks.FailTaskRequest",
        answers=(Answer(200, "Failed, or queued again", "interlude.domain.models.tasks.TaskSettled"),),
        errors=TASK_ERRORS,
    ),
    Route(
        "POST", "/tasks/{taskToken}/heartbeat", "heartbeatTask", "tasks:work", "Keep a claimed task", module="tasks",
        # One conditional UpdateItem of the task item (and, at times, a schedule).
        idempotency="claimed",
        request="interlude.domain.models.tasks.HeartbeatRequest", optional_body=True,
        answers=(Answer(200, "The claim holds", "interlude.domain.models.tasks.TaskHeld"),),
        errors=TASK_ERRORS,
    ),
)
# fmt: on


def gateway_routes() -> list[Route]:
    """One route per API Gateway route key, in declaration order: the first route declared under each key (routes
    sharing a key, the custom methods of one parameter's segment, are of one throttle class)."""
    first: dict[str, Route] = {}
    for route in ROUTES:
        first.setdefault(route.gateway_key, route)
    return list(first.values())


def route_class(route: Route) -> str:
    """`held`, `writes` or `reads`: the throttle class a deployment applies to the route."""
    if route.held:
        return "held"
    return "writes" if route.mutating else "reads"


# The function every route above is integrated with (API Gateway in the stack, the HTTP server locally).
ROUTES_FUNCTION = "api"
# Routes that act for no tenant: public documents, the console's sign-in form and its front door (which only looks for
# a cookie). Every other route acts for the tenant of its key, console session or signed link, and refuses a suspended
# tenant (interlude.tenant_suspended).
TENANT_FREE_OPERATIONS = frozenset({"getCapabilities", "getOpenApi", "consoleRoot", "consoleHome", "consoleSignInPage"})


def acts_for_a_tenant(route: Route) -> bool:
    return route.operation not in TENANT_FREE_OPERATIONS


Scope = Literal[
    "workflows:write",
    "workflows:read",
    "runs:create",
    "runs:read",
    "runs:cancel",
    "approvals:respond",
    "events:write",
    "keys:admin",
    "audit:read",
    # OpenWOP's scope of the webhook subscription routes (issue 14).
    "webhooks:manage",
    # Task workers (issue 15 item 2): claim, heartbeat, complete and fail tasks.
    "tasks:work",
    # Issue 28 item 5: mint links that decide as a named directory principal (keys:admin holds it too).
    "links:mint",
]
ALL_SCOPES: tuple[Scope, ...] = get_args(Scope)

# --- stack outputs (the `interlude` CLI finds a deployment's parts through them: --stack NAME) -----------

OUTPUT_API_URL = "ApiUrl"
# The WebSocket API clients follow runs live on (LIVE_API): wss://{api}.execute-api.{region}.amazonaws.com/{stage}.
OUTPUT_LIVE_URL = "LiveUrl"
# OUTPUT_TABLE_NAME, OUTPUT_ENTRIES_TABLE_NAME: the tables' (above).
OUTPUT_KEY_RING_SECRET = "KeyRingSecret"
OUTPUT_WEBHOOK_SECRET_PREFIX = "WebhookSecretPrefix"
# What `interlude webhooks secret show|rotate` creates a tenant's secret with, as the callbacks function does
# (CREATED_SECRETS_*_ENV): the tags (JSON; always) and the customer-managed key's ARN (only when there is one).
OUTPUT_WEBHOOK_SECRET_TAGS = "WebhookSecretTags"
OUTPUT_WEBHOOK_SECRET_KMS_KEY = "WebhookSecretKmsKey"
# The operator surface's function (OPERATOR_FUNCTION): `interlude tenants --stack NAME` invokes it by this name.
OUTPUT_ADMIN_FUNCTION = "AdminFunction"

# --- deadlines (EventBridge Scheduler) -------------------------------------------------------------


class Schedules(NamedTuple):
    """One-time schedules, one per deadline, in one schedule group per deployment (interlude.adapters.scheduler)."""

    # The function every schedule invokes (through the scheduler's execution role).
    target: str
    # Functions that create and delete schedules (granted exactly SCHEDULE_ACTIONS on the group's schedules
    # and iam:PassRole on exactly the execution role).
    managers: tuple[str, ...]
    # Target retry policy (Scheduler allows 0..185 attempts and 60..86400 s).
    max_retry_attempts: int = 185
    max_event_age_s: int = 24 * 3600
    dead_letter_retention_s: int = 14 * 24 * 3600
    # Scheduler invokes the target asynchronously: Lambda retries a failed invocation this often, for at most this long
    # (Lambda's ceiling), then sends the event to the target's on-failure queue (kept as long as the dead letters).
    target_async_retries: int = 2
    target_async_max_age_s: int = 6 * 3600
    # Environment of the managers, in SchedulerSettings' field order: group, target ARN, role ARN, DLQ ARN.
    environment: tuple[str, ...] = (
        "SCHEDULE_GROUP",
        "TIMEOUTS_FUNCTION_ARN",
        "SCHEDULER_ROLE_ARN",
        "SCHEDULE_DLQ_ARN",
    )


# api schedules the task checks (a claim, and a heartbeat that outruns the last check: interlude.app.tasks); admin hands
# a resumed tenant's deferred deadlines back to the scheduler and deletes a deleted tenant's schedules (issue 30).
SCHEDULES = Schedules(target="timeouts", managers=("dispatch", "api", "admin"))
# How long a schedule's input may still reach its target after it is due: Scheduler retries it max_event_age_s, then it
# waits in the schedules' dead-letter queue for an operator to replay (a due item is kept as long: store/due_index.py).
SCHEDULE_INPUT_KEPT_S = SCHEDULES.max_event_age_s + SCHEDULES.dead_letter_retention_s
# How long a deleted tenant's record stays as its tombstone (interlude.app.tenant_lifecycle, docs/adr/0195): past the
# longest any part of the deployment may still hand a worker the tenant's work, and a day more. A message's stay in a
# dead-letter queue counts from its first send (standard queues), and a redrive back to its queue gives it that queue's
# whole retention again; a schedule's input is retried, then dead-lettered; the timeouts function's failed invocations
# are kept as long. (The stream's on-failure queue holds a failed batch's shard positions, no work past the stream's
# 24 hours.) Past it, a tenant with no record and no key is the deleted tenant it was (store/tenant_standing.py), so
# its work is dropped however late an operator redrives it.
TENANT_WORK_CARRIED_S = max(
    *(queue(q.dead_letter).retention_s + q.retention_s for q in QUEUES if q.dead_letter),
    SCHEDULE_INPUT_KEPT_S,
    SCHEDULES.target_async_max_age_s + SCHEDULES.dead_letter_retention_s,
)
TENANT_TOMBSTONE_S = TENANT_WORK_CARRIED_S + 24 * 3600
# Deadlines due in one second share schedules (ADR 0132): each is listed in one of this many partitions of its second
# (interlude.store.due_index), and one schedule per second and shard invokes SCHEDULES.target with the partition. At
# the goal's 2,000 timed-out gates a second: 250 writes a second to each partition (of 1,000 WRU/s), 8 schedule
# invocations a second (of 1,000/s), and 250 deadlines an invocation, fired DUE_BUCKET_WORKERS at a time.
DUE_INDEX_SHARDS = 8
DUE_BUCKET_WORKERS = 10
# Managers that also read a schedule (its input names its run): a deletion checks each schedule it found by its name's
# tenant part before deleting it.
SCHEDULE_READERS = ("admin",)
SCHEDULE_READ_ACTIONS = ("scheduler:GetSchedule",)


class RecurringSchedule(NamedTuple):
    """A schedule of the deployment itself (not of a run): a rate-based EventBridge Scheduler schedule in the
    deadlines' group, through the same role, invoking SCHEDULES.target with `input`. Locally a pump invokes it."""

    name: str  # construct id
    every_s: int
    input: tuple[tuple[str, str], ...]


# Issue 16: signs the audit checkpoints of tenants whose entries have waited long enough and that appended nothing
# since (interlude.app.audit.checkpoint_pending); its period is part of the 300 s an entry waits at most.
AUDIT_CHECKPOINT_SWEEP = RecurringSchedule(name="AuditCheckpointSweep", every_s=60, input=(("sweep", "audit-checkpoints"),))
# Issue 30 (ADR 0118): queues a pass of the retention sweep (interlude.migrations.sweeps) on the migrations queue: the
# finished runs whose retention turns never finished are retained.
RETENTION_SWEEP = RecurringSchedule(name="RetentionSweep", every_s=24 * 3600, input=(("sweep", "retention"),))
RECURRING_SCHEDULES: tuple[RecurringSchedule, ...] = (AUDIT_CHECKPOINT_SWEEP, RETENTION_SWEEP)
SCHEDULE_ACTIONS = ("scheduler:CreateSchedule", "scheduler:DeleteSchedule")
# The local stack's group name; the deployed one is generated by CloudFormation (one per stack).
LOCAL_SCHEDULE_GROUP = "interlude-local-deadlines"
