"""Benchmark of secure sessions on loopback: handshake time and throughput.

Prints one JSON object per line:
  handshake/sans_io     the four SHS messages computed in memory (CPU cost only)
  handshake/loopback    TCP connect + secret handshake + goodbye against `tssb` server code
  throughput/raw_tcp    4 KiB writes over plain asyncio TCP (the baseline)
  throughput/boxstream  4 KiB box-stream messages over TCP      (ratio vs raw_tcp)
  throughput/channel    4 KiB messages on a multiplexed stream   (ratio vs raw_tcp)

Usage: python tools/bench_session.py [--mb 32] [--handshakes 100]
"""
import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import types

from tssb.context import Context
from tssb.session import PeerPolicy, connect, shs, start_server
from tssb.session.boxstream import BoxReader, BoxWriter

MSG = 4096


def emit(**rec):
    print(json.dumps(rec), flush=True)


def bench_sans_io(n):
    net, seed_a, seed_b = bytes(32), bytes(range(32)), bytes(range(32, 64))
    server_pub = shs._keypair(seed_b)[0]
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        c = shs.ClientHandshake(net, seed_a, server_pub)
        s = shs.ServerHandshake(net, seed_b)
        m2 = s.on_client_hello(c.hello())
        s.on_client_auth(c.on_server_hello(m2))
        c.on_server_accept(s.accept())
        s.keys()
        times.append(time.perf_counter() - t0)
    emit(bench="handshake", case="sans_io", n=n, median_ms=round(statistics.median(times) * 1e3, 3))


async def bench_handshake(a, b, n):
    policy = PeerPolicy.from_context(a, rate_per_addr=1e6, burst_per_addr=1e6,
                                     rate_total=1e6, burst_total=1e6)
    srv = await start_server(a, "127.0.0.1", 0, policy=policy, services={})
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        s = await connect("127.0.0.1", srv.port, b, peer=a.identity.public)
        times.append(time.perf_counter() - t0)
        await s.close()
    await srv.close()
    emit(bench="handshake", case="loopback", n=n,
         median_ms=round(statistics.median(times) * 1e3, 3),
         p90_ms=round(sorted(times)[int(0.9 * n)] * 1e3, 3))


async def _transfer(total, make_sender, make_receiver):
    """Time moving `total` bytes through a TCP connection with the given codec."""
    done = asyncio.get_running_loop().create_future()

    async def handle(reader, writer):
        feed = make_receiver()
        got = 0
        while got < total:
            data = await reader.read(65536)
            if not data:
                break
            got += feed(data)
        writer.write(b"k")
        await writer.drain()
        writer.close()
        done.set_result(got)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    seal = make_sender()
    payload = bytes(MSG)
    t0 = time.perf_counter()
    for _ in range(total // MSG):
        writer.write(seal(payload))
        await writer.drain()
    await reader.read(1)
    elapsed = time.perf_counter() - t0
    writer.close()
    server.close()
    await server.wait_closed()
    assert await done == total
    return elapsed


async def bench_throughput(a, b, mb):
    total = mb * 1024 * 1024
    raw = await _transfer(total, lambda: (lambda m: m), lambda: len)
    mbps_raw = total / raw / 1e6
    emit(bench="throughput", case="raw_tcp", msg_bytes=MSG, mb=mb, mb_per_s=round(mbps_raw, 1),
         ratio=1.0)

    key, nonce = bytes(range(32)), bytes(24)

    def receiver():
        r = BoxReader(key, nonce)
        return lambda data: sum(len(x) for x in r.feed(data))
    box = await _transfer(total, lambda: BoxWriter(key, nonce).seal, receiver)
    mbps = total / box / 1e6
    emit(bench="throughput", case="boxstream", msg_bytes=MSG, mb=mb, mb_per_s=round(mbps, 1),
         ratio=round(mbps / mbps_raw, 3))

    async def sink(channel, ctx, peer):
        got = 0
        while True:
            m = await channel.recv()
            if not m:
                break
            got += len(m)
        await channel.send(str(got).encode())
    sys.modules["tssb_bench_sink"] = types.SimpleNamespace(serve=sink)
    srv = await start_server(a, "127.0.0.1", 0, services={"sink": "tssb_bench_sink"})
    s = await connect("127.0.0.1", srv.port, b, peer=a.identity.public)
    ch = await s.open_stream("sink")
    payload = bytes(MSG)
    t0 = time.perf_counter()
    for _ in range(total // MSG):
        await ch.send(payload)
    await ch.send(b"")
    assert int(await ch.recv()) == total
    elapsed = time.perf_counter() - t0
    await s.close()
    await srv.close()
    mbps = total / elapsed / 1e6
    emit(bench="throughput", case="channel", msg_bytes=MSG, mb=mb, mb_per_s=round(mbps, 1),
         ratio=round(mbps / mbps_raw, 3))


async def run(args):
    with tempfile.TemporaryDirectory() as tmp:
        a = Context.open(tmp + "/a")
        b = Context.open(tmp + "/b")
        b.set_network_key(a.network_key)
        a.store.add_peer(b.identity.public)
        await bench_handshake(a, b, args.handshakes)
        await bench_throughput(a, b, args.mb)
        a.close()
        b.close()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=32, help="MiB per throughput case (default 32)")
    p.add_argument("--handshakes", type=int, default=100, help="handshakes to time (default 100)")
    args = p.parse_args(argv)
    bench_sans_io(args.handshakes)
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
