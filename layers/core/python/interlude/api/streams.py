"""`GET /runs/{runId}/events`: the event log as server-sent events (OpenWOP events.md, streamRunEvents).

Frames: `id:` = sequence, `event:` = the event type (in a mixed mode, the mode that admitted it), `data:` =
the RunEventDoc. `values` sends one `state.snapshot` (a RunSnapshot) after each update the request reads;
`bufferMs` > 0 sends `event: batch` frames (a JSON array), flushed at suspensions and the terminal event.
Behind API Gateway a response is buffered, so a request ends after interlude.app.streams.Bounds with a
`retry:` hint and the client resumes with `Last-Event-ID` (README, "Live event streams").
"""

from __future__ import annotations

import re
from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.api.http import (
    OPENWOP_VERSION,
    app,
    last_event_id,
    principal_for,
    query_flag,
    query_int,
    sse_response,
    stream_bounds,
)
from interlude.api.routes import route
from interlude.app import streams as streaming
from interlude.app.snapshots import snapshot
from interlude.composition import services
from interlude.domain import schemas
from interlude.domain.errors import Invalid
from interlude.domain.ids import from_wire

SUPPORTED_MODES = ("updates", "debug", "values")
MODE_RE = re.compile(r"^(values|(updates|messages|debug)(,(updates|messages|debug))*)$")
# Registered types that only `debug` carries (events.md §Modes); vendor types are debug-only too.
DEBUG_ONLY = frozenset({"node.started", "log.appended", "variable.changed", "version.pinned", "node.retried"})
MAX_BUFFER_MS = 5000


def registered_types() -> frozenset[str]:
    spec = schemas.load("run-event.schema.json")["properties"]["type"]["anyOf"][0]
    return frozenset(spec["enum"])


_REGISTERED = registered_types()


def in_updates(event_type: str) -> bool:
    return event_type in _REGISTERED and event_type not in DEBUG_ONLY and not event_type.startswith("lease.")


# How much of an unserved streamMode the refusal repeats: every mix this host serves is shorter.
SHOWN_MODE_CHARS = 40


def parse_modes(raw: str | None) -> list[str]:
    """The requested modes, or 400 unsupported_stream_mode listing what this host serves."""
    value = "updates" if raw is None or raw == "" else raw
    modes = value.split(",")
    if not MODE_RE.fullmatch(value) or any(m not in SUPPORTED_MODES for m in modes):
        shown = value if len(value) <= SHOWN_MODE_CHARS else value[:SHOWN_MODE_CHARS] + "…"
        raise Invalid(
            f"streamMode {shown!r} is not served; this host serves {', '.join(SUPPORTED_MODES)}",
            {"supported": list(SUPPORTED_MODES), "requested": shown},
            code="unsupported_stream_mode",
        )
    return list(dict.fromkeys(modes))


def admitting_mode(modes: list[str], event_type: str) -> str | None:
    for mode in modes:
        if mode == "debug" or (mode == "updates" and in_updates(event_type)):
            return mode
    return None


def _query(name: str) -> str | None:
    return (app.current_event.query_string_parameters or {}).get(name)


@route("streamRunEvents")
def stream_run_events(runId: str) -> Response:
    principal = principal_for("streamRunEvents")
    run_id = from_wire(runId)
    # Mode validation comes before any content negotiation: this answer does not depend on Accept.
    modes = parse_modes(_query("streamMode"))
    buffer_ms = query_int("bufferMs", 0, 0, MAX_BUFFER_MS)
    resumable = query_flag("resumable")
    svc = services()
    state, _ = svc.runs.load_run(principal.tenant, run_id)
    # Last-Event-ID is read only once the caller may see the run.
    last = last_event_id()
    bounds = stream_bounds()
    if resumable:
        bounds = bounds.for_resumable()
    values = modes == ["values"]
    parts: list[str] = [streaming.comment(f"interlude run events; streamMode={','.join(modes)}")]
    after = -1 if last is None else last
    if values and last is not None:
        # events.md: on a resumed values stream, the current state comes first.
        parts.append(streaming.frame(snapshot(state), event="state.snapshot", id=state.nextSeq - 1))
        after = max(last, state.nextSeq - 1)

    latest: dict[str, Any] = {}

    def read(after: int) -> list[dict[str, Any]]:
        if not values:
            return svc.store.read_events(run_id, after, holder=state)
        # A snapshot that matches its events exactly: read the head first, then only the events it covers.
        got = svc.store.get_run(run_id)
        if got is None:
            return []
        latest["head"] = got[0]
        return [d for d in svc.store.read_events(run_id, after, holder=got[0]) if d["sequence"] <= got[0].nextSeq - 1]

    def on_events(docs: list[dict[str, Any]]) -> int:
        if not values:
            frames = _frames(docs, modes, buffer_ms)
        elif any(in_updates(d["type"]) for d in docs):
            frames = [streaming.frame(snapshot(latest["head"]), event="state.snapshot", id=docs[-1]["sequence"])]
        else:
            frames = []
        parts.extend(frames)
        return len(frames)

    ended = streaming.follow(
        read,
        after,
        state.terminal,
        bounds,
        on_events,
        lambda: parts.append(streaming.comment("keep-alive")),
        already_sent=values and last is not None,
    )
    if ended != "terminal":
        parts.append(streaming.retry(bounds.retry_ms))
    return sse_response(parts, {"OpenWOP-Version": OPENWOP_VERSION})


def _frames(docs: list[dict[str, Any]], modes: list[str], buffer_ms: int) -> list[str]:
    admitted = [(d, m) for d in docs if (m := admitting_mode(modes, d["type"])) is not None]
    if buffer_ms <= 0:
        return [streaming.frame(d, event=m if len(modes) > 1 else d["type"], id=d["sequence"]) for d, m in admitted]
    out: list[str] = []
    batch: list[dict[str, Any]] = []
    for doc, _ in admitted:
        batch.append(doc)
        # Forced flushes: a suspension and the terminal event close a batch.
        if doc["type"] == "node.suspended" or doc["type"] in streaming.RUN_END_EVENTS:
            out.append(streaming.frame(batch, event="batch", id=batch[-1]["sequence"]))
            batch = []
    if batch:
        out.append(streaming.frame(batch, event="batch", id=batch[-1]["sequence"]))
    return out
