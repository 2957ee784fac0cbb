"""The signed-token surfaces and the approval page.

* `GET /interrupts/{token}`: the InterruptPayload as JSON, or, asked for `text/html`, the approval page. A GET
  never changes anything (mail and chat link scanners open links).
* `POST /interrupts/{token}`: `{resumeValue}` as JSON, or the page's form (`application/x-www-form-urlencoded`),
  which must carry the double-submit proof (interlude.api.page.csrf) and not come from another site.
* `GET /runs/{runId}/interrupts/{nodeId}` (runs:read): `{interruptId, token, expiresAt, intent, payload, url}`;
  the token is a `resolve` token only when the caller also holds approvals:respond, else `inspect`.
* `POST /runs/{runId}/interrupts/{nodeId}/tokens` (approvals:respond): mint with an intent and a shorter lifetime.
* `POST /runs/{runId}/interrupts/{nodeId}/links` (links:mint, or keys:admin): a link deciding as a named directory
  principal, for the tools a team already uses (issue 28 item 5).
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from functools import cache, partial
from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler.api_gateway import Response
from aws_lambda_powertools.shared.cookies import Cookie

from interlude.api.errors import status_of
from interlude.api.http import (
    OPENWOP_VERSION,
    REFUSAL_PAGES,
    app,
    base_url,
    error_response,
    json_response,
    over_https,
    parsed,
    principal_for,
    raw_body,
    refused_as_asked,
    request_cookies,
    resume_value_body,
    standing,
)
from interlude.api.idempotency import keyed
from interlude.api.page import approval, csrf, forms, posted
from interlude.api.page.fields import typed_spellings
from interlude.api.page.graph import GraphNode
from interlude.api.page.headers import CSP, content_security_policy
from interlude.api.page.names import names_of
from interlude.api.page.text import spelled
from interlude.api.routes import route
from interlude.app.facts import display_name as directory_name
from interlude.app.facts import entry_of
from interlude.app.tenant_facts import tenant_settings
from interlude.app.tokens import Target, TokenSurface, inspect_only
from interlude.composition import services
from interlude.config import settings
from interlude.domain.errors import DomainError, Forbidden
from interlude.domain.ids import check_author_id, from_wire, tenant_of
from interlude.domain.models.answers.decisions import Resolution
from interlude.domain.models.answers.tokens import MintedLink, MintedToken
from interlude.domain.models.run import OpenInterrupt, RunState
from interlude.domain.models.tokens import MintLinkRequest, MintTokenRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.domain.written_numbers import spellings
from interlude.engine.visits import interrupt_key, visit_of
from interlude.rules.auth import RESOLVE_SCOPE
from interlude.rules.interrupts.delegation import NOT_A_VOTE
from interlude.rules.tokens.scheme import Intent, KeyRing, TokenClaims, TokenExpired

NO_STORE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
FORM_TYPE = "application/x-www-form-urlencoded"
# A form posted from another site, or without its page's proof, as an API client is told it.
CROSS_SITE = "the form did not come from this request's own page"

# Error code → what the page calls it.
PAGE_KINDS = {
    "interrupt_token_invalid": "invalid",
    "interrupt_expired": "expired",
    "interrupt_already_resolved": "already",
    "not_found": "not-found",
    "forbidden": "forbidden",
    "interlude.vote_already_cast": "vote-cast",
    "validation_error": "not-accepted",
}


@cache
def surface() -> TokenSurface:
    cfg = settings()

    def ring(force: bool) -> KeyRing:
        # The ring's reader (and its Secrets Manager client) loads with the first token: not every request has one.
        from interlude.adapters.keyring_store import load_key_ring

        return load_key_ring(cfg.key_ring_secret, max_age_s=cfg.key_ring_cache_seconds, force_fetch=force)

    return services().token_surface(ring, admit=standing().require_active)


# -- routes -------------------------------------------------------------------------------------------


@route("inspectInterruptByToken")
def inspect_interrupt_by_token(token: str) -> Response:
    if wants_html():
        return page_get(token)
    target = surface().inspect(token)
    return json_response(200, target.interrupt.payload, NO_STORE)


@route("resolveInterruptByToken")
def resolve_interrupt_by_token(token: str) -> Response:
    content_type = (app.current_event.headers.get("content-type") or "").lower()
    if content_type.split(";")[0].strip() == FORM_TYPE:
        return page_post(token)
    # The token first: a refused token is 401/410 whatever the body holds.
    claims = surface().verify(token)
    resume_value = resume_value_body()
    target = surface().target(claims)
    written = spellings(raw_body())
    return token_resolved(surface().resolve_target(target, resume_value, keyed(token_resolved), written))


def token_resolved(outcome: dict[str, Any]) -> Response:
    return json_response(200, Resolution.model_validate(outcome), NO_STORE)


@route("getInterruptToken")
def get_interrupt_token(runId: str, nodeId: str) -> Response:
    principal = principal_for("getInterruptToken")
    intent: Intent = "resolve" if RESOLVE_SCOPE in principal.scopes else "inspect"
    minted = surface().mint(principal, from_wire(runId), check_author_id(unquote(nodeId), "nodeId"), intent)
    return json_response(200, with_url(minted), NO_STORE)


@route("mintInterruptToken")
def mint_interrupt_token(runId: str, nodeId: str) -> Response:
    principal = principal_for("mintInterruptToken")
    run_id = from_wire(runId)
    node_id = check_author_id(unquote(nodeId), "nodeId")
    request = parsed(MintTokenRequest, optional=True)
    minted = surface().mint(principal, run_id, node_id, request.intent, request.lifetimeSeconds)
    return json_response(201, with_url(minted), NO_STORE)


@route("mintInterruptLink")
def mint_interrupt_link(runId: str, nodeId: str) -> Response:
    principal = principal_for("mintInterruptLink")
    run_id = from_wire(runId)
    node_id = check_author_id(unquote(nodeId), "nodeId")
    request = parsed(MintLinkRequest)
    minted = surface().mint_link(principal, run_id, node_id, request.principal, request.lifetimeSeconds)
    return json_response(201, MintedLink.model_validate({**minted, "url": url_of(minted["token"])}), NO_STORE)


def with_url(minted: dict[str, Any]) -> MintedToken:
    return MintedToken.model_validate({**minted, "url": url_of(minted["token"])})


def url_of(token: str) -> str:
    return f"{base_url()}/interrupts/{token}"


# -- the page -----------------------------------------------------------------------------------------


def wants_html() -> bool:
    accept = (app.current_event.headers.get("accept") or "").lower()
    return "text/html" in accept


def html_response(
    status: int, title: str, body_html: str, style_nonce: str, cookies: list[Cookie] | None = None
) -> Response:
    return Response(
        status_code=status,
        content_type="text/html; charset=utf-8",
        body=approval.document(title, body_html, style_nonce),
        headers={"OpenWOP-Version": OPENWOP_VERSION, CSP: content_security_policy(style_nonce)},
        # Payload 2.0 carries Set-Cookie values in their own list (the local gateway writes them as headers).
        cookies=cookies,
    )


def damaged_link(exc: DomainError) -> Response:
    """A path under /interrupts/ that no route answers (a link a mail or chat tool damaged, a slash or more
    appended): to a browser, the page of a link that is not whole; to a client, the refusal as JSON. A request
    there whose handler failed: to a browser, a page saying so."""
    if not wants_html():
        return error_response(exc)
    status = status_of(exc)
    if status in (404, 405):
        return result_page(status, approval.Result("invalid"), None, _nonce())
    failed = result_page(status, approval.Result("error", detail=FAILED_WORDS), None, _nonce())
    if exc.retry_after_s is not None:
        failed.headers["Retry-After"] = str(exc.retry_after_s)
    return failed


FAILED_WORDS = "This went wrong on our side. Try again in a moment; if it happens again, tell whoever sent you this link."


REFUSAL_PAGES[__name__.removeprefix("interlude.api.")] = damaged_link


def _nonce() -> str:
    return secrets.token_urlsafe(18)


def page_get(token: str) -> Response:
    style = _nonce()
    claims: TokenClaims | None = None
    try:
        claims = surface().verify(token)
        target = surface().target(claims)
    except DomainError as exc:
        return error_page(exc, claims_of(exc, claims), style)
    return open_page(token, target, style, status=200)


def claims_of(exc: DomainError, claims: TokenClaims | None) -> TokenClaims | None:
    """The claims a refused token still names: an expired one names its request."""
    return exc.claims if isinstance(exc, TokenExpired) else claims


def open_page(
    token: str, target: Target, style: str, status: int, error: str | None = None, answer: forms.Answer | None = None
) -> Response:
    # A link whose minting key was revoked (or whose person left the directory) shows the request, never a form
    # its decision would be refused from.
    decides = surface().stands(target)
    view = view_of(target.state, target.claims, target.interrupt.payload, decides=decides)
    title = approval.title_of(view.payload)
    if not decides:
        return html_response(status, title, approval.render_open(view, style_nonce=style, csrf_field=None), style)
    proof_cookie, https, sent = csrf.cookie_of(token), over_https(), request_cookies()
    browser = csrf.browser_secret(proof_cookie.held_or_earlier(sent, https))
    form_field = csrf.field_value(csrf.derive_key(surface().kid_secret(token)), token, browser)
    cookies = [proof_cookie.made(browser, csrf.COOKIE_MAX_AGE_S, https)]
    if proof_cookie.earlier(sent, https) is not None:
        cookies.append(proof_cookie.earlier_ended())
    markup = approval.render_open(view, style_nonce=style, csrf_field=form_field, error=error, answer=answer)
    return html_response(status, title, markup, style, cookies=cookies)


def page_post(token: str) -> Response:
    """The page's form sent. Each refusal is a page, or, to an API client whose Accept ranks JSON first, the refusal's
    envelope with the same status (http.refused_as_asked), as the console's forms answer."""
    style = _nonce()
    claims: TokenClaims | None = None
    try:
        claims = surface().verify(token)
        form = posted.read_form(raw_body(), forms.MAX_FORM_FIELDS)
        if not form_is_same_site(token, form):
            cross_site = partial(result_page, 403, approval.Result("cross-site"), None, style)
            return refused_as_asked(Forbidden(CROSS_SITE), cross_site)
        target = surface().target(claims)
    except DomainError as exc:
        return refused_as_asked(exc, partial(error_page, exc, claims_of(exc, claims), style))
    if not claims.decides:
        seeing = approval.Result("forbidden", detail="This link lets you see this request, not decide it.")
        return refused_as_asked(inspect_only(claims), partial(result_page, 403, seeing, None, style))
    payload = target.interrupt.payload
    try:
        example = forms.example_answer(payload, form)
        if example is not None:
            # An example pressed fills the form in; the person checks it and sends it.
            return open_page(token, target, style, status=200, answer=example)
        resume_value = forms.resume_from_form(payload, form)
        surface().resolve_target(target, resume_value, written_numbers=typed_spellings(form))
    except forms.FormError as exc:
        return not_accepted(token, target, style, form, exc, exc.as_refusal())
    except DomainError as exc:
        if exc.code == "validation_error":
            return not_accepted(token, target, style, form, forms.refusal(payload, exc.message, exc.details), exc)
        return refused_as_asked(exc, partial(error_page, exc, claims, style))
    return decided_page(target, resume_value, style)


def not_accepted(
    token: str, target: Target, style: str, form: dict[str, list[str]], said: forms.FormError, refusal: DomainError
) -> Response:
    """The page again with the form as it was sent, each problem said beside its field; to an API client asking for
    JSON, `refusal`'s envelope."""
    page = partial(open_page, token, target, style, 400, str(said), forms.Answer(form, said.fields))
    return refused_as_asked(refusal, page)


def form_is_same_site(token: str, form: dict[str, list[str]]) -> bool:
    event = app.current_event
    if csrf.cross_site(event.headers.get("origin"), event.headers.get("sec-fetch-site"), base_url()):
        return False
    key = csrf.derive_key(surface().kid_secret(token))
    browser = csrf.cookie_of(token).held_or_earlier(request_cookies(), over_https())
    return csrf.check(key, token, posted.one(form, csrf.FIELD), browser)


def decided_page(target: Target, resume_value: Any, style: str) -> Response:
    claims = target.claims
    after, _ = services().runs.load_run(target.state.tenant, claims.run_id)
    still = after.interrupts.get(claims.node_id)
    action = resume_value.get("action") if isinstance(resume_value, dict) else None
    kind = target.interrupt.kind
    verdict = ""
    if still is not None and still.interruptId == claims.interrupt_id:
        counted = votes_cast(still)
        required = (target.interrupt.payload.get("data") or {}).get("requiredApprovals", 1)
        result = approval.Result(
            "recorded", action=action, run_status=after.status, extra={"counted": counted, "required": required}
        )
    else:
        result = approval.Result(
            "decided" if kind == "approval" else "answered", action=action, run_status=after.status
        )
        verdict = approval.verdict(what_became_of(after, claims, None))
    return result_page(200, result, view_of(after, claims, target.interrupt.payload, verdict), style)


def votes_cast(interrupt: OpenInterrupt) -> int:
    """The votes counted towards the gate: an `ask` is a question and a `delegate` a hand-over, not votes."""
    return sum(1 for v in interrupt.votes if v.action not in NOT_A_VOTE)


# A refusal's message (its start) → what the page says instead: the people reading it hold a link, not a key.
REFUSAL_WORDS = {
    "this token may inspect": "This link lets you see this request, not decide it.",
    "the key that minted this token": "Whoever sent this link may no longer decide requests. Ask them for a new link.",
    "this principal is not an eligible approver": "You are not one of the people who may decide this request.",
}


def refusal_words(exc: DomainError) -> str:
    if exc.code == "forbidden" and (exc.details or {}).get("field") == "approversList":
        return "You are not one of the approvers named for this request."
    said = next((words for start, words in REFUSAL_WORDS.items() if exc.message.startswith(start)), None)
    return said or forms.in_plain_words(exc.message)


def error_page(exc: DomainError, claims: TokenClaims | None, style: str) -> Response:
    kind = PAGE_KINDS.get(exc.code, "error")
    detail = refusal_words(exc) if kind in ("forbidden", "not-accepted", "error") else None
    view = None
    extra: dict[str, Any] = {}
    if claims is not None and kind in ("already", "vote-cast", "forbidden", "expired"):
        try:
            state, _ = services().runs.load_run(tenant_of(claims.run_id), claims.run_id)
        except DomainError:
            state = None
        if state is not None:
            time_zone = approver_time_zone(state.tenant, claims)
            extra = what_became_of(state, claims, time_zone)
            open_interrupt = state.interrupts.get(claims.node_id)
            payload = extra.pop("payload", None) or (open_interrupt.payload if open_interrupt is not None else {})
            view = view_of(state, claims, payload, approval.verdict(extra))
            if kind == "expired" and not extra:
                extra = whom_to_ask(state, claims, view)
    run_status = view.run_status if view else None
    result = approval.Result(kind, run_status=run_status, detail=detail, extra=extra)
    return result_page(status_of(exc), result, view, style)


def what_became_of(state: RunState, claims: TokenClaims, time_zone: str | None) -> dict[str, Any]:
    """What became of the interrupt a link names, from its stored resolution: decided (the decision, who made it,
    when, the comment), timed out, or withdrawn with its run (and why); {} while it is open or when there is none to
    tell. `payload`: what the request asked."""
    open_interrupt = state.interrupts.get(claims.node_id)
    if open_interrupt is not None and open_interrupt.interruptId == claims.interrupt_id:
        return {}
    visit = visit_of(state, claims.node_id, claims.interrupt_id)
    if visit is None:
        return {}
    item = services().store.closed_interrupt(state.runId, interrupt_key(state.runId, claims.node_id, visit))
    if item is None or item.get("status") == "open":
        return {}
    payload = item.get("payload") or {}
    resolution = item.get("resolution") or {}
    at = approval.when(resolution["at"], time_zone) if resolution.get("at") else None
    told: dict[str, Any] = {"payload": payload, "kind": payload.get("kind"), "at": at}
    if item.get("status") == "cancelled":
        return {**told, **withdrawn(state, resolution)}
    if resolution.get("timedOut") or resolution.get("reason") == "timeout":
        return {**told, "timedOut": True}
    value = resolution.get("resumeValue")
    decision = resolution.get("decision") or (value.get("action") if isinstance(value, dict) else None) or "answered"
    comment = next((value[k] for k in ("comment", "feedback") if isinstance(value, dict) and isinstance(value.get(k), str)), None)
    return {**told, "decision": decision, "by": display_name(state.tenant, resolution.get("resolvedBy")), "comment": comment}


def withdrawn(state: RunState, resolution: dict[str, Any]) -> dict[str, Any]:
    """A request closed with its run: cancelled (by whom, and why, from the run's `run.cancelled`), or stopped."""
    from interlude.engine.subworkflows import PARENT_CANCELLED

    if resolution.get("reason") != "run cancelled":
        return {"status": "withdrawn"}
    cancelled: dict[str, Any] = next(
        (e["payload"] for e in reversed(services().store.read_events(state.runId, state.nextSeq - 3)) if e["type"] == "run.cancelled"),
        {},
    )
    by = cancelled.get("cancelledBy")
    return {
        "status": "cancelled",
        "reason": cancelled.get("reason") if cancelled.get("reason") != PARENT_CANCELLED else "its parent run was cancelled",
        "by": display_name(state.tenant, {"subjectId": by}) if isinstance(by, str) else None,
    }


def whom_to_ask(state: RunState, claims: TokenClaims, view: approval.View) -> dict[str, Any]:
    """For a link past its time whose request is still open: which request, until when, and who can send a new
    link (whoever started the run) or decide in anyone's place (the gate's and the tenant's override principals)."""
    definition = services().definitions.workflow(state.tenant, state.workflowId, state.workflowVersion)
    gate = node_config(definition, claims.node_id)
    overrides = [*(gate.get("overridePrincipals") or []), *tenant_settings(services().interactions, state.tenant).overridePrincipals]
    names = [display_name(state.tenant, {"subjectId": p}) for p in dict.fromkeys(str(p) for p in overrides)]
    return {
        "title": approval.title_of(view.payload) if view.payload else None,
        "expiredAt": approval.when(datetime.fromtimestamp(claims.expires_at, UTC), view.time_zone),
        "askedBy": view.asked_by,
        "overrides": [n for n in names if n],
    }


def display_name(tenant: str, subject: Any) -> str | None:
    """A person as the page names them: their directory display name, else their subject id."""
    if not isinstance(subject, dict) or not subject.get("subjectId"):
        return None
    return directory_name(services().directory_records, tenant, str(subject["subjectId"]))


def approver_time_zone(tenant: str, claims: TokenClaims) -> str | None:
    """The time zone of the person the link acts for (the directory entry of a personal link's principal, or of its
    minter's subject): the zone their mail showed; None: show UTC."""
    if claims.principal is not None:
        subject_id: str | None = claims.principal
    elif claims.minter is not None:
        record = services().store.get_api_key(claims.minter)
        subject_id = (record or {}).get("subject", {}).get("subjectId")
    else:
        return None
    entry = entry_of(services().directory_records, tenant, subject_id) if subject_id else None
    return entry.timeZone if entry is not None else None


def result_page(status: int, result: approval.Result, view: approval.View | None, style: str) -> Response:
    _, heading, _ = approval.outcome_words(result)
    return html_response(status, heading, approval.render_result(result, view), style)


def node_config(definition: WorkflowDefinition, node_id: str) -> dict[str, Any]:
    try:
        return definition.node(node_id).config
    except KeyError:
        return {}


def view_of(
    state: RunState, claims: TokenClaims, payload: dict[str, Any], verdict: str = "", decides: bool = True
) -> approval.View:
    """`verdict`: how the gate ended, when its state alone would mislead (approval.verdict); `decides`: False when
    the link no longer decides, whatever its claims say (TokenSurface.stands)."""
    definition = services().definitions.workflow(state.tenant, state.workflowId, state.workflowVersion)
    names = names_of(definition, state.workflowId)
    nodes = [
        GraphNode(
            n.id,
            n.typeId,
            state.nodes[n.id].status if n.id in state.nodes else "pending",
            names.step(n.id),
            verdict if n.id == claims.node_id else "",
        )
        for n in definition.nodes
    ]
    edges = [(e.sourceNodeId, e.targetNodeId) for e in definition.edges]
    open_interrupt = state.interrupts.get(claims.node_id)
    votes = (
        votes_cast(open_interrupt)
        if open_interrupt is not None and open_interrupt.interruptId == claims.interrupt_id
        else 0
    )
    return approval.View(
        # Its numbers as the run's caller wrote them (docs/adr/0119).
        payload=spelled(payload, state.writtenNumbers),
        node_id=claims.node_id,
        intent=claims.intent if claims.decides and decides else "inspect",
        run_status=state.status,
        expires_at=claims.expires_at,
        nodes=nodes,
        edges=edges,
        votes=votes,
        asked_by=display_name(state.tenant, (state.owner or {}).get("subject")),
        asked_at=raised_at(state, claims),
        workflow_name=names.workflow,
        time_zone=approver_time_zone(state.tenant, claims),
        labels=names.labels_of(claims.node_id),
    )


def raised_at(state: RunState, claims: TokenClaims) -> str | None:
    """When the interrupt the link names was raised (from the run while it is open, else its stored item)."""
    open_interrupt = state.interrupts.get(claims.node_id)
    if open_interrupt is not None and open_interrupt.interruptId == claims.interrupt_id:
        return open_interrupt.raisedAt
    visit = visit_of(state, claims.node_id, claims.interrupt_id)
    return services().store.raised_at(state.runId, interrupt_key(state.runId, claims.node_id, visit)) if visit else None
