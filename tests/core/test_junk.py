# Unauthenticated GOSET packets cannot stop replication or crowd out feeds (issue 15,
# items 1-3). CPython and MicroPython.
from tinyssb import entry
from tinyssb.bus import Bus, same_stores
from tinyssb.dmx import GOSET_DMX
from tinyssb.goset import DEPLOYED, EXT, PINNED, WIRE, WIRE_AGE_MS
from tinyssb.node import Node, RESERVE
from tinyssb.store import MemStore
from support import FAST, Rand, identity, make_node


def authored(n, who=1, mode=None):
    kw = {} if mode is None else {"mode": mode}
    r = Rand(who)
    node = Node(MemStore(), identity=identity(who), timing=FAST, rand=r.below, **kw)
    for i in range(n):
        node.post(bytes(((i + j) & 0x7F) for j in range(10 + 45 * (i % 4))),
                  entry.PLAIN48 if i % 4 == 0 else entry.CHAIN20)
    return node


def junk_claim(r, cnt=None):
    lo, hi = sorted((r.key(), r.key()))
    c = cnt if cnt is not None else 2 + r.below(254)
    return GOSET_DMX + b"c" + lo + hi + r.key() + bytes((c,))


def junk_novelty(r):
    return GOSET_DMX + b"n" + r.key()


def replicate_with_junk(a, b, junk, per_step, until=120000):
    """Run the bus; before every step `per_step` junk packets reach b (an attacker next
    to b only). Returns the virtual time when b holds a's feed completely, or None."""
    bus = Bus([a, b])
    r = Rand(77)
    fid = a.author.fid
    t = 0
    while t < until:
        t += 100
        for _ in range(per_step):
            b.on_packet(junk(r), t)
        bus.step(t)
        if b.store.has_feed(fid) and b.store.front(fid) == a.store.front(fid) and \
                same_stores([a, b]):
            return t
    return None


def test_one_junk_claim_does_not_stop_replication():
    # Deployed behaviour, for reference: one claim with CNT 200 gates WANT/CHNK for good.
    a, b = authored(6, mode=DEPLOYED), make_node(rand_seed=2)
    b = Node(MemStore(), timing=FAST, rand=Rand(2).below, mode=DEPLOYED)
    sent = [False]

    def once(r):
        if sent[0]:
            return GOSET_DMX + b"z" + bytes(32)    # ignored ZAP filler
        sent[0] = True
        return junk_claim(r, 200)
    assert replicate_with_junk(a, b, once, 1, 60000) is None
    assert not b.goset.in_sync()
    # Our nodes: the same packet changes nothing.
    sent[0] = False
    a, b = authored(6), make_node(rand_seed=2)
    assert replicate_with_junk(a, b, once, 1, 60000) is not None


def test_replication_goes_on_while_junk_claims_and_novelties_arrive():
    a, b = authored(8), make_node(rand_seed=2)
    t0 = replicate_with_junk(a, b, lambda r: junk_novelty(r), 0)
    assert t0 is not None
    a, b = authored(8), make_node(rand_seed=2)
    mixed = lambda r: junk_claim(r) if r.below(2) else junk_novelty(r)
    t = replicate_with_junk(a, b, mixed, 3)
    assert t is not None and t <= 2 * t0, (t, t0)
    assert len(b.goset) <= b.goset.capacity
    assert b.store.feeds() == [a.author.fid]   # no junk became a stored feed
    assert b.counters.get("drop_internal_error", 0) == 0, b.last_error


def test_junk_novelties_cannot_fill_the_set_for_good():
    r = Rand(9)
    b = make_node(rand_seed=3)
    b.goset.capacity = 30
    for i in range(200):
        b.on_packet(junk_novelty(r), i)
    assert len(b.goset) == 30 and b.store.feeds() == []
    assert all(b.goset.trust(k) == WIRE for k in b.goset.keys)
    # a real feed announced afterwards is learned and replicated
    a = authored(4)
    bus = Bus([a, b])
    bus.run(60000, 100, stop=lambda: same_stores([a, b]))
    assert same_stores([a, b])
    assert b.goset.trust(a.author.fid) == PINNED
    # ... and the junk that nobody vouched for ages out
    bus.run(bus.now + WIRE_AGE_MS + 10000, 1000)
    assert b.goset.keys == [a.author.fid]
    # a restart finds no junk in the store
    b2 = make_node(rand_seed=4, store=b.store)
    assert b2.goset.keys == [a.author.fid]


def test_verified_feeds_are_never_pushed_out_by_announced_keys():
    b = make_node(rand_seed=5)
    b.goset.capacity = 12
    authors = [authored(1, who=10 + i) for i in range(5)]
    t = 0
    for a in authors:
        bus = Bus([a, b])
        bus.now = t      # b's clock goes on
        t = bus.run(t + 30000, 100, stop=lambda: b.store.has_feed(a.author.fid))
        assert b.store.front(a.author.fid)[0] == 1
    r = Rand(6)
    for i in range(100):
        b.learn([r.key()], EXT if i % 2 else WIRE, t + i)
        b.on_packet(junk_novelty(r), t + i)
    for a in authors:
        assert b.goset.trust(a.author.fid) == PINNED
    assert len(b.goset) == 12


def _store_with_feeds(n):
    st = MemStore()
    fids = []
    for i in range(n):
        fid = Rand(1000 + i).key()
        st.add_feed(fid)
        st.append(fid, 1, bytes(120), bytes(20))
        fids.append(fid)
    return st, fids


def test_a_store_with_more_feeds_than_the_set_holds_starts():
    st, fids = _store_with_feeds(40)
    st.add_feed(Rand(5).key())        # a stored feed with no entry (junk of older builds)
    followed = fids[-1]
    n = Node(st, identity=identity(1), capacity=20, timing=FAST, follow=[followed])
    own = n.author.fid
    assert len(n.goset) == 20 - RESERVE      # the rest stays free for the mesh
    assert own in n.goset and followed in n.goset
    dormant = [f for f in fids if f not in n.goset]
    assert dormant and all(st.front(f)[0] == 1 for f in dormant)
    # a dormant feed that a neighbour announces comes back (it is verified here)
    n.on_packet(GOSET_DMX + b"n" + dormant[0], 0)
    assert dormant[0] in n.goset and n.goset.trust(dormant[0]) == PINNED
    assert len(n.goset) <= 20
    # deployed behaviour starts too: the first `capacity` feeds
    d = Node(st, capacity=20, timing=FAST, mode=DEPLOYED)
    assert len(d.goset) == 20


def forged_keys(r, n=3):
    from tinyssb import gosetx as X
    return X.DMX + b"k" + r.bytes(2) + b"".join(r.key() for _ in range(n))


def forged_beacon(r, victim):
    """A beacon of the victim's announced set plus one junk key: it decodes from symbol 0
    alone (what an attacker that heard the victim's beacon can send)."""
    from tinyssb import gosetx as X
    from tinyssb.hotloops import xor_bytes
    s0 = victim.ext.enc.encode(0, 1)
    j = r.key()
    sym = xor_bytes(s0[:32], j) + xor_bytes(s0[32:35], X._chk(j)) + bytes(((s0[35] + 1) & 255,))
    return X.DMX + b"b" + r.bytes(4) + sym


def test_keys_from_forged_extension_packets_are_never_passed_on():
    # a - b - c, all ours; an attacker next to b forges KEYS and decodable beacons. b may
    # hold junk for a while (provisional), but never announces it: c learns a's feed only.
    a, b, c = authored(3), make_node(rand_seed=2), make_node(rand_seed=3)
    bus = Bus([a, b, c], links={(0, 1), (1, 2)})
    r = Rand(21)
    junk = set()
    t = 0
    while t < 120000 and not same_stores([a, b, c]):
        t += 100
        if t < 60000:
            p = forged_keys(r) if t % 200 else forged_beacon(r, b)
            b.on_packet(p, t)
            junk.update(k for k in b.goset.keys if k != a.author.fid)
        bus.step(t)
        assert not junk & set(b.announced().keys)
    assert same_stores([a, b, c]) and junk
    assert not junk & set(c.goset.keys)
    assert c.goset.keys == [a.author.fid] and b.store.feeds() == [a.author.fid]
    assert b.counters.get("drop_internal_error", 0) == 0, b.last_error


def test_a_provisional_key_being_fetched_is_not_pushed_out_by_junk():
    from tinyssb.goset import FETCH_MS
    a, b = authored(2), make_node(rand_seed=2)
    b.goset.capacity = 10
    bus = Bus([a, b])
    fid = a.author.fid
    bus.run(30000, 100, stop=lambda: fid in b.goset)
    t = bus.now
    b.goset.fetch(fid, t)           # as b's WANT listing it does
    r = Rand(5)
    for i in range(50):
        b.on_packet(forged_keys(r), t + i)
    assert fid in b.goset and b.goset.trust(fid) == EXT
    for i in range(10):
        b.on_packet(forged_keys(r), t + FETCH_MS + i)
    assert fid not in b.goset       # once the answer is overdue it is junk's equal
