import random

import pytest

from clock_helpers import Feed
from tssb.clock import events as E
from tssb.clock.dag import EventDAG, MAX_FORK_DEPTH
from tssb.clock.errors import ClockError


def feed_with_fork():
    f = Feed("dag").extend(6)
    mids = [E.parse_feed_event(r).eid for r in f.raws]
    fork3, m3 = f.entry(3, mids[1], b"other")      # second branch from seq 2
    fork4, _ = f.entry(4, m3, b"other4")
    return f, [fork3, fork4]


def build(raws, order=None):
    evs = [E.parse_feed_event(r) for r in raws]
    d = EventDAG(evs[0].key, 64, 3)
    todo = list(evs)
    if order is not None:
        order.shuffle(todo)
    while todo:  # insert in any order that respects references
        for ev in list(todo):
            if d.can_add(ev):
                d.add(ev)
                todo.remove(ev)
    return d


def test_digest_independent_of_arrival_order():
    f, extra = feed_with_fork()
    raws = f.raws + extra
    digests = {build(raws, random.Random(i)).digest() for i in range(6)}
    assert len(digests) == 1


def test_fork_branches_sorted_by_first_hash():
    f, extra = feed_with_fork()
    d = build(f.raws + extra)
    items = d.linearize()
    assert [k for k, _ in items] == ["leaf", "leaf", "fork"]
    branches = items[2][1]
    firsts = [b[0][1] for b in branches]
    assert firsts == sorted(firsts) and len(branches) == 2
    assert sorted(len(b) for b in branches) == [2, 4]


def test_nested_fork_and_order_is_topological():
    f, extra = feed_with_fork()
    mids = [E.parse_feed_event(r).eid for r in f.raws]
    nested, _ = f.entry(5, mids[3], b"nested")   # fork inside the main branch at seq 5
    d = build(f.raws + extra + [nested])
    pos = {e: i for i, e in enumerate(d.order())}
    for ev in d.events.values():
        for p in ev.prevs:
            if p in pos:
                assert pos[p] < pos[ev.eid]
    main_branch = [b for b in d.linearize()[2][1] if len(b) > 2][0]
    assert main_branch[-1][0] == "fork"


def test_join_event_continues_parent_chain():
    seed = b"\x01" * 32
    root = E.make_signed_event(seed, E.ZERO_ROOT, (), 1, b"root")
    a = E.make_signed_event(seed, root.eid, (root.eid,), 2, b"a")
    b = E.make_signed_event(seed, root.eid, (root.eid,), 3, b"b")
    j = E.make_signed_event(seed, root.eid, (a.eid, b.eid), 4, b"join")
    after = E.make_signed_event(seed, root.eid, (j.eid,), 5, b"after")
    d = EventDAG(root.eid, 32, 2)
    for ev in (root, a, b, j, after):
        d.add(ev)
    kinds = [k for k, _ in d.linearize()]
    assert kinds == ["leaf", "fork", "leaf", "leaf"]
    st = d.stamps()
    assert st[a.eid] <= st[j.eid] and st[b.eid] <= st[j.eid]
    assert d.tips() == [after.eid]


def test_digest_changes_with_each_event():
    f = Feed("grow").extend(10)
    seen = set()
    for i in range(1, 11):
        seen.add(build(f.raws[:i]).digest())
    assert len(seen) == 10


def test_orphan_refused():
    f = Feed("orph").extend(3)
    d = EventDAG(f.fid, 16, 2)
    with pytest.raises(ClockError) as ei:
        d.add(E.parse_feed_event(f.raws[1]))
    assert ei.value.reason == "orphan"


def test_fork_depth_bounded():
    seed = b"\x02" * 32
    root = E.make_signed_event(seed, E.ZERO_ROOT, (), 0, b"")
    d = EventDAG(root.eid, 16, 1)
    d.add(root)
    cur = root.eid
    for i in range(MAX_FORK_DEPTH + 2):   # every event forks: depth grows each level
        side = E.make_signed_event(seed, root.eid, (cur,), i, b"s")
        main = E.make_signed_event(seed, root.eid, (cur,), i, b"m")
        d.add(side)
        d.add(main)
        cur = main.eid
    with pytest.raises(ClockError) as ei:
        d.digest()
    assert ei.value.reason == "fork_depth"


def test_tampered_entry_rejected():
    f = Feed("bad").extend(2)
    raw = bytearray(f.raws[1])
    raw[60] ^= 1
    with pytest.raises(ClockError) as ei:
        E.parse_feed_event(bytes(raw))
    assert ei.value.reason in ("signature", "dmx")
    raw = bytearray(f.raws[1])
    raw[-1] ^= 1
    with pytest.raises(ClockError) as ei:
        E.parse_feed_event(bytes(raw))
    assert ei.value.reason == "signature"
