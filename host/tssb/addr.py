"""Peer addresses "HOST:PORT": parsing, and when two of them name the same server.

Users write one server several ways (`localhost:8008`, `127.0.0.1:8008`, `[::1]:8008`,
`Host.Example:8008`); the peers table must find the peer whichever they type, and must not
hold two peers at one address. Names are not resolved (a DNS answer may change; a lookup
may hang): loopback names and addresses are one host, IP addresses compare by value,
names case-insensitively without a trailing dot.
"""
import ipaddress

LOOPBACK = "loopback"
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


def parse(text):
    """(host, port) of "HOST:PORT" (an IPv6 host in brackets: "[::1]:8008").

    Raises: ValueError with a message for the user.
    """
    host, sep, port = str(text).strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("HOST:PORT with a port 1..65535, got %r" % text)
    return host, int(port)


def format_addr(host, port):
    """"HOST:PORT", with an IPv6 host in brackets."""
    return ("[%s]:%d" if ":" in host else "%s:%d") % (host, port)


def canonical_host(host):
    """The form two spellings of one host share (see the module doc)."""
    h = host.strip().strip("[]").lower().rstrip(".")
    if h in LOOPBACK_NAMES or h.endswith(".localhost"):
        return LOOPBACK
    try:
        ip = ipaddress.ip_address(h.split("%")[0])
    except ValueError:
        return h
    mapped = getattr(ip, "ipv4_mapped", None)
    if mapped is not None:
        ip = mapped
    return LOOPBACK if ip.is_loopback else ip.compressed


def same_addr(a, b):
    """True when the addresses a and b ("HOST:PORT") name the same server."""
    try:
        ha, pa = parse(a)
        hb, pb = parse(b)
    except ValueError:
        return a == b
    return pa == pb and canonical_host(ha) == canonical_host(hb)
