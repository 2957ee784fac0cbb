"""What each application service is built with, declared as Protocols: the store's capabilities it reads and writes,
and the operations of the other services it calls.

A leaf: it names types only (imported for annotations), so a service module depends on its collaborators through
here and never imports another service's module to call it. interlude.composition joins the concrete stores and
services; any object with these methods serves (a test's fake as well as the DynamoDB store).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

if TYPE_CHECKING:
    from datetime import datetime

    from interlude.app.idempotency import KeyedWrite
    from interlude.domain.audit import AuditDraft
    from interlude.domain.models.requests import CancelRunRequest, CreateRunRequest
    from interlude.domain.models.run import OpenInterrupt, PendingAction, RunState
    from interlude.domain.models.workflow import WorkflowDefinition
    from interlude.engine.run import Transition
    from interlude.rules import auth
    from interlude.rules.audit import Head
    from interlude.rules.interrupts.decide import Resolver
    from interlude.rules.limits import Limits
    from interlude.store.audit import Listed
    from interlude.store.idempotency import AnsweredRecord
    from interlude.store.inbox import ClosedGate, EntryFilter, InboxPage
    from interlude.store.interactions import SettingsRead
    from interlude.store.item_index import ItemIndexReader
    from interlude.store.live import Follower, LiveConnection
    from interlude.store.retention import RetainedRun
    from interlude.store.tasks import Claim, ReadyEntry, Task

T = TypeVar("T")


# -- the store's capabilities ------------------------------------------------------------------------------------


class RunRecords(Protocol):
    """A run's head, its event log and its interrupt items."""

    def get_run(self, run_id: str) -> tuple[RunState, int] | None: ...

    def run_head(self, run_id: str) -> tuple[RunState, int] | None:
        """The run as `get_run` reads it, for a reader of anything but its inputs: a format-4 head's large inputs may
        be left in the event batch that holds them (RunState.inputsDigest set, `inputs` empty)."""
        ...

    def complete(self, head: tuple[RunState, int]) -> tuple[RunState, int]:
        """`head` with the parts it holds elsewhere read back (store/head_parts.py)."""
        ...

    def get_runs(self, run_ids: list[str]) -> dict[str, tuple[RunState, int]]: ...

    def commit(
        self,
        transition: Transition,
        expected_version: int | None,
        now_iso: str,
        answered: AnsweredRecord | None = None,
        open_runs_limit: int | None = None,
        audit: AuditDraft | None = None,
        expires: int | None = None,
    ) -> list[dict[str, Any]]: ...

    def rewrite_head(self, state: RunState, expected_version: int) -> None: ...

    def read_events(
        self,
        run_id: str,
        after_sequence: int = -1,
        limit: int | None = None,
        holder: RunState | None = None,
        consistent: bool = False,
    ) -> list[dict[str, Any]]: ...

    def raised_any(self, run_id: str, keys: list[str]) -> bool: ...

    def raised_at(self, run_id: str, key: str) -> str | None: ...

    def closed_interrupt(self, run_id: str, key: str) -> dict[str, Any] | None: ...

    def gate_close(
        self, run_id: str, node_id: str, interrupt_id: str, after_seq: int
    ) -> tuple[str, dict[str, Any]] | None: ...


class DispatchedRuns(RunRecords, Protocol):
    """The run records an outbox handler reads (app/dispatch.HeldRuns): besides the store's, what dispatch holds for
    the record being dispatched and the batch it came in."""

    def once(self, key: Any, read: Callable[[], T]) -> T:
        """`read()`'s answer, read once for the batch being dispatched."""
        ...

    def closed_gate(self, run_id: str, interrupt_id: str) -> ClosedGate | None:
        """The gate the record closed under `interrupt_id`, as its inbox keys tell it; None: not so told."""
        ...

    def held_retained(self, run_id: str) -> RetainedRun | None:
        """The run's head and expiry as read with the record's batch; None: not read with it."""
        ...

    def raised_at(self, run_id: str, key: str, interrupt_id: str | None = None) -> str | None:
        """When the gate was raised: from the record that closed it where it names `interrupt_id`, else its item."""
        ...

    def handed_back_at(self, run_id: str) -> float | None:
        """When a resume handed back the record's message, held while its tenant was suspended; None: never held."""
        ...


class RunIndex(Protocol):
    """The tenant's run listing (one entry per run) and the heads it names."""

    def run_index(self, tenant: str, family: str | None = None) -> ItemIndexReader: ...

    def get_runs(self, run_ids: list[str]) -> dict[str, tuple[RunState, int]]: ...


class InboxEntries(Protocol):
    def delete_inbox_entries(self, keys: list[tuple[str, dict[str, Any]]]) -> None: ...


class InboxPages(Protocol):
    def page(
        self,
        tenant: str,
        families: list[str],
        limit: int,
        cursor: str | None,
        query: str,
        wanted: EntryFilter | None = None,
        now_epoch: float | None = None,
        order: str = "newest",
    ) -> InboxPage: ...


# A run's open interrupts as the inbox shows them, read from the run's own partition (store.inbox.run_open_interrupts).
RunInterrupts = Callable[[str], tuple[list[dict[str, Any]], int]]


class WorkflowVersions(Protocol):
    """Stored workflow versions (immutable) and the pointer to each workflow's latest."""

    def latest_workflow_version(self, tenant: str, workflow_id: str) -> int | None: ...

    def get_workflow(self, tenant: str, workflow_id: str, version: int) -> dict[str, Any] | None: ...


class WorkflowRecords(WorkflowVersions, Protocol):
    """The versions, the latest of each, and the catalogue both faces' listings read."""

    def latest_workflow(self, tenant: str, workflow_id: str) -> tuple[int, dict[str, Any]] | None: ...

    def put_workflow_version(
        self,
        tenant: str,
        workflow_id: str,
        version: int,
        definition: dict[str, Any],
        created_at: str,
        created_by: str,
        versions_limit: int,
        catalogue: dict[str, Any] | None = None,
        modulex_record: dict[str, Any] | None = None,
    ) -> bool: ...

    def catalogue_page(
        self, tenant: str, offset: int, limit: int, keep: Callable[[dict[str, Any]], bool] | None = None
    ) -> tuple[list[tuple[str, dict[str, Any]]], int]: ...

    def catalogue_first(self, tenant: str, most: int) -> list[tuple[str, dict[str, Any]]]: ...


class KeyLookup(Protocol):
    def get_api_key(self, key_id: str) -> dict[str, Any] | None: ...


class KeyRecords(KeyLookup, Protocol):
    """API keys (hashed secrets), their listing, and the console sessions signed in with them."""

    def put_api_key(
        self,
        key_id: str,
        record: dict[str, Any],
        answered: AnsweredRecord | None = None,
        audit: AuditDraft | None = None,
    ) -> None: ...

    def list_api_keys(
        self, tenant: str, limit: int, cursor: str | None
    ) -> tuple[list[tuple[str, dict[str, Any]]], str | None]: ...

    def revoke_api_key(
        self, tenant: str, key_id: str, at: str, audit: AuditDraft | None = None
    ) -> dict[str, Any] | None: ...

    def open_console_session(self, tenant: str, session_id: str, key_id: str, ends_at: int) -> None: ...

    def console_session_open(self, tenant: str, session_id: str, key_id: str) -> bool: ...

    def end_console_session(self, tenant: str, session_id: str) -> None: ...


class Transactions(Protocol):
    """Items written with the audit entry that records them, all or nothing."""

    def transact(self, items: list[tuple[str, dict[str, Any]]], audit: AuditDraft) -> None: ...


class TenantRecords(Protocol):
    """The tenant's settings item and its credential grants."""

    def get_settings(self, tenant: str) -> dict[str, Any] | None: ...

    def read_settings(self, tenant: str, *, consistent: bool = False) -> SettingsRead: ...

    def get_grant(self, tenant: str, provider: str) -> frozenset[str] | None: ...


class EventRecords(Protocol):
    """External events kept by correlation, and the interrupts waiting on one."""

    def put_event(self, tenant: str, hash_: str, record: dict[str, Any], expires_at: int) -> str: ...

    def waiters(self, tenant: str, hash_: str) -> list[dict[str, str]]: ...

    def unconsumed_events(
        self, tenant: str, hash_: str, now_epoch: float, taken_by: str | None = None
    ) -> list[tuple[str, dict[str, Any]]]: ...

    def claim_event(self, tenant: str, hash_: str, sk: str, interrupt_id: str) -> bool: ...

    def release_event(self, tenant: str, hash_: str, sk: str, interrupt_id: str) -> None: ...


class DirectoryRecords(Protocol):
    """The tenant's principal directory: entries, group and role members, out-of-office delegations."""

    def get(self, tenant: str, principal_id: str) -> dict[str, Any] | None: ...

    def get_many(self, tenant: str, principal_ids: list[str]) -> dict[str, dict[str, Any]]: ...

    def put(
        self,
        tenant: str,
        principal_id: str,
        entry: dict[str, Any],
        at: str,
        by: str,
        limit: int,
        max_delegators: int = ...,
    ) -> tuple[bool, dict[str, Any]]: ...

    def delete(self, tenant: str, principal_id: str) -> dict[str, Any] | None: ...

    def members(self, tenant: str, kind: str, name: str, most: int) -> list[str]: ...

    def delegations(self, tenant: str, delegate: str, most: int) -> list[dict[str, Any]]: ...

    def by_slack_user(self, tenant: str, slack_user_id: str) -> str | None: ...


class RequestCounters(Protocol):
    """The tenant's request window and usage counters."""

    def count_request(self, tenant: str, window: Any, limit: int, requests: int = 1, windows: int = 1) -> int | None: ...

    def usage(self, tenant: str) -> dict[str, int]: ...


class DeliveryAttempts(Protocol):
    def attempts(self, run_id: str, notice_id: str | None = None) -> list[dict[str, Any]]: ...


class WebhookRecords(Protocol):
    """Webhook subscriptions and their dead letters."""

    def of_tenant(self, tenant: str, consistent: bool = False) -> list[dict[str, Any]]: ...

    def put(self, record: dict[str, Any], secret_version: str, limit: int) -> None: ...

    def get(self, webhook_id: str) -> dict[str, Any] | None: ...

    def move_secret_version(self, webhook_id: str, version: str, expected: str | None) -> bool: ...

    def delete(self, webhook_id: str) -> dict[str, Any] | None: ...

    def dead_letters(
        self, webhook_id: str, limit: int, cursor: str | None, now_iso: str
    ) -> tuple[list[dict[str, Any]], str | None]: ...


class SubscriptionSecrets(Protocol):
    """One secret per webhook subscription (its current signing secret and the one it replaced)."""

    def name(self, webhook_id: str) -> str: ...

    def name_of(self, subscription: Any) -> str: ...

    def create(self, name: str, value: dict[str, Any]) -> str: ...

    def read(self, name: str, version: str | None = None) -> dict[str, Any] | None: ...

    def replace(self, name: str, value: dict[str, Any]) -> str: ...

    def delete(self, name: str) -> None: ...


class TaskRecords(Protocol):
    """Task items and their queues' ready entries."""

    def create(
        self,
        task_id: str,
        run_id: str,
        node_id: str,
        visit: int,
        request: dict[str, Any],
        now: float,
        expires: int | None,
    ) -> bool: ...

    def ready(self, tenant: str, queue: str, now: float) -> list[ReadyEntry]: ...

    def drop(self, entry: ReadyEntry) -> None: ...

    def get(self, task_id: str) -> Task | None: ...

    def claim(self, entry: ReadyEntry, nonce: str, lease_until: float, deadline: float, check_at: float) -> bool: ...

    def heartbeat(
        self, task_id: str, claim: Claim, lease_until: float, check_at: float | None, previous_check_at: float = 0
    ) -> bool: ...

    def settle(
        self, task_id: str, claim: Claim, status: str, outcome: dict[str, Any], lapsed_by: float = 0
    ) -> bool: ...

    def requeue(self, task: Task, claim: Claim, not_before: float, lapsed_by: float = 0) -> bool: ...

    def cancel(self, task_id: str) -> bool: ...

    def retire(self, task_id: str) -> None: ...


class EffectLedger(Protocol):
    def ledger(self, run_id: str) -> list[dict[str, Any]]: ...


class FailedEffects(Protocol):
    """Reopens the failed effect record of a run's action, so its next attempt calls again (app/replay.py)."""

    def __call__(self, run_id: str, node_id: str, effect_id: str, keying: str, now: datetime) -> Any: ...


class RunArchive(Protocol):
    """What a run's export reads beside its head and events: every interrupt it raised, and when it expires."""

    def interrupts(self, run_id: str) -> list[dict[str, Any]]: ...

    def expires_at(self, run_id: str) -> int | None: ...


class NotificationLog(Protocol):
    def of_run(self, run_id: str) -> list[dict[str, Any]]: ...


class AuditChains(Protocol):
    """The tenant's audit chains: heads, entries, checkpoints, and the chains a checkpoint is pending for."""

    def head(self, tenant: str, chain: int) -> Head: ...

    def heads(self, tenant: str, chains: list[int] | None = None, consistent: bool = True) -> dict[int, Head]: ...

    def entries(self, tenant: str, chain: int, first: int, last: int) -> Iterator[tuple[int, dict[str, Any]]]: ...

    def newest(self, tenant: str, chain: int, limit: int, before: int) -> tuple[list[dict[str, Any]], bool]: ...

    def listed(self, tenant: str, chain: int, head: Head, limit: int, before: int | None = None) -> Listed: ...

    def checkpoints(self, tenant: str, chain: int, first: int, last: int) -> list[dict[str, Any]]: ...

    def checkpoint_before(self, tenant: str, chain: int, at: int) -> int: ...

    def put_checkpoint(
        self, tenant: str, chain: int, head: Head, checkpoint: dict[str, Any], pending_since: float | None, now_epoch: float
    ) -> bool: ...

    def settle(self, tenant: str, chain: int, head: Head) -> bool: ...

    def tails(self, tenant: str, heads: dict[int, Head], consistent: bool = True) -> dict[int, Head]: ...

    def caught_up(self, tenant: str, chain: int, head: Head) -> Head | None: ...

    def pending_chains(self) -> Iterator[tuple[str, int]]: ...

    def append_drafts(self, tenant: str, chain: int, placed: list[tuple[AuditDraft, str]], now_epoch: float) -> Head | None: ...


class Anchors(Protocol):
    """Where each tenant's signed audit anchor is published and read back (interlude.adapters.audit_anchor)."""

    def publish(self, tenant: str, published: bytes) -> None: ...

    def read(self, tenant: str) -> bytes | None: ...


# The checkpoint signing key (an Ed25519 private key), or None where the process has none; and the deployment's
# anchors, or None where it keeps none. Read when first needed: only a checkpoint, a verification or discovery does.
SigningKeySource = Callable[[], Any]
AnchorsSource = Callable[[], "Anchors | None"]

R = TypeVar("R")
# Runs each of a list of jobs, side by side or not, and answers their results in the same order (dispatch's runs, the
# audit listing's chains: adapters/batch.side_by_side).
Concurrently = Callable[[Callable[[T], R], list[T]], list[R]]


# -- the other services' operations ------------------------------------------------------------------------------


class DefinitionSource(Protocol):
    """Workflow versions as the engine runs them (immutable: kept for the process's life)."""

    def workflow(self, tenant: str, workflow_id: str, version: int) -> WorkflowDefinition: ...


class RetentionRestamps(Protocol):
    """A tenant's re-stamp job (app/retention.Restamp): what starts it with a change of retentionDays, its progress."""

    def starting(self, tenant: str, days: int, generation: str) -> Any:
        """The TransactWriteItem that starts it, written with the settings change."""
        ...

    def started(self, tenant: str, generation: str) -> None:
        """Its first turn queued, once the change is written (where no queue is at hand, the daily sweep takes it)."""
        ...

    def progress(self, tenant: str) -> dict[str, Any] | None: ...


class TenantLimits(Protocol):
    """The limits in force for a tenant (its own over the host's defaults), briefly cached."""

    def limits(self, tenant: str) -> Limits: ...

    def forget(self, tenant: str) -> None: ...

    def usage(self, tenant: str) -> dict[str, Any]: ...


class SearchKeyJobs(Protocol):
    """The job that indexes a tenant's older runs under metadata keys it declares searchable (app/search_keys.py)."""

    def declaration(
        self, tenant: str, previous: Iterable[str], declared: Iterable[str], at: str
    ) -> list[tuple[str, dict[str, Any]]]: ...

    def start(self, tenant: str) -> None: ...

    def progress(self, tenant: str) -> dict[str, Any] | None: ...


class RunLedger(Protocol):
    """A run read with its passed deadlines applied, and a transition committed to it (app/runs.py)."""

    def load_run(self, principal_tenant: str, run_id: str) -> tuple[RunState, int]: ...

    def apply_deadlines(self, state: RunState, version: int) -> tuple[RunState, int]: ...

    def commit_or_fail(
        self,
        build: Callable[..., Transition],
        version: int | None,
        now: datetime,
        node_id: str | None = None,
        keyed: KeyedWrite | None = None,
        result: Callable[[Transition], Any] = ...,
        open_runs_limit: int | None = None,
        audit: AuditDraft | None = None,
    ) -> Transition: ...

    def commit_answered(
        self,
        transition: Transition,
        version: int | None,
        now: datetime,
        keyed: KeyedWrite | None = None,
        result: Callable[[Transition], Any] = ...,
        open_runs_limit: int | None = None,
        audit: AuditDraft | None = None,
    ) -> Transition: ...


class RunCancels(Protocol):
    def cancel_run(
        self,
        principal: auth.Principal,
        run_id: str,
        request: CancelRunRequest,
        keyed: KeyedWrite | None = None,
        surface: str = "api",
    ) -> RunState: ...


class RunControl(RunCancels, Protocol):
    """A run created and cancelled (app/lifecycle.py)."""

    def create_run(
        self,
        principal: auth.Principal,
        request: CreateRunRequest,
        keyed: KeyedWrite | None = None,
        written_numbers: Mapping[str, str] | None = None,
    ) -> RunState: ...


class VersionWrites(Protocol):
    """A checked definition stored as a version of a workflow, within the tenant's quotas (app/workflows.py)."""

    def store_workflow_version(
        self,
        principal: auth.Principal,
        workflow_id: str,
        version: int,
        definition: WorkflowDefinition,
        catalogue: dict[str, Any] | None = None,
        modulex_record: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None: ...


class Gates(Protocol):
    """The interrupt a gate holds now, and the node a caller names as the engine runs it (app/decisions.py)."""

    def open_interrupt(self, state: RunState, node_id: str) -> OpenInterrupt: ...

    def node_named(self, state: RunState, node_id: str) -> str: ...


class Decider(Gates, Protocol):
    """A resume value decided on a gate, as a resolver (app/decisions.py)."""

    def resolve(
        self,
        state: RunState,
        version: int,
        node_id: str,
        resume_value: Any,
        resolver: Resolver,
        interrupt_id: str | None = None,
        keyed: KeyedWrite | None = None,
        written_numbers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]: ...


class SlackChannel(Protocol):
    """The tenant's Slack app as the interactivity endpoint meets it (adapters/notify/slack_interactivity.py): its
    signing secret, the post that answers a click through the click's response_url, and a modal opened with its bot
    token (egress-checked)."""

    def signing_secret(self, tenant: str) -> str | None: ...

    def bot_token(self, tenant: str) -> str | None: ...

    def reply(self, response_url: str, message: dict[str, Any]) -> None: ...

    def open_view(self, tenant: str, trigger_id: str, view: dict[str, Any]) -> bool: ...


class WaitingAction(NamedTuple):
    pending: PendingAction
    # The run's items' provisional expiry while it is not near (rules/run_search.open_expiry), else None: what an item
    # written for the action now is kept at least until, so that a run ending within its items' margin has no retention
    # write for it (ADRs 0133, 0142).
    items_expire: int | None


class ActionOutcomes(Protocol):
    """Which action a node's visit waits on, and its outcome landed on the run (app/actions.py)."""

    def pending_action(self, run_id: str, node_id: str, visit: int) -> PendingAction | None: ...

    def waiting_action(self, run_id: str, node_id: str, visit: int) -> WaitingAction | None: ...

    def finish_action(self, run_id: str, node_id: str, visit: int, outcome: dict[str, Any]) -> int: ...


class Subscriptions(Protocol):
    """A webhook subscription of the principal's tenant (app/webhooks.py)."""

    def subscription(self, principal: auth.Principal, webhook_id: str) -> dict[str, Any]: ...


class AuditAppends(Protocol):
    def append(self, entry: AuditDraft) -> None: ...


# The callbackUrl and webhook URL guards' host-name resolver (None: getaddrinfo); tests inject a fixed table.
HostResolver = Callable[[str, int], list[str]]


class LiveRecords(Protocol):
    """The open WebSocket connections and the runs they follow (store/live.py)."""

    def open_connection(self, tenant: str, connection_id: str, key_id: str, connected_at: str, expires: int) -> None: ...

    def live_connection(self, connection_id: str) -> LiveConnection | None: ...

    def close_connection(self, connection_id: str) -> None: ...

    def open_connections(self, tenant: str, now: int) -> int: ...

    def recorded_connections(self, connection_ids: list[str], now: int) -> set[str]: ...

    def follow(
        self, connection: LiveConnection, run_id: str, runs_limit: int, followers_limit: int, expires: int
    ) -> str | None: ...

    def unfollow(self, connection_id: str, run_id: str) -> None: ...

    def followers(self, run_id: str) -> list[Follower]: ...

    def drop_follower(self, run_id: str, connection_id: str) -> None: ...


class Connections(Protocol):
    """Sends to, reads and closes WebSocket connections (API Gateway's management API: adapters/live_connections.py)."""

    def send(self, connection_id: str, data: bytes) -> bool:
        """False when the connection is gone (API Gateway's GoneException)."""
        ...

    def is_open(self, connection_id: str) -> bool:
        """False when the connection is gone (its client left without a $disconnect reaching us, or it closed)."""
        ...

    def close(self, connection_id: str) -> bool:
        """False when it was not closed: gone already, or the close refused (logged)."""
        ...
