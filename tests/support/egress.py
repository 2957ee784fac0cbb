"""The egress guard's fixtures shared by the unit, integration and e2e tests: a fixed DNS table (no test performs a
real lookup) and every URL the guard must refuse, with the reason it gives."""

from __future__ import annotations

import socket

from interlude.rules.egress import EgressRefused, check_url

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


def needs_lookup(url: str) -> bool:
    """True when the guard must resolve the URL's host to judge it (an e2e test cannot inject DNS)."""

    def tripwire(host: str, port: int) -> list[str]:
        raise LookupError(host)

    try:
        check_url(url, resolve=tripwire)
    except LookupError:
        return True
    except EgressRefused:
        return False
    return True
