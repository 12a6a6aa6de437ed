"""`make bench`: one JSON object per line.

Runs the protocol-core cases here (GOSET agreement, feed replication, each next to its
lower bound), then every other tools/bench_*.py with this interpreter (bench_mpy.py runs
under MicroPython from the Makefile).
"""
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "shared"))

from tinyssb.bus import Bus, same_stores  # noqa: E402
from tinyssb.node import Node  # noqa: E402
from tinyssb.store import MemStore  # noqa: E402


def emit(**kw):
    print(json.dumps(kw), flush=True)


def _verify(pub, msg, sig):
    from tinyssb import crypto
    return crypto.verify(pub, msg, sig)


def node(seed, identity=None, capacity=100):
    r = random.Random(seed)
    return Node(MemStore(), identity=identity, verify=_verify, capacity=capacity,
                rand=lambda n: r.randrange(n) if n > 1 else 0)


def bench_goset(diff, two_sided, seed=1):
    """Two nodes with 100-key sets differing in `diff` keys: GOSET traffic until equal.

    One-sided: B holds 100 - diff of A's keys. Two-sided: each holds 100 keys, diff/2 of
    them unknown to the other; their union exceeds the deployed capacity of 100, so these
    nodes use the format's maximum (255)."""
    r = random.Random(seed)
    keys = [r.randbytes(32) for _ in range(100 + (diff // 2 if two_sided else 0))]
    cap = 255 if two_sided else 100
    a, b = node(seed, capacity=cap), node(seed + 1, capacity=cap)
    if two_sided:
        only_a = only_b = diff // 2
        common = keys[:100 - only_a]
        ka, kb = common + keys[100 - only_a:100], common + keys[100:100 + only_b]
    else:
        ka, kb = keys[:100], keys[:100 - diff]
    for k in ka:
        a.follow(k)
    for k in kb:
        b.follow(k)
    bus = Bus([a, b])
    t = bus.run(3600000, 100, stop=lambda: a.goset.keys == b.goset.keys)
    pk = sum(bus.packets.get(k, 0) for k in ("claim", "novelty"))
    by = sum(bus.bytes.get(k, 0) for k in ("claim", "novelty"))
    bound = diff * 40
    emit(bench="goset", case="100 keys, %s diff %d" % ("two-sided" if two_sided else "one-sided", diff),
         agreed=a.goset.keys == b.goset.keys, time_s=t / 1000, packets=pk, bytes=by,
         bound_packets=diff, bound_bytes=bound, ratio=round(by / bound, 2))


def bench_replication(n_entries=100, seed=3):
    """Copy a 100-entry feed (short and side-chained entries) to an empty node."""
    from tinyssb import crypto
    s = bytes([7]) * 32
    a = node(seed, identity=(s, crypto.publickey(s)))
    r = random.Random(seed)
    for i in range(n_entries):
        size = r.choice((20, 40, 150, 400))
        a.post(r.randbytes(size))
    b = node(seed + 1)
    bus = Bus([a, b])
    t0 = time.perf_counter()
    t = bus.run(36000000, 100, stop=lambda: same_stores([a, b]))
    wall = time.perf_counter() - t0
    fid = a.author.fid
    chunks = sum(a.store.chunk_count(fid, q) for q in range(1, n_entries + 1))
    bound_pk = n_entries + chunks
    pk, by = bus.total()
    emit(bench="replication", case="%d entries, %d chunks, deployed timing" % (n_entries, chunks),
         complete=same_stores([a, b]), time_s=t / 1000, packets=pk, bytes=by,
         by_kind=bus.packets, bound_packets=bound_pk, bound_bytes=bound_pk * 120,
         ratio_packets=round(pk / bound_pk, 2), ratio_bytes=round(by / (bound_pk * 120), 2),
         wall_s=round(wall, 2))


def main():
    for d in (1, 10, 50):
        bench_goset(d, False)
    for d in (2, 10, 50):
        bench_goset(d, True)
    bench_replication()
    for name in sorted(os.listdir(HERE)):
        if name.startswith("bench_") and name.endswith(".py") and name not in ("bench_mpy.py",):
            r = subprocess.run([sys.executable, os.path.join(HERE, name)],
                               cwd=os.path.dirname(HERE))
            if r.returncode:
                emit(bench=name[6:-3], error="exit status %d" % r.returncode)


if __name__ == "__main__":
    main()
