"""Egress guard: every spelling of a local, private or metadata destination is refused; public ones pass.

Host names are resolved by a fake resolver (a fixed table), so no test performs a real DNS lookup.
"""

from __future__ import annotations

import ipaddress
import socket

import pytest

from interlude.delivery.egress import CheckedTarget, EgressRefused, check_url, is_denied_address

PUBLIC_V4 = "93.184.215.14"
PUBLIC_V6 = "2606:4700::1111"

FAKE_DNS: dict[str, list[str]] = {
    "hooks.example.com": [PUBLIC_V4],
    "dual.example.com": [PUBLIC_V4, PUBLIC_V6],
    "nat64.example.com": ["64:ff9b::5db8:d822"],
    "xn--bcher-kva.example": [PUBLIC_V4],
    # Public first, then loopback: what a rebinding name answers.
    "rebind.example.com": [PUBLIC_V4, "127.0.0.1"],
    "private.example.com": ["10.0.0.5"],
    "imds.example.com": ["169.254.169.254"],
    "ecs-creds.example.com": [PUBLIC_V4, "169.254.170.2"],
    "mapped.example.com": ["::ffff:169.254.169.254"],
    "ula.example.com": [PUBLIC_V6, "fd00:ec2::254"],
    "cgnat.example.com": ["100.100.100.200"],
    "wireserver.example.com": ["168.63.129.16"],
    "nat64-loopback.example.com": ["64:ff9b::7f00:1"],
    "linklocal6.example.com": ["fe80::1%1"],
    "empty.example.com": [],
    "garbage.example.com": ["not-an-address"],
}


def fake_resolve(host: str, port: int) -> list[str]:
    if host not in FAKE_DNS:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return list(FAKE_DNS[host])


def no_lookup(host: str, port: int) -> list[str]:
    raise AssertionError(f"an IP literal must not be resolved, but {host!r} was")


def refusal(url: str, **kwargs: object) -> EgressRefused:
    with pytest.raises(EgressRefused) as caught:
        check_url(url, resolve=fake_resolve, **kwargs)  # type: ignore[arg-type]
    return caught.value


REFUSED: list[tuple[str, str]] = [
    # Scheme: only https.
    ("http://93.184.215.14/", "scheme"),
    ("HTTP://hooks.example.com/", "scheme"),
    ("ftp://93.184.215.14/", "scheme"),
    ("file:///etc/passwd", "scheme"),
    ("gopher://127.0.0.1:6379/_INFO", "scheme"),
    ("javascript:alert(1)", "scheme"),
    ("//hooks.example.com/", "scheme"),
    # Credentials in the authority (and the parser-confusion forms built on them).
    ("https://user:pass@hooks.example.com/", "userinfo"),
    ("https://hooks.example.com@127.0.0.1/", "userinfo"),
    ("https://127.0.0.1@hooks.example.com/", "userinfo"),
    ("https://@hooks.example.com/", "userinfo"),
    ("https://hooks.example.com:443@169.254.169.254/", "userinfo"),
    # Parser differentials: backslash, whitespace, control characters, length.
    ("https://169.254.169.254\\@hooks.example.com/", "malformed"),
    ("https://hooks.example.com\\.127.0.0.1/", "malformed"),
    ("https://hooks.example.com/\r\nX-Injected: 1", "malformed"),
    (" https://hooks.example.com/", "malformed"),
    ("https://hooks.exam\tple.com/", "malformed"),
    ("https://hooks.example.com/" + "a" * 3000, "malformed"),
    # Names of the host itself, the local network and metadata services, in any spelling.
    ("https://localhost/", "host_name"),
    ("https://LOCALHOST./", "host_name"),
    ("https://api.localhost/", "host_name"),
    ("https://printer.local/", "host_name"),
    ("https://service.internal/", "host_name"),
    ("https://metadata.google.internal/computeMetadata/v1/", "host_name"),
    ("https://metadata.goog/", "host_name"),
    ("https://metadata/", "host_name"),
    ("https://instance-data/latest/meta-data/", "host_name"),
    ("https://instance-data.ec2.internal/", "host_name"),
    ("https://router.home.arpa/", "host_name"),
    ("https://%6c%6f%63%61%6c%68%6f%73%74/", "host_name"),
    ("https://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/", "host_name"),  # fullwidth "localhost"
    ("https://metadata.google.internal./", "host_name"),
    # Hosts that are not hosts.
    ("https:///", "host_name"),
    ("https:hooks.example.com/", "host_name"),
    ("https://[::1/", "host_name"),
    ("https://[fe80::1%25eth0]/", "host_name"),
    ("https://[::ffff:0x7f.1]/", "host_name"),
    ("https://256.256.256.256/", "host_name"),
    ("https://1.2.3.4.5/", "host_name"),
    ("https://hooks..example.com/", "host_name"),
    ("https://%2f%2f127.0.0.1/", "host_name"),
    # Ports.
    ("https://hooks.example.com:0/", "port"),
    ("https://hooks.example.com:65536/", "port"),
    ("https://hooks.example.com:44x/", "port"),
    ("https://hooks.example.com:+443/", "port"),
    # Loopback, spelled every way a URL parser or getaddrinfo accepts.
    ("https://127.0.0.1/openwop-callback-probe", "address_not_global"),
    ("https://127.1/", "address_not_global"),
    ("https://127.0.1/", "address_not_global"),
    ("https://2130706433/", "address_not_global"),
    ("https://017700000001/", "address_not_global"),
    ("https://0177.0.0.1/", "address_not_global"),
    ("https://0x7f.1/", "address_not_global"),
    ("https://0x7f000001/", "address_not_global"),
    ("https://0X7F.0.0.1/", "address_not_global"),
    ("https://127.0.0.1./", "address_not_global"),
    ("https://%31%32%37.0.0.1/", "address_not_global"),
    ("https://\u2460\u2461\u2466.0.0.1/", "address_not_global"),  # circled digits, IDNA-mapped to 127
    ("https://127\u30020\u30020\u30021/", "address_not_global"),  # ideographic full stops
    ("https://127.255.255.254:8443/", "address_not_global"),
    ("https://0/", "address_not_global"),
    ("https://0.0.0.0/", "address_not_global"),
    ("https://[::1]/", "address_not_global"),
    ("https://[0:0:0:0:0:0:0:1]/", "address_not_global"),
    ("https://[::]/", "address_not_global"),
    ("https://[::ffff:7f00:1]/openwop-callback-probe", "address_not_global"),
    ("https://[::ffff:127.0.0.1]/", "address_not_global"),
    ("https://[0:0:0:0:0:FFFF:7F00:0001]/", "address_not_global"),
    ("https://[::127.0.0.1]/", "address_not_global"),
    ("https://[64:ff9b::7f00:1]/", "address_not_global"),
    ("https://[2002:7f00:1::]/", "address_not_global"),
    # Cloud metadata and platform services.
    ("https://169.254.169.254/latest/meta-data/", "address_not_global"),
    ("https://2852039166/", "address_not_global"),
    ("https://0xa9fea9fe/", "address_not_global"),
    ("https://0251.0376.0251.0376/", "address_not_global"),
    ("https://169.254.43518/", "address_not_global"),
    ("https://[::ffff:a9fe:a9fe]/", "address_not_global"),
    ("https://[::ffff:169.254.169.254]/", "address_not_global"),
    ("https://[::169.254.169.254]/", "address_not_global"),
    ("https://[64:ff9b::a9fe:a9fe]/", "address_not_global"),
    ("https://[2002:a9fe:a9fe::1]/", "address_not_global"),
    ("https://169.254.170.2/v2/credentials", "address_not_global"),
    ("https://[fd00:ec2::254]/", "address_not_global"),
    ("https://100.100.100.200/", "address_not_global"),
    ("https://168.63.129.16/", "address_not_global"),
    ("https://192.0.0.192/", "address_not_global"),
    # Private, shared and special-purpose ranges.
    ("https://10.0.0.1/", "address_not_global"),
    ("https://172.16.0.1/", "address_not_global"),
    ("https://172.31.255.255/", "address_not_global"),
    ("https://192.168.1.1/", "address_not_global"),
    ("https://100.64.0.1/", "address_not_global"),
    ("https://[::ffff:10.0.0.1]/", "address_not_global"),
    ("https://[64:ff9b::c0a8:101]/", "address_not_global"),
    ("https://224.0.0.1/", "address_not_global"),
    ("https://239.255.255.250/", "address_not_global"),
    ("https://255.255.255.255/", "address_not_global"),
    ("https://240.0.0.1/", "address_not_global"),
    ("https://198.18.0.1/", "address_not_global"),
    ("https://192.0.2.1/", "address_not_global"),
    ("https://192.88.99.1/", "address_not_global"),
    ("https://[fc00::1]/", "address_not_global"),
    ("https://[fe80::1]/", "address_not_global"),
    ("https://[fec0::1]/", "address_not_global"),
    ("https://[ff02::1]/", "address_not_global"),
    ("https://[2001:db8::1]/", "address_not_global"),
    ("https://[100::1]/", "address_not_global"),
    ("https://[2001::1]/", "address_not_global"),
    ("https://[64:ff9b:1::a00:1]/", "address_not_global"),
    ("https://[3fff::1]/", "address_not_global"),
    ("https://[5f00::1]/", "address_not_global"),
    # Names whose resolution includes a denied address: one bad answer is enough.
    ("https://rebind.example.com/", "address_not_global"),
    ("https://private.example.com/", "address_not_global"),
    ("https://imds.example.com/latest/meta-data/", "address_not_global"),
    ("https://ecs-creds.example.com/", "address_not_global"),
    ("https://mapped.example.com/", "address_not_global"),
    ("https://ula.example.com/", "address_not_global"),
    ("https://cgnat.example.com/", "address_not_global"),
    ("https://wireserver.example.com/", "address_not_global"),
    ("https://nat64-loopback.example.com/", "address_not_global"),
    ("https://linklocal6.example.com/", "address_not_global"),
    # Names that do not resolve to anything usable.
    ("https://nxdomain.example.com/", "unresolvable"),
    ("https://empty.example.com/", "unresolvable"),
    ("https://garbage.example.com/", "unresolvable"),
]


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
    (
        "https://[::ffff:93.184.215.14]/",
        CheckedTarget("https", "::ffff:5db8:d70e", 443, "/", ("::ffff:5db8:d70e",)),
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
