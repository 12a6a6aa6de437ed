# MicroPython benchmark of the protocol core: Node.on_packet time per packet kind.
# Run from the repo root: micropython tools/bench_mpy.py (one JSON object per line).
import sys
import time

sys.path.insert(0, "shared")
sys.path.insert(0, "tests/core")

import json  # noqa: E402

from tinyssb import crypto  # noqa: E402
from tinyssb.node import Node  # noqa: E402
from tinyssb.store import MemStore  # noqa: E402


def us():
    return time.ticks_us() if hasattr(time, "ticks_us") else int(time.perf_counter() * 1e6)


def diff(a, b):
    return time.ticks_diff(b, a) if hasattr(time, "ticks_diff") else b - a


def main():
    seed = bytes(range(32))
    author = Node(MemStore(), identity=(seed, crypto.publickey(seed)))
    for i in range(30):
        author.post(bytes((i + j) & 0xFF for j in range(40 + 9 * i)))
    fid = author.author.fid
    pkts = {"claim": [], "want": [], "entry": [], "chunk": []}
    rx = Node(MemStore())
    rx.follow(fid)
    pkts["claim"].append(author.goset.novelty(fid))
    pkts["want"].append(rx.want_vector())
    for s in range(1, 31):
        pkts["entry"].append(author.store.entry(fid, s))
        for k in range(author.store.chunk_count(fid, s)):
            pkts["chunk"].append(author.store.chunk(fid, s, k))
    res = {}
    # WANT: answered by the author (reads its store, no signature work)
    t = us()
    n = 50
    for i in range(n):
        author.on_packet(pkts["want"][0], i)
    res["want"] = diff(t, us()) / n
    # entries then chunks, in order, into the empty replica (one signature check each)
    t = us()
    for p in pkts["entry"]:
        rx.on_packet(p, 0)
    res["entry"] = diff(t, us()) / len(pkts["entry"])
    t = us()
    for p in pkts["chunk"]:
        rx.on_packet(p, 0)
    res["chunk"] = diff(t, us()) / len(pkts["chunk"])
    assert rx.store.front(fid) == author.store.front(fid)
    t = us()
    for i in range(n):
        rx.on_packet(pkts["claim"][0], i)
    res["novelty"] = diff(t, us()) / n
    t = us()
    s = 0
    for i in range(20):
        crypto.verify(fid, b"x" * 122, author.store.entry(fid, 1)[56:])
    verify_us = diff(t, us()) / 20
    impl = sys.implementation.name
    for kind in ("novelty", "want", "entry", "chunk"):  # novelty: an already known key
        print(json.dumps({"bench": "node_on_packet", "case": kind, "impl": impl,
                          "us_per_packet": round(res[kind], 1)}))
    print(json.dumps({"bench": "ed25519_verify", "impl": impl, "backend": crypto.BACKEND,
                      "ms_per_verify": round(verify_us / 1000, 2),
                      "entry_share_of_verify": round(verify_us / res["entry"], 2)}))


def keyset(tag, n):
    from hashlib import sha256
    return [sha256(bytes((tag, i & 0xFF, i >> 8))).digest() for i in range(n)]


def node_with(keys, seed):
    from support import FAST, Rand
    n = Node(MemStore(), timing=FAST, rand=Rand(seed).below)
    for k in keys:
        n.follow(k)
    return n


def bench_symbols():
    """GOSET extension: time per received packet on sets of 90-100 keys (issue 17: <= 2 ms)."""
    import gc
    from tinyssb import gosetx as X
    impl = sys.implementation.name
    common = keyset(1, 90)
    res = {}
    # a beacon the receiver settles by solving (it holds a superset): names what it lacks
    big, small = node_with(common + keyset(2, 10), 1), node_with(common, 2)
    beacon = small.ext._beacon(X.BEACON)
    t = us()
    for i in range(20):
        big.ext.keys_sent = {}
        big.on_packet(beacon, 1000 + i)
    res["beacon_solved"] = diff(t, us()) / 20
    # a beacon that decodes from its symbol 0 alone (one key more)
    one = node_with(common + keyset(3, 1), 3)
    beacon = one.ext._beacon(X.BEACON)
    t = us()
    for i in range(20):
        small.spaces.views = []
        small.spaces._index()
        small.on_packet(beacon, 2000 + i)
    res["beacon_decoded"] = diff(t, us()) / 20
    for kind in ("beacon_solved", "beacon_decoded"):
        print(json.dumps({"bench": "gosetx_on_packet", "case": kind, "impl": impl,
                          "keys": 95, "ms_per_packet": round(res[kind] / 1000, 3),
                          "bound_ms": 2.0}))
    # two-sided differences (5 + 5 and 10 + 10 keys over 90 common ones): the reply starts
    # a decoder, symbols follow. The same decode five times: per packet the fastest of the
    # five (other processes on a shared machine only ever add time); then the mean and
    # the slowest packet of the stream.
    for only in (5, 10):
        a = node_with(common + keyset(4, only), 4)
        beacon = a.ext._beacon(X.BEACON)
        streams = [p for _, p in a.ext._symbols(1, 90)]
        starts, per = [], []
        for rep in range(5):
            b2 = node_with(common + keyset(5, only), 6)
            gc.collect()
            t = us()
            b2.on_packet(beacon, 0)
            starts.append(diff(t, us()))
            for j in range(len(streams)):
                gc.collect()    # a collection of this test's whole heap is not the packet's
                t = us()
                b2.on_packet(streams[j], 1)
                d = diff(t, us())
                if j < len(per):
                    per[j] = min(per[j], d)
                else:
                    per.append(d)
                if b2.spaces.view(a.announced().state) is not None:
                    break
            assert b2.spaces.view(a.announced().state) is not None
        print(json.dumps({"bench": "gosetx_on_packet", "case": "reply_and_decoder",
                          "impl": impl, "keys": 90 + only,
                          "ms_per_packet": round(min(starts) / 1000, 3), "bound_ms": 2.0}))
        print(json.dumps({"bench": "gosetx_on_packet", "case": "symbols_packet",
                          "impl": impl, "keys": 90 + only, "diff": 2 * only,
                          "packets": len(per),
                          "ms_per_packet": round(sum(per) / len(per) / 1000, 3),
                          "ms_slowest_packet": round(max(per) / 1000, 3),
                          "bound_ms": 2.0}))


main()
bench_symbols()
