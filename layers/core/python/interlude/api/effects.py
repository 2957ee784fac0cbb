"""GET /runs/{runId}/effects (a run's effect records, OpenWOP idempotency Layer 2) and GET /host/effect-seams."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.api.http import json_response, principal_for
from interlude.api.routes import route
from interlude.composition import services
from interlude.domain.errors import NotFound
from interlude.domain.ids import from_wire
from interlude.domain.models.answers.effects import EffectSeamManifest, RunEffects

PACKAGE = Path(__file__).resolve().parents[1]
# Every outbound effect whose outcome is recorded and reused instead of performed again (store.effects), in the row
# shape replay.md and openwop-client read: `{seam, kind, guarded: true, guardedBy, note?}` (the openwop repository's
# schema copy reads `{id, kind, suppression}`: docs/adr/0076, "The effect-seam manifest's two shapes").
SEAMS = (
    {
        "seam": "interlude.core-http",
        "kind": "http",
        "guarded": True,
        "guardedBy": "interlude.store.effects: the effect record claimed by business identity before the call",
        "note": "core.http: claimed before the call, the outcome recorded after it; a redelivery, a crashed worker "
        "or a run naming the same effectKey gets the recorded outcome (GET /runs/{runId}/effects)",
    },
)
# Discovery's `replay` family (issue 29 item 2): POST /runs/{runId}:fork serves both modes (interlude.app.forks), and
# a replay fork performs no effect its source performed (each lands its recorded outcome: engine/forks.py). Experimental
# until 2.1: a fork runs again under its source's recorded history rather than copying the source's log prefix byte
# for byte (docs/adr/0110-forks-run-again-under-recorded-history.md).
REPLAY_CAPABILITY: dict[str, Any] | None = {
    "status": "experimental",
    "since": "2.0",
    "until": "2.1",
    "witness": "witnessable-gated",
    "modes": ["fork", "branch"],
    "effectSeamsManifest": "/host/effect-seams",
}


@route("getRunEffects")
def get_run_effects(runId: str) -> Response:
    principal = principal_for("getRunEffects")
    return json_response(200, RunEffects.model_validate(services().run_effects.run_effects(principal, from_wire(runId))))


@route("getEffectSeamManifest")
def get_effect_seam_manifest() -> Response:
    principal_for("getEffectSeamManifest")
    if REPLAY_CAPABILITY is None:
        raise NotFound("this host does not advertise replay (no POST /runs/{runId}:fork), so it publishes no effect seams")
    manifest = {
        "manifestVersion": "1",
        "host": {"name": "interlude", "build": {"kind": "artifact-sha256", "id": package_digest()}},
        "seams": list(SEAMS),
    }
    return json_response(200, EffectSeamManifest.model_validate(manifest))


@cache
def package_digest() -> str:
    """sha256 over the package's Python sources (path and bytes): names the build the manifest speaks for."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        digest.update(str(path.relative_to(PACKAGE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()
