"""Two host nodes replicate over WebSocket and over UDP multicast on loopback."""
import asyncio
import select
import socket
import time

import pytest

from tssb.bridge import udp, websocket
from bridge_helpers import has_all, host, wait_for

LONG = b"side chain " * 40   # > 48 bytes: goes into a chain20 side chain


def _free_port(kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


async def _replicate(a, b, ports=None):
    fa, fb = a.node.author.fid, b.node.author.fid
    for i in range(5):
        a.post(b"from a %d" % i)
        b.post(b"from b %d" % i)
    a.post(LONG)
    a.node.follow(fb)
    b.node.follow(fa)
    ok = await wait_for(lambda: has_all(b.store, fa, 6) and has_all(a.store, fb, 5)
                        and b.store.chunk_count(fa, 6) == a.store.chunk_count(fa, 6))
    assert ok, (a.node.counters, b.node.counters, ports)
    for s in range(1, 6):
        assert b.store.entry(fa, s) == a.store.entry(fa, s)
        assert a.store.entry(fb, s) == b.store.entry(fb, s)
    n = a.store.chunk_count(fa, 6)
    assert n > 0
    assert [b.store.chunk(fa, 6, c) for c in range(n)] == [a.store.chunk(fa, 6, c)
                                                           for c in range(n)]


def test_websocket_server_and_client():
    async def main():
        a, b = host(), host()
        port = _free_port()
        server = await websocket.serve(a, "127.0.0.1", port)
        tasks = [asyncio.ensure_future(a.run()), asyncio.ensure_future(b.run()),
                 asyncio.ensure_future(websocket.connect_forever(b, "ws://127.0.0.1:%d" % port))]
        try:
            await _replicate(a, b)
        finally:
            for t in tasks:
                t.cancel()
            server.close()
            await server.wait_closed()
    asyncio.run(main())


def _multicast_ok(port):
    """Whether a datagram one socket sends to the group reaches another socket joined on
    the same port, both ways. Some sandboxed network stacks hand each multicast datagram
    to one SO_REUSEPORT socket only (often the sender's own), which two hosts on one
    machine cannot work around."""
    socks = []
    try:
        socks = [udp.multicast_socket(udp.GROUP, port, "127.0.0.1") for _ in range(2)]
        for i, s in enumerate(socks):
            s.sendto(b"probe %d" % i, (udp.GROUP, port))
        for i, s in enumerate(socks):
            want, end = b"probe %d" % (1 - i), time.monotonic() + 1.0
            while True:
                left = end - time.monotonic()
                if left <= 0 or not select.select([s], [], [], left)[0]:
                    return False
                if s.recv(64) == want:
                    break
        return True
    except OSError:
        return False
    finally:
        for s in socks:
            s.close()


def test_udp_multicast_loopback():
    port = _free_port(socket.SOCK_DGRAM)
    if not _multicast_ok(port):
        pytest.skip("multicast between two sockets on loopback unavailable here")

    async def main():
        a, b = host(), host()
        pa = await udp.open_multicast(a, udp.GROUP, port, "127.0.0.1")
        pb = await udp.open_multicast(b, udp.GROUP, port, "127.0.0.1")
        tasks = [asyncio.ensure_future(a.run()), asyncio.ensure_future(b.run())]
        try:
            await _replicate(a, b, (pa.counts, pb.counts))
            assert pb.counts["rx"] > 0 and pb.counts["echo"] > 0
        finally:
            for t in tasks:
                t.cancel()
    asyncio.run(main())


def test_udp_drops_bad_crc_and_echo():
    a = host()
    p = udp.UdpPort(a, udp.GROUP, 1)
    p.send(bytes(range(40)))          # no transport: only remembered
    p.datagram_received(list(p.recent)[0], ("127.0.0.1", 1))
    assert p.counts["echo"] == 1
    p.datagram_received(b"\x00" * 30, ("127.0.0.1", 1))
    assert p.counts["bad"] == 1 and p.counts["rx"] == 0
    p.error_received(OSError("no route"))   # asyncio reports a failed send here
    assert p.counts["err"] == 1
