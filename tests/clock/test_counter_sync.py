"""Counter threads over the thread sync (SyncMachine "threads" + driver over a memory
pair): every received message is verified before it is stored, offenders are rejected
and blocked persistently and the sync stops at once with the reason, and messages under
Rule 2's temporary block are not propagated until released."""
import collections
import hashlib
import sqlite3

import pytest

from clock_helpers import sync, thread_repo
from counter_helpers import KINDS, LINKS, SEEDS, T, RawRepo, World, chain, invalid
from tssb.clock import counter as C
from tssb.clock import crypto
from tssb.clock.errors import ClockError
from tssb.clock.repo import ThreadRepo


def stored(repo, eid):
    """Where a repo keeps an event: "dag", "held" or None."""
    if repo.db.execute("SELECT 1 FROM clock_events WHERE eid = ?", (eid,)).fetchone():
        return "dag"
    if repo.db.execute("SELECT 1 FROM clock_held WHERE eid = ?", (eid,)).fetchone():
        return "held"
    return None


def same(a, b, root):
    return a.load(root).digest() == b.load(root).digest()


def counting(repo):
    """Count the verdicts of a repo's admit hook (to show which path a test took)."""
    seen = collections.Counter()
    orig = repo.admit

    def admit(ev, final=False):
        fate = orig(ev, final)
        seen[fate] += 1
        return fate
    repo.admit = admit
    return seen


def late_joiner_world():
    """root -> I0 -> I1, where I1's author joined after I0 (its Participate refers to I0)
    and I1 sorts before that Participate: a peer receives the increment before the join."""
    w = World()
    i0 = w.add(w.increment(w.root))
    h = w.st.hashes[i0.eid]
    for i in range(200):
        x = hashlib.sha256(b"late%d" % i).digest()
        if not C.select(h, crypto.publickey(x), w.st.params.ratio):
            continue
        join = C.participate(x, w.root, [i0.eid], i0.ts + 5)
        probe = C.CounterState(w.init)
        for m in w.msgs[1:] + [join]:
            probe.ingest(m, None)
        inc = C.make_increment(x, probe, [i0.eid], chain(i0.ts + 6), i0.ts + T + 10)
        if inc.eid < join.eid:
            w.add(join)
            w.add(inc)
            return w, join, inc
    raise AssertionError("fixed data has no such late joiner")


@pytest.mark.parametrize("n,k", [(128, 4), (2, 1)])   # (2, 1): the Merkle descent does it all
def test_valid_increments_replicate_and_counters_agree(n, k):
    w = World()
    ref = w.root
    for _ in range(4):
        ref = w.add(w.increment(ref)).eid
    other = w.add(w.increment(w.root, seed=w.chosen(w.root, exclude=[w.chosen(w.root)])))
    a, b = thread_repo(n, k), thread_repo(n, k)
    for m in w.msgs:
        assert a.post(m) == "stored"
    b.post(w.init)
    sa, sb, ma, mb = sync(a, b, mode="threads", n=n, k=k)
    assert sa["ok"] and sb["ok"] and sa["rounds"] <= 3
    ca, cb = a.counter(w.root), b.counter(w.root)
    assert cb.value() == ca.value() == w.st.value() >= 1
    assert cb.top() == ca.top() and other.eid in cb.increments
    assert len(b.load(w.root)) == len(w.msgs) and same(a, b, w.root)
    assert not a.blocked(w.root) and not b.blocked(w.root)


def test_increment_before_its_authors_join_waits_then_is_accepted():
    w, join, inc = late_joiner_world()
    a, b = thread_repo(), thread_repo()
    for m in w.msgs:
        a.post(m)
    b.post(w.init)
    seen = counting(b)
    sa, sb, ma, mb = sync(a, b, mode="threads")
    assert sa["ok"] and sb["ok"]
    assert seen["wait"] >= 1                    # the increment did arrive first
    assert stored(b, inc.eid) == "dag" and not b.blocked(w.root)
    assert b.counter(w.root).value() == w.st.value() and same(a, b, w.root)


def test_admit_order_independent_and_final_verdict():
    w, join, inc = late_joiner_world()
    b = thread_repo()
    for m in w.msgs:
        if m.eid not in (join.eid, inc.eid):
            b.post(m)
    assert b.admit(inc) == "wait"               # the join may still come
    with pytest.raises(ClockError) as ei:       # ... unless everything has arrived
        b.admit(inc, final=True)
    assert ei.value.reason == "rejected:not_participant"
    assert [r[:2] for r in b.blocked(w.root)] == [(inc.author, "not_participant")]


@pytest.mark.parametrize("kind", KINDS)
def test_invalid_increment_rejected_blocked_and_sync_stops(kind, tmp_path):
    w, bad = invalid(kind)
    path = str(tmp_path / "honest.db")
    a = ThreadRepo(sqlite3.connect(path), 128, 4)
    b = RawRepo(sqlite3.connect(":memory:"), 128, 4)      # holds the offender's increment
    for m in w.msgs:
        a.post(m)
        b.post(m)
    b.post(bad)
    sa, sb, ma, mb = sync(a, b, mode="threads")
    assert not sa["ok"] and sa["reason"] == "rejected:" + kind
    assert not sb["ok"] and mb.peer_reason == "rejected:" + kind     # the peer was told
    assert ma.stats["rounds"] == 1 and mb.stats["rounds"] == 1       # no spinning
    assert stored(a, bad.eid) is None
    assert [r[:3] for r in a.blocked(w.root)] == [(bad.author, kind, bad.eid)]
    a.db.close()
    # The decision survives reopening the store, and the author's later messages are refused.
    a2 = ThreadRepo(sqlite3.connect(path), 128, 4)
    st = a2.counter(w.root)
    assert st.blocked == {bad.author: kind}
    later = C.participate(_seed(bad.author), w.root, [w.root], bad.ts + 1)
    with pytest.raises(ClockError) as ei:
        a2.admit(later)
    assert ei.value.reason == "rejected:blocked" and stored(a2, later.eid) is None
    assert len(a2.blocked(w.root)) == 1                                # first decision kept


def _seed(pub):
    for s in SEEDS + [hashlib.sha256(b"outsider%d" % i).digest() for i in range(64)]:
        if crypto.publickey(s) == pub:
            return s
    raise AssertionError("unknown author")


def test_offender_among_valid_messages_valid_ones_still_verified():
    """The offender's peer also holds valid increments: they may arrive before the
    rejection, are verified like any other, and the counter stays consistent."""
    w, bad = invalid("not_selected")
    w.add(w.increment(w.root))
    a = thread_repo()
    b = RawRepo(sqlite3.connect(":memory:"), 128, 4)
    for m in w.msgs:
        b.post(m)
    b.post(bad)
    a.post(w.init)
    sa, sb, ma, mb = sync(a, b, mode="threads")
    assert sa["reason"] == "rejected:not_selected" and stored(a, bad.eid) is None
    st = a.counter(w.root)
    assert bad.eid not in st.msgs and st.value() <= 1
    assert all(stored(a, e) == "dag" for e in st.msgs)   # whatever was stored is valid


def designated_pair(w):
    """(i1, D): an increment on the Initiate and a participant SELECT designates after it
    but not after the Initiate (so a message of D is held only by who knows i1)."""
    h_root = w.st.hashes[w.root]
    for s in SEEDS:
        if not C.select(h_root, crypto.publickey(s), 2):
            continue
        i1 = w.increment(w.root, seed=s)
        probe = C.CounterState(w.init)
        for m in w.msgs[1:] + [i1]:
            probe.ingest(m, None)
        for d in SEEDS:
            pub = crypto.publickey(d)
            if C.select(probe.hashes[i1.eid], pub, 2) and not C.select(h_root, pub, 2):
                return w.add(i1), d
    raise AssertionError("fixed data has no such pair")


def test_held_message_not_propagated_until_released():
    w = World()
    i1, d = designated_pair(w)
    late = C.participate(d, w.root, [i1.eid], i1.ts + T + 50)   # after the earliest next increment
    a, b = thread_repo(), thread_repo()
    for m in w.msgs:
        a.post(m)
    b.post(w.init)
    assert a.post(late) == "held"
    assert [e.eid for e in a.held(w.root)] == [late.eid]
    sa, sb, *_ = sync(a, b, mode="threads")
    assert sa["ok"] and sb["ok"] and same(a, b, w.root)      # digests agree without it
    assert stored(b, late.eid) is None                        # not propagated
    assert b.counter(w.root).value() == a.counter(w.root).value()
    # D increments: the frontier moves past the held message, which is released ...
    i2 = C.make_increment(d, a.counter(w.root), [i1.eid], chain(i1.ts + 1), i1.ts + T + 100)
    assert a.post(i2) == "stored"
    assert stored(a, late.eid) == "dag" and not a.held(w.root)
    # ... and now travels.
    sa, sb, *_ = sync(a, b, mode="threads")
    assert sa["ok"] and sb["ok"] and same(a, b, w.root)
    assert stored(b, late.eid) == "dag" and b.counter(w.root).value() == a.counter(w.root).value()


def test_hold_converges_when_peers_saw_different_increments():
    """B stored D's message before knowing i1 (no hold then); A knows i1. After the sync
    both hold it back, digests agree, and both release it once D increments."""
    w = World()
    i1, d = designated_pair(w)
    late = C.participate(d, w.root, [w.root], i1.ts + T + 50)
    a, b = thread_repo(), thread_repo()
    for m in w.msgs:
        a.post(m)
        if m.eid != i1.eid:
            b.post(m)
    assert b.post(late) == "stored"                # B: D is not designated after the root
    sa, sb, ma, mb = sync(a, b, mode="threads")
    assert sa["ok"] and sb["ok"] and sa["rounds"] <= 3 and same(a, b, w.root)
    assert stored(a, late.eid) == stored(b, late.eid) == "held"
    i2 = C.make_increment(d, a.counter(w.root), [i1.eid], chain(i1.ts + 1), i1.ts + T + 100)
    b.post(i2)
    sa, sb, *_ = sync(a, b, mode="threads")
    assert sa["ok"] and sb["ok"] and same(a, b, w.root)
    assert stored(a, late.eid) == stored(b, late.eid) == "dag"


def test_held_message_from_peer_stays_aside_and_sync_converges():
    """A peer that does not hold D's message (it lacks i1) offers it; we keep it aside,
    send i1, and the peer then holds it back too."""
    w = World()
    i1, d = designated_pair(w)
    late = C.participate(d, w.root, [w.root], i1.ts + T + 50)
    a, b = thread_repo(), thread_repo()
    for m in w.msgs:
        a.post(m)
        if m.eid != i1.eid:
            b.post(m)
    b.post(late)
    seen = counting(a)
    sa, sb, *_ = sync(a, b, mode="threads")
    assert sa["ok"] and sb["ok"] and same(a, b, w.root)
    assert seen["held"] >= 1 and stored(a, late.eid) == "held"


def test_local_post_refused_without_blocking_ourselves():
    w, bad = invalid("too_early")
    a = thread_repo()
    for m in w.msgs:
        a.post(m)
    with pytest.raises(ClockError) as ei:
        a.post(bad)
    assert ei.value.reason == "too_early"
    assert stored(a, bad.eid) is None and not a.blocked(w.root)
    assert bad.author not in a.counter(w.root).blocked


def test_plain_threads_unaffected_and_stray_root():
    """A thread whose root is not an Initiate is stored as before; an event whose thread
    root has not arrived waits."""
    from tssb.clock import events as E
    root = E.make_signed_event(SEEDS[0], E.ZERO_ROOT, (), 1, b"Idea: not a counter")
    reply = E.make_signed_event(SEEDS[1], root.eid, (root.eid,), 2, b"C" + bytes(40))
    r = thread_repo()
    r.follow(root.eid)
    assert r.admit(reply) == "wait"
    assert r.post(root) == "stored" and r.admit(reply) == "add"
    r.save(reply)
    assert len(r.load(root.eid)) == 2 and r.counter(root.eid) is None


def test_garbage_increment_body_rejected_as_malformed():
    from tssb.clock import events as E
    w = World()
    a = thread_repo()
    for m in w.msgs:
        a.post(m)
    junk = E.make_signed_event(SEEDS[0], w.root, (w.root,), w.init.ts + 5 * T, b"C\xff\xff")
    with pytest.raises(ClockError) as ei:
        a.admit(junk)
    assert ei.value.reason == "rejected:malformed"
    assert [r[1] for r in a.blocked(w.root)] == ["malformed"]


assert LINKS >= 2   # chain() spacing in these tests relies on several links
