"""The composition root: where the stores, the adapters and the application services are joined, and the faces' node
types plugged into the engine.

`Services` builds each application service from the stores, adapters and other services its constructor declares
(interlude/app/ports.py), at its first use: a function builds only what its invocations ask for, so each service's
module loads where it is first needed, not at a cold start (an edge's decision: the services import what they use at
the top). The entry points ask it for the service they call: functions/*/handler.py, the API's route modules, the
CLI's in-process commands, the local stack, the test and bench harnesses. No service is handed it.
"""

from __future__ import annotations

from functools import cache, partial
from typing import TYPE_CHECKING, Any

from interlude import wiring
from interlude.config import DEFAULT_STEP_BUDGET, settings
from interlude.domain import clock as clock_
from interlude.domain.built_once import built_once

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from datetime import datetime

    from interlude.adapters.notify.outbox import NotificationOutbox
    from interlude.adapters.scheduler.outbox import DeadlineSchedules
    from interlude.adapters.subscription_secrets import SubscriptionSecrets
    from interlude.app.actions import Actions, RunEffects
    from interlude.app.audit import AuditTrail
    from interlude.app.claims import GateClaims
    from interlude.app.decisions import Decisions
    from interlude.app.definitions import Definitions
    from interlude.app.delegation import Delegation
    from interlude.app.deliveries import RunDeliveries
    from interlude.app.directory import Directory
    from interlude.app.dispatch import HeldRuns, OutboxHandler
    from interlude.app.external_events import ExternalEvents
    from interlude.app.forks import Forks
    from interlude.app.inbox import Inbox
    from interlude.app.keys import Keys
    from interlude.app.lifecycle import RunLifecycle
    from interlude.app.limits import TenantLimiter
    from interlude.app.live import LiveFollowing
    from interlude.app.notifications import Notifications
    from interlude.app.ports import (
        AnchorsSource,
        Concurrently,
        Connections,
        HostResolver,
        SigningKeySource,
        SlackChannel,
    )
    from interlude.app.replay import Replay
    from interlude.app.retention import Restamp, RunRetention
    from interlude.app.run_export import RunExports
    from interlude.app.run_listing import RunListing
    from interlude.app.runs import Runs
    from interlude.app.search_keys import SearchKeys
    from interlude.app.slack import SlackInteractions
    from interlude.app.subworkflows import SubWorkflows
    from interlude.app.tasks import Tasks
    from interlude.app.tenants import Tenants
    from interlude.app.tokens import RingSource, TokenSurface
    from interlude.app.webhooks import Webhooks
    from interlude.app.workflows import Workflows
    from interlude.domain.clock import Clock
    from interlude.domain.models.run import RunState
    from interlude.engine.nodetypes import NodeType
    from interlude.faces.modulex.operations import ModulexFace
    from interlude.faces.modulex.workflows import ModulexWorkflows
    from interlude.store.deliveries import DeliveryStore
    from interlude.store.directory import DirectoryStore
    from interlude.store.effects import EffectStore
    from interlude.store.facade import Store
    from interlude.store.idempotency import IdempotencyStore
    from interlude.store.inbox import InboxIndex
    from interlude.store.interactions import InteractionStore
    from interlude.store.limits import LimitStore
    from interlude.store.notifications import NotificationStore
    from interlude.store.tasks import TaskStore
    from interlude.store.transactions import TransactionalTable
    from interlude.store.webhooks import WebhookStore


class Services:
    """The application services over one table (and the stores beside it, on its client), each built at first use."""

    def __init__(
        self,
        store: Store,
        clock: Clock = clock_.now,
        step_budget: int = DEFAULT_STEP_BUDGET,
        callback_resolver: HostResolver | None = None,
        audit_key: SigningKeySource | None = None,
        anchors: AnchorsSource | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.step_budget = step_budget
        # The callbackUrl and webhook URL guards' host-name resolver (None: getaddrinfo); tests inject a fixed table.
        self.callback_resolver = callback_resolver
        # The audit checkpoint key and the anchors' bucket: the deployment's (Secrets Manager, S3) unless given.
        self.audit_key = audit_key or _audit_signing_key
        self.anchors = anchors or _audit_anchors
        # The tenants' Slack apps (their signing secrets, cached): made at the first click.
        self._slack_app: SlackChannel | None = None
        # Every audit entry appended through this store checkpoints its chain when one is due.
        store.after_audit = lambda tenant, chain, head: self.audit.checkpoint_if_due(tenant, chain, head)

    # -- the stores beside the run table's ---------------------------------------------------------------------

    @built_once
    def interactions(self) -> InteractionStore:
        from interlude.store.interactions import InteractionStore

        return InteractionStore(self.store.table, self.store.client)

    @built_once
    def directory_records(self) -> DirectoryStore:
        from interlude.store.directory import DirectoryStore

        return DirectoryStore(self.store)

    @built_once
    def request_counters(self) -> LimitStore:
        from interlude.store.limits import LimitStore

        return LimitStore(self.store.table, self.store.client)

    @built_once
    def idempotency(self) -> IdempotencyStore:
        from interlude.store.idempotency import IdempotencyStore

        return IdempotencyStore(self.store.table, self.store.client)

    @built_once
    def inbox_index(self) -> InboxIndex:
        from interlude.store.inbox import InboxIndex

        return InboxIndex(self.store.table, self.store.client, self.store.entries_table)

    @built_once
    def delivery_records(self) -> DeliveryStore:
        from interlude.store.deliveries import DeliveryStore

        return DeliveryStore(self.store)

    @built_once
    def webhook_records(self) -> WebhookStore:
        from interlude.store.webhooks import WebhookStore

        return WebhookStore(self.store.table, self.store.client)

    @built_once
    def webhook_secrets(self) -> SubscriptionSecrets:
        from interlude.adapters.subscription_secrets import subscription_secrets

        return subscription_secrets()

    @built_once
    def task_records(self) -> TaskStore:
        from interlude.store.tasks import TaskStore

        return TaskStore(self.store)

    @built_once
    def effect_records(self) -> EffectStore:
        from interlude.store.effects import EffectStore

        return EffectStore(self.store)

    @built_once
    def notification_records(self) -> NotificationStore:
        from interlude.store.notifications import NotificationStore

        return NotificationStore(self.store)

    # -- the application services ------------------------------------------------------------------------------

    @built_once
    def audit(self) -> AuditTrail:
        from interlude.app.audit import AuditTrail

        return AuditTrail(self.store.audit_log, self.store, self.audit_key, self.anchors, _chains_side_by_side)

    @built_once
    def keys(self) -> Keys:
        from interlude.app.keys import Keys

        return Keys(self.store, self.clock, settings().key_cache_seconds)

    @built_once
    def limiter(self) -> TenantLimiter:
        from interlude.app.limits import TenantLimiter

        return TenantLimiter(self.interactions, self.request_counters, self.clock)

    @built_once
    def definitions(self) -> Definitions:
        from interlude.app.definitions import Definitions

        return Definitions(self.store)

    @built_once
    def workflows(self) -> Workflows:
        from interlude.app.workflows import Workflows

        return Workflows(self.store, self.limiter, self.clock)

    @built_once
    def tenants(self) -> Tenants:
        from interlude.adapters.retention_restamps import RestampJobs
        from interlude.app.tenants import Tenants
        from interlude.store.retention import RetentionStore

        restamps = RestampJobs(RetentionStore(self.store.table, self.store.entries_table, self.store.client))
        return Tenants(self.interactions, self.store, self.limiter, self.clock, self.search_keys, restamps)

    @built_once
    def search_keys(self) -> SearchKeys:
        from interlude.app.limits import LIMITS_CACHE_SECONDS
        from interlude.app.search_keys import SearchKeys
        from interlude.app.tenant_facts import tenant_settings
        from interlude.store.search_keys import SearchKeysStore

        def queue(tenant: str, delay_s: int) -> None:
            from interlude.adapters.migration_turns import queue_search_keys

            queue_search_keys(tenant, delay_s)

        def declared(tenant: str) -> list[str]:
            return tenant_settings(self.interactions, tenant).searchableMetadata

        store = SearchKeysStore(self.store.table, self.store.entries_table, self.store.client)
        return SearchKeys(store, declared, self.clock, queue, LIMITS_CACHE_SECONDS)

    @built_once
    def directory(self) -> Directory:
        from interlude.app.directory import Directory

        return Directory(self.directory_records, self.clock)

    @built_once
    def webhooks(self) -> Webhooks:
        from interlude.app.webhooks import Webhooks

        return Webhooks(self.webhook_records, self.webhook_secrets, self.clock, self.callback_resolver)

    @built_once
    def runs(self) -> Runs:
        from interlude.app.runs import Runs

        # The limiter (and the tenant settings' model) load with the first run that ends, not with the first record.
        return Runs(self.store, self.definitions, self.clock, self.step_budget, lambda tenant: self.limiter.retention_days(tenant))

    @built_once
    def lifecycle(self) -> RunLifecycle:
        from interlude.app.lifecycle import RunLifecycle

        return RunLifecycle(
            self.store,
            self.store,
            self.runs,
            self.definitions,
            self.limiter,
            self.clock,
            self.step_budget,
            self.callback_resolver,
        )

    @built_once
    def forks(self) -> Forks:
        from interlude.app.forks import Forks

        # The replay service (its stores and outbox) loads only when a redrive reopens a failed business effect.
        def reopen_failed_effect(run_id: str, node_id: str, effect_id: str, keying: str, now: datetime) -> Any:
            return self.replay.reopen_failed_effect(run_id, node_id, effect_id, keying, now)

        return Forks(self.store, self.runs, self.definitions, self.limiter, reopen_failed_effect, self.clock, self.step_budget)

    @built_once
    def decisions(self) -> Decisions:
        from interlude.app.decisions import Decisions

        return Decisions(
            self.store,
            self.runs,
            self.definitions,
            self.interactions,
            self.directory_records,
            self.clock,
            self.step_budget,
        )

    @built_once
    def delegation(self) -> Delegation:
        from interlude.app.delegation import Delegation

        return Delegation(
            self.runs, self.decisions, self.definitions, self.interactions, self.directory_records, self.clock
        )

    @built_once
    def claims(self) -> GateClaims:
        from interlude.app.claims import GateClaims

        return GateClaims(self.runs, self.decisions, self.definitions, self.directory_records, self.clock)

    @built_once
    def inbox(self) -> Inbox:
        from interlude.app.inbox import Inbox
        from interlude.store.inbox import run_open_interrupts

        return Inbox(
            self.runs,
            self.inbox_index,
            partial(run_open_interrupts, self.store.client, self.store.table),
            self.directory_records,
            self.interactions,
            self.clock,
        )

    @built_once
    def external_events(self) -> ExternalEvents:
        from interlude.app.external_events import ExternalEvents

        return ExternalEvents(self.interactions, self.store, self.decisions, self.interactions, self.clock)

    @built_once
    def actions(self) -> Actions:
        from interlude.app.actions import Actions

        return Actions(self.store, self.runs, self.definitions, self.clock, self.step_budget)

    @built_once
    def run_effects(self) -> RunEffects:
        from interlude.app.actions import RunEffects

        return RunEffects(self.runs, self.effect_records)

    @built_once
    def tasks(self) -> Tasks:
        from interlude.app.tasks import Tasks

        # Runs read through held_runs: the outbox hands it the head its batch read (elsewhere it reads the store).
        return Tasks(self.task_records, self.held_runs, self.runs, self.actions, self.clock)

    @built_once
    def sub_workflows(self) -> SubWorkflows:
        from interlude.app.subworkflows import SubWorkflows

        return SubWorkflows(
            self.held_runs,  # the outbox hands it the head its batch read (elsewhere it reads the store)
            self.store,
            self.runs,
            self.definitions,
            self.limiter,
            self.actions,
            self.clock,
            self.step_budget,
        )

    @built_once
    def notifications(self) -> Notifications:
        from interlude.app.notifications import Notifications

        return Notifications(self.runs, self.notification_records)

    @built_once
    def replay(self) -> Replay:
        from interlude.adapters.replay_outbox import ReplayOutbox
        from interlude.app.replay import Replay

        return Replay(
            self.store,
            self.runs,
            self.definitions,
            self.webhooks,
            self.webhook_records,
            self.limiter,
            self.tenants.effect_retention_days,
            ReplayOutbox(self.store, self.clock),
            self.clock,
            self.step_budget,
        )

    @built_once
    def run_listing(self) -> RunListing:
        from interlude.app.run_listing import RunListing

        return RunListing(self.store, self.runs, self.lifecycle, self.limiter)

    @built_once
    def run_exports(self) -> RunExports:
        from interlude.app.run_export import RunExports

        return RunExports(self.runs, self.store, self.store, self.effect_records, self.clock)

    @built_once
    def restamp(self) -> Restamp:
        from interlude.app.retention import Restamp
        from interlude.store.retention import RetentionStore

        store = RetentionStore(self.store.table, self.store.entries_table, self.store.client)
        return Restamp(store, self.retention, self.clock, wiring.RUN_INDEX.shards)

    @built_once
    def retention(self) -> RunRetention:
        from interlude.adapters.migration_turns import queue_run_retention
        from interlude.app.retention import RunRetention
        from interlude.store.retention import RetentionStore

        return RunRetention(
            RetentionStore(self.store.table, self.store.entries_table, self.store.client),
            self.limiter.retention_days,
            self.clock,
            lambda tenant: self.limiter.limits(tenant).searchable_metadata,
            queue_run_retention,
            # dispatch's turn (on_events), decided on the head it read with the record's batch where it can be
            lambda run_id: self.held_runs.held_retained(run_id),
        )

    @built_once
    def deliveries(self) -> RunDeliveries:
        from interlude.app.deliveries import RunDeliveries

        return RunDeliveries(self.runs, self.delivery_records)

    def token_surface(self, ring: RingSource, admit: Callable[[str], None] = lambda tenant: None) -> TokenSurface:
        """The signed-token surfaces over `ring` (the deployment's key ring: api/tokens.py); `admit(tenant)` refuses
        a token of a tenant that may not act now."""
        from interlude.app.tokens import TokenSurface

        return TokenSurface(
            self.runs,
            self.decisions,
            self.directory_records,
            self.store,
            self.interactions,
            self.audit,
            self.clock,
            ring,
            admit=admit,
        )

    def slack_interactions(self, admit: Callable[[str], None] = lambda tenant: None) -> SlackInteractions:
        """Clicks in Slack messages (issue 28 item 6); `admit(tenant)` refuses a tenant that may not act now."""
        from interlude.adapters.notify.slack_interactivity import slack_app
        from interlude.app.slack import SlackInteractions

        channel = self._slack_app or slack_app(self.callback_resolver)
        self._slack_app = channel
        return SlackInteractions(
            self.runs,
            self.decisions,
            self.directory_records,
            channel,
            self.clock,
            admit,
            self.limiter.admit_tenant,
            self.definitions,
        )

    # -- the ModuleX face ---------------------------------------------------------------------------------------

    @built_once
    def modulex(self) -> ModulexFace:
        from interlude.faces.modulex.operations import ModulexFace

        return ModulexFace(self.store, self.runs, self.lifecycle, self.decisions, self.workflows, self.definitions)

    @built_once
    def modulex_workflows(self) -> ModulexWorkflows:
        from interlude.faces.modulex.workflows import ModulexWorkflows

        return ModulexWorkflows(self.store, self.workflows, self.clock)

    # -- following runs live (the WebSocket API: api/live.py, and the outbox) ----------------------------------

    @built_once
    def live(self) -> LiveFollowing:
        from interlude.app.live import LiveFollowing, LiveLimits
        from interlude.store.live import LiveStore

        cfg = settings()
        limits = LiveLimits(cfg.live_connections_per_tenant, cfg.live_followers_per_run)
        records = LiveStore(self.store.table, self.store.entries_table, self.store.client)
        return LiveFollowing(
            records,
            self.store,
            lambda: self.live_connections,
            self.clock,
            limits,
            self.keys.connected_principal,
            # dispatch's batch read them with its runs' heads (OutboxRecords(followers=True)); built there alone.
            lambda run_id: self.held_runs.held_followers(run_id),
        )

    @built_once
    def live_connections(self) -> Connections:
        """The WebSocket API's connections, through its management endpoint (made at the first send)."""
        from interlude.adapters.live_connections import ApiGatewayConnections

        return ApiGatewayConnections(settings().live_endpoint)

    # -- the dispatch function's outbox -------------------------------------------------------------------------

    @built_once
    def deadline_schedules(self) -> DeadlineSchedules:
        from interlude.adapters.scheduler.outbox import DeadlineSchedules
        from interlude.store.due_index import DueIndex

        return DeadlineSchedules(
            self.held_runs, self.runs, self.definitions, self.clock, DueIndex(self.store.table, self.store.client)
        )

    @built_once
    def notification_outbox(self) -> NotificationOutbox:
        from interlude.adapters.notify.outbox import NotificationOutbox

        return NotificationOutbox(
            self.held_runs,
            self.directory_records,
            # the limiter (and its rules) loads with the first record that asks for the tenant's settings
            lambda tenant: self.limiter.settings(tenant),
            self.definitions,
            self.clock,
            self.notification_records,
        )

    @built_once
    def held_runs(self) -> HeldRuns:
        """What the outbox handlers read runs through: a dispatched run's head as read for its batch."""
        from interlude.app.dispatch import HeldRuns

        return HeldRuns(self.store)

    @built_once
    def outbox(self) -> tuple[OutboxHandler, ...]:
        """The outbox handlers, in order. Features add their handler here.

        Built with the first record: only the dispatch function runs them, so the API and timeouts functions' cold
        starts load no delivery, scheduler or metrics adapter. The handlers that move runs (sub-workflows, tasks, kept
        external events) are built with the first record that concerns them (engine/events.py)."""
        from interlude.adapters import metrics
        from interlude.adapters.actions.outbox import queue_actions
        from interlude.adapters.delivery.outbox import callback_notices
        from interlude.adapters.delivery.subscription_outbox import webhook_deliveries
        from interlude.adapters.tenant_usage import on_events as tenant_usage
        from interlude.engine import events as concerns

        return (
            self.deadline_schedules.on_events,
            partial(callback_notices, self.held_runs, self.keys, self.clock),
            _when(concerns.raised_external_events, lambda: self.external_events.resolve_kept_events),
            partial(metrics.on_events, self.held_runs),
            queue_actions,
            partial(webhook_deliveries, self.webhook_records, self.held_runs),
            self.notification_outbox.on_events,
            _when(concerns.requests_child_or_ends_run, lambda: self.sub_workflows.on_events),
            _when(concerns.requests_or_cancels_task, lambda: self.tasks.on_events),
            _when(concerns.ends_or_reruns_run, lambda: self.retention.on_events),
            # Where the deployment has a WebSocket API: each batch to the run's live followers (none: no read).
            *((self.live.on_events,) if settings().live_endpoint else ()),
            # Last: a handler above that fails has its record delivered again, which emits its usage metric again.
            tenant_usage,
        )

    def handle_outbox_batch(
        self,
        batch: Sequence[tuple[str, dict[str, Any]]],
        heads: dict[str, tuple[RunState, int]],
        concurrently: Concurrently[Any, Any],
    ) -> dict[str, BaseException]:
        """A batch of the table stream's event-log items through the outbox (app/dispatch.py): (record id, stream
        record) pairs with their runs' heads as read for the batch; answers the records that failed."""
        from interlude.adapters import metrics
        from interlude.app.dispatch import handle_batch

        return handle_batch(
            batch,
            heads,
            self.store,
            self.outbox,
            self.held_runs,
            self._advance,
            concurrently,
            self.audit.append_drafts,
            self.clock().timestamp(),
            metrics.orphan_batch_dropped,
        )

    def _advance(self, run_id: str, got: tuple[RunState, int]) -> int:
        # The engine's run rules load with the first run a record leaves runnable (a step budget reached).
        return self.lifecycle.advance_run(run_id, got)


def _when(concerns: Callable[[list[dict[str, Any]]], object], handler: Callable[[], OutboxHandler]) -> OutboxHandler:
    """An outbox handler built (its modules loaded) with the first record whose events it concerns."""

    def handle(run_id: str, events: list[dict[str, Any]]) -> None:
        if concerns(events):
            handler()(run_id, events)

    return handle


@cache
def services() -> Services:
    """The process's services over the configured table: what every Lambda entry point uses."""
    # The whole store loads here, with the first service asked for: the timeouts function's audit sweep loads none.
    from interlude.store.facade import Store

    cfg = settings()
    return Services(Store(cfg.table_name, cfg.entries_table_name), step_budget=cfg.step_budget)


def audit_trail(table: TransactionalTable) -> AuditTrail:
    """The audit trail over `table`'s transactions alone, with the deployment's key and anchors: the timeouts
    function's checkpoint sweep, which reads no run (no run store loaded)."""
    from interlude.app.audit import AuditTrail

    trail = AuditTrail(table.audit_log, table, _audit_signing_key, _audit_anchors)
    table.after_audit = lambda tenant, chain, head: trail.checkpoint_if_due(tenant, chain, head)
    return trail


def compose() -> None:
    # The engine loads here, not with this module: the timeouts function's audit sweep imports the composition and
    # runs no workflow. The ModuleX node types load when a modulex.* typeId is first run or checked (an OpenWOP request
    # never loads the ModuleX face); the engine's own, at the first lookup of any typeId (engine/face_types.py: the
    # dispatch function's records look up none).
    from interlude.engine.face_types import register_lazily

    register_lazily("modulex.", _modulex_types)


def _modulex_types() -> Iterable[NodeType]:
    # Imported when a ModuleX node is first run or checked: an OpenWOP request never loads the ModuleX face.
    from interlude.faces.modulex.nodetypes import MODULEX_TYPES

    return MODULEX_TYPES


def _audit_signing_key() -> Any:
    # Imported on first use: only a checkpoint, a verification or discovery reads the key.
    from interlude.adapters.audit_key import load_signing_key

    return load_signing_key()


def _chains_side_by_side(job: Callable[[int], Any], chains: list[int]) -> list[Any]:
    # Imported on first use: only a listing of several chains runs threads.
    from interlude.adapters.batch import side_by_side

    return side_by_side(job, chains, wiring.AUDIT_LISTING_WORKERS)


def _audit_anchors() -> Any:
    # Imported on first use: only the checkpoint sweep and a verification read or write the anchors.
    from interlude.adapters.audit_anchor import configured_anchors

    return configured_anchors()
