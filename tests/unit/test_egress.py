"""Egress guard: every spelling of a local, private or metadata destination is refused; public ones pass.

Host names are resolved by a fake resolver (a fixed table), so no test performs a real DNS lookup.
"""

from __future__ import annotations

import ipaddress
import socket
import threading

import pytest

from interlude.rules import egress
from interlude.rules.egress import CheckedTarget, EgressRefused, check_url, is_denied_address
from tests.support.egress import PUBLIC_V4, PUBLIC_V6, REFUSED, fake_resolve


def no_lookup(host: str, port: int) -> list[str]:
    raise AssertionError(f"an IP literal must not be resolved, but {host!r} was")


def refusal(url: str, **kwargs: object) -> EgressRefused:
    with pytest.raises(EgressRefused) as caught:
        check_url(url, resolve=fake_resolve, **kwargs)  # type: ignore[arg-type]
    return caught.value


def test_refusal_table_is_broad() -> None:
    assert len(REFUSED) >= 60
    assert len({url for url, _ in REFUSED}) == len(REFUSED)


@pytest.mark.parametrize(("url", "reason"), REFUSED, ids=[url[:60] for url, _ in REFUSED])
def test_refused(url: str, reason: str) -> None:
    refused = refusal(url)

    assert refused.reason == reason
    assert str(refused)


@pytest.mark.parametrize(
    "url",
    [
        "https://rebind.example.com/",
        "https://ula.example.com/",
        "https://private.example.com/",
    ],
)
def test_refusal_message_does_not_reveal_resolved_addresses(url: str) -> None:
    # The tenant sees the message; the resolved address is only for operators' logs.
    refused = refusal(url)

    assert refused.address is not None
    assert refused.address not in str(refused)


PASSES: list[tuple[str, CheckedTarget]] = [
    ("https://93.184.215.14/", CheckedTarget("https", PUBLIC_V4, 443, "/", (PUBLIC_V4,))),
    ("https://1572394766/cb", CheckedTarget("https", PUBLIC_V4, 443, "/cb", (PUBLIC_V4,))),
    ("https://0x5d.184.215.14/", CheckedTarget("https", PUBLIC_V4, 443, "/", (PUBLIC_V4,))),
    ("https://[2606:4700::1111]/hook?x=1", CheckedTarget("https", PUBLIC_V6, 443, "/hook?x=1", (PUBLIC_V6,))),
    (
        "https://[64:ff9b::5db8:d822]/",
        CheckedTarget("https", "64:ff9b::5db8:d822", 443, "/", ("64:ff9b::5db8:d822",)),
    ),
    (
        "https://[2002:5db8:d822::1]:8443/",
        CheckedTarget("https", "2002:5db8:d822::1", 8443, "/", ("2002:5db8:d822::1",)),
    ),
    # RFC 5952 section 5's text for an IPv4-mapped address, on every Python (3.11's ipaddress writes ::ffff:5db8:d70e).
    (
        "https://[::ffff:93.184.215.14]/",
        CheckedTarget("https", "::ffff:93.184.215.14", 443, "/", ("::ffff:93.184.215.14",)),
    ),
    (
        "https://[::FFFF:5db8:d70e]/",
        CheckedTarget("https", "::ffff:93.184.215.14", 443, "/", ("::ffff:93.184.215.14",)),
    ),
]


@pytest.mark.parametrize(("url", "expected"), PASSES, ids=[url for url, _ in PASSES])
def test_public_literals_pass_normalised_and_unresolved(url: str, expected: CheckedTarget) -> None:
    assert check_url(url, resolve=no_lookup) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (
            "https://hooks.example.com/approve",
            CheckedTarget("https", "hooks.example.com", 443, "/approve", (PUBLIC_V4,)),
        ),
        (
            "https://HOOKS.Example.COM.:8443/a?b=c#fragment",
            CheckedTarget("https", "hooks.example.com", 8443, "/a?b=c", (PUBLIC_V4,)),
        ),
        (
            "https://hooks.example.com:/",
            CheckedTarget("https", "hooks.example.com", 443, "/", (PUBLIC_V4,)),
        ),
        (
            "https://hooks.example.com?x=1",
            CheckedTarget("https", "hooks.example.com", 443, "/?x=1", (PUBLIC_V4,)),
        ),
        (
            "https://%68ooks.example.com/",
            CheckedTarget("https", "hooks.example.com", 443, "/", (PUBLIC_V4,)),
        ),
        (
            "https://dual.example.com/",
            CheckedTarget("https", "dual.example.com", 443, "/", (PUBLIC_V4, PUBLIC_V6)),
        ),
        (
            "https://nat64.example.com/",
            CheckedTarget("https", "nat64.example.com", 443, "/", ("64:ff9b::5db8:d822",)),
        ),
        (
            "https://b\u00fccher.example/\u00fcber?q=\u00f6",
            CheckedTarget("https", "xn--bcher-kva.example", 443, "/%C3%BCber?q=%C3%B6", (PUBLIC_V4,)),
        ),
    ],
)
def test_public_names_pass_with_every_resolved_address(url: str, expected: CheckedTarget) -> None:
    assert check_url(url, resolve=fake_resolve) == expected


def test_resolver_receives_normalised_host_and_port() -> None:
    asked: list[tuple[str, int]] = []

    def recording_resolve(host: str, port: int) -> list[str]:
        asked.append((host, port))
        return [PUBLIC_V4]

    check_url("https://Hooks.Example.com.:8443/x", resolve=recording_resolve)

    assert asked == [("hooks.example.com", 8443)]


def test_duplicate_answers_are_recorded_once() -> None:
    target = check_url("https://hooks.example.com/", resolve=lambda host, port: [PUBLIC_V4, PUBLIC_V4])

    assert target.addresses == (PUBLIC_V4,)


class TestLoopbackDevelopmentSwitch:
    def test_admits_http_and_loopback_literals(self) -> None:
        target = check_url("http://127.0.0.1:8080/cb", resolve=no_lookup, allow_loopback=True)

        assert target == CheckedTarget("http", "127.0.0.1", 8080, "/cb", ("127.0.0.1",))

    def test_admits_ipv6_loopback(self) -> None:
        target = check_url("http://[::1]:9000/", resolve=no_lookup, allow_loopback=True)

        assert target.addresses == ("::1",)

    def test_admits_localhost_when_it_resolves_to_loopback(self) -> None:
        target = check_url(
            "http://localhost:9000/cb", resolve=lambda host, port: ["127.0.0.1", "::1"], allow_loopback=True
        )

        assert (target.host, target.port, target.addresses) == ("localhost", 9000, ("127.0.0.1", "::1"))

    @pytest.mark.parametrize(
        ("url", "reason"),
        [
            ("http://169.254.169.254/latest/meta-data/", "address_not_global"),
            ("http://[::ffff:a9fe:a9fe]/", "address_not_global"),
            ("http://10.0.0.1/", "address_not_global"),
            ("http://192.168.0.10/", "address_not_global"),
            ("http://100.100.100.200/", "address_not_global"),
            ("http://0.0.0.0:8080/", "address_not_global"),
            ("http://[::]/", "address_not_global"),
            ("http://[fd00:ec2::254]/", "address_not_global"),
            ("http://private.example.com/", "address_not_global"),
            ("http://metadata.google.internal/", "host_name"),
            ("http://metadata/", "host_name"),
            ("http://printer.local/", "host_name"),
            ("http://user@127.0.0.1/", "userinfo"),
            ("ftp://127.0.0.1/", "scheme"),
        ],
    )
    def test_still_refuses_everything_else(self, url: str, reason: str) -> None:
        assert refusal(url, allow_loopback=True).reason == reason

    def test_admits_ipv4_mapped_loopback_written_as_rfc_5952_writes_it(self) -> None:
        target = check_url("http://[::ffff:7f00:1]:9000/", resolve=no_lookup, allow_loopback=True)

        assert (target.host, target.addresses) == ("::ffff:127.0.0.1", ("::ffff:127.0.0.1",))

    def test_localhost_resolving_elsewhere_is_refused(self) -> None:
        refused = refusal_with("http://localhost/", lambda host, port: ["127.0.0.1", "10.1.2.3"], allow_loopback=True)

        assert refused.reason == "address_not_global"

    def test_is_off_by_default(self) -> None:
        assert refusal("http://127.0.0.1:8080/cb").reason == "scheme"
        assert refusal("https://127.0.0.1:8080/cb").reason == "address_not_global"


def refusal_with(url: str, resolve: object, **kwargs: object) -> EgressRefused:
    with pytest.raises(EgressRefused) as caught:
        check_url(url, resolve=resolve, **kwargs)  # type: ignore[arg-type]
    return caught.value


@pytest.mark.parametrize(
    ("address", "denied"),
    [
        ("93.184.215.14", False),
        ("2606:4700::1111", False),
        ("64:ff9b::5db8:d822", False),
        ("2002:5db8:d822::", False),
        ("::ffff:5db8:d822", False),
        ("64:ff9b::a00:1", True),
        ("2002:a00:1::", True),
        ("::a00:1", True),
        ("::ffff:a00:1", True),
        ("::", True),
        ("::1", True),
    ],
)
def test_translation_prefixes_are_judged_by_the_embedded_ipv4(address: str, denied: bool) -> None:
    assert is_denied_address(ipaddress.ip_address(address)) is denied


# Every class of IPv4 address the guard tells apart, public ones included.
EMBEDDED_V4 = ["93.184.215.14", "127.0.0.1", "10.0.0.1", "172.16.0.1", "192.168.1.1", "169.254.169.254",
               "100.100.100.200", "0.0.0.0", "224.0.0.1", "240.0.0.1", "255.255.255.255", "192.0.2.1",
               "168.63.129.16", "8.8.8.8"]  # fmt: skip


@pytest.mark.parametrize("allow_loopback", [False, True])
@pytest.mark.parametrize("v4", EMBEDDED_V4)
def test_an_ipv4_mapped_address_gets_its_embedded_address_verdict_on_every_python(v4: str, allow_loopback: bool) -> None:
    # From Python 3.13, ipaddress's own is_loopback, is_private etc. of ::ffff:a.b.c.d follow the embedded address;
    # 3.11's judge the IPv6 address. The guard decides by the embedded address on both.
    mapped = ipaddress.IPv6Address(f"::ffff:{v4}")
    v4_address = ipaddress.IPv4Address(v4)

    verdict = is_denied_address(mapped, allow_loopback=allow_loopback)

    assert verdict is is_denied_address(v4_address, allow_loopback=allow_loopback)


def test_a_refused_mapped_address_is_named_as_rfc_5952_writes_it() -> None:
    assert refusal("https://mapped.example.com/").address == "::ffff:169.254.169.254"
    assert refusal("https://[::ffff:a9fe:a9fe]/").address == "::ffff:169.254.169.254"


def test_a_host_name_whose_lookup_does_not_answer_in_time_is_unresolved(monkeypatch: pytest.MonkeyPatch) -> None:
    # A tenant can own a name whose servers never answer: the system resolver then waits 10 s and more, holding the
    # API request or the delivery that looks it up. The lookup has a limit of its own.
    answer_now = threading.Event()

    def never_answering(host: str, port: int, **kwargs: object) -> list[tuple[object, ...]]:
        answer_now.wait(10)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC_V4, port))]

    monkeypatch.setattr(egress, "LOOKUP_TIMEOUT_S", 0.2)
    monkeypatch.setattr(egress.socket, "getaddrinfo", never_answering)
    try:
        with pytest.raises(EgressRefused) as refused:
            check_url("https://silent.example.com/hook")
        # At createRun: the 400 every refused destination gets.
        assert callback_url_refusal("https://silent.example.com/hook") == "destination_denied"
    finally:
        answer_now.set()
    assert refused.value.reason == egress.UNRESOLVED


def test_the_default_lookup_answers_as_getaddrinfo_does(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = {
        "hooks.example.com": [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC_V4, 443))],
        "dual.example.com": [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (PUBLIC_V6, 443, 0, 0)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC_V4, 443)),
        ],
    }

    def getaddrinfo(host: str, port: int, **kwargs: object) -> list[tuple[object, ...]]:
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return answers[host]

    monkeypatch.setattr(egress.socket, "getaddrinfo", getaddrinfo)
    assert check_url("https://hooks.example.com/").addresses == (PUBLIC_V4,)
    assert check_url("https://dual.example.com/").addresses == (PUBLIC_V6, PUBLIC_V4)
    with pytest.raises(EgressRefused) as refused:
        check_url("https://nowhere.example.com/")
    assert refused.value.reason == egress.UNRESOLVED


def callback_url_refusal(url: str) -> str | None:
    from interlude.domain.errors import Invalid
    from interlude.rules.callback_url import check_callback_url

    try:
        check_callback_url(url)
    except Invalid as invalid:
        return str((invalid.details or {}).get("reason"))
    return None
