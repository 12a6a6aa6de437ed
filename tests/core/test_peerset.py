# Our node next to a deployed one that holds feeds we lack: candidates from claims'
# XOR, confirmed by WANT probes keyed by the deployed node's set (peerset.py).
# CPython and MicroPython.
from tinyssb import crypto, entry
from tinyssb.bus import Bus, same_stores
from tinyssb.dmx import GOSET_DMX
from tinyssb.goset import DEPLOYED, PINNED
from tinyssb.node import Node
from tinyssb.store import MemStore
from support import FAST, Rand

KINDS = ("claim", "novelty", "beacon", "reply", "symbols", "request", "keys", "probe")


def feeds(n, seed):
    out = []
    for i in range(n):
        s = bytes(((seed * 7 + i) & 0xFF, (i >> 8) & 0xFF)) * 16
        fid = crypto.publickey(s)
        au = entry.Author(fid, lambda m, s=s: crypto.sign(s, m), 0, fid[:entry.HASH_LEN])
        _, pkt, mid, _ = au.next(b"feed", entry.PLAIN48)
        out.append((fid, pkt, mid))
    return out


def holder(fs, seed, mode=None, entries=True):
    st = MemStore()
    for fid, pkt, mid in fs:
        st.add_feed(fid)
        if entries:
            st.append(fid, 1, pkt, mid)
    kw = {} if mode is None else {"mode": mode}
    return Node(st, timing=FAST, rand=Rand(seed).below, follow=[f[0] for f in fs], **kw)


def test_a_key_named_only_by_a_claims_xor_is_confirmed_by_its_entry():
    fs = sorted(feeds(12, 1))
    dep = holder(fs, 1, DEPLOYED)
    ours = holder(fs[:6] + fs[7:], 2)      # lacks one in the middle (not a claim's end)
    bus = Bus([dep, ours])
    bus.run(60000, 100, stop=lambda: dep.goset.keys == ours.goset.keys)
    assert dep.goset.keys == ours.goset.keys
    k = fs[6][0]
    assert ours.goset.trust(k) == PINNED and ours.store.front(k)[0] == 1
    assert ours.counters["tx_probe"] >= 1 and ours.counters["rx_confirmed"] == 1
    # one full claim of the deployed node, one probe: no claim dance
    assert sum(bus.bytes.get(x, 0) for x in KINDS) <= 105 + 40 * 2 + 20


def test_a_wrong_candidate_is_never_learned_and_expires():
    from tinyssb.peerset import CANDIDATE_MS
    fs = feeds(6, 2)
    ours = holder(fs, 3)
    ours.tick_kinds(0)
    g = ours.goset
    before = list(g.keys)
    # a claim over our whole set with one key more and an XOR that names a key nobody
    # holds (junk, or a region holding two more and one fewer)
    r = Rand(4)
    x = bytearray(g.state)
    j = r.key()
    for i in range(32):
        x[i] ^= j[i]
    lo, hi = g.keys[0], g.keys[-1]
    if not lo < j < hi:
        j = None
    claim = GOSET_DMX + b"c" + lo + hi + bytes(x) + bytes((len(g) + 1,))
    out = ours.on_packet_kinds(claim, 10)
    if j is not None:
        assert j in g.peer.candidates and [k for k, _ in out].count("probe") == 1
    assert g.keys == before                       # never learned, never shown
    for t in range(20, CANDIDATE_MS + 5000, 500):
        ours.tick_kinds(t)
    assert not g.peer.candidates and g.keys == before
    assert all(k in before for k in ours.replicas)   # its probe replica is gone


def test_without_entries_the_claim_dance_still_agrees():
    fs = feeds(12, 5)
    dep = holder(fs, 5, DEPLOYED, entries=False)
    ours = holder(fs[:10], 6, entries=False)
    bus = Bus([dep, ours])
    bus.run(600000, 100, stop=lambda: dep.goset.keys == ours.goset.keys)
    assert dep.goset.keys == ours.goset.keys


def test_ranks_follow_a_full_claim_and_the_halves_of_a_help():
    # the neighbour's set: 0..9 (ten keys); ours lacks 4 and 7
    from tinyssb.goset import EXTENDED, GOSet
    keys = [bytes((i + 1,)) * 32 for i in range(10)]
    g = GOSet(100, EXTENDED)
    for i in (0, 1, 2, 3, 5, 6, 8, 9):
        g.add(keys[i])
    p = g.peer
    p.claim(keys[0], keys[9], bytes(32), 10, 0)          # its full claim
    assert p.ranks == {keys[0]: 0, keys[9]: 9}
    p.asked(keys[0], keys[9], 0)                          # our ask: the whole region
    g.add(keys[4], 2)                                     # (boundaries join our set)
    p.claim(keys[1], keys[4], bytes(32), 4, 1)            # its first half: 1..4
    p.claim(keys[5], keys[8], bytes(32), 4, 1)            # its second half: 5..8
    assert [p.ranks[keys[i]] for i in (1, 4, 5, 8)] == [1, 4, 5, 8]


def _claim(keys, cnt=None):
    from tinyssb.hotloops import xor_into
    x = bytearray(32)
    for k in keys:
        xor_into(x, k)
    return GOSET_DMX + b"c" + keys[0] + keys[-1] + bytes(x) + bytes((len(keys) if cnt is None else cnt,))


def test_one_key_named_of_a_two_sided_difference_of_two_names_the_other():
    # its set: 0..9 less 6 (ours only) plus 10 (its only); its full claim, then a claim of
    # a region of ours where it lacks 6: the novelty for 6 makes the rest of the XOR
    # difference of the whole sets its one key we lack, a candidate probed at its index
    from tinyssb.goset import EXTENDED, GOSet
    r = Rand(7)
    keys = sorted(r.key() for _ in range(11))
    a, b = keys[6], keys[9]
    ours = [k for k in keys if k != b]          # holds a, lacks b
    theirs = [k for k in keys if k != a]        # holds b, lacks a
    g = GOSet(100, EXTENDED)
    for k in ours:
        g.add(k)
    g.on_packet(_claim(theirs), 0)              # its full claim: same count, other XOR
    assert not g.peer.candidates
    g.on_packet(_claim(theirs[3:8]), 10)        # keys 3..8 less 6: it lacks a
    assert g.novelties == [a]
    assert list(g.peer.candidates) == [b]
    assert g.peer.probes(10) == [(b, _claim(theirs)[72:104], theirs.index(b))]
    assert b not in g                           # a candidate, never learned


def test_the_remainder_of_stale_counts_names_nothing():
    # a full claim four keys ahead of ours, and nothing else known: no candidate, and a
    # claim naming a key we hold does not bring a novelty for it
    from tinyssb.goset import EXTENDED, GOSet
    r = Rand(8)
    keys = sorted(r.key() for _ in range(12))
    g = GOSet(100, EXTENDED)
    for k in keys[:8]:
        g.add(k)
    g.on_packet(_claim(keys[:8] + keys[9:], 11), 0)
    assert not g.peer.candidates and not g.novelties


def test_feeds_confirmed_in_a_burst_are_not_made_dormant():
    # ours follows capacity - RESERVE feeds; the deployed node holds two more (its
    # lowest and highest, which its full claim names): verified by their entries, they
    # stay (making them dormant would undo the agreement)
    from tinyssb.node import RESERVE
    fs = sorted(feeds(12, 9))
    dep = holder(fs, 9, DEPLOYED)
    st = MemStore()
    mine = fs[1:11]
    for fid, pkt, mid in mine:
        st.add_feed(fid)
        st.append(fid, 1, pkt, mid)
    ours = Node(st, timing=FAST, rand=Rand(10).below, follow=[f[0] for f in mine],
                capacity=len(mine) + RESERVE)
    bus = Bus([dep, ours])
    bus.run(60000, 100, stop=lambda: same_stores([dep, ours]))
    assert dep.goset.keys == ours.goset.keys
    assert all(ours.goset.trust(f[0]) == PINNED for f in fs)
    assert ours.counters.get("dormant", 0) == 0


def test_one_key_each_way_in_two_halves_costs_one_exchange():
    # the deployed node lacks key 30 of 41, ours lacks key 10: its full claim, our claim
    # of one half, its answer there (which names one key), the other key from the whole
    # set's XOR: a probe and a novelty. Asking for the whole region and helping with it
    # (the deployed answer to a claim of equal count) cost 1,065 B here.
    fs = sorted(feeds(41, 11))
    dep = holder([f for i, f in enumerate(fs) if i != 10], 11, DEPLOYED)
    ours = holder([f for i, f in enumerate(fs) if i != 30], 12)
    bus = Bus([dep, ours])
    bus.run(60000, 100, stop=lambda: dep.goset.keys == ours.goset.keys)
    assert dep.goset.keys == ours.goset.keys
    assert ours.counters["rx_confirmed"] == 1
    assert sum(bus.bytes.get(x, 0) for x in KINDS) <= 105 + 105 + 210 + 12 + 40


def test_our_whole_set_is_asked_for_in_two_halves_once():
    # a full claim five keys ahead of our 19: two claims (its round helps two), meeting
    # at one key; once both are helped, the whole set is not asked for again
    from tinyssb.goset import ASK_AGAIN_MS, EXTENDED, GOSet
    r = Rand(12)
    keys = sorted(r.key() for _ in range(24))
    g = GOSet(100, EXTENDED)
    mine = [k for i, k in enumerate(keys) if i not in (5, 11, 17, 20, 21)]
    for k in mine:
        g.add(k)
    full = _claim(keys)
    g.on_packet(full, 0)
    asks = g.asks_out
    assert len(asks) == 2
    assert asks[0][8:40] == keys[0] and asks[1][40:72] == keys[23]
    assert asks[0][40:72] == asks[1][8:40]
    m = asks[0][40:72]
    g.asks_out = []
    # its help for each half (the keys strictly inside, in two claims each)
    for lo, hi in ((keys[0], m), (m, keys[23])):
        inside = [k for k in keys if lo < k < hi]
        h = len(inside) // 2
        g.on_packet(_claim(inside[:h]), 100)
        g.on_packet(_claim(inside[h:]), 100)
    g.asks_out = []
    g.on_packet(full, ASK_AGAIN_MS + 1000)
    assert all(p[8:40] != keys[0] or p[40:72] != keys[23] for p in g.asks_out)
    assert all((p[8:40], p[40:72]) not in ((keys[0], m), (m, keys[23])) for p in g.asks_out)


def test_a_region_asked_for_in_part_leaves_the_rest_known():
    # its claim over keys 0..29 holds four keys we lack (5, 9, 22, 25): we ask for the
    # lower two thirds only; its help halves that part (naming 5 by its XOR), and the rest
    # (its claim less the part: 19..29) is known without a claim of its, two keys more
    # than ours: asked for next
    from tinyssb.goset import EXTENDED, GOSet
    r = Rand(13)
    keys = sorted(r.key() for _ in range(36))
    g = GOSet(100, EXTENDED)
    ours = [k for i, k in enumerate(keys) if i not in (5, 9, 22, 25)]
    for k in ours:
        g.add(k)
    g.on_packet(_claim(keys[:30]), 0)
    assert len(g.asks_out) == 1
    part = g.asks_out[0]
    assert part[8:40] == keys[0] and part[40:72] == keys[19]
    g.asks_out = []
    g.on_packet(_claim(keys[1:10]), 100)      # its help: the inside of the part, halved
    assert keys[5] in g.peer.candidates
    assert not g.asks_out
    g.on_packet(_claim(keys[10:19]), 100)
    assert [(p[8:40], p[40:72], p[104]) for p in g.asks_out] == [(keys[19], keys[29], 9)]


def test_a_region_holding_keys_each_way_is_claimed_half_by_half_once():
    # its claim: as many keys as ours there, another XOR (one key each way): one half at
    # a round, the other half at the next (after one of its rounds), then nothing more
    # (the answers are claims of its, pending on their own)
    from tinyssb.goset import EXTENDED, HALF_AGAIN_MS, GOSet
    r = Rand(14)
    keys = sorted(r.key() for _ in range(22))
    g = GOSet(100, EXTENDED)
    for i, k in enumerate(keys):
        if i != 6:
            g.add(k)              # ours: all but 6, and 15 (which it lacks)
    theirs = [k for i, k in enumerate(keys) if i != 15]
    g.on_packet(_claim(theirs), 0)
    assert not g.asks_out
    sent = []
    for t in (1000, 1000 + HALF_AGAIN_MS, 1000 + 2 * HALF_AGAIN_MS, 1000 + 3 * HALF_AGAIN_MS):
        sent.append([(p[8:40], p[40:72]) for p in g.round(t) if p[7] == 0x63])
    lo, hi = keys[0], keys[21]
    assert len(sent[0]) == 1 and sent[0][0][0] == lo
    assert len(sent[1]) == 1 and sent[1][0][1] == hi
    assert sent[2] == [] and sent[3] == []


def test_at_most_two_asks_wait_at_a_deployed_neighbour():
    # it helps two claims a round, smallest first: a third ask would wait behind newer,
    # smaller ones. Its full claim: our whole set in two halves; its help for them (four
    # quarters, two keys we lack in each): two asks, the other quarters wait here
    from tinyssb.goset import EXTENDED, GOSet
    r = Rand(15)
    keys = sorted(r.key() for _ in range(42))
    lack = (3, 6, 13, 16, 24, 27, 34, 37)
    g = GOSet(100, EXTENDED)
    for i, k in enumerate(keys):
        if i not in lack:
            g.add(k)
    g.on_packet(_claim(keys), 0)
    assert len(g.asks_out) == 2
    m = g.asks_out[0][40:72]
    g.asks_out = []
    for lo, hi in ((keys[0], m), (m, keys[41])):
        inside = [k for k in keys if lo < k < hi]
        h = len(inside) // 2
        g.on_packet(_claim(inside[:h]), 500)
        g.on_packet(_claim(inside[h:]), 500)
    assert len(g.asks_out) == 2
