import asyncio

import pytest

from clock_helpers import Feed, digest_of, feed_repo, put, sync, thread_repo
from tssb.channel import memory_pair
from tssb.clock import events as E
from tssb.clock import forks
from tssb.clock.driver import run_sync
from tssb.clock.sync import EVENTS, SyncMachine
from tssb.clock.wire import varint


def fronts(repo, feeds):
    return [repo.store.front(f.fid)[0] for f in feeds]


def assert_same(a, b, keys):
    assert digest_of(a, keys) == digest_of(b, keys)


@pytest.mark.parametrize("n,k", [(128, 4), (2, 1)])   # (2, 1): stamps nearly always "before"
def test_missing_messages_both_directions(n, k):
    feeds = [Feed("m%d" % i).extend(12) for i in range(6)]
    a, b = feed_repo(n, k), feed_repo(n, k)
    for i, f in enumerate(feeds):
        put(a.store, f.raws[:12 - i])
        put(b.store, f.raws[:6 + i])
    sa, sb, ma, mb = sync(a, b, n=n, k=k)
    assert sa["ok"] and sb["ok"]
    assert fronts(a, feeds) == fronts(b, feeds) == [max(12 - i, 6 + i) for i in range(6)]
    assert_same(a, b, [f.fid for f in feeds])
    if n == 2:   # every proactive guess was a false positive: the Merkle descent did it all
        assert ma.stats["events_sent"] == 0 and mb.stats["events_sent"] == 0
        assert ma.stats["trips"] > 1


def test_already_equal_is_one_round():
    feeds = [Feed("e%d" % i).extend(5) for i in range(3)]
    a, b = feed_repo(), feed_repo()
    for f in feeds:
        put(a.store, f.raws)
        put(b.store, f.raws)
    sa, sb, ma, mb = sync(a, b)
    assert sa["rounds"] == 1 and sa["elements_sent"] == 0 and sa["msgs_sent"] == 3


def test_forks_converge_and_are_proven():
    f = Feed("forky").extend(8)
    mids = [E.parse_feed_event(r).eid for r in f.raws]
    fork4, m4 = f.entry(4, mids[2], b"evil")
    fork5, _ = f.entry(5, m4, b"evil5")
    a, b = feed_repo(), feed_repo()
    put(a.store, f.raws)                 # a: main branch
    put(b.store, f.raws[:3])             # b: the fork branch
    put(b.store, [fork4, fork5])
    sa, sb, ma, mb = sync(a, b)
    assert sa["ok"] and sb["ok"]
    assert_same(a, b, [f.fid])
    da = a.load(f.fid)
    assert len(da) == 10 and len(da.tips()) == 2
    assert a.store.front(f.fid)[0] == 8 and b.store.front(f.fid)[0] == 5
    # each side found the fork and recorded a verifiable proof
    for repo, m in ((a, ma), (b, mb)):
        assert m.forks_found and forks.verify_proof(m.forks_found[0]) == (f.fid, 4)
        assert repo.forks()[0][:2] == (f.fid, 4)


def test_filter_false_positives_recovered():
    """A 1-bit filter says "yes" to every key: feeds only one side replicates enter both
    common sets, the peer answers NOTCOMMON, and the sets and digests still converge."""
    common = [Feed("c%d" % i).extend(6) for i in range(3)]
    only_a = [Feed("oa%d" % i).extend(4) for i in range(2)]
    only_b = [Feed("ob%d" % i).extend(4) for i in range(2)]
    a, b = feed_repo(), feed_repo()
    for f in common:
        put(a.store, f.raws)
        put(b.store, f.raws[:2])
    for f in only_a:
        put(a.store, f.raws)
    for f in only_b:
        put(b.store, f.raws)
    sa, sb, ma, mb = sync(a, b, filter_bits=1)
    assert sa["ok"] and sb["ok"]
    assert ma.stats["false_positives"] + mb.stats["false_positives"] >= 4
    assert sorted(ma.dags) == sorted(mb.dags) == sorted(f.fid for f in common)
    assert fronts(b, common) == [6, 6, 6]
    assert not any(b.store.has_feed(f.fid) for f in only_a)   # never imported
    assert not any(a.store.has_feed(f.fid) for f in only_b)


def test_entity_mode_fetches_a_new_feed():
    f = Feed("single").extend(9)
    a, b = feed_repo(), feed_repo()
    put(a.store, f.raws)
    sa, sb, ma, mb = sync(a, b, mode="entity", key=f.fid)
    assert sa["ok"] and sb["ok"] and b.store.front(f.fid)[0] == 9


def test_thread_sync_with_concurrent_branches():
    seeds = [bytes([i]) * 32 for i in range(1, 4)]
    root = E.make_signed_event(seeds[0], E.ZERO_ROOT, (), 1, b"topic")
    a, b = thread_repo(), thread_repo()
    for r in (a, b):
        r.post(root)
    prev_a = prev_b = root.eid
    for i in range(5):
        ea = E.make_signed_event(seeds[1], root.eid, (prev_a,), 10 + i, b"a%d" % i)
        eb = E.make_signed_event(seeds[2], root.eid, (prev_b,), 10 + i, b"b%d" % i)
        a.post(ea)
        b.post(eb)
        prev_a, prev_b = ea.eid, eb.eid
    sa, sb, ma, mb = sync(a, b, mode="threads")
    assert sa["ok"] and sb["ok"]
    da, db = a.load(root.eid), b.load(root.eid)
    assert len(da) == len(db) == 11 and da.digest() == db.digest()
    assert sorted(da.tips()) == sorted([prev_a, prev_b])


def test_maintenance_round_after_new_event():
    f = Feed("live").extend(4)
    a, b = feed_repo(), feed_repo()
    put(a.store, f.raws[:3])
    put(b.store, f.raws[:3])
    ma, mb = SyncMachine(a, "feeds"), SyncMachine(b, "feeds")

    async def main():
        ca, cb = memory_pair()
        qa, qb = asyncio.Queue(), asyncio.Queue()

        async def resp():
            return await run_sync(cb, mb, first=await cb.recv(), maintain=qb)
        ta = asyncio.ensure_future(run_sync(ca, ma, maintain=qa))
        tb = asyncio.ensure_future(resp())
        while not (ma.converged and mb.converged):
            await asyncio.sleep(0.001)
        put(a.store, f.raws[3:])             # a new local event on a
        qa.put_nowait("new")
        while not (b.store.front(f.fid)[0] == 4 and ma.converged and mb.converged):
            await asyncio.sleep(0.001)
        qa.put_nowait(None)                  # a ends the session; b sees it close
        return await asyncio.gather(ta, tb)
    sa, sb = asyncio.run(main())
    assert sa["ok"] and sb["ok"]
    assert b.store.front(f.fid)[0] == 4 and mb.round >= 2   # new rounds after convergence


async def _bad_peer(raw_event):
    """A peer that sends a tampered event proactively: we stop with its reason."""
    ca, cb = memory_pair()
    good = feed_repo()
    m = SyncMachine(good, "entity", key=E.parse_feed_event(raw_event[:0] or FEED.raws[0]).key)
    task = asyncio.ensure_future(run_sync(ca, m))
    await cb.recv()   # HELLO
    hello = SyncMachine(feed_repo(), "entity", key=FEED.fid).start()[0]
    await cb.send(hello)
    bad = bytearray(raw_event)
    bad[-3] ^= 0x40
    await cb.send(bytes([EVENTS]) + varint(1) + varint(len(bad)) + bytes(bad) + varint(0))
    return await task


FEED = Feed("victim").extend(2)


def test_tampered_event_aborts_with_reason():
    s = asyncio.run(_bad_peer(FEED.raws[0]))
    assert not s["ok"] and s["reason"] == "signature"


def test_unrequested_node_and_garbage_rejected():
    a = feed_repo()
    m = SyncMachine(a, "feeds")
    m.start()
    other = SyncMachine(feed_repo(), "feeds")
    for msg in other.start():
        m.receive(msg)
    from tssb.clock.errors import ClockError
    with pytest.raises(ClockError) as ei:
        m.receive(bytes([6, 1, 1]) + bytes(64))      # NODES nobody asked for
    assert ei.value.reason == "unrequested_node" and m.state == "error"
    m2 = SyncMachine(a, "feeds")
    with pytest.raises(ClockError) as ei:
        m2.receive(bytes([3, 1]))                    # STATUS before HELLO
    assert ei.value.reason == "unexpected"
