"""Builders for clock tests: feeds with real signed entries (plain or side-chained),
forks, two repos, and an in-memory pump that runs two machines without a driver."""
import asyncio
import collections
import hashlib
import sqlite3

from tinyssb.store import MemStore
from tssb.channel import memory_pair
from tssb.clock import crypto
from tssb.clock import events as E
from tssb.clock.driver import run_sync
from tssb.clock.repo import FeedRepo, ThreadRepo
from tssb.clock.sync import SyncMachine


def seed_of(name):
    return hashlib.sha256(b"seed:" + name.encode()).digest()


class Feed:
    """A feed author: produces the entries of one feed (and forks of it)."""

    def __init__(self, name):
        self.seed = seed_of(name)
        self.fid = crypto.publickey(self.seed)
        self.raws = []          # main branch feed events
        self.chunks = {}        # seq -> side chain of a chain20 entry

    def entry(self, seq, prev, payload):
        pkt, mid = E.make_entry(self.seed, seq, prev, payload)
        return E.feed_event_bytes(self.fid, seq, prev, pkt), mid

    def extend(self, count):
        for _ in range(count):
            seq = len(self.raws) + 1
            prev = self.fid[:20] if seq == 1 else E.parse_feed_event(self.raws[-1]).eid
            raw, _ = self.entry(seq, prev, b"m%d" % seq)
            self.raws.append(raw)
        return self

    def post(self, content):
        """Append a chain20 entry holding `content` (its chunks in self.chunks)."""
        seq = len(self.raws) + 1
        prev = self.fid[:20] if seq == 1 else E.parse_feed_event(self.raws[-1]).eid
        pkt, _, chunks = E.make_chain_entry(self.seed, seq, prev, content)
        self.raws.append(E.feed_event_bytes(self.fid, seq, prev, pkt))
        self.chunks[seq] = chunks
        return self


def put(store, raws, chunks=None):
    """Append feed events to a store (in order); `chunks`: seq -> side chain to store too."""
    for raw in raws:
        ev = E.parse_feed_event(raw)
        store.add_feed(ev.key)
        store.append(ev.key, ev.seq, raw[56:], ev.eid)
        for cnr, c in enumerate((chunks or {}).get(ev.seq, ())):
            store.put_chunk(ev.key, ev.seq, cnr, c)


def stored_chains(store, fid):
    """{seq: [chunks]} of every entry of a feed in a store."""
    out = {}
    seq = 1
    while store.entry(fid, seq) is not None:
        out[seq] = [store.chunk(fid, seq, c) for c in range(store.chunk_count(fid, seq))]
        seq += 1
    return out


def feed_repo(n=128, k=4):
    return FeedRepo(MemStore(), sqlite3.connect(":memory:"), n, k)


def thread_repo(n=128, k=4):
    return ThreadRepo(sqlite3.connect(":memory:"), n, k)


def sync(repo_a, repo_b, mode="feeds", key=None, signers=(None, None), **kw):
    """Run both ends over a memory pair; returns (summary_a, summary_b, ma, mb).
    `signers`: the seeds that sign each end's joins of forked feeds."""
    ma = SyncMachine(repo_a, mode, key=key, signer=signers[0], **kw)
    mb = SyncMachine(repo_b, mode, key=key if mode != "entity" else None, signer=signers[1], **kw)

    async def main():
        ca, cb = memory_pair()

        async def responder():
            first = await cb.recv()
            return await run_sync(cb, mb, first=first)
        return await asyncio.gather(run_sync(ca, ma), responder())
    sa, sb = asyncio.run(main())
    return sa, sb, ma, mb


def digest_of(repo, keys):
    m = SyncMachine(repo, "feeds", n=repo.n, k=repo.k)
    m._set_scope(keys)
    return m.digest()


def stamp_of(repo, keys):
    """The summed stamp a feeds-mode machine would send for `keys`."""
    m = SyncMachine(repo, "feeds", n=repo.n, k=repo.k)
    m._set_scope(keys)
    return m._snapshot()[1]


def pump(ma, mb, hook=None):
    """Run two machines against each other in memory, in order per direction (ma starts,
    mb answers its HELLO as the driver's responder does). `hook(src, msg)` ("a" or "b")
    returns the messages to deliver instead of msg. Stops when nothing is in flight;
    ClockError from a machine propagates."""
    hook = hook or (lambda src, msg: [msg])
    to_b, to_a = collections.deque(ma.start()), collections.deque()
    started = False
    while to_a or to_b:
        if to_b:
            for m in hook("a", to_b.popleft()):
                reply = mb.receive(m)
                if not started:
                    started = True
                    reply = mb.start() + reply
                to_a.extend(reply)
        if to_a:
            for m in hook("b", to_a.popleft()):
                to_b.extend(ma.receive(m))


def round_trips(ma, mb, hook=None):
    """Like `pump`, and returns the sync's round trips: ceil(depth / 2), depth being the
    longest causal chain of one-way messages (a message sent while handling one is one
    deeper than every message its sender received so far), as tools/bench_clock.py
    counts them."""
    hook = hook or (lambda src, msg: [msg])
    cur = {"a": 0, "b": 0}
    to_b = collections.deque((1, m) for m in ma.start())
    to_a = collections.deque()
    deepest = 1
    started = False
    while to_a or to_b:
        for src, dst, q, out, m in (("a", "b", to_b, to_a, mb), ("b", "a", to_a, to_b, ma)):
            if not q:
                continue
            d, msg = q.popleft()
            cur[dst] = max(cur[dst], d)
            for x in hook(src, msg):
                reply = m.receive(x)
                if dst == "b" and not started:
                    started = True
                    reply = mb.start() + reply
                out.extend((cur[dst] + 1, r) for r in reply)
                if reply:
                    deepest = max(deepest, cur[dst] + 1)
    return (deepest + 1) // 2
