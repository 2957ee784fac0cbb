"""What the entry points join together: the faces' node types into the engine, the adapters into dispatch.

The layers below import nothing above them, so this top-level module is where a face or an adapter is
plugged into the engine or the application services. Every entry point (functions/*/handler.py, the CLI, the
test and bench harnesses) calls `compose()` before running a workflow.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from interlude.app import audit

if TYPE_CHECKING:
    from collections.abc import Iterable

    from interlude.app import dispatch
    from interlude.app.service import Service
    from interlude.engine.nodetypes import NodeType


@cache
def outbox() -> tuple[dispatch.OutboxHandler, ...]:
    """The outbox handlers, declared once, in order. Features add their handler here.

    Imported on first use: only the dispatch function runs them, so the API and timeouts functions' cold starts
    load no delivery, scheduler or metrics adapter."""
    from interlude.adapters import metrics
    from interlude.adapters.actions.outbox import queue_actions
    from interlude.adapters.delivery.outbox import callback_notices
    from interlude.adapters.delivery.subscription_outbox import webhook_deliveries
    from interlude.adapters.notify import outbox as notifications
    from interlude.adapters.scheduler import outbox as deadline_schedules
    from interlude.adapters.tenant_usage import on_events as tenant_usage
    from interlude.app.external_events import resolve_kept_events
    from interlude.app.subworkflows import on_events as sub_workflows
    from interlude.app.tasks import on_events as task_queues

    return (
        deadline_schedules.on_events,
        callback_notices,
        resolve_kept_events,
        metrics.on_events,
        queue_actions,
        webhook_deliveries,
        notifications.on_events,
        sub_workflows,
        task_queues,
        # Last: a handler above that fails has its record delivered again, which would count its usage twice.
        tenant_usage,
    )


def compose() -> None:
    # The engine loads here, not with this module: the timeouts function's audit sweep imports the composition for
    # the signing key alone (compose_audit) and runs no workflow. The ModuleX node types load when a modulex.* typeId
    # is first run or checked (an OpenWOP request never loads the ModuleX face); the engine's own, at the first lookup
    # of any typeId (engine/face_types.py: the dispatch function's records look up none).
    from interlude.engine.face_types import register_lazily

    register_lazily("modulex.", _modulex_types)
    compose_audit()


def compose_audit() -> None:
    """What the audit trail needs joined (the checkpoint signing key, the anchors' bucket), for an entry point that
    runs no workflow."""
    audit.use_signing_key(_audit_signing_key)
    audit.use_anchors(_audit_anchors)


def _modulex_types() -> Iterable[NodeType]:
    # Imported when a ModuleX node is first run or checked: an OpenWOP request never loads the ModuleX face.
    from interlude.faces.modulex.nodetypes import MODULEX_TYPES

    return MODULEX_TYPES


def _audit_signing_key() -> Any:
    # Imported on first use: only a checkpoint, a verification or discovery reads the key.
    from interlude.adapters.audit_key import load_signing_key

    return load_signing_key()


def _audit_anchors() -> audit.Anchors | None:
    # Imported on first use: only the checkpoint sweep and a verification read or write the anchors.
    from interlude.adapters.audit_anchor import configured_anchors

    return configured_anchors()


def handle_stream_record(service: Service, record: dict[str, Any]) -> None:
    from interlude.app import dispatch

    dispatch.handle_record(service, record, outbox())
