"""Bloom-clock sync: bytes and rounds to bring two peers to the same feeds.

Cases: n common feeds (10, 100) of 20 entries each, peer B missing m entries (1, 10, 100)
at the ends of random feeds. Compared in the same run with a naive baseline (both send
every (FID, front seq) pair, then the missing entries are sent; computed exactly, it has
no probabilistic part). SETU on the same data is not run here yet (its module is another
worker's; see docs/clock.md). Prints one JSON object per line.
"""
import asyncio
import hashlib
import json
import random
import sqlite3
import time

from tinyssb.store import MemStore
from tssb.channel import memory_pair
from tssb.clock import crypto
from tssb.clock import events as E
from tssb.clock.driver import run_sync
from tssb.clock.repo import FeedRepo
from tssb.clock.sync import SyncMachine

ENTRIES = 20


def make_feeds(n, rng):
    feeds = []
    for i in range(n):
        seed = hashlib.sha256(b"bench%d" % i).digest()
        fid = crypto.publickey(seed)
        prev, raws = fid[:20], []
        for seq in range(1, ENTRIES + 1):
            pkt, mid = E.make_entry(seed, seq, prev, b"bench %d %d" % (i, seq))
            raws.append(E.feed_event_bytes(fid, seq, prev, pkt))
            prev = mid
        feeds.append(raws)
    return feeds


def fill(store, raws):
    for raw in raws:
        ev = E.parse_feed_event(raw)
        store.add_feed(ev.key)
        store.append(ev.key, ev.seq, raw[56:], ev.eid)


def run_clock(feeds, cut):
    a = FeedRepo(MemStore(), sqlite3.connect(":memory:"), 128, 4)
    b = FeedRepo(MemStore(), sqlite3.connect(":memory:"), 128, 4)
    for i, raws in enumerate(feeds):
        fill(a.store, raws)
        fill(b.store, raws[:ENTRIES - cut[i]])
    ma, mb = SyncMachine(a, "feeds"), SyncMachine(b, "feeds")

    async def main():
        ca, cb = memory_pair()

        async def resp():
            return await run_sync(cb, mb, first=await cb.recv())
        return await asyncio.gather(run_sync(ca, ma), resp())
    sa, sb = asyncio.run(main())
    assert sa["ok"] and sb["ok"]
    assert all(b.store.front(a_f)[0] == ENTRIES for a_f in a.keys())
    return sa, ma, mb


def naive_bytes(n, m):
    # both send n x (FID 32 + seq 4) + a count; then B asks nothing more: A sends m events
    return 2 * (n * 36 + 2) + m * E.FEED_EVENT_LEN, 2


def main():
    rng = random.Random(1)
    for n in (10, 100):
        feeds = make_feeds(n, rng)
        for m in (1, 10, 100):
            cut = [0] * n
            for _ in range(m):   # remove m entries from the ends of random feeds
                i = rng.randrange(n)
                while cut[i] >= ENTRIES:
                    i = rng.randrange(n)
                cut[i] += 1
            t0 = time.perf_counter()
            s, ma, mb = run_clock(feeds, cut)
            dt = time.perf_counter() - t0
            total = s["bytes_sent"] + s["bytes_recv"]
            nb, nr = naive_bytes(n, m)
            print(json.dumps({"bench": "clock_sync", "case": "n=%d,m=%d" % (n, m),
                              "bytes": total, "status_rounds": s["rounds"],
                              "round_trips": max(ma.stats["trips"], mb.stats["trips"]) + s["rounds"],
                              "proactive_events": ma.stats["events_sent"],
                              "descent_nodes": ma.stats["nodes_recv"] + mb.stats["nodes_recv"],
                              "seconds": round(dt, 3),
                              "naive_bytes": nb, "naive_rounds": nr,
                              "ratio": round(total / nb, 3)}), flush=True)


if __name__ == "__main__":
    main()
