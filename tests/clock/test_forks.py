"""Fork resolution across peers: proofs, signed joins, and their propagation to a third
peer (the feed owner) through later syncs; bad joins are refused with a reason."""
import asyncio

import pytest

from clock_helpers import Feed, digest_of, feed_repo, put, seed_of, sync
from tssb.channel import memory_pair
from tssb.clock import crypto
from tssb.clock import events as E
from tssb.clock import forks
from tssb.clock import repo as R
from tssb.clock.driver import run_sync
from tssb.clock.errors import ClockError
from tssb.clock.sync import JOINS, MAX_JOINS_MSG, SyncMachine
from tssb.clock.wire import Reader, varint

SEED_A, SEED_B = seed_of("peer A"), seed_of("peer B")
PUB_A, PUB_B = crypto.publickey(SEED_A), crypto.publickey(SEED_B)


def forked_feed(name, length=8, at=4):
    """A feed of `length` entries and a second branch of two entries forking at seq `at`."""
    f = Feed(name).extend(length)
    mids = [E.parse_feed_event(r).eid for r in f.raws]
    b1, m1 = f.entry(at, mids[at - 2], b"other %d" % at)
    b2, _ = f.entry(at + 1, m1, b"other %d" % (at + 1))
    return f, [b1, b2]


def resolvers(repo, fid):
    return sorted(row[1] for row in repo.joins(fid))


def joins_by(repo, fid):
    return {row[1]: (forks.parse_join(row[5]), row[4]) for row in repo.joins(fid)}


def test_fork_is_joined_and_reaches_the_owner():
    f, branch = forked_feed("forky")
    a, b, c = feed_repo(), feed_repo(), feed_repo()
    put(a.store, f.raws)                    # A: the main branch
    put(b.store, f.raws[:3])                # B: the other branch
    put(b.store, branch)
    put(c.store, f.raws[:6])                # C: the owner, main branch only, behind

    sa, sb, ma, mb = sync(a, b, signers=(SEED_A, SEED_B))
    assert sa["ok"] and sb["ok"]
    assert digest_of(a, [f.fid]) == digest_of(b, [f.fid])
    assert len(a.load(f.fid)) == len(b.load(f.fid)) == 10
    for repo in (a, b):
        # the two branches overlap at seq 4 and 5: one proof per doubly signed seq
        assert [(fid, seq) for fid, seq, _ in repo.forks()] == [(f.fid, 4), (f.fid, 5)]
        assert [forks.verify_proof(p) for _, _, p in repo.forks()] == [(f.fid, 4), (f.fid, 5)]
        assert resolvers(repo, f.fid) == sorted([PUB_A, PUB_B])
        for j, agreed in joins_by(repo, f.fid).values():
            assert agreed and forks.check_join(j, repo.load(f.fid))
            assert j.tips == forks.tips_in_join_order(repo.load(f.fid)) and len(j.tips) == 2
    assert sa["joins_made"] == sb["joins_made"] == 1
    assert sa["joins_sent"] == sb["joins_sent"] == 1 == sa["joins_recv"]

    # again: nothing new to sign or to send (JHAVE lists what each holds)
    sa, sb, ma, mb = sync(a, b, signers=(SEED_A, SEED_B))
    assert sa["ok"] and sb["ok"]
    assert (sa["joins_made"], sa["joins_sent"], sb["joins_made"], sb["joins_sent"]) == (0, 0, 0, 0)

    # B meets the owner: C gets the branch, the proof and both joins, and signs its own
    sb, sc, mb, mc = sync(b, c, signers=(SEED_B, f.seed))
    assert sb["ok"] and sc["ok"]
    assert len(c.load(f.fid)) == 10 and c.store.front(f.fid)[0] == 8
    assert [(fid, seq) for fid, seq, _ in c.forks()] == [(f.fid, 4), (f.fid, 5)]
    got = joins_by(c, f.fid)
    assert sorted(got) == sorted([PUB_A, PUB_B, f.fid])      # the owner's join: resolver = FID
    assert all(agreed for _, agreed in got.values())
    assert [x[2] for x in mb.joins_received] == ["stored"]   # B learns the owner's join
    # ... and A gets it on its next sync with B
    sa, sb, ma, mb = sync(a, b, signers=(SEED_A, SEED_B))
    assert sa["joins_recv"] == 1 and resolvers(a, f.fid) == sorted([PUB_A, PUB_B, f.fid])


def test_join_of_an_older_copy_is_kept_but_flagged():
    f, branch = forked_feed("stale")
    old = feed_repo()
    put(old.store, f.raws[:3])
    old._insert(E.parse_feed_event(branch[0]))   # a resolver that saw one entry of the branch
    put(old.store, f.raws[3:])
    seed_z = seed_of("peer Z")
    stale = forks.parse_join(forks.make_join(seed_z, old.load(f.fid), 5))
    a, b = feed_repo(), feed_repo()
    put(a.store, f.raws)
    for raw in branch:
        a._insert(E.parse_feed_event(raw))
    assert a.store_join(stale, forks.check_join(stale, a.load(f.fid))) == "stored"
    put(b.store, f.raws)
    sa, sb, ma, mb = sync(a, b)                 # no signers: joins are only passed on
    assert sa["ok"] and sb["ok"] and sa["joins_sent"] == 1
    (j, agreed, outcome), = mb.joins_received
    assert j.resolver == crypto.publickey(seed_z) and not agreed and outcome == "stored"
    assert [(row[1], row[4]) for row in b.joins(f.fid)] == [(j.resolver, 0)]
    assert b.forks()[0][:2] == (f.fid, 4)


def test_joins_per_sync_are_bounded_and_the_rest_follow():
    f, branch = forked_feed("popular")
    a, b = feed_repo(), feed_repo()
    put(a.store, f.raws)
    for raw in branch:
        a._insert(E.parse_feed_event(raw))
    dag = a.load(f.fid)
    for i in range(MAX_JOINS_MSG + 4):
        a.store_join(forks.parse_join(forks.make_join(seed_of("r%d" % i), dag, 10 + i)), True)
    put(b.store, f.raws)                        # B already holds both branches
    for raw in branch:
        b._insert(E.parse_feed_event(raw))
    sa, sb, _, _ = sync(a, b)
    assert sa["ok"] and sa["joins_sent"] == MAX_JOINS_MSG == sb["joins_recv"]
    sa, sb, _, _ = sync(a, b)
    assert sa["ok"] and sa["joins_sent"] == 4 and len(b.joins(f.fid)) == MAX_JOINS_MSG + 4


def test_repo_keeps_newest_join_per_resolver_and_bounds_resolvers(monkeypatch):
    f, branch = forked_feed("repo")
    a = feed_repo()
    put(a.store, f.raws)
    a._insert(E.parse_feed_event(branch[0]))
    dag = a.load(f.fid)
    j1 = forks.parse_join(forks.make_join(SEED_A, dag, 100))
    j0 = forks.parse_join(forks.make_join(SEED_A, dag, 50))
    j2 = forks.parse_join(forks.make_join(SEED_A, dag, 200))
    assert [a.store_join(j, True) for j in (j1, j0, j2)] == ["stored", "old", "replaced"]
    assert a.join_of(f.fid, PUB_A) == j2.raw
    monkeypatch.setattr(R, "MAX_JOINS_PER_FEED", 2)
    jb = forks.parse_join(forks.make_join(SEED_B, dag, 1))
    jz = forks.parse_join(forks.make_join(seed_of("z"), dag, 1))
    assert a.store_join(jb, True) == "stored" and a.store_join(jz, True) == "full"
    assert a.store_join(jz, True, own=True) == "stored"       # our own always fits


# -- bad joins -------------------------------------------------------------------------

class Tamper:
    """Channel wrapper replacing the joins of outgoing JOINS messages."""

    def __init__(self, inner, bad):
        self.inner = inner
        self.bad = bad

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def send(self, msg):
        if msg[0] == JOINS:
            r = Reader(msg[1:])
            rnd = r.uint()
            msg = bytes([JOINS]) + varint(rnd) + varint(1) + varint(len(self.bad)) + self.bad
        await self.inner.send(msg)


def signed_join(seed, fid, digest, tips, proofs):
    """A join built field by field (to forge ones make_join would not produce)."""
    b = bytearray(forks.JOIN_TAG + crypto.publickey(seed) + fid + digest + varint(1))
    b += varint(len(tips)) + b"".join(tips) + varint(len(proofs)) + b"".join(proofs)
    return bytes(b) + crypto.sign(seed, bytes(b))


def _other_feeds_proof():
    g, gbranch = forked_feed("elsewhere", 5, 3)
    return forks.make_proof(g.raws[2], gbranch[0])


def _bad_joins():
    f, branch = forked_feed("target")
    good_repo = feed_repo()
    put(good_repo.store, f.raws)
    for raw in branch:
        good_repo._insert(E.parse_feed_event(raw))
    good = forks.make_join(SEED_A, good_repo.load(f.fid), 7)
    sig_flip = bytearray(good)
    sig_flip[-5] ^= 1
    g, gbranch = forked_feed("elsewhere", 5, 3)
    g_repo = feed_repo()
    put(g_repo.store, g.raws)
    g_repo._insert(E.parse_feed_event(gbranch[0]))
    other_feed = forks.make_join(SEED_A, g_repo.load(g.fid), 7)
    wrong_proof = signed_join(SEED_A, f.fid, bytes(32), [], [_other_feeds_proof()])
    no_proof = signed_join(SEED_A, f.fid, bytes(32), [], [])
    return f, branch, [
        ("signature", bytes(sig_flip), "join_signature"),
        ("proof of another feed", wrong_proof, "join_proof_feed"),
        ("no proof", no_proof, "join_no_fork"),
        ("truncated", good[:-10], "join_short"),
        ("trailing bytes", good + b"x", "join_trailing"),
        ("garbage", b"\x00garbage" * 10, "join_tag"),
        ("empty", b"", "join_short"),
        ("join of a feed not in common", other_feed, "join_feed"),
    ]


F_BAD, BRANCH_BAD, BAD = _bad_joins()


@pytest.mark.parametrize("what,bad,reason", BAD, ids=[x[0] for x in BAD])
def test_bad_join_is_refused_with_reason(what, bad, reason):
    a, b = feed_repo(), feed_repo()
    put(a.store, F_BAD.raws)
    put(b.store, F_BAD.raws[:3] + BRANCH_BAD)
    ma = SyncMachine(a, "feeds", signer=SEED_A)
    mb = SyncMachine(b, "feeds", signer=SEED_B)

    async def main():
        ca, cb = memory_pair()

        async def responder():
            return await run_sync(cb, mb, first=await cb.recv())
        return await asyncio.wait_for(
            asyncio.gather(run_sync(Tamper(ca, bad), ma), responder()), 30)
    sa, sb = asyncio.run(main())
    assert not sb["ok"] and sb["reason"] == reason          # B refused, with the reason
    assert not sa["ok"] and sa["reason"] == "peer_error"    # A was told and stopped
    assert resolvers(b, F_BAD.fid) == [PUB_B]               # only B's own join is stored
    assert {fid for fid, _, _ in b.forks()} == {F_BAD.fid}  # no proof of another feed
    assert mb.state == "error"


def test_parse_join_rejects_each_defect_directly():
    for _, bad, reason in BAD[:-1]:
        with pytest.raises(ClockError) as ei:
            forks.parse_join(bad)
        assert "join_" + ei.value.reason == reason or ei.value.reason == reason
    with pytest.raises(ClockError) as ei:
        forks.parse_join(bytes(forks.MAX_JOIN_BYTES + 1))
    assert ei.value.reason == "too_large"
