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


def mesh_cases(args):
    """Junk GOSET packets against replication (issue 15, items 1-3)."""
    junk_replication(args)
    junk_then_feed(args)


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
