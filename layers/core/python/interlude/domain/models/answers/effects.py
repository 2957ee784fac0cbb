"""What the effect routes answer: a run's effect ledger and the host's effect-seam manifest.

Apart from interlude.domain.models.responses (which says why), so only the requests that answer them build them.
"""


from typing import Literal

from pydantic import Field

from interlude.domain.models.responses import Answer, Omitted


class EffectRecord(Answer):
    """One effect of a run (OpenWOP effect-ledger-projection.schema.json): content-free, never a payload or secret."""

    effectId: str
    nodeId: str
    attempt: int
    keying: Literal["business-identity", "activity-recipe"]
    providerKey: str = Omitted()
    state: Literal["claimed", "completed", "released", "escaped"]
    at: str


class RunEffects(Answer):
    runId: str
    effects: list[EffectRecord]


class EffectSeam(Answer):
    """A row as replay.md and openwop-client read it (docs/adr/0076, "The effect-seam manifest's two shapes")."""

    seam: str = Field(pattern=r"^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)+$")
    kind: Literal["http", "smtp", "queue", "storage", "provider-sdk", "webhook-fanout", "other"]
    guarded: Literal[True]
    guardedBy: str = Field(min_length=1)
    branchReFires: bool = Omitted()
    note: str = Omitted()


class EffectSeamHostBuild(Answer):
    kind: Literal["image-digest", "commit", "artifact-sha256"]
    id: str


class EffectSeamHost(Answer):
    name: str
    build: EffectSeamHostBuild


class EffectSeamManifest(Answer):
    """GET /host/effect-seams (OpenWOP replay.md, "The effect-seam manifest")."""

    manifestVersion: Literal["1"]
    host: EffectSeamHost
    seams: list[EffectSeam]


# -- the audit log (issue 16 item 5; OpenWOP openwop-audit-log-integrity, RFC 0218) ------------------------------
