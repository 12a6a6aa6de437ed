"""`make bench`: one JSON object per line.

Runs the protocol-core cases here (GOSET agreement, feed replication, each next to its
lower bound), then every other tools/bench_*.py with this interpreter (bench_mpy.py runs
under MicroPython from the Makefile).

GOSET agreement, 100-key sets on the in-memory bus, bytes until both hold the same keys
against the bound of one 40-byte novelty per missing key. Each key is a feed holding one
signed entry at every node that has the key (as in a mesh: a node announces the feeds it
replicates). Counted: GOSET packets both ways (claims, novelties, the extension's
packets) and our node's probe WANTs; the entries those bring (a feed's first entry, which
the node fetches anyway) are reported apart (entry_bytes_mean).
  goset        two deployed-behaviour nodes (the deployed algorithm: the baseline)
  goset_ext    two of our nodes (coded-symbol extension), SEEDS seeds: mean and max
  goset_mixed  one of ours with a deployed-behaviour node, in both roles (ours holding
               the superset, "ours_more", and the deployed node holding it, "deployed_more");
               bytes_by_sender_mean splits the bytes by sender and packet kind (the
               deployed node's claims are its help rounds and its full claims)
  goset_mixed_empty  deployed_more again with feeds that hold no entry (nothing can
               confirm a key the deployed node names only by XOR: the claim dance)
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


GOSET_KINDS = ("claim", "novelty", "beacon", "reply", "symbols", "request", "keys", "probe")
SEEDS = 10


def node(seed, identity=None, capacity=100, mode=DEPLOYED, store=None, follow=()):
    r = random.Random(seed)
    return Node(store or MemStore(), identity=identity, verify=_verify, capacity=capacity,
                rand=lambda n: r.randrange(n) if n > 1 else 0, mode=mode, follow=follow)


_FEEDS = {}


def feed(seed):
    """(fid, entry 1, its MID) of a feed whose secret is derived from `seed` (cached)."""
    got = _FEEDS.get(seed)
    if got is None:
        from tinyssb import crypto, entry
        s = random.Random(seed).randbytes(32)
        fid = crypto.publickey(s)
        au = entry.Author(fid, lambda m: crypto.sign(s, m), 0, fid[:entry.HASH_LEN])
        _, pkt, mid, _ = au.next(b"feed %d" % seed, entry.PLAIN48)
        got = _FEEDS[seed] = (fid, pkt, mid)
    return got


def holding(feeds, entries):
    st = MemStore()
    for fid, pkt, mid in feeds:
        st.add_feed(fid)
        if entries:
            st.append(fid, 1, pkt, mid)
    return st


def goset_run(diff, two_sided, seed, mode_a, mode_b, entries=True):
    """Two nodes with 100-key sets differing in `diff` keys: GOSET traffic until equal.

    One-sided: B holds 100 - diff of A's keys. Two-sided: each holds 100 keys, diff/2 of
    them unknown to the other; their union exceeds the deployed capacity of 100, so these
    nodes use the format's maximum (255). Returns (agreed, time_s, packets, bytes,
    entry bytes)."""
    r = random.Random(seed)
    feeds = [feed((seed << 12) + i) for i in r.sample(range(1 << 12),
                                                      100 + (diff // 2 if two_sided else 0))]
    cap = 255 if two_sided else 100
    if two_sided:
        only_a = only_b = diff // 2
        common = feeds[:100 - only_a]
        fa, fb = common + feeds[100 - only_a:100], common + feeds[100:100 + only_b]
    else:
        fa, fb = feeds[:100], feeds[:100 - diff]
    a = node(seed, capacity=cap, mode=mode_a, store=holding(fa, entries),
             follow=[f[0] for f in fa])
    b = node(seed + 1, capacity=cap, mode=mode_b, store=holding(fb, entries),
             follow=[f[0] for f in fb])
    bus = Bus([a, b])
    t = bus.run(3600000, 100, stop=lambda: a.goset.keys == b.goset.keys)
    pk = sum(bus.packets.get(k, 0) for k in GOSET_KINDS)
    by = sum(bus.bytes.get(k, 0) for k in GOSET_KINDS)
    roles = ("deployed" if mode_a == DEPLOYED else "ours",
             "deployed" if mode_b == DEPLOYED else "ours")
    split = {}
    for (i, kind), n in bus.sent.items():
        if kind in GOSET_KINDS:
            k = "%s_%s" % (roles[i] if roles[0] != roles[1] else "ab"[i], kind)
            split[k] = split.get(k, 0) + n
    return a.goset.keys == b.goset.keys, t / 1000, pk, by, bus.bytes.get("entry", 0), split


def case_name(diff, two_sided):
    return "100 keys, %s diff %d" % ("two-sided" if two_sided else "one-sided", diff)


def bench_goset(diff, two_sided, seed=1):
    """The deployed algorithm between two deployed-behaviour nodes (the baseline)."""
    ok, t, pk, by, _, _ = goset_run(diff, two_sided, seed, DEPLOYED, DEPLOYED)
    bound = diff * 40
    emit(bench="goset", case=case_name(diff, two_sided), agreed=ok, time_s=t, packets=pk,
         bytes=by, bound_packets=diff, bound_bytes=bound, ratio=round(by / bound, 2))


def bench_goset_modes(bench, diff, two_sided, mode_a, mode_b, role=None, entries=True):
    """Mean and max over SEEDS seeds (the first as in the baseline)."""
    runs = [goset_run(diff, two_sided, s, mode_a, mode_b, entries)
            for s in range(1, SEEDS + 1)]
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
               one_packet=sum(1 for x in runs if x[2] == 1),
               entry_bytes_mean=round(sum(x[4] for x in runs) / len(runs)),
               ratios=[round(b / bound, 2) for b in bys])
    split = {}
    for x in runs:
        for k, n in x[5].items():
            split[k] = split.get(k, 0) + n
    rec["bytes_by_sender_mean"] = {k: round(v / len(runs)) for k, v in sorted(split.items())}
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
    for d, two in cases:
        bench_goset_modes("goset_mixed_empty", d, two, DEPLOYED, EXTENDED, "deployed_more",
                          entries=False)
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
