"""GET /runs/{runId}/effects (a run's effect records, OpenWOP idempotency Layer 2) and GET /host/effect-seams."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.api.http import json_response, principal_for, service
from interlude.api.routes import route
from interlude.app.actions import run_effects
from interlude.domain.ids import from_wire
from interlude.domain.models.answers.effects import EffectSeamManifest, RunEffects

PACKAGE = Path(__file__).resolve().parents[1]
# Every outbound effect whose outcome is recorded and reused instead of performed again (store.effects).
SEAMS = (
    {
        "id": "interlude.core-http",
        "kind": "http",
        "suppression": "recorded-outcome",
        "witness": "seam-gated",
        "note": "core.http: claimed before the call, the outcome recorded after it; a redelivery, a crashed worker "
        "or a run naming the same effectKey gets the recorded outcome (GET /runs/{runId}/effects)",
    },
)


@route("getRunEffects")
def get_run_effects(runId: str) -> Response:
    principal = principal_for("getRunEffects")
    return json_response(200, RunEffects.model_validate(run_effects(service(), principal, from_wire(runId))))


@route("getEffectSeamManifest")
def get_effect_seam_manifest() -> Response:
    principal_for("getEffectSeamManifest")
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
