"""The signed-token surfaces' rules, between the HTTP layer and the run services: no HTTP and no boto3 here.

A token names one interrupt (`i`), its run (`r`) and node (`n`), an expiry and an intent, and — when an API
key minted it — that key's id (`k`). It carries no identity of the person holding it, so:

* A token minted through the API acts **for its minter**: the resolution is made as the minter's principal
  (subject, groups and roles read at decision time from the key record), on the `token` surface. Eligibility
  (`approversList`, group and role refs), quorum (distinct principals) and the one-vote-per-principal rule
  apply exactly as on the run-scoped surface, so a link cannot vote twice for one person, and a revoked key's
  links stop working (401). A minter that no longer holds `approvals:respond` is refused (403).
* A personal link (issue 14: minted by the host for one directory principal, `p`; or through the API by a key
  holding `links:mint`, issue 28 item 5) resolves as that principal, under the same issuer as their keys, with
  their directory groups and roles: quorum counts people.
* A callback notice's link (adapters/delivery/outbox.py) is minted for the key that created the run, so it acts
  for that key as above, and is an `inspect` link when that key may not decide (issue 26, S3).
* A token acting for no one (no minter, no principal: what callback notices carried before) inspects only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from interlude.app import audit_entries as audit
from interlude.app.idempotency import KeyedWrite
from interlude.app.tenant_facts import tenant_settings
from interlude.domain.clock import Clock, iso_epoch
from interlude.domain.errors import Conflict, DomainError, Forbidden, Invalid, NotFound
from interlude.domain.ids import tenant_of
from interlude.domain.models.run import OpenInterrupt, RunState
from interlude.domain.token_lifetimes import DEFAULT_MINTED_LINK_LIFETIME_S, MAX_MINTED_LINK_LIFETIME_S
from interlude.engine.visits import visit_of
from interlude.rules.auth import RESOLVE_SCOPE, Principal, active_key, personal_subject
from interlude.rules.interrupts.decide import Resolver
from interlude.rules.tokens.issuer import interrupt_token
from interlude.rules.tokens.scheme import Intent, KeyRing, TokenClaims, TokenInvalid, verify

if TYPE_CHECKING:
    from interlude.app.ports import AuditAppends, Decider, DirectoryRecords, KeyLookup, RunLedger, TenantRecords

# A token naming a kid this process has not seen triggers at most one forced re-read of the ring per interval,
# so a kid rotated in elsewhere verifies at once, and garbage kids cannot turn into a Secrets Manager call each.
REFETCH_INTERVAL_S = 5.0

RingSource = Callable[[bool], KeyRing]  # force_fetch -> the ring


@dataclass(frozen=True)
class Target:
    claims: TokenClaims
    state: RunState
    version: int
    interrupt: OpenInterrupt


class TokenSurface:
    def __init__(
        self,
        runs: RunLedger,
        decisions: Decider,
        directory: DirectoryRecords,
        keys: KeyLookup,
        tenants: TenantRecords,
        audit_log: AuditAppends,
        clock: Clock,
        ring_source: RingSource,
        monotonic: Callable[[], float] = time.monotonic,
        admit: Callable[[str], None] = lambda tenant: None,
    ) -> None:
        """`admit(tenant)`: refuses a token of a tenant that may not act now (a suspended one: store.tenant_standing)."""
        self.runs = runs
        self.decisions = decisions
        self.directory = directory
        self.keys = keys
        self.tenants = tenants
        self.audit_log = audit_log
        self.clock = clock
        self._ring_source = ring_source
        self._monotonic = monotonic
        self._admit = admit
        self._last_forced = float("-inf")

    # -- verification ---------------------------------------------------------------------------------

    def now(self) -> float:
        # The services' clock, so token expiry and interrupt deadlines are judged by one clock.
        return self.clock().timestamp()

    def ring(self) -> KeyRing:
        return self._ring_source(False)

    def verify(self, token: str) -> TokenClaims:
        """The claims of a token this host signed, its tenant admitted."""
        claims = self._verified(token)
        self._admit(tenant_of(claims.run_id))
        return claims

    def _verified(self, token: str) -> TokenClaims:
        try:
            return verify(token, self._ring_source(False), now=self.now())
        except TokenInvalid as exc:
            if exc.reason != "kid_unknown" or self._monotonic() - self._last_forced < REFETCH_INTERVAL_S:
                raise
        self._last_forced = self._monotonic()
        return verify(token, self._ring_source(True), now=self.now())

    def kid_secret(self, token: str) -> bytes:
        """The secret of the (already verified) token's kid, for deriving page keys."""
        kid = token.split(".")[2]
        return self._ring_source(False).keys[kid]

    # -- what a token names ---------------------------------------------------------------------------

    def target(self, claims: TokenClaims) -> Target:
        """The open interrupt a valid token names: 409 when it was resolved or its run ended, 404 when unknown."""
        try:
            state, version = self.runs.load_run(tenant_of(claims.run_id), claims.run_id)
        except DomainError as exc:
            if exc.code in ("not_found", "id_tenant_mismatch"):
                raise NotFound("the interrupt this token names does not exist") from None
            raise
        interrupt = state.interrupts.get(claims.node_id)
        if interrupt is not None and interrupt.interruptId == claims.interrupt_id:
            return Target(claims, state, version, interrupt)
        if existed(state, claims.node_id, claims.interrupt_id):
            raise Conflict(
                f"the interrupt this token names is no longer open (run {state.status})",
                {"runStatus": state.status},
                code="interrupt_already_resolved",
            )
        raise NotFound("the interrupt this token names does not exist")

    def resolver(self, claims: TokenClaims, tenant: str) -> Resolver:
        if claims.principal is not None:
            # A personal link: its principal must still be in the tenant's directory (removing them ends their links).
            if self.directory.get(tenant, claims.principal) is None:
                raise TokenInvalid("principal")
            return Resolver(subject=personal_subject(tenant, claims.principal), surface="token")
        if claims.minter is None:
            raise_inspect_only(claims)
        minter = active_key(self.keys.get_api_key(claims.minter), claims.minter, tenant, self.clock())
        if minter is None:
            raise TokenInvalid("minter")
        if RESOLVE_SCOPE not in minter.scopes:
            raise Forbidden("the key that minted this token may no longer resolve interrupts")
        return Resolver(subject=minter.subject, surface="token", groups=minter.groups, roles=minter.roles)

    def stands(self, target: Target) -> bool:
        """Whether the link decides as it stands now: a deciding token whose minting key is still active and may
        resolve, or whose personal principal is still in the directory (what `resolver` asks at the decision)."""
        if not target.claims.decides:
            return False
        try:
            self.resolver(target.claims, target.state.tenant)
        except (TokenInvalid, Forbidden):
            return False
        return True

    # -- operations -----------------------------------------------------------------------------------

    def inspect(self, token: str) -> Target:
        return self.target(self.verify(token))

    def resolve(self, token: str, resume_value: Any) -> tuple[dict[str, Any], Target]:
        claims = self.verify(token)
        require_resolve_intent(claims)
        target = self.target(claims)
        return self.resolve_target(target, resume_value), target

    def resolve_target(
        self,
        target: Target,
        resume_value: Any,
        keyed: KeyedWrite | None = None,
        written_numbers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Resolve an interrupt found by `target` under the run-scoped rules, as the token's resolver (`written_numbers`:
        how the request or form wrote its numbers)."""
        claims = target.claims
        require_resolve_intent(claims)
        resolver = self.resolver(claims, target.state.tenant)
        return self.decisions.resolve(
            target.state,
            target.version,
            claims.node_id,
            resume_value,
            resolver,
            interrupt_id=claims.interrupt_id,
            keyed=keyed,
            written_numbers=written_numbers,
        )

    def mint(
        self, principal: Principal, run_id: str, node_id: str, intent: Intent, lifetime_s: int | None = None
    ) -> dict[str, Any]:
        interrupt = self._open_interrupt(principal, run_id, node_id)
        token, expires_at = interrupt_token(
            self.ring(), run_id, interrupt, self.now(), intent, lifetime_s, minter=principal.key_id
        )
        self._record(principal, run_id, interrupt, {"intent": intent, "expiresAt": iso_epoch(expires_at)})
        return {
            "interruptId": interrupt.interruptId,
            "token": token,
            "expiresAt": iso_epoch(expires_at),
            "intent": intent,
            "payload": interrupt.payload,
        }

    def mint_link(
        self, principal: Principal, run_id: str, node_id: str, person: str, lifetime_s: int | None = None
    ) -> dict[str, Any]:
        """A link deciding as directory principal `person` (issue 28 item 5), as the personal links of the mails
        and Slack messages do: a day unless `lifetime_s` says otherwise, at most the tenant's longest (a week unless
        it set less), never past the gate's deadline."""
        longest = tenant_settings(self.tenants, principal.tenant).maxLinkLifetimeSeconds or MAX_MINTED_LINK_LIFETIME_S
        if lifetime_s is not None and lifetime_s > longest:
            raise Invalid(
                f"lifetimeSeconds may be at most {longest} in this tenant", {"field": "lifetimeSeconds", "maximum": longest}
            )
        interrupt = self._open_interrupt(principal, run_id, node_id)
        if self.directory.get(principal.tenant, person) is None:
            raise Invalid(f"the directory has no principal {person!r}", {"field": "principal"})
        requested = lifetime_s or min(DEFAULT_MINTED_LINK_LIFETIME_S, longest)
        token, expires_at = interrupt_token(
            self.ring(), run_id, interrupt, self.now(), "resolve", requested, principal=person, default_s=longest
        )
        details = {"intent": "resolve", "expiresAt": iso_epoch(expires_at), "principal": person}
        self._record(principal, run_id, interrupt, details)
        return {"interruptId": interrupt.interruptId, "principal": person, "token": token, "expiresAt": iso_epoch(expires_at)}

    def _open_interrupt(self, principal: Principal, run_id: str, node_id: str) -> OpenInterrupt:
        state, _ = self.runs.load_run(principal.tenant, run_id)
        return self.decisions.open_interrupt(state, node_id)

    def _record(self, principal: Principal, run_id: str, interrupt: OpenInterrupt, details: dict[str, Any]) -> None:
        """Recorded before the token is handed out: a mint the log cannot record is refused."""
        target = {"runId": run_id, "nodeId": interrupt.nodeId, "interruptId": interrupt.interruptId}
        self.audit_log.append(audit.draft(principal, "token.minted", target, iso_epoch(self.now()), details))


def require_resolve_intent(claims: TokenClaims) -> None:
    if not claims.decides:
        raise_inspect_only(claims)


def raise_inspect_only(claims: TokenClaims) -> NoReturn:
    raise inspect_only(claims)


def inspect_only(claims: TokenClaims) -> Forbidden:
    """The refusal of a decision by a token that may only inspect (or whose resolve names no one it acts for)."""
    why = " (it acts for no one)" if claims.intent == "resolve" else ""
    return Forbidden(f"this token may inspect the interrupt but not resolve it{why}", {"intent": claims.intent})


def existed(state: RunState, node_id: str, interrupt_id: str) -> bool:
    """Whether `interrupt_id` was raised by some visit of `node_id` in this run (ids derive from the visit)."""
    return visit_of(state, node_id, interrupt_id) is not None

