"""The SDK session every client is made from (interlude/sdk_clients.py): the credentials it resolves are the ones
botocore's whole chain resolves, with the chain cut to the environment's provider only where that provider answers."""

from __future__ import annotations

import copy

import botocore.session
import pytest

from interlude import sdk_clients

CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_CREDENTIAL_EXPIRATION")


@pytest.fixture
def fresh(monkeypatch):
    """A process's first session, under the environment the test sets."""
    monkeypatch.setattr(sdk_clients, "_session", None)
    for name in CREDENTIALS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _chain(session: botocore.session.Session) -> list[str]:
    return [provider.METHOD for provider in session.get_component("credential_provider").providers]


def test_a_functions_credentials_from_its_environment_are_the_ones_botocores_chain_resolves(fresh):
    fresh.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    fresh.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    fresh.setenv("AWS_SESSION_TOKEN", "token")
    ours, botocores = sdk_clients.session(), botocore.session.get_session()

    assert _chain(ours) == ["env"]
    mine, theirs = ours.get_credentials(), botocores.get_credentials()
    assert (mine.access_key, mine.secret_key, mine.token, mine.method) == (
        theirs.access_key,
        theirs.secret_key,
        theirs.token,
        theirs.method,
    )


def test_without_credentials_in_the_environment_the_chain_is_botocores_whole(fresh):
    # A SnapStart function's container credentials, a developer's profile: nothing is resolved here (the chain's
    # instance-metadata provider would call out), only the providers compared.
    chain = _chain(sdk_clients.session())

    assert chain == _chain(botocore.session.get_session())
    assert {"env", "container-role", "iam-role"} <= set(chain)


def test_a_session_made_again_after_a_restore_keeps_the_parsed_models_and_decides_its_chain_again(fresh):
    fresh.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    fresh.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    held = sdk_clients.session()
    loader = held.get_component("data_loader")
    fresh.delenv("AWS_ACCESS_KEY_ID")
    fresh.delenv("AWS_SECRET_ACCESS_KEY")

    sdk_clients.forget_clients()

    assert sdk_clients.session() is not held
    assert sdk_clients.session().get_component("data_loader") is loader
    assert "container-role" in _chain(sdk_clients.session())


def test_every_event_name_is_aliased_as_botocore_aliases_it(fresh):
    """The session's aliaser finds a name with no alias at once (interlude/sdk_clients.py); every name, the built-in
    handlers', a client's events' and each of botocore's aliases in every place of a name, maps as botocore maps it."""
    from botocore import handlers
    from botocore.hooks import EventAliaser
    from botocore.utils import EVENT_ALIASES

    ours = sdk_clients.session()._events
    assert type(ours) is not EventAliaser
    assert type(copy.copy(ours)) is type(ours)  # each client's copy is one too
    names = [spec[0] for spec in handlers.BUILTIN_HANDLERS]
    names += ["before-parameter-build.dynamodb.GetItem", "needs-retry.dynamodb.TransactWriteItems", "a", "a.b"]
    for old in EVENT_ALIASES:
        names += [f"before-call.{old}.Op", f"{old}.x", f"docs.{old}", f"x.{old}extra.y", f"x.pre{old}"]
    botocores = EventAliaser(None)
    assert {n: ours._alias_event_name(n) for n in names} == {n: botocores._alias_event_name(n) for n in names}
    assert ours._alias_event_name("before-call.autoscaling.X") == "before-call.auto-scaling.X"


def test_a_handler_that_takes_no_keyword_arguments_is_still_refused(fresh):
    """The session's emitter reads no signature of botocore's own handlers (interlude/sdk_clients.py); any other
    handler is checked as botocore checks it."""

    def positional_only(request):
        return None

    called: list[object] = []

    def keywords(request, **kwargs):
        called.append(request)

    session = sdk_clients.session()
    with pytest.raises(ValueError, match="must accept keyword arguments"):
        session.register("before-send.dynamodb", positional_only)
    # (an event of the test's own: moto, where the suite runs it in the same process, answers before-send)
    session.register("interlude-test.dynamodb", keywords)
    # The handler it accepts is called, by the events of a client made from it
    client = sdk_clients.client("dynamodb", region_name="us-east-1")
    client.meta.events.emit("interlude-test.dynamodb.GetItem", request="the request")
    assert called == ["the request"]
