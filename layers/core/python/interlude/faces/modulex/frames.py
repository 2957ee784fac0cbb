"""ModuleX run-stream frames, projected from the same RunEventDocs the OpenWOP stream sends.

Frames are data-only (`data: {...}` with the type inside the JSON), as ModuleX's SDKs parse them. Wrapped
types carry their fields under `data` (metadata, interrupt, resumed, done, cancelled); node frames are flat
and carry both spellings the SDKs read (`node`/`name`/`output` and the older `node_id`/`node_type`/`status`).
`error` is sent in both shapes the contract reports (flat `message`/`error_type`, and wrapped `data`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from interlude.domain.budgets import MAX_ANSWER_BYTES
from interlude.domain.ids import to_wire
from interlude.domain.models.run import WAITING_STATUSES, RunStatus
from interlude.faces.modulex import nodes
from interlude.faces.modulex.definition import META_KEY


@dataclass
class RunView:
    """What a projection needs to know about the run besides its events."""

    run_id: str  # the tenant-bound id; ModuleX sees its wire form (no slash)
    workflow_name: str
    workflow_version: str
    # engine node id -> {"id": ModuleX id, "type": ModuleX type, "name": display name}
    nodes: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def wire_id(self) -> str:
        return to_wire(self.run_id)

    def node(self, node_id: str) -> dict[str, str]:
        return self.nodes.get(node_id) or {"id": node_id, "type": "node", "name": node_id}

    def state_of(self, outputs: dict[str, Any]) -> dict[str, Any]:
        """Run outputs keyed the way ModuleX state is: by ModuleX node id."""
        return {self.node(k)["id"]: v for k, v in outputs.items() if not self.hidden(k)}

    def hidden(self, node_id: str) -> bool:
        """The nodes a translation adds (the start node, a failure route's pass-through) are not the author's."""
        return node_id not in self.nodes


def view_of(run_id: str, workflow_id: str, version: int, definition: Any) -> RunView:
    """A RunView from the run's workflow definition (an engine WorkflowDefinition)."""
    meta = (definition.metadata or {}).get(META_KEY)
    if meta:
        return RunView(run_id, meta.get("name") or workflow_id, str(meta.get("version") or version), meta["nodes"])
    info = {n.id: {"id": n.id, "type": n.typeId, "name": n.name or n.id} for n in definition.nodes}
    return RunView(run_id, definition.name or workflow_id, str(version), info)


ModulexStatus = Literal["pending", "running", "interrupted", "completed", "failed", "cancelled"]


def status_of(openwop_status: RunStatus) -> ModulexStatus:
    """ModuleX run status for an OpenWOP one."""
    if openwop_status in WAITING_STATUSES:
        return "interrupted"
    # Every OpenWOP status but the waiting ones is a ModuleX status of the same name.
    return cast(ModulexStatus, openwop_status)


def _unwrap(outputs: Any) -> Any:
    # The engine reports a non-object output as {"value": x}.
    if isinstance(outputs, dict) and set(outputs) == {"value"}:
        return outputs["value"]
    return outputs


def _interrupt_fields(payload: dict[str, Any]) -> dict[str, Any]:
    data = payload.get("data") or {}
    if payload.get("kind") == "custom" and data.get("customKind") == nodes.CUSTOM_KIND:
        inner = data.get("payload") or {}
        out = {"message": inner.get("message", ""), "data": inner.get("data") or {}}
        for key in ("resume_schema", "examples"):
            if key in inner:
                out[key] = inner[key]
        return out
    # An OpenWOP gate seen from the ModuleX face: its own words and its resume schema.
    message = data.get("title") or data.get("description") or ""
    if not message and data.get("questions"):
        message = "\n".join(q.get("question", "") for q in data["questions"])
    out = {"message": message, "data": data, "kind": payload.get("kind")}
    if payload.get("resumeSchema") is not None:
        out["resume_schema"] = payload["resumeSchema"]
    return out


def _ids(view: RunView) -> dict[str, str]:
    return {"run_id": view.wire_id, "thread_id": view.wire_id}


def _metadata(payload: dict[str, Any], view: RunView, at: str) -> dict[str, Any]:
    ids = _ids(view)
    meta = {
        **ids,
        "workflow_name": view.workflow_name,
        "workflow_version": view.workflow_version,
        "workflow_type": "workflow",
        "timestamp": at,
    }
    return {"type": "metadata", "data": meta, **ids, "workflow_type": "workflow", "timestamp": at}


def _done(payload: dict[str, Any], view: RunView, at: str) -> dict[str, Any]:
    data = {
        "message": "Workflow completed successfully",
        "final_state": view.state_of(payload.get("outputs") or {}),
        "total_execution_time_ms": payload.get("durationMs"),
    }
    return {"type": "done", "data": data, **_ids(view), "timestamp": at}


def _error(payload: dict[str, Any], view: RunView, at: str) -> dict[str, Any]:
    error = payload.get("error") or {}
    failed = payload.get("failedNodeId")
    details = {
        "error_type": error.get("code"),
        "error_message": error.get("message"),
        "node_id": view.node(failed)["id"] if failed else None,
    }
    return {
        "type": "error",
        "message": error.get("message"),
        "error_type": error.get("code"),
        "data": details,
        **_ids(view),
        "timestamp": at,
    }


def _cancelled(payload: dict[str, Any], view: RunView, at: str) -> dict[str, Any]:
    reason = payload.get("reason")
    return {"type": "cancelled", "data": {"reason": reason}, "reason": reason, **_ids(view), "timestamp": at}


def _node_frame(
    frame_type: str, status: str, node: dict[str, str], at: str, output: dict[str, Any] | None = None, **after: Any
) -> dict[str, Any]:
    """Node frames are flat, in both spellings; `output` (keyed by node id) only on updates."""
    frame: dict[str, Any] = {"type": frame_type, "node": node["id"], "name": node["name"], "timestamp": at}
    if output is not None:
        frame["output"] = output
    return {**frame, "node_id": node["id"], "node_type": node["type"], "status": status, **after}


def _node_started(payload: dict[str, Any], view: RunView, node: dict[str, str], at: str) -> dict[str, Any]:
    return _node_frame("node_started", "started", node, at)


def _node_update(payload: dict[str, Any], view: RunView, node: dict[str, str], at: str) -> dict[str, Any]:
    return _node_frame("node_update", "completed", node, at, output={node["id"]: _unwrap(payload.get("outputs"))})


def _node_error(payload: dict[str, Any], view: RunView, node: dict[str, str], at: str) -> dict[str, Any]:
    error = payload.get("error") or {}
    return _node_frame("node_error", "error", node, at, reason=error.get("code"), message=error.get("message"))


def _node_retry(payload: dict[str, Any], view: RunView, node: dict[str, str], at: str) -> dict[str, Any]:
    # ModuleX lists `node_retry` without documenting its shape: a node frame with the attempt that comes next.
    error = payload.get("error") or {}
    return _node_frame(
        "node_retry",
        "retrying",
        node,
        at,
        attempt=payload.get("attempt"),
        delay_ms=payload.get("delayMs"),
        reason=error.get("code"),
        message=error.get("message"),
    )


def _interrupt(payload: dict[str, Any], view: RunView, node: dict[str, str], at: str) -> dict[str, Any]:
    data = {"thread_id": view.wire_id, "node_id": node["id"], **_interrupt_fields(payload)}
    return {"type": "interrupt", "data": data, "timestamp": at}


def _resumed(payload: dict[str, Any], view: RunView, node: dict[str, str], at: str) -> dict[str, Any]:
    data = {**_ids(view), "node_id": node["id"], "resume_value": payload.get("resumeValue"), "timestamp": at}
    return {"type": "resumed", "data": data, "timestamp": at}


# The ModuleX frame of each RunEventDoc type that has one: run-level events, and events of a node.
_RUN_FRAMES: dict[str, Callable[[dict[str, Any], RunView, str], dict[str, Any]]] = {
    "run.started": _metadata,
    "run.completed": _done,
    "run.failed": _error,
    "run.cancelled": _cancelled,
}
_NODE_FRAMES: dict[str, Callable[[dict[str, Any], RunView, dict[str, str], str], dict[str, Any]]] = {
    "node.started": _node_started,
    "node.completed": _node_update,
    "node.failed": _node_error,
    "node.retried": _node_retry,
    "interrupt.requested": _interrupt,
    "interrupt.resolved": _resumed,
}


def project(doc: dict[str, Any], view: RunView) -> dict[str, Any] | None:
    """The ModuleX frame for one RunEventDoc, or None when ModuleX has no counterpart."""
    kind = doc["type"]
    payload = doc.get("payload") or {}
    at = doc["timestamp"]
    node_id = doc.get("nodeId")
    if node_id is not None and view.hidden(node_id):
        return None
    if kind in _RUN_FRAMES:
        return _RUN_FRAMES[kind](payload, view, at)
    if kind in _NODE_FRAMES and node_id:
        return _NODE_FRAMES[kind](payload, view, view.node(node_id), at)
    return None


def heartbeat(at: str) -> dict[str, Any]:
    return {"type": "heartbeat", "timestamp": at}


def interrupted(view: RunView, waiting_on: list[str], at: str) -> dict[str, Any]:
    """The close of a response that reached the run waiting on interrupts (`waiting_on`: their nodes; `at`: when it
    paused): ModuleX's `interrupted`, which the SDKs end a listen on, saying what to do next."""
    names = " and ".join(f"“{view.node(n)['name']}”" for n in waiting_on)
    message = f"The run is waiting for an answer at {names}: resume it to answer, then listen again to follow the run."
    data = {**_ids(view), "node_ids": [view.node(n)["id"] for n in waiting_on], "message": message}
    return {"type": "interrupted", "data": data, **_ids(view), "timestamp": at}


def history_skipped(view: RunView, frames: int, after: int, at: str) -> dict[str, Any]:
    """What a response that skips part of a long history says in its place: how many frames, and how to read them
    (`after`: the sequence of the frame before them; `at`: the time of the last of them)."""
    message = (
        f"{frames} earlier frames of this run are left out: one response carries at most "
        f"{MAX_ANSWER_BYTES // 2**20} MiB, so it sends the newest. To read them, listen with the header "
        f"Last-Event-ID: {after}, then again after each response."
    )
    data = {**_ids(view), "skipped_frames": frames, "last_event_id": after, "message": message}
    return {"type": "history_skipped", "data": data, **_ids(view), "timestamp": at}
