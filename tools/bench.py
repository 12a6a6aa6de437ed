"""`make bench`: one JSON object per line.

Runs the protocol-core cases here (GOSET agreement, feed replication, each next to its
lower bound), then every other tools/bench_*.py with this interpreter (bench_mpy.py runs
under MicroPython from the Makefile).

GOSET agreement, 100-key sets on the in-memory bus, bytes until both hold the same keys
against the bound of one 40-byte novelty per missing key:
  goset        two deployed-behaviour nodes (the deployed algorithm: the baseline)
  goset_ext    two of our nodes (coded-symbol extension), SEEDS seeds: mean and max
  goset_mixed  one of ours with a deployed-behaviour node, in both roles (ours holding
               the superset, "ours_more", and the deployed node holding it, "deployed_more")
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
from tinyssb.goset import DEPLOYED, EXTENDED  # noqa: E402
from tinyssb.node import Node  # noqa: E402
from tinyssb.store import MemStore  # noqa: E402


def emit(**kw):
    print(json.dumps(kw), flush=True)


def _verify(pub, msg, sig):
    from tinyssb import crypto
    return crypto.verify(pub, msg, sig)


GOSET_KINDS = ("claim", "novelty", "beacon", "reply", "symbols", "request", "keys")
SEEDS = 10


def node(seed, identity=None, capacity=100, mode=DEPLOYED):
    r = random.Random(seed)
    return Node(MemStore(), identity=identity, verify=_verify, capacity=capacity,
                rand=lambda n: r.randrange(n) if n > 1 else 0, mode=mode)


def goset_run(diff, two_sided, seed, mode_a, mode_b):
    """Two nodes with 100-key sets differing in `diff` keys: GOSET traffic until equal.

    One-sided: B holds 100 - diff of A's keys. Two-sided: each holds 100 keys, diff/2 of
    them unknown to the other; their union exceeds the deployed capacity of 100, so these
    nodes use the format's maximum (255). Returns (agreed, time_s, packets, bytes)."""
    r = random.Random(seed)
    keys = [r.randbytes(32) for _ in range(100 + (diff // 2 if two_sided else 0))]
    cap = 255 if two_sided else 100
    a, b = node(seed, capacity=cap, mode=mode_a), node(seed + 1, capacity=cap, mode=mode_b)
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
    pk = sum(bus.packets.get(k, 0) for k in GOSET_KINDS)
    by = sum(bus.bytes.get(k, 0) for k in GOSET_KINDS)
    return a.goset.keys == b.goset.keys, t / 1000, pk, by


def case_name(diff, two_sided):
    return "100 keys, %s diff %d" % ("two-sided" if two_sided else "one-sided", diff)


def bench_goset(diff, two_sided, seed=1):
    """The deployed algorithm between two deployed-behaviour nodes (the baseline)."""
    ok, t, pk, by = goset_run(diff, two_sided, seed, DEPLOYED, DEPLOYED)
    bound = diff * 40
    emit(bench="goset", case=case_name(diff, two_sided), agreed=ok, time_s=t, packets=pk,
         bytes=by, bound_packets=diff, bound_bytes=bound, ratio=round(by / bound, 2))


def bench_goset_modes(bench, diff, two_sided, mode_a, mode_b, role=None):
    """Mean and max over SEEDS seeds (the first as in the baseline)."""
    runs = [goset_run(diff, two_sided, s, mode_a, mode_b) for s in range(1, SEEDS + 1)]
    bound = diff * 40
    bys = [x[3] for x in runs]
    ts = [x[1] for x in runs]
    rec = {"bench": bench, "case": case_name(diff, two_sided)}
    if role:
        rec["role"] = role
    rec.update(agreed=all(x[0] for x in runs), seeds=len(runs),
               packets_mean=round(sum(x[2] for x in runs) / len(runs), 1),
               bytes_mean=round(sum(bys) / len(bys)), bytes_max=max(bys), bound_bytes=bound,
               ratio_mean=round(sum(bys) / len(bys) / bound, 2),
               ratio_max=round(max(bys) / bound, 2),
               time_s_mean=round(sum(ts) / len(ts), 1), time_s_max=max(ts),
               one_packet=sum(1 for x in runs if x[2] == 1))
    emit(**rec)


def bench_replication(n_entries=100, seed=3, mode=DEPLOYED):
    """Copy a 100-entry feed (short and side-chained entries) to an empty node."""
    from tinyssb import crypto
    s = bytes([7]) * 32
    a = node(seed, identity=(s, crypto.publickey(s)), mode=mode)
    r = random.Random(seed)
    for i in range(n_entries):
        size = r.choice((20, 40, 150, 400))
        a.post(r.randbytes(size))
    b = node(seed + 1, mode=mode)
    bus = Bus([a, b])
    t0 = time.perf_counter()
    t = bus.run(36000000, 100, stop=lambda: same_stores([a, b]))
    wall = time.perf_counter() - t0
    fid = a.author.fid
    chunks = sum(a.store.chunk_count(fid, q) for q in range(1, n_entries + 1))
    bound_pk = n_entries + chunks
    pk, by = bus.total()
    emit(bench="replication", case="%d entries, %d chunks, %s" % (
             n_entries, chunks, "deployed timing" if mode == DEPLOYED else "our nodes"),
         complete=same_stores([a, b]), time_s=t / 1000, packets=pk, bytes=by,
         by_kind=bus.packets, bound_packets=bound_pk, bound_bytes=bound_pk * 120,
         ratio_packets=round(pk / bound_pk, 2), ratio_bytes=round(by / (bound_pk * 120), 2),
         wall_s=round(wall, 2))


def main():
    cases = [(1, False), (10, False), (50, False), (2, True), (10, True), (50, True)]
    for d, two in cases:
        bench_goset(d, two)
    for d, two in cases:
        bench_goset_modes("goset_ext", d, two, EXTENDED, EXTENDED)
    for d, two in cases:
        bench_goset_modes("goset_mixed", d, two, EXTENDED, DEPLOYED, "ours_more")
        bench_goset_modes("goset_mixed", d, two, DEPLOYED, EXTENDED, "deployed_more")
    bench_replication()
    bench_replication(mode=EXTENDED)
    for name in sorted(os.listdir(HERE)):
        if name.startswith("bench_") and name.endswith(".py") and name not in ("bench_mpy.py",):
            r = subprocess.run([sys.executable, os.path.join(HERE, name)],
                               cwd=os.path.dirname(HERE))
            if r.returncode:
                emit(bench=name[6:-3], error="exit status %d" % r.returncode)


if __name__ == "__main__":
    main()
