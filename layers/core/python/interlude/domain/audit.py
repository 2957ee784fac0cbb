"""An audit entry before the log places it: who did what to what, when. The log adds its chain, sequence and prevHash
(interlude.store.audit); interlude.app.audit builds drafts and appends them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The actions this host records (README, "Audit"). A new kind of action adds its name here.
ACTIONS = (
    "interrupt.decided",
    "interrupt.voted",
    "run.cancelled",
    "key.created",
    "key.revoked",
    "token.minted",
    "settings.changed",
    "credentialGrant.recorded",
    # Issue 30 item 6: the operator's lifecycle of the tenant (a deletion removes the log itself).
    "tenant.created",
    "tenant.suspended",
    "tenant.resumed",
)
# What an entry's `details` may weigh (JCS bytes); a caller summarises rather than copying large values in.
MAX_DETAILS_BYTES = 4096
# The highest sequence GET /audit/verify accepts in fromSeq and toSeq; a range is clamped to each chain's end, so
# this toSeq verifies every chain to its end.
MAX_SEQ = 10**12 - 1


@dataclass(frozen=True)
class AuditDraft:
    tenant: str
    action: str
    # {"subjectId", "keyId"?, "surface"?}: the principal that acted, on which surface.
    actor: dict[str, Any]
    # What the action was about: {"runId", "nodeId"?, "interruptId"?} or {"keyId"} or {"tenant"} ...
    target: dict[str, Any]
    at: str
    details: dict[str, Any] = field(default_factory=dict)

    def entry(self, seq: int, prev_hash: str | None, chain: int) -> dict[str, Any]:
        """The stored document: what is hashed, and what the next entry's prevHash is the hash of. `chain`: which of
        the tenant's chains it belongs to (hashed too, so an entry moved to another chain no longer matches)."""
        return {
            "chain": chain,
            "seq": seq,
            "at": self.at,
            "tenant": self.tenant,
            "action": self.action,
            "actor": self.actor,
            "target": self.target,
            "details": self.details,
            "prevHash": prev_hash,
        }

    def fields(self) -> dict[str, Any]:
        """What a draft carried to the appender holds (an event batch's `audit`: docs/adr/0128)."""
        return {
            "tenant": self.tenant,
            "action": self.action,
            "actor": self.actor,
            "target": self.target,
            "at": self.at,
            "details": self.details,
        }

    @classmethod
    def of_fields(cls, fields: dict[str, Any]) -> AuditDraft:
        return cls(
            str(fields["tenant"]),
            str(fields["action"]),
            dict(fields["actor"]),
            dict(fields["target"]),
            str(fields["at"]),
            dict(fields.get("details") or {}),
        )
