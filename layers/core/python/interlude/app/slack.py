"""Deciding in Slack (issue 28 item 6): a click on a message's Approve or Reject button, reported by Slack to the
tenant's interactivity URL, decided as the directory principal the Slack user is.

The request is Slack's when its signature verifies with the tenant's signing secret (rules/slack.py); otherwise it is
refused (401) and nothing else is read. The clicker is the principal whose directory entry names their Slack user id;
their vote is cast through app/decisions.py exactly as their personal link would cast it (eligibility, quorum,
delegation, one vote per principal), on the `slack` surface. So a click Slack sends twice decides once: the second
finds the vote cast or the gate decided. What Slack shows afterwards goes to the click's `response_url`: the message
replaced in place with the outcome ("Approved by Ana"), or, for a click that decided nothing, a message in words
that only the clicker sees. That post is best-effort: the decision stands whether or not Slack takes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from interlude.domain.errors import DomainError, Unauthenticated
from interlude.domain.ids import TENANT_RE, tenant_of
from interlude.rules.auth import personal_subject
from interlude.rules.interrupts.decide import Resolver
from interlude.rules.slack import (
    SignatureRefused,
    click_of,
    ephemeral,
    outcome_text,
    replaced_message,
    verify_signature,
)

if TYPE_CHECKING:
    from interlude.app.ports import Decider, DirectoryRecords, RunLedger, SlackChannel
    from interlude.domain.clock import Clock
    from interlude.rules.limits import Admission
    from interlude.rules.slack import Click

SIGNATURE_INVALID = "interlude.slack_signature_invalid"

# What the clicker reads when their click decided nothing, by the refusal's code.
REFUSED_WORDS = {
    "forbidden": "You are not one of the approvers of this request, so your answer was not recorded.",
    "interlude.delegation_not_allowed": "You are not one of the approvers of this request, so your answer was not recorded.",
    "interlude.vote_already_cast": "You have already answered this request; your first answer stands.",
    "interrupt_already_resolved": "This request was already decided or has timed out, so your answer was not recorded.",
    "not_found": "This request no longer exists, so your answer was not recorded.",
    "id_tenant_mismatch": "This request no longer exists, so your answer was not recorded.",
    "interlude.tenant_suspended": "Interlude is not taking answers for your organisation at the moment.",
    "validation_error": "This request needs more than a button can give: open the approval page to answer it.",
}
BUSY_WORDS = "Interlude could not record your answer just now; please click again in a moment."
# A click past the tenant's request rate (the limit every API request of the tenant counts against).
RATE_WORDS = "Interlude is taking many answers for your organisation just now, so yours was not recorded; please click again in a few seconds."


@dataclass(frozen=True)
class Answered:
    """What Slack is answered (200), and whether the click cast a vote (the Decisions metric counts it)."""

    shown: dict[str, Any]
    voted: bool = False
UNKNOWN_USER_WORDS = (
    "Your Slack account is not linked to anyone in Interlude's directory, so your answer was not recorded. "
    "Ask your Interlude administrator to add your Slack member ID ({user}) to your directory entry."
)


class SlackInteractions:
    def __init__(
        self,
        runs: RunLedger,
        decisions: Decider,
        directory: DirectoryRecords,
        channel: SlackChannel,
        clock: Clock,
        admit: Callable[[str], None] = lambda tenant: None,
        rate: Callable[[str], Admission] | None = None,
    ) -> None:
        """`admit(tenant)`: refuses a tenant that may not act now (a suspended one: store.tenant_standing). `rate(tenant)`:
        counts the click against the tenant's request rate, as every API request is (app.limits.TenantLimiter)."""
        self.runs = runs
        self.decisions = decisions
        self.directory = directory
        self.channel = channel
        self.clock = clock
        self.admit = admit
        self.rate = rate

    def answer(self, tenant: str, timestamp: str | None, signature: str | None, body: bytes) -> Answered:
        """What to answer Slack (200) for a verified click: the message as it now reads, or the words the clicker
        was shown. Refuses (401) a request that is not Slack's for this tenant, (400) a payload that is no click, and
        (403) a click of a suspended tenant. A click past the tenant's request rate is told so in words (200: Slack
        shows a person an error for any other status)."""
        self.verify(tenant, timestamp, signature, body)
        click = click_of(body)
        try:
            self.admit(tenant)
        except DomainError as refused:
            # Refused as on every surface (403); the clicker is told why in words.
            if click.response_url:
                self.channel.reply(click.response_url, ephemeral(REFUSED_WORDS.get(refused.code, BUSY_WORDS)))
            raise
        if self.rate is not None and not self.rate(tenant).allowed:
            return self._shown(click, ephemeral(RATE_WORDS))
        if click.action is None:
            return Answered({})  # a click on the page's link, or a button of no decision: Slack only needs the acknowledgement
        shown = self._decide(tenant, click)
        return Answered(self._shown(click, shown).shown, voted=shown.get("replace_original") is True)

    def _shown(self, click: Click, shown: dict[str, Any]) -> Answered:
        if click.response_url:
            self.channel.reply(click.response_url, shown)
        return Answered(shown)

    def verify(self, tenant: str, timestamp: str | None, signature: str | None, body: bytes) -> None:
        secret = self.channel.signing_secret(tenant) if TENANT_RE.fullmatch(tenant) else None
        if secret is None:
            raise Unauthenticated(
                "this tenant has no Slack signing secret set", {"reason": "not_configured"}, code=SIGNATURE_INVALID
            )
        try:
            verify_signature(secret, timestamp, signature, body, self.clock().timestamp())
        except SignatureRefused as refused:
            raise Unauthenticated(refused.message, {"reason": refused.reason}, code=SIGNATURE_INVALID) from None

    def _decide(self, tenant: str, click: Click) -> dict[str, Any]:
        assert click.action is not None
        assert click.run_id is not None
        assert click.node_id is not None
        principal_id = self.directory.by_slack_user(tenant, click.user_id)
        record = self.directory.get(tenant, principal_id) if principal_id else None
        if principal_id is None or record is None:
            return ephemeral(UNKNOWN_USER_WORDS.format(user=click.user_id))
        who = str(record["entry"].get("displayName") or principal_id)
        try:
            if tenant_of(click.run_id) != tenant:
                return ephemeral(REFUSED_WORDS["not_found"])
            state, version = self.runs.load_run(tenant, click.run_id, deciding=True)
            resolver = Resolver(subject=personal_subject(tenant, principal_id), surface="slack")
            value = {"action": click.action, **({"comment": click.comment} if click.comment else {})}
            self.decisions.resolve(state, version, click.node_id, value, resolver, interrupt_id=click.interrupt_id)
            after, _ = self.runs.load_run(tenant, click.run_id)
        except DomainError as refused:
            return ephemeral(REFUSED_WORDS.get(refused.code, BUSY_WORDS))
        still_open = after.interrupts.get(click.node_id)
        decided = still_open is None or still_open.interruptId != click.interrupt_id
        return replaced_message(click.message, outcome_text(click.action, decided, who, click.comment))
