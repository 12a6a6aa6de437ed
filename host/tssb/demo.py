"""The main job (`make demo`): the whole system end to end on one machine.

Step 1 replicates feeds among a dozen tinySSB nodes on an in-memory broadcast medium
with a multi-hop topology, using the real protocol core with the deployed timers. Every
node writes its event log (JSONL, the shared schema) under OUT/logs. Later steps (LoRa
simulator, USB bridge, SETU between hosts, Spark report) join as they land.
"""
import json
import os
import random
import time

from tinyssb import crypto
from tinyssb.bus import Bus, same_stores
from tinyssb.eventlog import VIRTUAL_EPOCH_MS, EventLog, line_writer
from tinyssb.node import Node
from tinyssb.store import MemStore

N_NODES = 12
AUTHORS = 3


def _grid_links(n, width):
    links = set()
    for i in range(n):
        r, c = divmod(i, width)
        if c + 1 < width and i + 1 < n:
            links.add((i, i + 1))
        if i + width < n:
            links.add((i, i + width))
    return links


class _Clock:
    def __init__(self):
        self.now = 0

    def __call__(self):
        return VIRTUAL_EPOCH_MS + self.now


def mesh_step(out, seed=1, say=print):
    """Replicate posts of AUTHORS authors across N_NODES nodes on a 4-wide grid."""
    rnd = random.Random(seed)
    logdir = os.path.join(out, "logs")
    os.makedirs(logdir, exist_ok=True)
    clock = _Clock()
    files, nodes = [], []
    for i in range(N_NODES):
        name = "node%02d" % i
        f = open(os.path.join(logdir, name + ".jsonl"), "w")
        files.append(f)
        elog = EventLog(name, line_writer(f), clock, run="demo%d" % seed)
        ident = None
        if i < AUTHORS:
            s = bytes(rnd.getrandbits(8) for _ in range(32))
            ident = (s, crypto.publickey(s))
        r = random.Random(seed * 100 + i)
        nodes.append(Node(MemStore(), identity=ident, rand=lambda n, r=r: r.randrange(n) if n > 1 else 0,
                          log=lambda ev, f, e=elog: e.emit(ev, **f)))
    posts = 0
    for a in range(AUTHORS):
        for k in range(4):
            size = rnd.choice((16, 40, 180, 700))
            text = ("author %d post %d: " % (a, k)).encode() + bytes(rnd.getrandbits(8) for _ in range(size))
            nodes[a].post(text)
            posts += 1
    links = _grid_links(N_NODES, 4)
    say("mesh: %d nodes on a 4-wide grid (%d links), %d authors posted %d entries"
        % (N_NODES, len(links), AUTHORS, posts))
    bus = Bus(nodes, links=links)
    t0 = time.perf_counter()
    goset_t = None
    t = 0
    while t < 3600 * 1000:
        t += 100
        clock.now = t
        bus.step(t)
        if goset_t is None and all(n.goset.state == nodes[0].goset.state and len(n.goset) == AUTHORS
                                   for n in nodes):
            goset_t = t
        if t % 1000 == 0 and same_stores(nodes):
            break
    for f in files:
        f.close()
    ok = same_stores(nodes)
    pk, by = bus.total()
    say("mesh: GOSET agreed after %.1f s, all feeds complete at every node after %.1f s "
        "(virtual time; %.1f s of CPU)" % ((goset_t or 0) / 1000, t / 1000, time.perf_counter() - t0))
    say("mesh: %d packets, %d bytes on the medium" % (pk, by))
    for kind in sorted(bus.packets):
        say("        %-8s %6d packets %8d bytes" % (kind, bus.packets[kind], bus.bytes[kind]))
    drops = {}
    for n in nodes:
        for k, v in n.counters.items():
            if k.startswith("drop_"):
                drops[k[5:]] = drops.get(k[5:], 0) + v
    say("mesh: dropped on receipt (duplicates and not-yet-expected packets): %s"
        % ", ".join("%s %d" % kv for kv in sorted(drops.items())))
    return {"ok": ok, "converge_ms": t, "goset_ms": goset_t, "packets": pk, "bytes": by,
            "by_kind": bus.packets}


def run(out="out/demo", seed=1, say=print):
    os.makedirs(out, exist_ok=True)
    summary = {"mesh": mesh_step(out, seed, say)}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    say("demo: logs in %s, summary in %s" % (os.path.join(out, "logs"), os.path.join(out, "summary.json")))
    return all(v.get("ok", True) for v in summary.values())
