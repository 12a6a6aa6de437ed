"""Builders for clock tests: feeds with real signed entries, forks, two repos."""
import asyncio
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


def put(store, raws):
    """Append feed events to a MemStore (in order)."""
    for raw in raws:
        ev = E.parse_feed_event(raw)
        store.add_feed(ev.key)
        store.append(ev.key, ev.seq, raw[56:], ev.eid)


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
