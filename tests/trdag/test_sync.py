"""Both sides end with the same DAG: random DAGs, branches, partitions, depths, empty sides."""
import asyncio
import random

import pytest

from tinyssb.store import MemStore
from tssb.channel import memory_pair
from tssb.trdag import dagstore, driver, session

from dagutil import copy_into, grow, member_ids, new_dag, pump, sessions

VARIANTS = [session.BASIC, session.FAST, session.Options(levels=2, cutoff=0),
            session.Options(levels=1, cutoff=3), session.NAIVE]
IDS = ["basic", "fast", "levels2", "cutoff3", "naive"]


def partitioned(seed, common, only_a, only_b, branches=1):
    """A shared history, then each side grows alone (distinct authors, so no feed forks);
    `branches` > 1 interleaves concurrent writers that each see only part of the DAG."""
    rng = random.Random(seed)
    a, root, authors = new_dag(seed, n_authors=6)
    msgs = [a.get(root)] + grow(a, root, authors[:2], common, rng)
    b = dagstore.MemDagIndex()
    copy_into(b, msgs)
    for side, n, auth in ((a, only_a, authors[2:4]), (b, only_b, authors[4:6])):
        stale = side.copy()
        for k in range(n):
            if branches > 1 and k % branches:
                # concurrent writer: extends a branch from an older view of the DAG
                dagstore.Dag(side).offer(dagstore.post(stale, rng.choice(auth), root, "c%d" % k))
            else:
                dagstore.post(side, rng.choice(auth), root, "s%d" % k)   # merges all tips
                if k % (2 * branches) == 0:
                    stale = side.copy()
    return a, b, root


def run_pair(a, b, root, opt):
    sa, sb = sessions(a, b, root, opt)
    ea, eb = pump(sa, sb)
    assert ea is None and eb is None, (ea, eb)
    assert sa.ok and sb.ok
    assert member_ids(a, root) == member_ids(b, root)
    assert a.has(root) and b.has(root)
    return sa, sb


@pytest.mark.parametrize("opt", VARIANTS, ids=IDS)
@pytest.mark.parametrize("seed,common,only_a,only_b,branches", [
    (1, 40, 0, 0, 1),          # identical
    (2, 40, 13, 0, 1),         # a ahead (different max depth)
    (3, 40, 0, 9, 1),          # b ahead
    (4, 60, 17, 23, 1),        # partition, both moved on
    (5, 30, 20, 20, 3),        # partition with concurrent branches on each side
    (6, 0, 25, 5, 2),          # only the root in common
])
def test_random_partitions_converge(opt, seed, common, only_a, only_b, branches):
    a, b, root = partitioned(seed, common, only_a, only_b, branches)
    before = len(member_ids(a, root)), len(member_ids(b, root))
    if branches > 1:      # the scenario really has concurrent messages at one depth
        depths = [d for d, _ in a.members(root)]
        assert len(set(depths)) < len(depths)
    sa, sb = run_pair(a, b, root, opt)
    got_a, got_b = sa.stats.elements_recv, sb.stats.elements_recv
    n = len(member_ids(a, root))
    assert (got_a, got_b) == (n - before[0], n - before[1])     # nothing sent twice
    if before[0] == before[1] == n:
        assert sa.stats.rounds == 3 and sa.stats.elements_sent == 0


@pytest.mark.parametrize("opt", VARIANTS, ids=IDS)
def test_one_side_empty(opt):
    rng = random.Random(11)
    a, root, authors = new_dag(11)
    grow(a, root, authors, 50, rng)
    b = dagstore.MemDagIndex()                 # knows nothing, not even the root
    run_pair(a, b, root, opt)
    c = dagstore.MemDagIndex()
    sa, sb = sessions(c, a, root, opt)          # the empty side initiates
    assert pump(sa, sb) == (None, None)
    assert member_ids(c, root) == member_ids(a, root)


def test_only_root_on_one_side_and_unknown_root_everywhere():
    rng = random.Random(12)
    a, root, authors = new_dag(12)
    grow(a, root, authors, 10, rng)
    b = dagstore.MemDagIndex()
    copy_into(b, [a.get(root)])
    run_pair(a, b, root, session.BASIC)
    sa, sb = sessions(dagstore.MemDagIndex(), dagstore.MemDagIndex(), root)
    ea, eb = pump(sa, sb)
    assert eb.reason == "unknown_root" and ea.reason == "peer_abort"


def test_few_missing_in_a_deep_dag_variant_needs_fewer_rounds():
    rng = random.Random(13)
    a, root, authors = new_dag(13)
    msgs = grow(a, root, authors[:2], 600, rng)
    b = dagstore.MemDagIndex()
    copy_into(b, [a.get(root)] + msgs)
    # a concurrent message deep inside the DAG that only a has
    fork = dagstore.MemDagIndex()
    copy_into(fork, [a.get(root)] + msgs[:300])
    side = dagstore.post(fork, authors[2], root, "late branch")
    dagstore.Dag(a).offer(side)
    rounds = {}
    for name in ("basic", "fast", "naive"):
        bb = b.copy()
        sa, sb = run_pair(a, bb, root, session.VARIANTS[name])
        assert sb.stats.elements_recv == 1
        rounds[name] = (sa.stats.rounds, sa.stats.recon_bytes_sent)
    assert rounds["fast"][0] < rounds["basic"][0]
    assert rounds["naive"][0] == 3
    assert rounds["basic"][1] < rounds["naive"][1]       # walk beats sending all 600 IDs


def test_asyncio_driver_over_memory_channels_with_store_mirror():
    a, b, root = partitioned(21, 30, 40, 35, 2)
    store_b = MemStore()

    async def go():
        ca, cb = memory_pair(max_queue=4)           # tight back-pressure, both push at once
        return await asyncio.gather(
            driver.sync(ca, dagstore.Dag(a), root, True, session.FAST),
            driver.sync(cb, dagstore.Dag(b, store_b), None, False))

    (sa, sta), (sb, stb) = asyncio.run(go())
    assert sa.ok and sb.ok and member_ids(a, root) == member_ids(b, root)
    assert sta.bytes_sent == stb.bytes_recv and stb.bytes_sent == sta.bytes_recv
    assert sta.elements_sent == stb.elements_recv > 0
    assert store_b.feeds()       # a's feeds that b could continue are now in b's store


def test_sqlite_side(tmp_path):
    a, b, root = partitioned(31, 20, 15, 10, 1)
    sq = dagstore.SqliteDagIndex.open(str(tmp_path / "dag.sqlite"))
    dag = dagstore.Dag(sq)
    for d, mid in sorted([(0, root)] + b.members(root)):
        dag.offer(b.get(mid))
    run_pair(a, sq, root, session.FAST)
    assert member_ids(a, root) == member_ids(sq, root)
