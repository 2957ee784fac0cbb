"""The console's routes (wiring.ROUTES, operations `console*`): a session from the cookie, the services, a page.

Every request reads its session's item (sign-out deletes it: a copy of the cookie is refused at once, everywhere)
and re-reads the key it signed in with (the keys service's cached read, the deployment's key_cache_seconds): a revoked or expired
key ends the session on the instance that revoked it at once and on every other within that bound. Every page and
form holds the scope of the API operation it performs (wiring.Route.acts_as, api.http.authorize). Every form post
must come from the console itself (Origin/Sec-Fetch-Site) and carry the session's proof. A refusal is a page with
the refusal's status, never a server error.
"""

from __future__ import annotations

import functools
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar
from urllib.parse import unquote

from aws_lambda_powertools.event_handler.api_gateway import Response
from aws_lambda_powertools.shared.cookies import Cookie

from interlude import wiring
from interlude.adapters.keyring_store import load_key_ring
from interlude.api.console import pages, readable
from interlude.api.console import session as sessions
from interlude.api.console.pages import Frame, Notice
from interlude.api.errors import status_of
from interlude.api.http import (
    OPENWOP_VERSION,
    REFUSAL_PAGES,
    ROUTES_BY_OPERATION,
    admit,
    app,
    authorize,
    base_url,
    over_https,
    query_int,
    raw_body,
    refused_as_asked,
    request_cookies,
    scope_of,
    standing,
)
from interlude.api.idempotency import idempotent, key_namespace, namespace_of
from interlude.api.page import approval, csrf, forms
from interlude.api.page.cookies import PageCookie
from interlude.api.page.fields import typed_spellings
from interlude.api.page.graph import GraphNode
from interlude.api.page.headers import CSP, content_security_policy
from interlude.api.page.names import Names, names_of
from interlude.api.page.posted import one, read_form
from interlude.api.page.text import spelled
from interlude.api.replay import replay
from interlude.api.routes import route
from interlude.api.run_listing import METADATA_PARAM, search_filters
from interlude.app import audit, audit_entries
from interlude.app import inbox as approver_inbox
from interlude.app.facts import display_names, entry_of
from interlude.app.forks import Forked
from interlude.app.replay import CALLBACK_PREFIX, Family, bound_delivery
from interlude.app.run_listing import MAX_BULK_CANCEL
from interlude.app.snapshots import snapshot as run_snapshot
from interlude.composition import services
from interlude.config import settings
from interlude.domain.clock import iso_epoch
from interlude.domain.errors import DomainError, Forbidden, Invalid, MethodNotAllowed, Unauthenticated
from interlude.domain.ids import check_author_id, from_wire
from interlude.domain.models.principal_requests import AssignGateRequest
from interlude.domain.models.requests import CreateKeyRequest, CreateRunRequest, ForkRunRequest
from interlude.domain.models.run import PUBLIC_VOTE_FIELDS, OpenInterrupt, RunState
from interlude.domain.models.webhooks import DEAD_LETTER_MAX_PAGE
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.domain.validation import parse
from interlude.engine.nodetypes import STEP_INPUTS, STEP_INPUTS_DIGEST, bind_inputs
from interlude.engine.run import action_not_retryable
from interlude.rules import inputs as declared_inputs
from interlude.rules.auth import Principal, run_resolver
from interlude.rules.interrupts.claims import Move
from interlude.rules.tokens.scheme import KeyRing
from interlude.store.tenant_standing import SUSPENDED_CODE

MAX_FORM_FIELDS = 250
EVENTS_PER_PAGE = 200
RUNS_PER_PAGE = 25
AUDIT_PER_PAGE = 50
# A run page looks for its token mints among the tenant's latest TOKEN_SCAN_PAGES x audit.MAX_PAGE audit entries.
TOKEN_SCAN_PAGES = 5
# A cookie signed by a kid this instance has not seen yet makes it re-read the ring, at most this often.
RING_REFETCH_INTERVAL_S = 5.0
_last_ring_refetch = [float("-inf")]
E = TypeVar("E", bound=DomainError)
P = ParamSpec("P")


class NotSignedIn(Exception):
    """No session cookie, or one that does not verify: the person signs in (again)."""


@dataclass(frozen=True)
class Signed:
    session: sessions.Session
    principal: Principal
    kid_secret: bytes
    frame: Frame


# -- the key ring and the session ------------------------------------------------------------------


def ring(force: bool = False) -> KeyRing:
    cfg = settings()
    return load_key_ring(cfg.key_ring_secret, max_age_s=cfg.key_ring_cache_seconds, force_fetch=force)


def ring_with(kid: str | None) -> KeyRing:
    """The ring, read again (rate-limited) when it lacks `kid`: another instance may have rotated it."""
    held = ring()
    if kid is None or kid in held.keys or time.monotonic() - _last_ring_refetch[0] < RING_REFETCH_INTERVAL_S:
        return held
    _last_ring_refetch[0] = time.monotonic()
    return ring(force=True)


def now_s() -> int:
    return int(services().clock().timestamp())


def session_cookie() -> str | None:
    """The session the browser holds, as this release set it. One an earlier release set unprefixed over https is not
    read (docs/adr/0189): its holder signs in again, and the sign-in page ends it."""
    return sessions.SESSION.held(request_cookies(), over_https())


def signed_in() -> Signed:
    cookie = session_cookie()
    kid = sessions.kid_of(cookie)
    keys = ring_with(kid).keys
    found = sessions.unseal(cookie, keys, now_s())
    if found is None or kid is None:
        raise NotSignedIn()
    principal = services().keys.signed_in_principal(
        found.key_id, found.tenant, str(found.subject.get("subjectId")), found.nonce
    )
    admit(principal)
    # The session's scopes bound what it may do, whatever the key record says now.
    principal = principal._replace(scopes=principal.scopes & frozenset(found.scopes))
    frame = Frame(
        subject_id=str(found.subject.get("subjectId")),
        tenant=found.tenant,
        proof=sessions.form_proof(keys[kid], found),
        scopes=principal.scopes,
        holder=holder_name(found.tenant, str(found.subject.get("subjectId"))),
    )
    return Signed(found, principal, keys[kid], frame)


def holder_name(tenant: str, subject_id: str) -> str | None:
    """What the directory calls a key's holder (one GetItem), or None when it has no entry naming them."""
    entry = entry_of(services().directory_records, tenant, subject_id)
    return entry.displayName if entry is not None and entry.displayName else None


def cookie(spec: PageCookie, value: str, max_age_s: int) -> Cookie:
    return spec.made(value, max_age_s, over_https())


def ended_cookie() -> Cookie:
    return cookie(sessions.SESSION, "", 0)


def earlier_cookies_ended() -> list[Cookie]:
    """The console's cookies an earlier release set unprefixed over https that the browser still sends, ended."""
    sent, https = request_cookies(), over_https()
    return [spec.earlier_ended() for spec in (sessions.SESSION, sessions.SIGN_IN) if spec.earlier(sent, https) is not None]


# -- answers ----------------------------------------------------------------------------------------


def html(
    status: int,
    title: str,
    body: str,
    frame: Frame | None,
    current: str = "",
    cookies: list[Cookie] | None = None,
    go_to: str | None = None,
    refresh_s: int | None = None,
) -> Response:
    nonce = approval_nonce()
    return Response(
        status_code=status,
        content_type="text/html; charset=utf-8",
        body=pages.document(title, body, nonce, frame, current, go_to, refresh_s),
        headers={"OpenWOP-Version": OPENWOP_VERSION, CSP: content_security_policy(nonce)},
        cookies=cookies,
    )


def approval_nonce() -> str:
    return secrets.token_urlsafe(18)


def see_other(location: str, cookies: list[Cookie] | None = None) -> Response:
    return Response(
        status_code=303,
        content_type="text/html; charset=utf-8",
        body=pages.see_other(location),
        headers={"Location": location, "OpenWOP-Version": OPENWOP_VERSION},
        cookies=cookies,
    )


def as_asked(page: Callable[Concatenate[E, P], Response]) -> Callable[Concatenate[E, P], Response]:
    """A builder of a refusal's page (the refusal first), which answers an API client asking for JSON with the
    refusal's envelope instead (http.refused_as_asked)."""

    @functools.wraps(page)
    def answer(exc: E, /, *args: P.args, **kwargs: P.kwargs) -> Response:
        return refused_as_asked(exc, lambda: page(exc, *args, **kwargs))

    return answer


def sign_in_page(status: int, notice: Notice | None, extra_cookies: list[Cookie] | None = None) -> Response:
    held = ring()
    pre = sessions.pre_session(sessions.SIGN_IN.held_or_earlier(request_cookies(), over_https()))
    proof = sessions.sign_in_proof(held.current_kid, held.keys[held.current_kid], pre)
    cookies = [*(extra_cookies or []), cookie(sessions.SIGN_IN, pre, sessions.SIGN_IN_COOKIE_MAX_AGE_S)]
    cookies += earlier_cookies_ended()
    return html(status, "Sign in", pages.sign_in(proof, notice), None, cookies=cookies)


@as_asked
def sign_in_refused(exc: DomainError, notice: Notice, extra_cookies: list[Cookie] | None = None) -> Response:
    """A refusal that asks the person to sign in (again): the sign-in page with the refusal's status and `notice`."""
    return sign_in_page(status_of(exc), notice, extra_cookies)


@as_asked
def refused_page(exc: DomainError, signed: Signed | None, current: str) -> Response:
    """A refusal as a page: its status, in plain words."""
    status = status_of(exc)
    sentence = refusal_words(exc)
    notice = Notice("bad" if status != 409 else "warn", REFUSAL_HEADINGS.get(status, "That did not work"), sentence)
    body = pages.message(notice, ("/console/inbox", "Back to the inbox"))
    response = html(status, notice.heading, body, signed.frame if signed else None, current)
    if exc.retry_after_s is not None:
        response.headers["Retry-After"] = str(exc.retry_after_s)
    return response


@as_asked
def no_such_page(exc: DomainError) -> Response:
    """An address in the console that names no page (one mistyped, a run id pasted as tenant/id), or a form's address
    opened: a page in words, with the frame when signed in (http.REFUSAL_PAGES). A request whose handler failed
    (the server's fault, or a service it calls being busy): a page saying so, without the frame, whose reading
    could fail the same way."""
    status = status_of(exc)
    if status >= 500:
        return failure_page(exc, status)
    try:
        frame: Frame | None = signed_in().frame
    except (NotSignedIn, DomainError):
        frame = None
    words = address_words(status) or refusal_words(exc)
    notice = Notice("bad", REFUSAL_HEADINGS.get(status, "That did not work"), words)
    response = html(status, notice.heading, pages.message(notice, ("/console/inbox", "Back to the inbox")), frame)
    if isinstance(exc, MethodNotAllowed):
        response.headers["Allow"] = ", ".join(exc.allowed)
    return response


def address_words(status: int) -> str | None:
    """What a page says of an address no route answers: none at all, or one that answers another method."""
    if status == 404:
        return "There is no page at this address."
    if status != 405:
        return None
    if app.current_event.http_method in ("GET", "HEAD"):
        return "This address is a form's, not a page to open."
    return "This address is a page to open; nothing can be sent to it."


# What a failure (the server's, or a busy service's) says: whether anything was done is not known to the page.
BUSY_WORDS = "Interlude is busy just now. Try again in a moment."
FAILED_WORDS = "Something went wrong on Interlude's side. Try again in a moment; if it happens again, tell your administrator."


def failure_page(exc: DomainError, status: int) -> Response:
    notice = Notice("bad", REFUSAL_HEADINGS.get(status, "Something went wrong"), BUSY_WORDS if status == 503 else FAILED_WORDS)
    response = html(status, notice.heading, pages.message(notice, ("/console/inbox", "Back to the inbox")), None)
    if exc.retry_after_s is not None:
        response.headers["Retry-After"] = str(exc.retry_after_s)
    return response


REFUSAL_PAGES[__name__.removeprefix("interlude.api.")] = no_such_page


REFUSAL_HEADINGS = {
    400: "That was not accepted",
    403: "Not allowed",
    404: "Not found",
    409: "Already settled",
    410: "No longer available",
    413: "Too large",
    429: "Too many requests",
    500: "Something went wrong",
    503: "Busy, try again",
}


def session_ended(exc: Unauthenticated) -> Response:
    notice = Notice("warn", "Your session has ended", exc.message[:1].upper() + exc.message[1:] + ". Sign in again.")
    return sign_in_refused(exc, notice, [ended_cookie()])


def may(principal: Principal, operation: str) -> bool:
    """Whether the session may use console route `operation` (a page to show after an action, a form to offer)."""
    scope = scope_of(operation)
    return scope is None or scope in principal.scopes


def page(operation: str, current: str) -> Callable[[Callable[..., Response]], Callable[..., Response]]:
    """Registers console route `operation`, a signed-in GET holding the scope of the API operation it performs:
    no session → the sign-in page (303); a refusal → its page."""

    def decorator(render: Callable[..., Response]) -> Callable[..., Response]:
        def handler(**params: str) -> Response:
            signed: Signed | None = None
            try:
                signed = signed_in()
                authorize(signed.principal, operation)
                return render(signed, **params)
            except NotSignedIn:
                return see_other("/console/sign-in")
            except Unauthenticated as exc:
                return session_ended(exc)
            except DomainError as exc:
                return refused_page(exc, signed, current)

        handler.__name__ = render.__name__
        return route(operation)(handler)

    return decorator


def form_post(operation: str, current: str) -> Callable[[Callable[..., Response]], Callable[..., Response]]:
    """Registers console route `operation`, a signed-in form post holding the scope of the API operation it
    performs (checked before anything is read or done), from this console (Origin, Sec-Fetch-Site) and carrying
    the session's proof."""

    spec = ROUTES_BY_OPERATION[operation]

    def decorator(act: Callable[..., Response]) -> Callable[..., Response]:
        def handler(**params: str) -> Response:
            signed: Signed | None = None
            try:
                signed = signed_in()
                authorize(signed.principal, operation)
                return proven_and_keyed(spec, act, signed, current, **params)
            except NotSignedIn:
                refusal = Unauthenticated("this browser holds no console session")
                return sign_in_refused(refusal, Notice("warn", "Please sign in", "Your session has ended; sign in again."))
            except Unauthenticated as exc:
                return session_ended(exc)
            except DomainError as exc:
                return refused_page(exc, signed, current)

        handler.__name__ = act.__name__
        return route(operation)(handler)

    return decorator


def proven_and_keyed(spec: wiring.Route, act: Callable[..., Response], signed: Signed, current: str, **params: str) -> Response:
    """`act` on the posted form once it comes from this console with the session's proof, honouring Idempotency-Key
    in the session's tenant (its key's own for a credential's form) only now (wiring.Route.keyed_in_handler): what it
    keeps is the page answered."""
    form = read_form(raw_body(), MAX_FORM_FIELDS)
    if not same_site() or not sessions.form_proof_ok(signed.kid_secret, signed.session, one(form, "csrf")):
        return cross_site_page(Forbidden(CROSS_SITE), signed.frame, current)
    acting = functools.partial(answered_as_page, act, signed, form, current)
    return idempotent(spec, acting, namespace_of(spec, signed.principal), session_cookie())(**params)


def answered_as_page(act: Callable[..., Response], signed: Signed, form: dict[str, list[str]], current: str, **params: str) -> Response:
    try:
        return act(signed, form, **params)
    except Unauthenticated as exc:
        return session_ended(exc)
    except DomainError as exc:
        return refused_page(exc, signed, current)


# Why a form is refused that did not come from the console's own page (its proof or its origin).
CROSS_SITE = "the form did not come from this console's own page"


@as_asked
def cross_site_page(exc: Forbidden, frame: Frame | None, current: str) -> Response:
    notice = Notice(
        "bad",
        "Not sent from this console",
        "The form did not come from this console's own page, so nothing was changed. Reload the page and try again.",
    )
    return html(403, notice.heading, pages.message(notice, ("/console/inbox", "Back to the inbox")), frame, current)


def same_site() -> bool:
    headers = app.current_event.headers
    return not csrf.cross_site(headers.get("origin"), headers.get("sec-fetch-site"), base_url())


# -- sign in and out ---------------------------------------------------------------------------------


@route("consoleHome")
def console_home() -> Response:
    if session_cookie():
        return see_other("/console/inbox")
    return sign_in_page(200, None)


@route("consoleRoot")
def console_root() -> Response:
    return see_other("/console")


@route("consoleSignInPage")
def console_sign_in_page() -> Response:
    return sign_in_page(200, None)


# Why a key was refused at sign-in (the refusal's start), in the words of someone pasting one into a form.
SIGN_IN_WORDS = {
    "missing Authorization": "Paste an API key first.",
    "the bearer credential is not an Interlude API key": "That is not an Interlude API key: check that you pasted all of it.",
}


def sign_in_words(message: str) -> str:
    return next((words for start, words in SIGN_IN_WORDS.items() if message.startswith(start)), forms.in_plain_words(message))


@route("consoleSignIn")
def console_sign_in() -> Response:
    try:
        form = read_form(raw_body(), MAX_FORM_FIELDS)
        proof, pasted = one(form, "csrf"), (one(form, "api_key") or "").strip()
    except DomainError as exc:
        return not_signed_in(exc)
    pre = sessions.SIGN_IN.held_or_earlier(request_cookies(), over_https())
    if not same_site() or not sessions.sign_in_proof_ok(ring_with(None).keys, pre, proof):
        notice = Notice("bad", "Not sent from this console", "Reload this page and sign in again.")
        return sign_in_refused(Forbidden(CROSS_SITE), notice)
    try:
        principal = services().keys.authenticate(f"Bearer {pasted}")
        standing().require_active(principal.tenant)
    except Unauthenticated as exc:
        return sign_in_refused(exc, Notice("bad", "That key was not accepted", sign_in_words(exc.message)))
    except DomainError as exc:
        return sign_in_refused(exc, Notice("bad", "Not allowed", sign_in_words(exc.message)))
    # Idempotency-Key only now, in the namespace of the key that signs in (wiring.Route.keyed_in_handler): another
    # tenant's sign-in, or another key's, never meets its record; the same sign-in sent again is answered as before.
    keyed = idempotent(ROUTES_BY_OPERATION["consoleSignIn"], functools.partial(session_opened, principal), key_namespace(principal))
    try:
        return keyed()
    except DomainError as exc:
        return not_signed_in(exc)


def not_signed_in(exc: DomainError) -> Response:
    return sign_in_refused(exc, Notice("bad", "That was not accepted", forms.in_plain_words(exc.message)))


def session_opened(principal: Principal) -> Response:
    held = ring()
    started = sessions.new_session(principal.key_id, principal.tenant, principal.subject, principal.scopes, now_s())
    services().keys.open_console_session(principal, started.nonce, started.expires_at)
    value = sessions.seal(started, held.current_kid, held.keys[held.current_kid])
    # A page that moves on to the inbox (meta refresh), so reloading the inbox never re-posts the key.
    holder = holder_name(principal.tenant, str(principal.subject["subjectId"]))
    notice = Notice("ok", "Signed in", f"{pages.signed_in_words(holder, principal.scopes)}.")
    return html(
        200,
        "Signed in",
        pages.message(notice, ("/console/inbox", "Continue to the inbox")),
        None,
        cookies=[
            cookie(sessions.SESSION, value, sessions.SESSION_TTL_S),
            cookie(sessions.SIGN_IN, "", 0),
            *earlier_cookies_ended(),
        ],
        go_to="/console/inbox",
    )


@route("consoleSignOut")
def console_sign_out() -> Response:
    try:
        signed = signed_in()
    except DomainError as exc:
        if exc.code == SUSPENDED_CODE:
            # Refused like every request of a suspended tenant: the session stays as it is.
            return refused_page(exc, None, "")
        return signed_out_page()
    except NotSignedIn:
        return signed_out_page()
    try:
        return proven_and_keyed(ROUTES_BY_OPERATION["consoleSignOut"], end_session, signed, "")
    except DomainError as exc:
        return refused_page(exc, signed, "")


def end_session(signed: Signed, form: dict[str, list[str]]) -> Response:
    services().keys.end_console_session(signed.session.tenant, signed.session.nonce)
    return signed_out_page()


def signed_out_page() -> Response:
    return sign_in_page(200, Notice("ok", "Signed out", "This browser holds no session any more."), [ended_cookie()])


# -- inbox and decisions -----------------------------------------------------------------------------


def inbox_page(
    signed: Signed,
    notice: Notice | None,
    status: int = 200,
    cursor: str | None = None,
    filled: pages.Filled | None = None,
) -> Response:
    authorize(signed.principal, "consoleInbox")
    query = inbox_query()
    listed = services().inbox.inbox(signed.principal, approver_inbox.DEFAULT_INBOX_LIMIT, query.filters(), cursor)
    items = listed["interrupts"]
    contexts = run_contexts([i["runId"] for i in items])
    people = people_named(
        signed.principal.tenant,
        {s for i in items for s in pages.voters(i.get("votes") or [])}
        | named_approvers(items)
        | {who for context in contexts.values() for pair in context.assignees.values() for who in pair if who}
        | {str(p) for i in items for p in i.get("onBehalfOf") or []},
    )
    body = pages.inbox(
        signed.frame,
        items,
        listed.get("nextCursor"),
        notice,
        contexts,
        filled,
        people,
        query,
        approver_inbox.INTERRUPT_KINDS,
        may(signed.principal, "consoleClaim"),
        workflow_choices(signed.principal.tenant),
    )
    return html(status, "Inbox", body, signed.frame, "inbox")


def inbox_query() -> pages.InboxQuery:
    """The inbox's filters and order from the request, checked as GET /interrupts checks its own."""
    query = app.current_event.query_string_parameters or {}
    kind = query.get("kind") or None
    if kind is not None and kind not in approver_inbox.INTERRUPT_KINDS:
        raise Invalid(f"kind must be one of {list(approver_inbox.INTERRUPT_KINDS)}", {"field": "kind"})
    workflow_id = (
        check_author_id(query["workflowId"].strip(), "workflowId") if (query.get("workflowId") or "").strip() else None
    )
    sort = query.get("sort") or "newest"
    if sort not in dict(pages.INBOX_SORTS):
        raise Invalid(f"sort must be one of {[s for s, _ in pages.INBOX_SORTS]}", {"field": "sort"})
    claim = query.get("claim") or None
    if claim is not None and claim not in dict(pages.INBOX_CLAIMS):
        raise Invalid(f"claim must be one of {[c for c, _ in pages.INBOX_CLAIMS]}", {"field": "claim"})
    return pages.InboxQuery(kind, workflow_id, sort, claim)


def named_approvers(items: list[dict[str, Any]]) -> set[str]:
    """The people approval gates on this page name as their approvers (to say who may still vote, by name)."""
    return {str(a) for i in items for a in ((i.get("payload") or {}).get("data") or {}).get("approversList") or []}


def run_contexts(run_ids: list[str]) -> dict[str, pages.RunContext]:
    """What each run's workflow version calls its parts, its inputs and its open gates' deadlines (one batch read of
    the runs; versions are cached)."""
    runs = services().store.get_runs(list(dict.fromkeys(run_ids))) if run_ids else {}
    return {
        run_id: pages.RunContext(
            names_of(
                services().definitions.workflow(state.tenant, state.workflowId, state.workflowVersion), state.workflowId
            ),
            spelled(state.inputs, state.writtenNumbers),
            {node_id: iso_epoch(oi.deadline) for node_id, oi in state.interrupts.items() if oi.deadline is not None},
            {node_id: (oi.assignee, oi.assignedBy) for node_id, oi in state.interrupts.items() if oi.assignee},
            state.writtenNumbers,
        )
        for run_id, (state, _) in runs.items()
    }


@page("consoleInbox", "inbox")
def console_inbox(signed: Signed) -> Response:
    return inbox_page(signed, None, cursor=(app.current_event.query_string_parameters or {}).get("cursor"))


@form_post("consoleDecide", "inbox")
def console_decide(signed: Signed, form: dict[str, list[str]], runId: str, nodeId: str) -> Response:  # noqa: N803
    run_id = from_wire(runId)
    node_id = check_author_id(unquote(nodeId), "nodeId")
    back = one(form, "back")
    state, _ = services().runs.load_run(signed.principal.tenant, run_id)
    interrupt = services().decisions.open_interrupt(state, node_id)
    step = names_of(services().definitions.workflow(state.tenant, state.workflowId, state.workflowVersion), state.workflowId).step(node_id)
    try:
        example = forms.example_answer(interrupt.payload, form)
        if example is not None:
            # An example pressed fills the gate's form in; the person checks it and sends it.
            return after_decision(signed, back, run_id, None, 200, (run_id, node_id, example))
        value = forms.resume_from_form(interrupt.payload, form)
        outcome = services().decisions.resolve_interrupt(
            signed.principal, run_id, node_id, value, surface="console", written_numbers=typed_spellings(form)
        )
    except forms.FormError as exc:
        return refused(signed, back, run_id, node_id, step, exc, form, exc.as_refusal())
    except DomainError as exc:
        if isinstance(exc, Unauthenticated):
            raise
        if exc.code == "validation_error":
            said = forms.refusal(interrupt.payload, exc.message, exc.details)
            return refused(signed, back, run_id, node_id, step, said, form, exc)
        notice = refusal_notice(exc, "Nothing was changed")
        return refused_with(exc, lambda status: after_decision(signed, back, run_id, notice, status))
    words = approval.RUN_WORDS.get(outcome["status"], outcome["status"])
    still_open = node_id in services().runs.load_run(signed.principal.tenant, run_id)[0].interrupts
    heading = "Your vote was counted" if still_open else "Decision recorded"
    notice = Notice("ok", heading, f"{step} of run {run_id}: the run is now {words}.")
    return after_decision(signed, back, run_id, notice, 200)




def claim_post(signed: Signed, form: dict[str, list[str]], run_id: str, node_id: str, move: Move) -> Response:
    """Claim, release or assign the gate as the matching API route does (services().claims), then the page it came
    from (the inbox, or the run), with what came of it."""
    back = one(form, "back")
    named = (one(form, "assignee") or "").strip() or None
    try:
        got = services().claims.move(signed.principal, run_id, check_author_id(unquote(node_id), "nodeId"), move, named, surface="console")
    except DomainError as exc:
        if isinstance(exc, Unauthenticated) or exc.code == "validation_error":
            raise
        notice = refusal_notice(exc, "Nothing was changed")
        return refused_with(exc, lambda status: after_decision(signed, back, run_id, notice, status))
    if got["assignee"] is None:
        heading = "Nobody works this request now"
    else:
        # By what the directory calls them, as the page below names the assignee.
        named_as = people_named(signed.principal.tenant, {got["assignee"]})[got["assignee"]]
        heading = "You work this request now" if move == "claim" else f"Assigned to {named_as}"
    return after_decision(signed, back, run_id, Notice("ok", heading, "Who may decide it is unchanged."), 200)


@form_post("consoleClaim", "inbox")
def console_claim(signed: Signed, form: dict[str, list[str]], runId: str, nodeId: str) -> Response:  # noqa: N803
    return claim_post(signed, form, from_wire(runId), nodeId, "claim")


@form_post("consoleRelease", "inbox")
def console_release(signed: Signed, form: dict[str, list[str]], runId: str, nodeId: str) -> Response:  # noqa: N803
    return claim_post(signed, form, from_wire(runId), nodeId, "release")


@form_post("consoleAssign", "inbox")
def console_assign(signed: Signed, form: dict[str, list[str]], runId: str, nodeId: str) -> Response:  # noqa: N803
    named = (one(form, "assignee") or "").strip()
    if named:
        parse(AssignGateRequest, {"assignee": named}, "assignee")
    return claim_post(signed, form, from_wire(runId), nodeId, "assign")


def refused(
    signed: Signed,
    back: str | None,
    run_id: str,
    node_id: str,
    step: str,
    exc: forms.FormError,
    form: dict[str, list[str]],
    refusal: DomainError,
) -> Response:
    """The page again with the gate's form as it was sent, each problem said beside its field; to an API client asking
    for JSON, `refusal`'s envelope (http.refused_as_asked)."""
    notice = Notice("bad", "That was not accepted", f"{step}: {exc} Nothing was changed.")
    filled = (run_id, node_id, forms.Answer(form, exc.fields))
    return refused_as_asked(refusal, lambda: after_decision(signed, back, run_id, notice, 400, filled))


def refused_with(exc: DomainError, page: Callable[[int], Response]) -> Response:
    """A refused form's `page`, given the refusal's status; to an API client asking for JSON, the refusal's envelope
    (http.refused_as_asked)."""
    return refused_as_asked(exc, lambda: page(status_of(exc)))


def refusal_notice(exc: DomainError, heading: str) -> Notice:
    """A refused action said on the page: a conflict (someone was first) as a warning, any other refusal as bad."""
    return Notice("warn" if status_of(exc) == 409 else "bad", heading, refusal_words(exc))


# A decision that lost its race (another tab, another person, the deadline), by the refusal's code: the service's
# message names nodes and interrupts, which a person deciding never met.
DECISION_REFUSAL_WORDS = {
    "interrupt_already_resolved": "This request was already decided, or it timed out or its run was stopped",
    "interlude.vote_already_cast": "You have already voted on this request; your first vote stands",
}


def refusal_words(exc: DomainError) -> str:
    """A refusal as the sentence a person reads on the console."""
    words = DECISION_REFUSAL_WORDS.get(exc.code)
    if words is None:
        return forms.in_plain_words(exc.message)
    run = approval.RUN_WORDS.get(str((exc.details or {}).get("runStatus")))
    return f"{words}{f': the run is {run}' if run else ''}."


def after_decision(
    signed: Signed, back: str | None, run_id: str, notice: Notice | None, status: int, filled: pages.Filled | None = None
) -> Response:
    # The inbox needs the decision's own scope; the run page may need one the session lacks.
    if back == "run" and may(signed.principal, "consoleRun"):
        return run_page(signed, run_id, notice, status, filled)
    return inbox_page(signed, notice, status, filled=filled)


# -- runs ---------------------------------------------------------------------------------------------


def runs_view(principal: Principal, asked: Mapping[str, str], cursor: str | None, live: bool = False) -> pages.RunsView:
    """A page of the tenant's runs, newest first, that the search `asked` finds: the run listing service under GET
    /runs's own filters, checked as that route checks them (search_filters)."""
    listing = services().run_listing
    searchable = listing.searchable_metadata(principal.tenant)
    filters = search_filters({k: as_instant(k, v) for k, v in asked.items()}, searchable)
    page = listing.list_runs(principal.tenant, RUNS_PER_PAGE, cursor, filters=filters)
    rows = [
        {
            "runId": r.runId,
            "workflowId": r.workflowId,
            "workflowName": workflow_name(r),
            "status": r.status,
            "startedAt": r.startedAt or r.createdAt,
            "tags": r.tags,
        }
        for r in page.runs
    ]
    return pages.RunsView(rows, page.next_cursor, asked, searchable, live, workflow_choices(principal.tenant))


def workflow_name(state: RunState) -> str | None:
    """What a person calls a run's workflow: the name the run keeps, else (a run made before runs kept it) its
    version's, read once per process (Definitions keeps each version)."""
    if state.workflowName is not None:
        return state.workflowName
    return services().definitions.workflow(state.tenant, state.workflowId, state.workflowVersion).display_name(state.workflowId)


# The Workflow filter of the run search offers the tenant's workflows as choices up to this many (else a text field).
WORKFLOW_CHOICES = 100


def workflow_choices(tenant: str) -> list[tuple[str, str]]:
    return services().workflows.named_workflows(tenant, WORKFLOW_CHOICES) or []


# A browser's date-time field: no seconds, no offset. The console says its times are UTC.
BROWSER_MOMENT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?")


def as_instant(name: str, value: str) -> str:
    """A time bound as GET /runs takes it: one from a browser's date-time field is UTC."""
    if name in ("createdAfter", "createdBefore") and BROWSER_MOMENT.fullmatch(value):
        return value + "Z"
    return value


@page("consoleRuns", "runs")
def console_runs(signed: Signed) -> Response:
    query = app.current_event.query_string_parameters or {}
    wanted = (query.get("runId") or "").strip()
    if wanted:
        return see_other(pages.run_href(from_wire(wanted.replace("%2F", "/"))))
    asked = {
        k: v.strip()
        for k, v in query.items()
        if (k in pages.RUN_SEARCH_FIELDS or k.startswith(METADATA_PARAM)) and v.strip()
    }
    view = runs_view(signed.principal, asked, query.get("cursor"), query.get("live") == "on")
    refresh = pages.LIVE_REFRESH_S if view.refreshes else None
    return html(200, "Runs", pages.runs(signed.frame, view, None), signed.frame, "runs", refresh_s=refresh)


@form_post("consoleCancelRuns", "runs")
def console_cancel_runs(signed: Signed, form: dict[str, list[str]]) -> Response:
    ids = list(dict.fromkeys(v.strip() for v in form.get("runId", []) if v.strip()))
    if not ids:
        raise Invalid("select at least one run to cancel", {"field": "runId"})
    reason = (one(form, "reason") or "").strip()[:500]
    if one(form, "confirm") != "yes":
        if len(ids) > MAX_BULK_CANCEL:
            raise Invalid(
                f"select at most {MAX_BULK_CANCEL} runs to cancel at once",
                {"field": "runId", "maxRunIds": MAX_BULK_CANCEL},
            )
        return html(200, "Cancel runs?", pages.confirm_cancel(signed.frame, ids, reason), signed.frame, "runs")
    reason = reason or "cancelled from the console"
    outcomes = services().run_listing.bulk_cancel(signed.principal, ids, reason, surface="console")
    lines = tuple(f"{run_id}: {cancel_outcome_words(got)}" for run_id, got in outcomes)
    cancelled = sum(1 for _, got in outcomes if isinstance(got, RunState))
    notice = Notice("ok" if cancelled == len(ids) else "warn", f"Cancelled {cancelled} of {len(ids)}", "", lines)
    # What the session may read afterwards: the run, the runs, or only what happened (runs:cancel alone).
    if len(ids) == 1 and cancelled == 1 and may(signed.principal, "consoleRun"):
        return run_page(signed, ids[0], notice, 200)
    if not may(signed.principal, "consoleRuns"):
        return html(200, notice.heading, pages.message(notice), signed.frame, "runs")
    view = runs_view(signed.principal, {}, None)
    return html(200, "Runs", pages.runs(signed.frame, view, notice), signed.frame, "runs")


# A run a bulk cancel did not cancel, and why, in words (the API's entry says it by code).
CANCEL_REFUSAL_WORDS = {
    "validation_error": "this is not a run's id",
    "run_forbidden": "no run of yours has this id",
    "not_found": "no run has this id",
}


def cancel_outcome_words(got: RunState | DomainError) -> str:
    if isinstance(got, RunState):
        return approval.RUN_WORDS.get(got.status, got.status)
    if got.code == "run_terminal":
        return f"not cancelled: it is {approval.RUN_WORDS.get(str((got.details or {}).get('runStatus')), 'over')}"
    words = CANCEL_REFUSAL_WORDS.get(got.code or "")
    return f"not cancelled: {words}" if words else f"not cancelled. {refusal_words(got)}"


@page("consoleRun", "runs")
def console_run(signed: Signed, runId: str) -> Response:  # noqa: N803
    return run_page(signed, from_wire(runId), None, 200)


def run_page(signed: Signed, run_id: str, notice: Notice | None, status: int, filled: pages.Filled | None = None) -> Response:
    principal = authorize(signed.principal, "consoleRun")
    after = query_int("after", -1, -1, 10**12)
    state, _ = services().runs.load_run(principal.tenant, run_id)
    query = app.current_event.query_string_parameters or {}
    selected = query.get("step") or None
    me = run_resolver(principal, "console").principal
    # Its numbers, wherever the page shows them, as the run's caller wrote them (docs/adr/0119).
    written = state.writtenNumbers
    snapshot = spelled(run_snapshot(state), written)
    definition = services().definitions.workflow(state.tenant, state.workflowId, state.workflowVersion)
    if selected is not None:
        selected = definition.engine_node_id(selected)
        if selected not in {n.id for n in definition.nodes}:
            raise Invalid("this run's workflow has no such step", {"field": "step"})
    names = names_of(definition, state.workflowId)
    nodes, edges = graph_of(state, names)
    polled = services().runs.poll_events(principal, run_id, after, 0)
    events = spelled(polled["events"][:EVENTS_PER_PAGE], written)
    last_seen = events[-1]["sequence"] if events else after
    more = last_seen if polled["lastSequence"] > last_seen else None
    deliveries = services().deliveries.run_deliveries(principal, run_id)["deliveries"]
    tokens = tokens_minted(principal, run_id)
    notifications = services().notifications.run_notifications(principal, run_id)["notifications"]
    open_interrupts: dict[str, dict[str, Any]] = {
        node_id: {
            "kind": oi.kind,
            "raisedAt": oi.raisedAt,
            "deadline": iso_epoch(oi.deadline) if oi.deadline is not None else "none",
            "payload": spelled(oi.payload, written),
            "votes": [{k: v for k, v in vote.model_dump().items() if k in PUBLIC_VOTE_FIELDS} for vote in oi.votes],
            "mayDecide": may(principal, "consoleDecide") and not voted(oi, me),
            "assignee": oi.assignee,
            "assignedBy": oi.assignedBy,
            "mayClaim": may(principal, "consoleClaim"),
        }
        for node_id, oi in state.interrupts.items()
    }
    view = pages.RunView(
        snapshot=snapshot,
        nodes=nodes,
        edges=edges,
        open_interrupts=open_interrupts,
        events=events,
        more_events_after=more,
        deliveries=deliveries,
        unavailable=(
            [("Links made", "Links made are read from the audit trail, which this key may not read (audit:read).")]
            if tokens is None
            else []
        ),
        notifications=notifications,
        tokens=tokens,
        names=names,
        retry_step=retry_step(principal, state, definition),
        recover_deliveries=may(principal, "consoleRecoverRunDeliveries") and any_dead_notice(deliveries),
        recover_notifications=may(principal, "consoleRecoverRunNotifications")
        and any(n.get("status") == "dead" for n in notifications),
        people=people_named(
            state.tenant,
            deciders(events)
            | {s for gate in open_interrupts.values() for s in pages.voters(gate["votes"])}
            | named_approvers(list(open_interrupts.values()))
            | {who for oi in state.interrupts.values() for who in (oi.assignee, oi.assignedBy) if who}
            | {str(n["principalId"]) for n in notifications if n.get("principalId")}
            | audit_people(tokens or []),
        ),
        filled=filled,
        selected=selected,
        step=None if selected is None else step_inputs(state, definition, selected, events),
        live=live_choice(query.get("live"), state, open_interrupts) if status == 200 and filled is None else None,
        may_fork=may(principal, "consoleForkRun"),
    )
    refresh = pages.LIVE_REFRESH_S if view.live else None
    return html(status, f"Run {run_id}", pages.run(signed.frame, view, notice), signed.frame, "runs", refresh_s=refresh)


def live_choice(asked: str | None, state: RunState, gates: Mapping[str, Mapping[str, Any]]) -> bool | None:
    """Whether the run page reloads itself: a run still moving does, unless the page holds a decision form (a
    reload would lose what is being typed) or the person turned it off (`live` off); they may turn it on. None: the
    run has ended, nothing to follow."""
    if state.terminal:
        return None
    if asked in ("on", "off"):
        return asked == "on"
    return not any(gate["mayDecide"] for gate in gates.values())


def step_inputs(
    state: RunState, definition: WorkflowDefinition, node_id: str, events: list[dict[str, Any]]
) -> readable.StepInputs:
    """What the run page knows of one step: the gate's request (open, else its latest on the page), its declared
    inputs as its latest start on the page recorded them (else bound from the run's values as they stand: a start
    recorded before this release, or on another page), its output and its error."""
    node = definition.node(node_id)
    open_gate = state.interrupts.get(node_id)
    recorded = readable.started_inputs(events, node_id) if node.inputs else None
    bound = (recorded or {}).get(STEP_INPUTS)
    if node.inputs and recorded is None:
        variables = {v.name: v.defaultValue for v in definition.variables if v.defaultValue is not None}
        try:
            bound = bind_inputs(node.inputs, {**state.outputs, "inputs": {**variables, **state.inputs}})
        except Exception:  # noqa: BLE001 - a binding that cannot be read now is shown as not given, never a failed page
            bound = None
    error = state.error if state.failedNodeId == node_id else readable.failure_of(events, node_id)
    written = state.writtenNumbers
    return readable.StepInputs(
        spelled(open_gate.payload, written) if open_gate is not None else readable.latest_request(events, node_id),
        spelled(bound, written),
        spelled(state.outputs.get(node_id), written),
        error if state.nodes.get(node_id) is not None and state.nodes[node_id].status == "failed" else None,
        recorded=recorded is not None,
        too_large=((recorded or {}).get(STEP_INPUTS_DIGEST) or {}).get("bytes"),
    )


@form_post("consoleForkRun", "runs")
def console_fork_run(signed: Signed, form: dict[str, list[str]], runId: str) -> Response:  # noqa: N803
    """A fork of the run (replay, or a branch at an event), as POST /runs/{runId}:fork makes it."""
    raw_from = (one(form, "fromSeq") or "").strip()
    mode = one(form, "mode") or "replay"
    fields: dict[str, Any] = {"mode": mode}
    if mode == "branch" or raw_from:
        # Digits as a person types them become a number; anything else (also "²", which str.isdigit() passes and
        # int() refuses) goes to the request model as it was sent, which refuses it in words.
        fields["fromSeq"] = int(raw_from) if re.fullmatch(r"[0-9]{1,15}", raw_from) else raw_from or None
    return forked(
        signed,
        from_wire(runId),
        lambda principal, run_id: services().forks.fork_run(principal, run_id, parse(ForkRunRequest, fields, "fork")),
        "Forked",
    )


@form_post("consoleRedriveRun", "runs")
def console_redrive_run(signed: Signed, form: dict[str, list[str]], runId: str) -> Response:  # noqa: N803
    """The failed run again from its failed node, as POST /runs/{runId}:redrive makes it."""
    return forked(signed, from_wire(runId), services().forks.redrive_run, "Redriven")


def forked(signed: Signed, run_id: str, make: Callable[[Principal, str], Forked], how: str) -> Response:
    """The new run's page, or this run's again with why nothing was started. Like the API's routes, forking needs
    runs:read besides runs:create (it reads the source's whole history)."""
    signed.principal.require("runs:read")
    try:
        made = make(signed.principal, run_id)
    except DomainError as exc:
        if isinstance(exc, Unauthenticated):
            raise
        notice = refusal_notice(exc, "Nothing was started")
        return refused_with(exc, lambda status: run_page(signed, run_id, notice, status))
    notice = Notice("ok", f"{how}: a new run", f"Run {made.state.runId} started from run {run_id}.")
    return run_page(signed, made.state.runId, notice, 201)


def any_dead_notice(attempts: list[dict[str, Any]]) -> bool:
    """Whether a callback notice of the run is dead-lettered: its last attempt was final and not delivered."""
    last = {a.get("noticeId"): a for a in attempts if str(a.get("noticeId", "")).startswith(CALLBACK_PREFIX)}
    return any(a.get("final") and a.get("status") != "delivered" for a in last.values())


def retry_step(principal: Principal, state: RunState, definition: WorkflowDefinition) -> str | None:
    """The step of a run failed at its HTTP call, when the session may take it again (issue 30 item 5)."""
    if state.failedNodeId is None or not may(principal, "consoleRetryAction"):
        return None
    return state.failedNodeId if action_not_retryable(state, definition, state.failedNodeId) is None else None


def voted(interrupt: OpenInterrupt, principal: str) -> bool:
    """Whether `principal` has cast its one vote on the gate (a question is not a vote)."""
    return any(v.principal == principal and v.action != "ask" for v in interrupt.votes)


def graph_of(state: RunState, names: Names) -> tuple[list[GraphNode], list[tuple[str, str]]]:
    definition = services().definitions.workflow(state.tenant, state.workflowId, state.workflowVersion)
    nodes = [
        GraphNode(n.id, n.typeId, state.nodes[n.id].status if n.id in state.nodes else "pending", names.step(n.id))
        for n in definition.nodes
    ]
    return nodes, [(e.sourceNodeId, e.targetNodeId) for e in definition.edges]


def deciders(events: list[dict[str, Any]]) -> set[str]:
    """The subject ids of who decided in these events."""
    return {
        str(who["subjectId"])
        for e in events
        if isinstance(who := (e.get("payload") or {}).get("resolvedBy"), dict) and who.get("subjectId")
    }


def people_named(tenant: str, subjects: set[str]) -> dict[str, str]:
    """What the directory calls each of these people (else their subject id): one BatchGetItem per 100."""
    return display_names(services().directory_records, tenant, subjects)


# -- workflows ----------------------------------------------------------------------------------------

WORKFLOWS_PER_PAGE = 50


@page("consoleWorkflows", "workflows")
def console_workflows(signed: Signed) -> Response:
    wanted = ((app.current_event.query_string_parameters or {}).get("workflowId") or "").strip()
    if wanted:
        return see_other(f"/console/workflows/{check_author_id(wanted, 'workflowId')}")
    page_number = query_int("page", 1, 1, 10**6)
    listed = services().workflows.list_workflows(signed.principal.tenant, page_number, WORKFLOWS_PER_PAGE)
    body = pages.workflows(signed.frame, listed["workflows"], None, page_number, listed["total_pages"])
    return html(200, "Workflows", body, signed.frame, "workflows")


@page("consoleWorkflow", "workflows")
def console_workflow(signed: Signed, workflowId: str) -> Response:  # noqa: N803
    return workflow_page(signed, check_author_id(unquote(workflowId), "workflowId"), query_int("version", None, 1, 10**9))


def workflow_page(
    signed: Signed,
    workflow_id: str,
    version: int | None,
    notice: Notice | None = None,
    status: int = 200,
    answer: forms.Answer | None = None,
) -> Response:
    """A version of the workflow (the latest unless `version`), and on the latest the Start run form when the
    session may start runs (`answer`: the form as it was sent, with what was wrong)."""
    authorize(signed.principal, "consoleWorkflow")
    latest = int(services().workflows.get_workflow(signed.principal, workflow_id)["version"])
    got = services().workflows.get_workflow_version(signed.principal, workflow_id, version or latest)
    definition = WorkflowDefinition.model_validate(got["definition"])
    nodes = [GraphNode(n.id, n.typeId, "pending", definition.step_name(n.id)) for n in definition.nodes]
    edges = [(e.sourceNodeId, e.targetNodeId) for e in definition.edges]
    start = None
    if int(got["version"]) == latest and may(signed.principal, "consoleStartRun"):
        start = pages.start_run_form(declared_inputs.schema_of(definition.variables), answer)
    body = pages.workflow(signed.frame, got, nodes, edges, start, notice, definition)
    return html(status, f"Workflow {definition.display_name(workflow_id) or workflow_id}", body, signed.frame, "workflows")


@form_post("consoleStartRun", "workflows")
def console_start_run(signed: Signed, form: dict[str, list[str]], workflowId: str) -> Response:  # noqa: N803
    """A run of the workflow's latest version, its inputs from the form its declared inputs draw: the same service
    and checks as POST /runs."""
    workflow_id = check_author_id(unquote(workflowId), "workflowId")
    version = int(services().workflows.get_workflow(signed.principal, workflow_id)["version"])
    definition = services().definitions.workflow(signed.principal.tenant, workflow_id, version)
    schema = declared_inputs.schema_of(definition.variables)
    try:
        tags = [t.strip() for t in (one(form, pages.TAGS_FIELD) or "").splitlines() if t.strip()]
        inputs = forms.value_from_form(schema, form) if definition.variables else {}
        request = parse(CreateRunRequest, {"workflowId": workflow_id, "inputs": inputs, "tags": tags}, "run")
        state = services().lifecycle.create_run(signed.principal, request, written_numbers=typed_spellings(form))
    except forms.FormError as exc:
        return not_started(signed, workflow_id, str(exc), forms.Answer(form, exc.fields), exc.as_refusal())
    except DomainError as exc:
        if isinstance(exc, Unauthenticated) or status_of(exc) != 400:
            raise
        return not_started(signed, workflow_id, forms.in_plain_words(exc.message), forms.Answer(form), exc)
    notice = Notice("ok", "Run started", f"Run {state.runId} of {definition.display_name(workflow_id) or workflow_id} started.")
    if may(signed.principal, "consoleRun"):
        return run_page(signed, state.runId, notice, 201)
    return html(201, notice.heading, pages.message(notice), signed.frame, "workflows")


def not_started(signed: Signed, workflow_id: str, why: str, answer: forms.Answer, refusal: DomainError) -> Response:
    """The workflow's page again with the form as it was sent and why it was not accepted, nothing started; to an API
    client asking for JSON, `refusal`'s envelope (http.refused_as_asked)."""
    notice = Notice("bad", "The run was not started", f"{why} Nothing was started.")

    def page() -> Response:
        if not may(signed.principal, "consoleWorkflow"):
            return html(400, notice.heading, pages.message(notice), signed.frame, "workflows")
        return workflow_page(signed, workflow_id, None, notice, 400, answer)

    return refused_as_asked(refusal, page)


# -- keys ---------------------------------------------------------------------------------------------


def keys_page(signed: Signed, notice: Notice | None, status: int = 200, created: dict[str, Any] | None = None) -> Response:
    authorize(signed.principal, "consoleKeys")
    cursor = (app.current_event.query_string_parameters or {}).get("cursor") if created is None else None
    listed = services().keys.list_keys(signed.principal.tenant, 100, cursor)
    scopes = [s for s in wiring.ALL_SCOPES if s in signed.principal.scopes]
    holders = {str(s) for k in listed["keys"] if (s := (k.get("subject") or {}).get("subjectId"))}
    people = people_named(signed.principal.tenant, holders)
    body = pages.keys(signed.frame, listed["keys"], listed.get("cursor"), notice, created, scopes, people)
    return html(status, "Keys", body, signed.frame, "keys")


@page("consoleKeys", "keys")
def console_keys(signed: Signed) -> Response:
    return keys_page(signed, None)


@form_post("consoleCreateKey", "keys")
def console_create_key(signed: Signed, form: dict[str, list[str]]) -> Response:
    request = parse(
        CreateKeyRequest,
        {"subjectId": (one(form, "subjectId") or "").strip(), "scopes": form.get("scope", [])},
        "new key",
    )
    created = services().keys.create_key(signed.principal, request, surface="console")
    return keys_page(signed, None, 201, created)


@form_post("consoleRevokeKey", "keys")
def console_revoke_key(signed: Signed, form: dict[str, list[str]], keyId: str) -> Response:  # noqa: N803
    revoked = services().keys.revoke_key(signed.principal.tenant, unquote(keyId), audit_entries.actor(signed.principal, "console"))
    if revoked["keyId"] == signed.session.key_id:
        return session_ended(Unauthenticated("you revoked the API key this session signed in with"))
    notice = Notice("ok", "Key revoked", f"Key {revoked['keyId']} is refused from now on.")
    return keys_page(signed, notice)


# -- audit --------------------------------------------------------------------------------------------


@page("consoleAudit", "audit")
def console_audit(signed: Signed) -> Response:
    cursor = (app.current_event.query_string_parameters or {}).get("cursor")
    listed = services().audit.entries_page(signed.principal.tenant, AUDIT_PER_PAGE, cursor)
    people = people_named(signed.principal.tenant, audit_people(listed["entries"]))
    body = pages.audit(signed.frame, listed["entries"], listed.get("cursor"), None, people)
    return html(200, "Audit", body, signed.frame, "audit")


def audit_people(entries: list[dict[str, Any]]) -> set[str]:
    """Who acted in these entries, and whom their details name (subject ids), to be named."""
    found: set[str] = set()
    for entry in entries:
        acted = (entry.get("actor") or {}).get("subjectId")
        named = [(entry.get("details") or {}).get(key) for key in readable.PEOPLE_DETAILS]
        found |= {str(s) for s in (acted, *named) if isinstance(s, str) and s}
    return found


def tokens_minted(principal: Principal, run_id: str) -> list[dict[str, Any]] | None:
    """Token mints for the run among the tenant's latest audit entries (None: the key may not read the audit log)."""
    if not may(principal, "consoleAudit"):
        return None
    found: list[dict[str, Any]] = []
    cursor = None
    for _ in range(TOKEN_SCAN_PAGES):
        listed = services().audit.entries_page(principal.tenant, audit.MAX_PAGE, cursor)
        found += [
            e for e in listed["entries"] if e.get("action") == "token.minted" and (e.get("target") or {}).get("runId") == run_id
        ]
        cursor = listed.get("cursor")
        if cursor is None:
            break
    return found


# -- dead letters (issue 30 item 5) -------------------------------------------------------------------


def dead_letters_page(signed: Signed, notice: Notice | None, status: int = 200) -> Response:
    principal = authorize(signed.principal, "consoleDeadLetters")
    groups = [
        (subscription, services().webhooks.dead_letters(principal, subscription["webhookId"], DEAD_LETTER_MAX_PAGE, None)["deliveries"])
        for subscription in services().webhook_records.of_tenant(principal.tenant)
    ]
    return html(status, "Dead letters", pages.dead_letters(signed.frame, groups, notice), signed.frame, "dead-letters")


@page("consoleDeadLetters", "dead-letters")
def console_dead_letters(signed: Signed) -> Response:
    return dead_letters_page(signed, None)


@form_post("consoleRetryDelivery", "dead-letters")
def console_retry_delivery(signed: Signed, form: dict[str, list[str]]) -> Response:
    webhook_id, delivery_id = one(form, "webhookId") or "", one(form, "deliveryId") or ""
    if not webhook_id or not delivery_id:
        raise Invalid("name the dead letter to send again", {"field": "deliveryId"})
    try:
        retried = replay().retry_webhook_delivery(signed.principal, webhook_id, bound_delivery(delivery_id))
    except DomainError as exc:
        if isinstance(exc, Unauthenticated):
            raise
        if not may(signed.principal, "consoleDeadLetters"):
            raise
        notice = refusal_notice(exc, "Nothing was sent")
        return refused_with(exc, lambda status: dead_letters_page(signed, notice, status))
    sentence = f"The delivery for run {retried['runId']} is on its way again (attempt {retried['attempt']})."
    notice = Notice("ok", "Sent again", sentence)
    if not may(signed.principal, "consoleDeadLetters"):
        return html(200, notice.heading, pages.message(notice), signed.frame, "dead-letters")
    return dead_letters_page(signed, notice)


@form_post("consoleRecoverRunDeliveries", "runs")
def console_recover_run_deliveries(signed: Signed, form: dict[str, list[str]], runId: str) -> Response:  # noqa: N803
    return recovered(signed, from_wire(runId), "callback-deliveries", "failed callback deliveries")


@form_post("consoleRecoverRunNotifications", "runs")
def console_recover_run_notifications(signed: Signed, form: dict[str, list[str]], runId: str) -> Response:  # noqa: N803
    return recovered(signed, from_wire(runId), "notifications", "failed notifications")


def recovered(signed: Signed, run_id: str, family: Family, what: str) -> Response:
    """The run's dead letters of `family` sent again (as recoverRunDeliveries / recoverRunNotifications), and its page
    saying how many."""
    try:
        done = replay().recover_run(signed.principal, run_id, family)
    except DomainError as exc:
        if isinstance(exc, Unauthenticated) or not may(signed.principal, "consoleRun"):
            raise
        notice = refusal_notice(exc, "Nothing was sent")
        return refused_with(exc, lambda status: run_page(signed, run_id, notice, status))
    sent = done["queued"]
    sentence = f"{sent} of the run's {what} {'is' if sent == 1 else 'are'} on their way again." if sent else f"The run has no {what} to send again."
    notice = Notice("ok", "Sent again" if sent else "Nothing to send", sentence)
    if not may(signed.principal, "consoleRun"):
        return html(200, notice.heading, pages.message(notice), signed.frame, "runs")
    return run_page(signed, run_id, notice, 200)


@form_post("consoleRetryAction", "runs")
def console_retry_action(signed: Signed, form: dict[str, list[str]], runId: str, nodeId: str) -> Response:  # noqa: N803
    run_id = from_wire(runId)
    try:
        replay().retry_action(signed.principal, run_id, check_author_id(unquote(nodeId), "nodeId"), surface="console")
    except DomainError as exc:
        if isinstance(exc, Unauthenticated) or not may(signed.principal, "consoleRun"):
            raise
        notice = refusal_notice(exc, "Nothing was changed")
        return refused_with(exc, lambda status: run_page(signed, run_id, notice, status))
    notice = Notice("ok", "Trying again", "The failed step is being tried again; the run goes on from there.")
    if not may(signed.principal, "consoleRun"):
        return html(200, notice.heading, pages.message(notice), signed.frame, "runs")
    return run_page(signed, run_id, notice, 200)
