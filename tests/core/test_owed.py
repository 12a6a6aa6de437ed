# WANT/CHNK scheduling of our nodes: requests answered when the entry or chunk arrives,
# side chains forwarded whole, orphans kept. CPython and MicroPython.
from tinyssb.goset import DEPLOYED
from tinyssb.node import Node
from tinyssb.store import MemStore
from support import FAST, Rand, identity


def author(sizes, mode=None):
    kw = {} if mode is None else {"mode": mode}
    a = Node(MemStore(), identity=identity(1), timing=FAST, rand=Rand(1).below, **kw)
    for i, n in enumerate(sizes):
        a.post(bytes((i + j) & 0x7F for j in range(n)))
    return a


def relay(fid, seed, mode=None):
    kw = {} if mode is None else {"mode": mode}
    n = Node(MemStore(), timing=FAST, rand=Rand(seed).below, **kw)
    n.follow(fid)
    return n


def test_a_want_we_cannot_serve_is_answered_when_the_entry_arrives():
    a = author([20, 20])
    fid = a.author.fid
    b, c = relay(fid, 2), relay(fid, 3)
    assert b.on_packet(c.want_vector(), 0) == []          # b has nothing yet: owed
    e1 = a.store.entry(fid, 1)
    assert b.on_packet(e1, 10) == [e1]                   # arrives: goes out at once
    assert c.on_packet(e1, 11) == [] and c.store.front(fid)[0] == 1
    e2 = a.store.entry(fid, 2)
    assert b.on_packet(e2, 20) == [e2]                   # the WANT's credit goes on
    # deployed behaviour answers only what it holds
    d = relay(fid, 4, mode=DEPLOYED)
    c2 = relay(fid, 5, mode=DEPLOYED)
    assert d.on_packet(c2.want_vector(), 0) == [] and d.on_packet(e1, 10) == []


def test_a_side_chain_is_forwarded_whole_once_complete():
    a = author([300])
    fid = a.author.fid
    chunks = [a.store.chunk(fid, 1, k) for k in range(a.store.chunk_count(fid, 1))]
    assert len(chunks) == 3
    b, c = relay(fid, 2), relay(fid, 3)
    b.on_packet(c.want_vector(), 0)
    e1 = a.store.entry(fid, 1)
    assert b.on_packet(e1, 10) == []          # held: its chain is still arriving
    assert b.on_packet(chunks[0], 20) == []
    assert b.on_packet(chunks[1], 30) == []
    out = b.on_packet(chunks[2], 40)
    assert out == [e1] + chunks               # entry and chain together
    for p in out:
        c.on_packet(p, 50)
    assert c.store.chunk_count(fid, 1) == 3


def test_an_entry_that_opens_a_chain_brings_its_first_chunks():
    a = author([300])
    fid = a.author.fid
    b = relay(fid, 2)
    out = a.on_packet(b.want_vector(), 0)
    assert len(out) == 4 and out[0] == a.store.entry(fid, 1)
    for p in out:
        b.on_packet(p, 1)
    assert b.store.chunk_count(fid, 1) == 3


def test_orphans_wait_for_their_predecessor():
    a = author([20, 20, 300])
    fid = a.author.fid
    b = relay(fid, 2)
    e = [a.store.entry(fid, s) for s in (1, 2, 3)]
    ch = [a.store.chunk(fid, 3, k) for k in range(3)]
    for p in (e[1], ch[2], ch[1], e[2]):       # out of order, the first of each missing
        b.on_packet(p, 1)
    assert b.store.front(fid)[0] == 0
    b.on_packet(e[0], 2)
    assert b.store.front(fid)[0] == 3 and b.store.chunk_count(fid, 3) == 0
    b.on_packet(ch[0], 3)
    assert b.store.chunk_count(fid, 3) == 3
    assert b.counters["rx_adopted"] == 4


def test_a_pushed_entry_goes_once_more_unless_the_requester_asks_on():
    from tinyssb.node import REPUSH_JITTER, REPUSH_MS
    a = author([20, 20])
    fid = a.author.fid
    b, c = relay(fid, 2), relay(fid, 3)
    b.tick_kinds(0)
    b.on_packet(c.want_vector(), 0)
    e1 = a.store.entry(fid, 1)
    assert b.on_packet(e1, 10) == [e1]                   # pushed to c's standing WANT
    later = 10 + REPUSH_MS + REPUSH_JITTER
    assert b.next_deadline(20) <= later
    assert [p for k, p in b.tick_kinds(later) if k == "entry"] == [e1]    # once more
    assert [p for k, p in b.tick_kinds(later + 5000) if k == "entry"] == []  # only once
    # a WANT of c that asks beyond it shows the push arrived: nothing goes again
    e2 = a.store.entry(fid, 2)
    assert b.on_packet(e2, later + 6000) == [e2]
    c.on_packet(e1, later + 6000)
    c.on_packet(e2, later + 6000)
    b.on_packet(c.want_vector(), later + 6100)
    assert [k for k, p in b.tick_kinds(later + 6000 + REPUSH_MS + REPUSH_JITTER)
            if k == "entry"] == []


def test_a_newly_vouched_feed_is_named_with_its_proof():
    # b holds a's key provisionally; the first entry verifies it: b names the key in
    # KEYS, followed by the entry, since a neighbour whose set it knows (c) lacks it
    from tinyssb import gosetx as X
    a = author([20])
    fid = a.author.fid
    b = Node(MemStore(), timing=FAST, rand=Rand(2).below)
    c = Node(MemStore(), identity=identity(3), timing=FAST, rand=Rand(3).below)
    b.tick_kinds(0)
    b.learn([fid], 1, 0)                                   # EXT, as from a's beacon
    b.on_packet(c.ext._beacon(X.BEACON), 5)                # b knows c's set now
    e1 = a.store.entry(fid, 1)
    out = b.on_packet_kinds(e1, 10)
    assert [k for k, _ in out] == ["keys", "entry"] and out[0][1][10:] == fid
    assert out[1][1] == e1 and b.counters["tx_proof"] == 1
    c.tick_kinds(0)
    c.on_packet(out[0][1], 11)
    c.on_packet(out[1][1], 11)
    assert c.store.front(fid)[0] == 1                      # verified at once
    # nobody we know lacks it: no KEYS
    d = Node(MemStore(), timing=FAST, rand=Rand(4).below)
    d.tick_kinds(0)
    d.learn([fid], 1, 0)
    assert [k for k, _ in d.on_packet_kinds(e1, 10)] == []
