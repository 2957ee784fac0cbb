"""Deciding in Slack (issue 28 item 6): a click on a message's Approve or Reject button, reported by Slack to the
tenant's interactivity URL, decided as the directory principal the Slack user is.

The request is Slack's when its signature verifies with the tenant's signing secret (rules/slack_requests.py);
otherwise it is refused (401) and nothing else is read. The clicker is the principal whose directory entry names their
Slack user id; their vote is cast through app/decisions.py exactly as their personal link would cast it (eligibility,
quorum, delegation, one vote per principal), on the `slack` surface. So a click Slack sends twice decides once: the
second finds the vote cast or the gate decided. What Slack shows afterwards goes to the click's `response_url`: the
message replaced in place with the outcome ("Approved by Ana"), or, for a click that decided nothing, a message in
words that only the clicker sees. That post is best-effort: the decision stands whether or not Slack takes it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from interlude.app.facts import asked_of, recipients
from interlude.domain.errors import DomainError, NotFound, Unauthenticated
from interlude.domain.ids import TENANT_RE, tenant_of
from interlude.rules.answer_schema import Asked, check, field_at, field_labels
from interlude.rules.auth import personal_subject
from interlude.rules.interrupts.decide import Resolver
from interlude.rules.slack import (
    CLOSE_MODAL,
    COMMENT_BLOCK,
    DECISION_BLOCK,
    FORM_ACTION,
    button_value,
    decision_modal,
    ephemeral,
    field_errors,
    outcome_text,
    replaced_message,
)
from interlude.rules.slack_forms import answer_of, form_modal, modal_form, said_view
from interlude.rules.slack_requests import SignatureRefused, Submission, interaction_of, verify_signature
from interlude.rules.wording import headline

if TYPE_CHECKING:
    from interlude.app.ports import Decider, DefinitionSource, DirectoryRecords, RunLedger, SlackChannel
    from interlude.domain.clock import Clock
    from interlude.domain.models.run import OpenInterrupt, RunState
    from interlude.rules.limits import Admission
    from interlude.rules.slack_requests import Click

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
CHOOSE_WORDS = "Choose Approve or Reject."
# A gate whose form Slack cannot show (or no longer can): the personal link in the message answers it.
PAGE_WORDS = "This request needs more than Slack can show: open the answer page from the message to answer it."
NOT_ASKED_WORDS = "You are not one of the people this request asks, so your answer was not recorded."
NO_MODAL_WORDS = "Slack could not open the form just now; use Approve or Reject, or open the approval page."
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
        definitions: DefinitionSource | None = None,
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
        self.definitions = definitions

    def answer(self, tenant: str, timestamp: str | None, signature: str | None, body: bytes) -> Answered:
        """What to answer Slack (200) for a verified click: the message as it now reads, or the words the clicker
        was shown. Refuses (401) a request that is not Slack's for this tenant, (400) a payload that is no click, and
        (403) a click of a suspended tenant. A click past the tenant's request rate is told so in words (200: Slack
        shows a person an error for any other status)."""
        self.verify(tenant, timestamp, signature, body)
        got = interaction_of(body)
        if isinstance(got, Submission):
            return self._submitted(tenant, got)
        click = got
        try:
            self.admit(tenant)
        except DomainError as refused:
            # Refused as on every surface (403); the clicker is told why in words.
            if click.response_url:
                self.channel.reply(click.response_url, ephemeral(REFUSED_WORDS.get(refused.code, BUSY_WORDS)))
            raise
        if self.rate is not None and not self.rate(tenant).allowed:
            return self._shown(click, ephemeral(RATE_WORDS))
        if click.opens_modal:
            return self._open_modal(tenant, click)
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
            # No request is signed with a secret made now: one sent to a tenant without Slack (or to no tenant) is
            # refused exactly as a wrong signature is, so the answer never tells which tenants use Slack.
            secret = secrets.token_hex(32)
        try:
            verify_signature(secret, timestamp, signature, body, self.clock().timestamp())
        except SignatureRefused as refused:
            raise Unauthenticated(refused.message, {"reason": refused.reason}, code=SIGNATURE_INVALID) from None

    def _principal(self, tenant: str, slack_user_id: str) -> tuple[str, str] | None:
        """(principal id, what people call them) of the directory entry naming this Slack user."""
        principal_id = self.directory.by_slack_user(tenant, slack_user_id)
        record = self.directory.get(tenant, principal_id) if principal_id else None
        if principal_id is None or record is None:
            return None
        return principal_id, str(record["entry"].get("displayName") or principal_id)

    def _vote(
        self, tenant: str, principal_id: str, run_id: str, node_id: str, interrupt_id: str, action: str, comment: str | None
    ) -> bool:
        """Cast the principal's vote as their personal link would (raises the refusal); whether it decided the gate."""
        value = {"action": action, **({"comment": comment} if comment else {})}
        return self._resolve(tenant, principal_id, run_id, node_id, interrupt_id, value)

    def _resolve(self, tenant: str, principal_id: str, run_id: str, node_id: str, interrupt_id: str, value: Any) -> bool:
        """Answer the gate with `value` as the principal's personal link would (raises the refusal); whether that
        decided it."""
        if tenant_of(run_id) != tenant:
            raise NotFound("no such run")
        state, version = self.runs.load_run(tenant, run_id)
        resolver = Resolver(subject=personal_subject(tenant, principal_id), surface="slack")
        self.decisions.resolve(state, version, node_id, value, resolver, interrupt_id=interrupt_id)
        after, _ = self.runs.load_run(tenant, run_id)
        still_open = after.interrupts.get(node_id)
        return still_open is None or still_open.interruptId != interrupt_id

    def _decide(self, tenant: str, click: Click) -> dict[str, Any]:
        assert click.action is not None
        assert click.run_id is not None
        assert click.node_id is not None
        assert click.interrupt_id is not None
        found = self._principal(tenant, click.user_id)
        if found is None:
            return ephemeral(UNKNOWN_USER_WORDS.format(user=click.user_id))
        principal_id, who = found
        try:
            decided = self._vote(tenant, principal_id, click.run_id, click.node_id, click.interrupt_id, click.action, click.comment)
        except DomainError as refused:
            return ephemeral(REFUSED_WORDS.get(refused.code, BUSY_WORDS))
        return replaced_message(click.message, outcome_text(click.action, decided, who, click.comment))

    # -- the decision modal (a bot token's messages) -----------------------------------------------------------

    def _open_modal(self, tenant: str, click: Click) -> Answered:
        """Open the decision modal for a linked principal while the gate is open: views.open is the click's only call
        to Slack (its trigger_id lives 3 seconds); otherwise the clicker is told why, as a button click is."""
        assert click.run_id is not None
        assert click.node_id is not None
        assert click.interrupt_id is not None
        assert click.trigger_id is not None
        if self._principal(tenant, click.user_id) is None:
            return self._shown(click, ephemeral(UNKNOWN_USER_WORDS.format(user=click.user_id)))
        found = self._open_interrupt(tenant, click.run_id, click.node_id, click.interrupt_id)
        if isinstance(found, str):
            return self._shown(click, ephemeral(found))
        state, interrupt = found
        data = interrupt.payload.get("data") or {}
        title = str(data.get("title") or data.get("prompt") or "Your decision is needed")
        if click.action_id == FORM_ACTION:
            spec = self._form(state, interrupt)
            if spec is None:
                return self._shown(click, ephemeral(PAGE_WORDS))
            value = button_value(click.run_id, click.node_id, click.interrupt_id)
            view = form_modal(headline(interrupt.payload)[0], spec, value)
        else:
            value = button_value(click.run_id, click.node_id, click.interrupt_id, reply_to=click.response_url)
            view = decision_modal(title, list(data.get("actions") or ()), value)
        if not self.channel.open_view(tenant, click.trigger_id, view):
            # No second call to Slack inside its 3 seconds: the acknowledgement carries the words (logged too).
            return Answered(ephemeral(NO_MODAL_WORDS))
        return Answered({})

    def _open_interrupt(
        self, tenant: str, run_id: str, node_id: str, interrupt_id: str
    ) -> tuple[RunState, OpenInterrupt] | str:
        """The run and its interrupt, still open, or the words saying why not."""
        try:
            if tenant_of(run_id) != tenant:
                raise NotFound("no such run")
            state: RunState = self.runs.load_run(tenant, run_id)[0]
        except DomainError as refused:
            return REFUSED_WORDS.get(refused.code, BUSY_WORDS)
        interrupt = state.interrupts.get(node_id)
        if interrupt is None or interrupt.interruptId != interrupt_id:
            return REFUSED_WORDS["interrupt_already_resolved"]
        return state, interrupt

    def _submitted(self, tenant: str, sent: Submission) -> Answered:
        """The modal sent: the vote cast as a click casts it, the modal closed; a refusal is said beside its field and
        the modal stays open (Slack's `response_action: errors`)."""
        if sent.form is not None:
            return self._answered(tenant, sent, sent.form)
        found = self._admitted(tenant, sent.user_id)
        if isinstance(found, str):
            return Answered(field_errors({DECISION_BLOCK: found}))
        if sent.action is None:
            return Answered(field_errors({DECISION_BLOCK: CHOOSE_WORDS}))
        try:
            decided = self._vote(tenant, found[0], sent.run_id, sent.node_id, sent.interrupt_id, sent.action, sent.comment)
        except DomainError as refused:
            about = str((refused.details or {}).get("field") or "")
            block = COMMENT_BLOCK if about.startswith("resumeValue.comment") else DECISION_BLOCK
            return Answered(field_errors({block: REFUSED_WORDS.get(refused.code, BUSY_WORDS)}))
        if not decided and sent.response_url:
            self._vote_counted(tenant, sent, found[1])
        return Answered(CLOSE_MODAL, voted=True)

    def _vote_counted(self, tenant: str, sent: Submission, who: str) -> None:
        """A modal's vote that did not decide the gate: the clicker's message says it counted and what the gate waits
        for, as a button's vote does (best-effort, through the click's response_url)."""
        assert sent.action is not None
        assert sent.response_url is not None
        found = self._open_interrupt(tenant, sent.run_id, sent.node_id, sent.interrupt_id)
        if isinstance(found, str):
            return
        data = found[1].payload.get("data") or {}
        title = str(data.get("title") or "Your decision is needed")
        header = {"blocks": [{"type": "header", "text": {"type": "plain_text", "text": title[:150]}}]}
        self.channel.reply(sent.response_url, replaced_message(header, outcome_text(sent.action, False, who, sent.comment)))

    # -- a gate's short form (clarification, custom, ModuleX, low-confidence) --------------------------------------

    def _config(self, state: RunState, node_id: str) -> dict[str, Any]:
        if self.definitions is None:
            return {}
        definition = self.definitions.workflow(state.tenant, state.workflowId, state.workflowVersion)
        return dict(definition.node(node_id).config) if node_id in {n.id for n in definition.nodes} else {}

    def _form(self, state: RunState, interrupt: OpenInterrupt) -> Asked | None:
        """What the modal asks for this gate's answer, in the gate's words (its fieldLabels); None: Slack cannot."""
        return modal_form(interrupt.payload, field_labels(self._config(state, interrupt.nodeId)))

    def _answered(self, tenant: str, sent: Submission, form: dict[str, Any]) -> Answered:
        """The answer modal sent: read and checked as the page reads and checks its form (each refusal beside its
        field, the modal open), then decided through the same path as a click, as the principal's personal link
        would; a refusal that concerns no field replaces the modal with its words."""
        words = self._admitted(tenant, sent.user_id)
        if isinstance(words, str):
            return Answered(said_view(words))
        principal_id = words[0]
        found = self._open_interrupt(tenant, sent.run_id, sent.node_id, sent.interrupt_id)
        if isinstance(found, str):
            return Answered(said_view(found))
        state, interrupt = found
        config = self._config(state, interrupt.nodeId)
        spec = modal_form(interrupt.payload, field_labels(config))
        if spec is None:
            return Answered(said_view(PAGE_WORDS))
        people, _ = recipients(self.directory, tenant, asked_of(interrupt.payload, config))
        if principal_id not in people:
            return Answered(said_view(NOT_ASKED_WORDS))
        value, errors = answer_of(spec, form)
        if not errors and spec.schema is not None:
            check(spec.schema, value, spec.asks, errors)
        if errors:
            return Answered(field_errors(errors))
        try:
            self._resolve(tenant, principal_id, sent.run_id, sent.node_id, sent.interrupt_id, value)
        except DomainError as refused:
            about = str((refused.details or {}).get("field") or "")
            if refused.code == "validation_error" and about.startswith("resumeValue"):
                block = field_at(spec.asks, [p for p in about.split(".")[1:] if p])
                if block is not None:
                    return Answered(field_errors({block: "This answer is not accepted here."}))
            return Answered(said_view(REFUSED_WORDS.get(refused.code, BUSY_WORDS)))
        return Answered(CLOSE_MODAL, voted=True)

    def _admitted(self, tenant: str, slack_user_id: str) -> tuple[str, str] | str:
        """The sender as (principal id, name) when the tenant may act now, within its rate, and they are linked;
        else the words saying why not."""
        try:
            self.admit(tenant)
        except DomainError as refused:
            return REFUSED_WORDS.get(refused.code, BUSY_WORDS)
        if self.rate is not None and not self.rate(tenant).allowed:
            return RATE_WORDS
        found = self._principal(tenant, slack_user_id)
        return found if found is not None else UNKNOWN_USER_WORDS.format(user=slack_user_id)
