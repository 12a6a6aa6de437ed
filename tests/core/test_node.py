from tinyssb import entry
from tinyssb.bus import Bus, same_stores
from tinyssb.goset import GOSetFull
from tinyssb.store import MemStore
from support import Rand, converge, identity, make_node


def authored(n_entries, who=1, sizes=(10, 60, 250)):
    """A node that authored n_entries (plain and chained, short and long)."""
    node = make_node(identity(who), rand_seed=who)
    for i in range(n_entries):
        size = sizes[i % len(sizes)]
        body = bytes(((i + j) & 0x7F) for j in range(size))
        node.post(body, entry.PLAIN48 if size <= 48 and i % 2 else entry.CHAIN20)
    return node


def test_two_nodes_replicate_plain_and_chained():
    a = authored(6)
    b = make_node(rand_seed=2)
    bus, t = converge([a, b])
    assert same_stores([a, b]), t
    fid = a.author.fid
    assert b.store.front(fid) == a.store.front(fid)
    for seq in range(1, 7):
        pa = a.store.entry(fid, seq)
        ch = [b.store.chunk(fid, seq, k) for k in range(b.store.chunk_count(fid, seq))]
        cha = [a.store.chunk(fid, seq, k) for k in range(a.store.chunk_count(fid, seq))]
        assert entry.content(b.store.entry(fid, seq), ch) == entry.content(pa, cha)
    assert b.counters.get("drop_internal_error", 0) == 0


def test_many_nodes_different_gosets_converge_and_late_joiner():
    a = authored(4, who=1)
    b = authored(3, who=2)
    c = authored(2, who=3)
    d = make_node(rand_seed=9)
    nodes = [a, b, c, d]
    bus, t = converge(nodes)
    assert same_stores(nodes)
    assert len(d.goset) == 3 and d.goset.state == a.goset.state
    a.post(b"after the first sync, long enough for a chunk or two" * 3)
    late = make_node(rand_seed=17)
    nodes.append(late)
    bus, t = converge(nodes)
    assert same_stores(nodes)
    assert late.store.front(a.author.fid)[0] == 5


def test_multi_hop_line_topology():
    a = authored(3)
    mids = [make_node(rand_seed=20 + i) for i in range(3)]
    nodes = [a] + mids
    links = set((i, i + 1) for i in range(len(nodes) - 1))
    bus, t = converge(nodes, links=links)
    assert same_stores(nodes)


def test_restart_from_store_resumes_side_chains():
    a = authored(3, sizes=(400,))
    st = MemStore()
    b = make_node(rand_seed=3, store=st)
    bus = Bus([a, b])
    # run until b holds the entries but not yet every chunk
    fid = a.author.fid
    bus.run(60000, 100, stop=lambda: st.has_feed(fid) and st.front(fid)[0] == 3)
    b2 = make_node(rand_seed=4, store=st)  # "reboot" on the same store
    bus2, t = converge([a, b2])
    assert same_stores([a, b2])


def test_goset_full_is_reported():
    n = make_node()
    n.goset.capacity = 2
    n.follow(bytes([1]) * 32)
    n.follow(bytes([2]) * 32)
    try:
        n.follow(bytes([3]) * 32)
        assert False
    except GOSetFull:
        pass


def test_want_reply_is_bounded_and_round_robin():
    a = authored(12, sizes=(8,))
    b = make_node(rand_seed=5)
    b.follow(a.author.fid)
    w = b.want_vector()
    out = a.on_packet(w, 0)
    assert len(out) == 5  # WANT credit
    assert all(len(p) == 120 for p in out)
    for p in out:
        b.on_packet(p, 0)
    assert b.store.front(a.author.fid)[0] == 5
    assert b.counters["rx_entry"] == 5


def test_wrong_goset_state_gates_want():
    a = authored(3)
    b = make_node(rand_seed=5)
    b.follow(a.author.fid)
    b.follow(bytes([9]) * 32)  # b's set differs: its WANT DMX is not a's
    out = a.on_packet(b.want_vector(), 0)
    assert out == [] and a.counters.get("drop_unknown_dmx") == 1


def test_robustness_random_and_mutated_packets():
    a = authored(4, sizes=(30, 300))
    b = make_node(rand_seed=6)
    bus, _ = converge([a, b])
    good = []
    for kind, p in a.tick_kinds(10 ** 9):
        good.append(p)
    fid = a.author.fid
    for s in range(1, 5):
        good.append(a.store.entry(fid, s))
        for k in range(a.store.chunk_count(fid, s)):
            good.append(a.store.chunk(fid, s, k))
    good.append(b.want_vector())
    good.append(a.goset.full_claim())
    before = (b.store.front(fid), len(b.goset), b.goset.state)
    r = Rand(99)
    for i in range(600):
        base = good[i % len(good)]
        m = r.below(5)
        if m == 0:
            p = r.bytes(r.below(130))
        elif m == 1:
            p = base[:r.below(len(base))]
        elif m == 2:
            p = base + r.bytes(1 + r.below(20))
        else:
            b_ = bytearray(base)
            for _ in range(1 + r.below(3)):
                b_[r.below(len(b_))] ^= 1 << r.below(8)
            p = bytes(b_)
        b.on_packet(p, i)
        a.on_packet(p, i)
    assert b.counters.get("drop_internal_error", 0) == 0, b.last_error
    assert a.counters.get("drop_internal_error", 0) == 0, a.last_error
    # flipped claims can add keys (by design anyone may add feed IDs), but nothing
    # accepted can be a corrupt entry: the replicated feed is unchanged and complete
    assert b.store.front(fid) == before[0]
    assert same_entries(a, b, fid)


def same_entries(a, b, fid):
    for s in range(1, a.store.front(fid)[0] + 1):
        if a.store.entry(fid, s) != b.store.entry(fid, s):
            return False
        if a.store.chunk_count(fid, s) != b.store.chunk_count(fid, s):
            return False
    return True
