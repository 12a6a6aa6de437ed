"""Hostile-input benchmark (issue 15): one JSON object per line.

mesh cases (in memory, virtual time, on the core's Bus; our nodes unless noted):
  junk_replication   a 100-entry feed (short and side-chained entries) copied to an empty
                     node while 10^4 junk CLAIM and NOVELTY packets (random keys, random
                     counts up to 255) arrive interleaved, spread over the time the copy
                     takes without junk; junk reaching the copying node only, then both.
                     Bar: completes, in <= 1.5x the virtual time without junk.
  junk_then_feed     10^4 junk novelties reach a node first; then a real feed is announced
                     (by one of our nodes, then by a deployed-behaviour node): is it learned
                     and replicated, and did any junk become a stored feed?
  ext_flood          the GOSET extension forged (issue 15 hole): 10^4 packets (KEYS of
                     random keys, beacons that decode to the victim's set plus a junk key,
                     random beacons, SYMBOLS for its decoders, REQUESTs) reach the middle
                     node of a line a - b - c while a's 100-entry feed travels to c: does it
                     arrive, how much later, and does any junk key reach c (it must not:
                     keys stay provisional, never announced onward, until an entry verifies)
  ext_then_feed      10^4 forged KEYS (3 random keys each) reach a node; then a real feed is
                     announced by one of our nodes: learned and replicated?

Usage: python tools/bench_hostile.py [--only mesh] [--junk 10000]
"""
import argparse
import json
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "shared"))

from tinyssb import crypto  # noqa: E402
from tinyssb.bus import Bus, same_stores  # noqa: E402
from tinyssb.dmx import GOSET_DMX  # noqa: E402
from tinyssb.goset import DEPLOYED, EXTENDED  # noqa: E402
from tinyssb.node import Node  # noqa: E402
from tinyssb.store import MemStore  # noqa: E402

TIME_BOUND = 1.5        # junk may slow a copy down by this much (issue 15, Benchmark)
STEP_MS = 100           # bus step
LIMIT_MS = 3600 * 1000  # a copy that takes an hour of virtual time has failed


def emit(**rec):
    print(json.dumps(rec), flush=True)


def _node(seed, identity=None, mode=EXTENDED):
    r = random.Random(seed)
    return Node(MemStore(), identity=identity, mode=mode,
                rand=lambda n: r.randrange(n) if n > 1 else 0)


def _author(seed, n_entries, mode=EXTENDED):
    s = bytes([seed & 0xFF]) * 32
    a = _node(seed, (s, crypto.publickey(s)), mode)
    r = random.Random(seed)
    for _ in range(n_entries):
        a.post(r.randbytes(r.choice((20, 40, 150, 400))))
    return a


def _junk(r, claims):
    if claims and r.random() < 0.5:
        lo, hi = sorted((r.randbytes(32), r.randbytes(32)))
        return GOSET_DMX + b"c" + lo + hi + r.randbytes(32) + bytes((r.randrange(2, 256),))
    return GOSET_DMX + b"n" + r.randbytes(32)


def _copy(junk, per_step, targets, seed=3):
    """Copy a 100-entry feed from a to b while `per_step` junk packets reach each of
    `targets` (indices into [a, b]) before every step. Returns (ms, complete, b, bus)."""
    a, b = _author(seed, 100), _node(seed + 1)
    nodes = [a, b]
    bus = Bus(nodes)
    r = random.Random(seed + 7)
    sent = 0
    t = 0
    while t < LIMIT_MS:
        t += STEP_MS
        k = per_step(t)
        for _ in range(k):
            if sent >= junk:
                break
            p = _junk(r, True)
            for i in targets:
                nodes[i].on_packet(p, t)
            sent += 1
        bus.step(t)
        if same_stores(nodes):
            return t, True, b, bus, sent
    return t, False, b, bus, sent


def junk_replication(args):
    t0, ok0, _, _, _ = _copy(0, lambda t: 0, [])
    emit(bench="hostile", case="junk_replication", junk=0, complete=ok0, time_s=t0 / 1000)
    steps = max(1, t0 // STEP_MS)
    for name, targets in (("copying node", [1]), ("both nodes", [0, 1])):
        w0 = time.perf_counter()
        rate = -(-args.junk // steps)
        t, ok, b, bus, sent = _copy(args.junk, lambda t: rate, targets)
        emit(bench="hostile", case="junk_replication", junk=sent, junk_reaches=name,
             complete=ok, time_s=t / 1000, ratio=round(t / t0, 2), bound=TIME_BOUND,
             ok=ok and t <= TIME_BOUND * t0, goset=len(b.goset),
             stored_feeds=len(b.store.feeds()),
             junk_dropped={k: v for k, v in b.counters.items() if k.startswith("drop_")},
             wall_s=round(time.perf_counter() - w0, 2))


def junk_then_feed(args):
    for author_mode in (EXTENDED, DEPLOYED):
        b = _node(11)
        r = random.Random(12)
        w0 = time.perf_counter()
        for i in range(args.junk):
            b.on_packet(_junk(r, False), i // 10)
        full = len(b.goset)
        a = _author(13, 10, author_mode)
        bus = Bus([a, b])
        bus.now = args.junk // 10
        t0 = bus.now
        fid = a.author.fid
        t = bus.run(t0 + LIMIT_MS, STEP_MS, stop=lambda: same_stores([a, b]))
        emit(bench="hostile", case="junk_then_feed", junk=args.junk,
             author="ours" if author_mode == EXTENDED else "deployed",
             goset_after_junk=full, learned=fid in b.goset,
             replicated=same_stores([a, b]), time_s=round((t - t0) / 1000, 1),
             stored_feeds=len(b.store.feeds()), wall_s=round(time.perf_counter() - w0, 2))


def _forged_ext(r, victim):
    """A forged extension packet from an attacker that hears the victim's beacons and
    requests (so it knows the victim's symbol 0 and its decoders' tags)."""
    from tinyssb import gosetx as X
    from tinyssb.hotloops import xor_bytes
    ext = victim.ext
    k = r.randrange(6)
    if k == 0 or (k in (1, 2) and ext.enc is None):
        return X.DMX + b"k" + r.randbytes(2 + 32 * (1 + r.randrange(3)))
    if k in (1, 2):     # beacon or REPLY of the victim's set plus one junk key
        s0 = ext.enc.encode(0, 1)
        j = r.randbytes(32)
        sym = (xor_bytes(s0[:32], j) + xor_bytes(s0[32:35], X._chk(j))
               + bytes(((s0[35] + 1) & 0xFF,)))
        return X.DMX + (b"b" if k == 1 else b"B") + r.randbytes(4) + sym
    if k == 3:
        return X.DMX + b"b" + r.randbytes(40)
    if k == 4:
        tag = ext.decoders[0].tag if ext.decoders else r.randbytes(2)
        return X.DMX + b"s" + tag + (1 + r.randrange(30)).to_bytes(2, "big") + r.randbytes(108)
    return X.DMX + b"r" + (ext.tag or bytes(2)) + (1 + r.randrange(200)).to_bytes(2, "big") + b"\x06"


def _line_copy(junk, seed=3):
    """a's 100-entry feed to c over b (a - b - c) while `junk` forged extension packets
    reach b, spread over the clean run's time. Returns (ms, complete, b, c, sent)."""
    a, b, c = _author(seed, 100), _node(seed + 1), _node(seed + 2)
    nodes = [a, b, c]
    bus = Bus(nodes, links={(0, 1), (1, 2)})
    r = random.Random(seed + 7)
    rate = junk[1] if junk else 0
    sent = 0
    t = 0
    while t < LIMIT_MS:
        t += STEP_MS
        for _ in range(rate):
            if sent >= junk[0]:
                break
            b.on_packet(_forged_ext(r, b), t)
            sent += 1
        bus.step(t)
        if same_stores(nodes):
            return t, True, b, c, sent
    return t, False, b, c, sent


def ext_flood(args):
    t0, ok0, _, _, _ = _line_copy(None)
    emit(bench="hostile", case="ext_flood", junk=0, complete=ok0, time_s=t0 / 1000)
    w0 = time.perf_counter()
    rate = -(-args.junk // max(1, t0 // STEP_MS))
    t, ok, b, c, sent = _line_copy((args.junk, rate))
    fid = _author(3, 0).author.fid
    emit(bench="hostile", case="ext_flood", junk=sent, junk_reaches="middle node",
         complete=ok, time_s=t / 1000, ratio=round(t / t0, 2),
         contained=ok and c.goset.keys == [fid] and b.store.feeds() == [fid],
         junk_keys_behind=len([k for k in c.goset.keys if k != fid]),
         middle_stored_feeds=len(b.store.feeds()), middle_goset=len(b.goset),
         middle_counters={k: v for k, v in sorted(b.counters.items())
                          if k.startswith(("drop_", "ext_"))},
         wall_s=round(time.perf_counter() - w0, 2))


def ext_then_feed(args):
    from tinyssb import gosetx as X
    b = _node(11)
    r = random.Random(12)
    w0 = time.perf_counter()
    for i in range(args.junk):
        b.on_packet(X.DMX + b"k" + r.randbytes(98), i // 10)
    full = len(b.goset)
    a = _author(13, 10)
    bus = Bus([a, b])
    bus.now = t0 = args.junk // 10
    fid = a.author.fid
    t = bus.run(t0 + LIMIT_MS, STEP_MS, stop=lambda: same_stores([a, b]))
    emit(bench="hostile", case="ext_then_feed", junk=args.junk, goset_after_junk=full,
         learned=fid in b.goset, replicated=same_stores([a, b]),
         time_s=round((t - t0) / 1000, 1), stored_feeds=len(b.store.feeds()),
         wall_s=round(time.perf_counter() - w0, 2))


def mesh_cases(args):
    """Junk GOSET and forged extension packets against replication (issue 15, items
    1-3, and the extension's hole)."""
    junk_replication(args)
    junk_then_feed(args)
    ext_flood(args)
    ext_then_feed(args)


CASES = {"mesh": mesh_cases}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", choices=sorted(CASES), help="run one group of cases")
    p.add_argument("--junk", type=int, default=10000, help="junk packets per case (10000)")
    args = p.parse_args(argv)
    for name, fn in CASES.items():
        if args.only in (None, name):
            fn(args)


if __name__ == "__main__":
    main()
