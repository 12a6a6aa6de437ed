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


main()
