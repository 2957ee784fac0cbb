"""The one declaration of how Interlude is wired: table layout, functions, their triggers and the routes.

The CDK construct (infra/interlude_cdk/), the local stack (interlude.local) and the tests all read this module, so the
deployed shape and the emulated shape cannot drift. Add a function, queue or route here first.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, get_args

# The declarations are NamedTuples, not frozen dataclasses: every function imports this module at its cold start, and
# a dataclass generates and compiles its methods at class creation (six per frozen class, about 0.7 ms a class on
# Python 3.11: 8 of the 10 ms this module cost); a NamedTuple is as immutable and hashable, and builds in a quarter.

# --- the table -------------------------------------------------------------------------------------

TABLE_LOGICAL_NAME = "Table"
PARTITION_KEY = "pk"
SORT_KEY = "sk"
TTL_ATTRIBUTE = "ttl"
STREAM_VIEW = "NEW_IMAGE"


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
ITEM_INDEXES = (RUN_INDEX, INBOX, TASK_QUEUES)


def key_attributes() -> list[tuple[str, str]]:
    """Every attribute that appears in a key schema, with its DynamoDB type ("S" throughout)."""
    names = [PARTITION_KEY, SORT_KEY]
    for index in GLOBAL_INDEXES:
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
# BatchWriteItem too: the inbox entries' writers hold it, and its DeleteRequest would otherwise bypass the deny.
APPEND_ONLY_DENIED_ACTIONS = ("dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem")

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
    memory_mb: int = 512
    timeout_s: int = 29
    # DynamoDB actions this function's role is granted on the table (least privilege).
    table_actions: tuple[str, ...] = ()
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
    # Sends e-mail through SES (issue 14): granted ses:SendEmail/SendRawEmail on the deployment's from-identity and
    # configuration set, whose names arrive in SES_FROM_ADDRESS / SES_CONFIGURATION_SET.
    sends_email: bool = False


# SQS → callbacks settings, shared by the event source mapping and the local pump.
CALLBACK_BATCH_SIZE = 4
# The queue between the stream and dispatch (the outbox), and its batch: what a quiet tenant's item waits for behind a
# busy one's is at most one batch of this many items (docs/scale.md, "Fairness across tenants").
OUTBOX_QUEUE = "outbox"
OUTBOX_BATCH_SIZE = 1

FUNCTIONS: tuple[Function, ...] = (
    Function(
        name="api",
        handler="handler.lambda_handler",
        description="Every HTTP route (OpenWOP v2 and ModuleX faces)",
        # Every link an answer holds (token urls, eventsUrl, statusUrl) is built from it, never from the request.
        needs_public_base_url=True,
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
            # PUT /tenant/notifications/slack writes the tenant's Slack credential (issue 14); nothing reads it back.
            (
                "SLACK_SECRET_PREFIX",
                ("secretsmanager:PutSecretValue", "secretsmanager:CreateSecret", "secretsmanager:TagResource"),
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
        # One concurrent batch per stream shard; more than a few shards is a very busy table.
        reserved_concurrency=4,
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
        sends_to=("callbacks", "actions", "notifications"),
        needs_public_base_url=True,
        # Its queue's maximum concurrency too (interlude_cdk): with SQS fair queues, a busy tenant's items fill at
        # most what is in flight, and a quiet tenant's item takes the next instance that frees.
        reserved_concurrency=6,
    ),
    Function(
        name="callbacks",
        handler="handler.lambda_handler",
        # A batch is delivered one notice after another: CALLBACK_BATCH_SIZE attempts of at most 15 s each.
        timeout_s=90,
        description="Callback notices from the SQS queue to tenant URLs: egress-checked, pinned, signed, retried",
        consumes="callbacks",
        batch_size=CALLBACK_BATCH_SIZE,
        sends_to=("callbacks-dlq",),
        table_actions=(
            "dynamodb:GetItem",
            "dynamodb:PutItem",
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
            # The audit sweep's checkpoint takes a quiet chain off the pending index: a Delete in its transaction
            # (interlude.store.audit.AuditLog.put_checkpoint).
            "dynamodb:DeleteItem",
            # Reminders read the delegations of a gate's approvers in batches
            # (interlude.store.directory.DirectoryStore.get_many).
            "dynamodb:BatchGetItem",
        ),
        reserved_concurrency=5,
        # A reminder's schedule (issue 14) fires here too: it queues the reminders of the gate it names.
        sends_to=("notifications",),
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
        # run's transition; no queries.
        table_actions=(
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:ConditionCheckItem",
            # The transition runs on past the action: a gate it reaches opens there, its inbox index entries with it
            # (interlude.store.inbox).
            "dynamodb:BatchWriteItem",
        ),
        # Auth headers by reference: read, never written.
        secret_grants=(("ACTION_SECRET_PREFIX", ("secretsmanager:GetSecretValue",)),),
        reserved_concurrency=10,
    ),
    Function(
        name="notify",
        handler="handler.lambda_handler",
        # A batch is CALLBACK_BATCH_SIZE notifications, each at most one e-mail and one Slack post of 15 s.
        timeout_s=150,
        description="Notifications (issue 14): personal decision links by e-mail (SES) and Slack; retried, dead-lettered",
        consumes="notifications",
        batch_size=CALLBACK_BATCH_SIZE,
        sends_to=("notifications-dlq",),
        table_actions=(
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:Query",
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
        description="The table's migrations (backfills): queued by each deploy, taken turn by turn from its queue",
        consumes="migrations",
        batch_size=1,
        sends_to=("migrations",),
        # Checkpoints (Query, UpdateItem), the pages of a Scan, which index items are missing (BatchGetItem) and their
        # puts (BatchWriteItem); a workflow's latest version and record (Query, GetItem), its pointer and catalogue entry
        # (PutItem), a key's listing (UpdateItem).
        table_actions=(
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:Query",
            "dynamodb:Scan",
            "dynamodb:BatchGetItem",
            "dynamodb:BatchWriteItem",
        ),
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
    # Dead letters carry the notice's identity and delivery history, never its body, token or signing secret.
    Queue(name="callbacks-dlq", url_env="CALLBACK_DLQ_URL", retention_s=14 * 24 * 3600),
    Queue(
        name="callbacks",
        url_env="CALLBACK_QUEUE_URL",
        # At least 6x the callbacks function's timeout (AWS's guidance for SQS event sources).
        visibility_timeout_s=540,
        dead_letter="callbacks-dlq",
        # A safety net only: the worker dead-letters a notice itself after CALLBACK_MAX_ATTEMPTS; SQS redrives
        # a message the worker could not even process (a crash every time) after twice as many receives.
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
        # Retries of the action itself are counted by its effect record (core.http maxAttempts, at most 10); the
        # redrive catches a message that crashes the worker every time.
        max_receive_count=20,
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
    readers=("api", "dispatch", "notify"),
    description="Interlude interrupt token key ring: the current kid signs, every kid held verifies",
)
# The audit checkpoint signing key (interlude.adapters.audit_key): signs audit checkpoints and nothing else.
AUDIT_KEY_SECRET = Secret(
    name="AuditSigningKey",
    env="AUDIT_KEY_SECRET",
    # timeouts: the periodic checkpoint sweep (AUDIT_CHECKPOINT_SWEEP).
    readers=("api", "timeouts"),
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
# function) and read by GET /audit/verify (api). The table's writers hold no other S3 action: none can rewrite it.
AUDIT_ANCHOR_BUCKET = Bucket(
    name="AuditAnchors",
    env="AUDIT_ANCHOR_BUCKET",
    prefix="audit-anchors/",
    writers=("timeouts",),
    readers=("api",),
    description="Interlude audit anchors: each tenant's chain heads and last checkpoints, signed; Object Lock",
)
BUCKETS: tuple[Bucket, ...] = (AUDIT_ANCHOR_BUCKET,)

# --- routes ----------------------------------------------------------------------------------------


# The protocol a route speaks, which decides the shape of its refusals (interlude.api.errors): the OpenWOP
# envelope {error, message, details?} or ModuleX {detail}.
Face = Literal["openwop", "modulex"]


class Route(NamedTuple):
    method: str
    path: str  # API Gateway syntax: /runs/{runId}
    operation: str
    scope: str | None  # None: no API key (discovery, token surfaces)
    summary: str = ""
    mutating: bool = False
    face: Face = "openwop"
    # A console route: the API operation it performs. Its request must hold that operation's scope (the console's
    # session stands for an API key; interlude.api.http.scope_of), so the two cannot drift apart.
    acts_as: str | None = None


CONSOLE_ROUTES: tuple[Route, ...] = (
    Route("GET", "/console", "consoleHome", None, "Console: to the inbox, or to sign in"),
    Route("GET", "/console/sign-in", "consoleSignInPage", None, "Console: the sign-in page"),
    Route("POST", "/console/sign-in", "consoleSignIn", None, "Console: exchange an API key for a session", True),
    Route("POST", "/console/sign-out", "consoleSignOut", None, "Console: end the session", True),
    Route(
        "GET", "/console/inbox", "consoleInbox", None, "Console: what the signed-in key may decide", acts_as="listInterrupts"
    ),
    Route(
        "POST",
        "/console/runs/{runId}/interrupts/{nodeId}",
        "consoleDecide",
        None,
        "Console: decide an interrupt (as the signed-in key, surface console)",
        True,
        acts_as="resolveInterruptByRun",
    ),
    Route("GET", "/console/runs", "consoleRuns", None, "Console: runs, filtered and paged", acts_as="listRuns"),
    Route(
        "POST",
        "/console/runs/cancel",
        "consoleCancelRuns",
        None,
        "Console: cancel the selected runs",
        True,
        acts_as="bulkCancelRuns",
    ),
    Route(
        "GET",
        "/console/runs/{runId}",
        "consoleRun",
        None,
        "Console: a run, its graph, timeline, gates and deliveries",
        acts_as="getRun",
    ),
    Route("GET", "/console/workflows", "consoleWorkflows", None, "Console: workflows", acts_as="listWorkflows"),
    Route(
        "GET",
        "/console/workflows/{workflowId}",
        "consoleWorkflow",
        None,
        "Console: a workflow's versions, drawn",
        acts_as="getWorkflow",
    ),
    Route("GET", "/console/keys", "consoleKeys", None, "Console: the tenant's API keys", acts_as="listKeys"),
    Route("POST", "/console/keys", "consoleCreateKey", None, "Console: create an API key", True, acts_as="createKey"),
    Route(
        "POST",
        "/console/keys/{keyId}/revoke",
        "consoleRevokeKey",
        None,
        "Console: revoke an API key",
        True,
        acts_as="revokeKey",
    ),
    Route("GET", "/console/audit", "consoleAudit", None, "Console: the tenant's audit trail", acts_as="listAuditEntries"),
)

ROUTES: tuple[Route, ...] = (
    Route("GET", "/.well-known/openwop", "getCapabilities", None, "Discovery document"),
    Route("GET", "/openapi.json", "getOpenApi", None, "This API's OpenAPI document"),
    Route("PUT", "/workflows/{workflowId}", "putWorkflow", "workflows:write", "Register a new workflow version", True),
    Route("GET", "/workflows/{workflowId}", "getWorkflow", "workflows:read", "Latest workflow version"),
    Route("POST", "/runs", "createRun", "runs:create", "Start a run", True),
    Route("GET", "/runs/{runId}", "getRun", "runs:read", "Run snapshot"),
    Route("POST", "/runs/{runId}/cancel", "cancelRun", "runs:cancel", "Cancel a run", True),
    Route("GET", "/runs/{runId}/events/poll", "pollRunEvents", "runs:read", "Long-poll the event log"),
    Route(
        "POST",
        "/runs/{runId}/interrupts/{nodeId}",
        "resolveInterruptByRun",
        "approvals:respond",
        "Resolve the interrupt a node holds",
        True,
    ),
    Route("POST", "/keys", "createKey", "keys:admin", "Create an API key", True),
    Route("GET", "/keys", "listKeys", "keys:admin", "The tenant's API keys (metadata, never secrets), paged"),
    Route("DELETE", "/keys/{keyId}", "revokeKey", "keys:admin", "Revoke an API key of the tenant", True),
    # Signed-token surfaces (interlude.api.tokens): the token in the path is the credential.
    Route("GET", "/interrupts/{token}", "inspectInterruptByToken", None, "Interrupt payload, or the approval page"),
    Route("POST", "/interrupts/{token}", "resolveInterruptByToken", None, "Resolve through a signed token", True),
    Route("GET", "/runs/{runId}/interrupts/{nodeId}", "getInterruptToken", "runs:read", "An interrupt and a token"),
    Route(
        "POST",
        "/runs/{runId}/interrupts/{nodeId}/tokens",
        "mintInterruptToken",
        "approvals:respond",
        "Mint a token with an intent and a shorter lifetime",
        True,
    ),
    Route("GET", "/runs/{runId}/deliveries", "listRunDeliveries", "runs:read", "Callback delivery attempts of a run"),
    # Issue 3 (interlude.api.inbox): the approver inbox, external events, tenant settings and credential grants.
    Route("GET", "/interrupts", "listInterrupts", "approvals:respond", "Pending interrupts the caller may decide"),
    Route("POST", "/events", "postEvent", "events:write", "Deliver an external event by correlation", True),
    Route("GET", "/tenant/settings", "getTenantSettings", "keys:admin", "The tenant's settings"),
    Route("PUT", "/tenant/settings", "putTenantSettings", "keys:admin", "Replace the tenant's settings", True),
    Route(
        "PUT",
        "/tenant/credential-grants/{provider}",
        "putCredentialGrant",
        "keys:admin",
        "Record that the tenant holds a credential grant (never the material)",
        True,
    ),
    # Issue 7 (interlude.api.streams, interlude.api.modulex): the SSE event stream, and the ModuleX face.
    Route("GET", "/runs/{runId}/events", "streamRunEvents", "runs:read", "Stream the event log (SSE)"),
    Route("POST", "/workflows/run", "modulexRun", "runs:create", "ModuleX: start a run", True, face="modulex"),
    Route(
        "GET",
        "/workflows/listen/{runId}",
        "modulexListen",
        "runs:read",
        "ModuleX: the run's frames (SSE)",
        face="modulex",
    ),
    Route(
        "POST",
        "/workflows/resume/{threadId}",
        "modulexResume",
        "approvals:respond",
        "ModuleX: answer the run's interrupt (owner/admin key)",
        True,
        face="modulex",
    ),
    Route(
        "POST",
        "/workflows/cancel/{runId}",
        "modulexCancel",
        "runs:cancel",
        "ModuleX: cancel a run",
        True,
        face="modulex",
    ),
    Route(
        "GET", "/workflows/state/{threadId}", "modulexState", "runs:read", "ModuleX: the run's state", face="modulex"
    ),
    # Issue 14 (interlude.api.principals): the tenant's principal directory.
    Route("PUT", "/principals/{principalId}", "putPrincipal", "keys:admin", "Create or replace a directory entry", True),
    Route("GET", "/principals/{principalId}", "getPrincipal", "keys:admin", "A directory entry"),
    Route("DELETE", "/principals/{principalId}", "deletePrincipal", "keys:admin", "Remove a directory entry", True),
    # Issue 16 (interlude.api.run_listing): run listing and bulk cancel.
    Route("GET", "/runs", "listRuns", "runs:read", "The tenant's runs, newest first, paged and filtered"),
    Route("POST", "/runs:bulk-cancel", "bulkCancelRuns", "runs:cancel", "Cancel up to 100 runs, each on its own", True),
    # Issue 15 (interlude.api.effects): the effect records of gated actions (idempotency Layer 2), and the seams.
    Route("GET", "/runs/{runId}/effects", "getRunEffects", "runs:read", "The run's effect records (Layer 2)"),
    Route("GET", "/host/effect-seams", "getEffectSeamManifest", "runs:read", "The host's outbound effect seams"),
    # Issue 14 item 4 (interlude.api.delegation): an approver hands their vote to another principal.
    Route(
        "POST",
        "/runs/{runId}/interrupts/{nodeId}/delegation",
        "delegateVote",
        "approvals:respond",
        "Hand the caller's vote on an approval gate to another principal",
        True,
    ),
    # Issue 14 (interlude.api.webhooks): OpenWOP webhook subscriptions, tenant-wide.
    Route("POST", "/webhooks", "registerWebhook", "webhooks:manage", "Register a webhook subscription", True),
    Route("DELETE", "/webhooks/{webhookId}", "unregisterWebhook", "webhooks:manage", "Unregister a webhook", True),
    Route(
        "POST",
        "/webhooks/{webhookId}/rotate-secret",
        "rotateWebhookSecret",
        "webhooks:manage",
        "Replace a subscription's secret; the old one signs too through the overlap",
        True,
    ),
    Route(
        "GET",
        "/webhooks/{webhookId}/dead-letters",
        "listWebhookDeadLetters",
        "webhooks:manage",
        "A subscription's dead-lettered deliveries (content-free), newest first",
    ),
    Route("GET", "/runs/{runId}/notifications", "listRunNotifications", "runs:read", "Who was told what, when, how"),
    Route(
        "PUT",
        "/tenant/notifications/slack",
        "putSlackSettings",
        "keys:admin",
        "Set the tenant's Slack incoming-webhook URL or bot token (stored in Secrets Manager, never returned)",
        True,
    ),
    # Issue 16 (interlude.api.modulex_workflows): ModuleX database mode and run rows. GET and PUT
    # /workflows/{workflowId} above answer on the face of the workflow they name (docs/decisions.md).
    Route(
        "POST", "/workflows", "modulexCreateWorkflow", "workflows:write", "ModuleX: deploy a workflow", True, "modulex"
    ),
    Route("GET", "/workflows", "listWorkflows", "workflows:read", "Workflows of both faces, paged", face="modulex"),
    Route(
        "DELETE",
        "/workflows/{workflowId}",
        "modulexDeleteWorkflow",
        "workflows:write",
        "ModuleX: delete a workflow (its versions stay for its runs)",
        True,
        "modulex",
    ),
    Route("GET", "/workflow-runs", "modulexListRuns", "runs:read", "ModuleX: the runs, newest first", face="modulex"),
    Route("GET", "/workflow-runs/{runPk}", "modulexGetRun", "runs:read", "ModuleX: one run's record", face="modulex"),
)

# Issue 16 item 5 (interlude.api.audit): the tenant's tamper-evident audit log.
ROUTES += (
    Route("GET", "/audit/verify", "verifyAuditLog", "audit:read", "Re-walk a range of the audit log's hash chain"),
    Route("GET", "/audit", "listAuditEntries", "audit:read", "The tenant's audit entries, newest first"),
)

# Issue 16 item 3 (interlude.api.console): the operator console. No bearer key: a signed session cookie, made at
# sign-in from an API key, stands for it while the session stays open (sign-out ends it) and the key active; every
# page and form holds the scope of the API operation it performs (acts_as).
ROUTES += CONSOLE_ROUTES

# Issue 15 item 3 (interlude.api.subworkflows): a run's immediate parent (core.subWorkflow).
ROUTES += (Route("GET", "/runs/{runId}/ancestry", "getRunAncestry", "runs:read", "The run's immediate parent run"),)

# Issue 15 item 2 (interlude.api.tasks): the tenant's task workers take, heartbeat and finish task nodes.
ROUTES += (
    Route("POST", "/tasks:claim", "claimTask", "tasks:work", "Take a ready task from named queues (long poll)", True),
    Route("POST", "/tasks/{taskToken}/complete", "completeTask", "tasks:work", "Complete a claimed task", True),
    Route("POST", "/tasks/{taskToken}/fail", "failTask", "tasks:work", "Fail a claimed task", True),
    Route("POST", "/tasks/{taskToken}/heartbeat", "heartbeatTask", "tasks:work", "Keep a claimed task", True),
)

# Routes that hold their request open (long-poll, SSE) for up to the function's timeout: throttled as a class
# of their own, since each one occupies an api invocation for its whole hold.
HELD_OPERATIONS = frozenset({"pollRunEvents", "streamRunEvents", "modulexListen", "claimTask"})


def route_class(route: Route) -> str:
    """`held`, `writes` or `reads`: the throttle class a deployment applies to the route."""
    if route.operation in HELD_OPERATIONS:
        return "held"
    return "writes" if route.mutating else "reads"


# The function every route above is integrated with (API Gateway in the stack, the HTTP server locally).
ROUTES_FUNCTION = "api"

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
]
ALL_SCOPES: tuple[Scope, ...] = get_args(Scope)

# --- stack outputs (the `interlude` CLI finds a deployment's parts through them: --stack NAME) -----------

OUTPUT_API_URL = "ApiUrl"
OUTPUT_TABLE_NAME = "TableName"
OUTPUT_KEY_RING_SECRET = "KeyRingSecret"
OUTPUT_WEBHOOK_SECRET_PREFIX = "WebhookSecretPrefix"
# What `interlude webhooks secret show|rotate` creates a tenant's secret with, as the callbacks function does
# (CREATED_SECRETS_*_ENV): the tags (JSON; always) and the customer-managed key's ARN (only when there is one).
OUTPUT_WEBHOOK_SECRET_TAGS = "WebhookSecretTags"
OUTPUT_WEBHOOK_SECRET_KMS_KEY = "WebhookSecretKmsKey"

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
    # Scheduler invokes the target asynchronously: Lambda retries a failed invocation this often, then sends the
    # event to the target's on-failure queue (kept as long as the dead letters).
    target_async_retries: int = 2
    # Environment of the managers, in SchedulerSettings' field order: group, target ARN, role ARN, DLQ ARN.
    environment: tuple[str, ...] = (
        "SCHEDULE_GROUP",
        "TIMEOUTS_FUNCTION_ARN",
        "SCHEDULER_ROLE_ARN",
        "SCHEDULE_DLQ_ARN",
    )


# api schedules the task checks (a claim, and a heartbeat that outruns the last check: interlude.app.tasks).
SCHEDULES = Schedules(target="timeouts", managers=("dispatch", "api"))


class RecurringSchedule(NamedTuple):
    """A schedule of the deployment itself (not of a run): a rate-based EventBridge Scheduler schedule in the
    deadlines' group, through the same role, invoking SCHEDULES.target with `input`. Locally a pump invokes it."""

    name: str  # construct id
    every_s: int
    input: tuple[tuple[str, str], ...]


# Issue 16: signs the audit checkpoints of tenants whose entries have waited long enough and that appended nothing
# since (interlude.app.audit.checkpoint_pending); its period is part of the 300 s an entry waits at most.
AUDIT_CHECKPOINT_SWEEP = RecurringSchedule(name="AuditCheckpointSweep", every_s=60, input=(("sweep", "audit-checkpoints"),))
RECURRING_SCHEDULES: tuple[RecurringSchedule, ...] = (AUDIT_CHECKPOINT_SWEEP,)
SCHEDULE_ACTIONS = ("scheduler:CreateSchedule", "scheduler:DeleteSchedule")
# The local stack's group name; the deployed one is generated by CloudFormation (one per stack).
LOCAL_SCHEDULE_GROUP = "interlude-local-deadlines"
