# GOSET extension (shared/tinyssb/gosetx.py): coded-symbol set agreement between our nodes,
# invisible to deployed ones. CPython and MicroPython.
from tinyssb import gosetx as X
from tinyssb.bus import Bus
from tinyssb.dmx import want_dmx
from tinyssb.goset import DEPLOYED, EXT
from tinyssb.node import Node
from tinyssb.store import MemStore
from support import FAST, Rand

GOSET_KINDS = ("claim", "novelty", "beacon", "reply", "symbols", "request", "keys")


def node(seed, keys, mode=None, capacity=100):
    kw = {} if mode is None else {"mode": mode}
    n = Node(MemStore(), timing=FAST, rand=Rand(seed).below, capacity=capacity, **kw)
    for k in keys:
        n.follow(k)
    return n


def pair(common, only_a, only_b, seed=1, capacity=100):
    r = Rand(seed)
    c = [r.key() for _ in range(common)]
    ka = c + [r.key() for _ in range(only_a)]
    kb = c + [r.key() for _ in range(only_b)]
    return (node(seed, ka, capacity=capacity), node(seed + 50, kb, capacity=capacity),
            set(ka) | set(kb))


def agree(a, b, until=60000):
    bus = Bus([a, b])
    t = bus.run(until, 100, stop=lambda: a.goset.keys == b.goset.keys)
    return bus, t


def goset_bytes(bus):
    return sum(bus.bytes.get(k, 0) for k in GOSET_KINDS)


def test_packet_layouts():
    a, b, _ = pair(20, 3, 0)
    p = a.ext._beacon(X.BEACON)
    assert len(p) == X.BEACON_LEN == 48 and p[:7] == X.DMX and p[7] == X.BEACON
    assert p[8:12] == a.goset.state[:4]
    assert p[12:44] == a.announced().state and p[47] == 23
    for start, stop in ((1, 4), (4, 5)):
        for kind, s in a.ext._symbols(start, stop):
            assert kind == "symbols" and len(s) == 12 + 36 * (stop - start) <= 120
            assert s[8:10] == a.announced().state[:2]
            assert int.from_bytes(s[10:12], "big") == start
    out = a.ext._keys_for(b.announced().keys, b.announced().state, 0)
    assert [len(p) for _, p in out] == [106]     # 3 keys in one packet


def test_one_missing_key_travels_in_one_beacon():
    for seed in range(1, 6):
        a, b, union = pair(30, 1, 0, seed, capacity=32)
        bus, t = agree(a, b)
        assert a.goset.keys == b.goset.keys and set(b.goset.keys) == union
        # the fuller set beacons first after start; symbol 0 alone names the key
        assert goset_bytes(bus) == X.BEACON_LEN and bus.packets == {"beacon": 1}, seed


def test_the_side_holding_more_names_what_the_other_lacks():
    # b's beacon reaches a first: a solves it (b's set is a subset) and sends KEYS.
    a, b, union = pair(40, 7, 0)
    before = b.announced().state
    out = a.on_packet_kinds(b.ext._beacon(X.BEACON), 10)
    assert [k for k, _ in out] == ["keys", "keys", "keys"]
    for _, p in out:
        b.on_packet(p, 10)
    assert set(b.goset.keys) == union
    learned = union - set(b.followed)
    assert len(learned) == 7 and all(b.goset.trust(k) == EXT for k in learned)
    # learned keys are provisional: not announced onward until an entry verifies
    assert b.announced().state == before and not learned & set(b.announced().keys)
    # the KEYS (tagged with a's set) add up to a's set: b can ask a for entries at once
    assert b.spaces.view(a.announced().state).keys == a.announced().keys


def test_two_sided_differences_decode():
    for only in (1, 4, 12):
        a, b, union = pair(60, only, only, seed=only)
        bus, t = agree(a, b)
        assert set(a.goset.keys) == set(b.goset.keys) == union, only
        assert goset_bytes(bus) <= 2.5 * 40 * 2 * only + 200, (only, goset_bytes(bus))
        assert a.counters.get("drop_internal_error", 0) == 0


def test_a_deployed_node_ignores_the_extension():
    r = Rand(8)
    keys = [r.key() for _ in range(10)]
    a = node(1, keys + [r.key()])
    d = node(2, keys, mode=DEPLOYED)
    pkts = [a.ext._beacon(X.BEACON), a.ext._beacon(X.REPLY)]
    pkts += [p for _, p in a.ext._symbols(1, 4)]
    pkts.append(X.DMX + b"r" + a.ext.tag + b"\x00\x01\x06")
    pkts.append(X.DMX + b"k" + a.ext.tag + r.key())
    before = (list(d.goset.keys), d.goset.state)
    for p in pkts:
        assert d.on_packet(p, 5) == []
    assert (list(d.goset.keys), d.goset.state) == before
    assert d.counters["drop_unknown_dmx"] == len(pkts)
    assert X.DMX not in (want_dmx(d.goset.state), d.want_dmx, d.chnk_dmx)


def test_mixed_pair_converges_on_the_deployed_path():
    r = Rand(9)
    keys = [r.key() for _ in range(30)]
    ours = node(1, keys)
    dep = node(2, keys[:25] + [r.key(), r.key()], mode=DEPLOYED)
    bus = Bus([ours, dep])
    bus.run(600000, 100, stop=lambda: ours.goset.keys == dep.goset.keys)
    assert ours.goset.keys == dep.goset.keys
    assert bus.packets.get("claim", 0) > 0    # ours spoke the deployed protocol


def test_malformed_extension_packets_are_dropped_and_counted():
    a, b, _ = pair(20, 2, 2)
    tag = a.ext.tag
    bad = [X.DMX + b"b" + bytes(39),                      # beacon too short
           X.DMX + b"B" + bytes(41),                      # reply too long
           X.DMX + b"s" + tag + b"\x00\x01" + bytes(35),  # partial symbol
           X.DMX + b"s" + tag + b"\x00\x01",              # no symbol
           X.DMX + b"r" + tag + b"\x00\x00\x06",          # request for symbol 0
           X.DMX + b"r" + tag + b"\xff\xff\x06",          # beyond any stream
           X.DMX + b"r" + tag + b"\x00",                  # short request
           X.DMX + b"k" + tag + bytes(31),                # partial key
           X.DMX + b"k" + tag + bytes(32 * 4),            # > 3 keys: beyond 120 bytes
           X.DMX + b"x" + bytes(10)]                      # unknown type
    for p in bad:
        assert a.on_packet(p, 1) == []
    drops = sum(v for k, v in a.counters.items() if k.startswith("drop_"))
    assert drops == len(bad) and a.counters.get("drop_internal_error", 0) == 0


def test_mutated_extension_traffic_cannot_break_agreement():
    a, b, union = pair(40, 3, 3, seed=4)
    bus = Bus([a, b])
    r = Rand(12)
    good = [a.ext._beacon(X.BEACON), b.ext._beacon(X.REPLY)]
    good += [p for _, p in a.ext._symbols(1, 7)]
    for i in range(300):
        p = bytearray(good[i % len(good)])
        for _ in range(1 + r.below(3)):
            p[7 + r.below(len(p) - 7)] ^= 1 << r.below(8)
        b.on_packet(bytes(p[:r.below(len(p)) + 1] if i % 5 == 0 else p), i)
        a.on_packet(bytes(p), i)
    assert a.counters.get("drop_internal_error", 0) == 0, a.last_error
    assert b.counters.get("drop_internal_error", 0) == 0, b.last_error
    bus.run(120000, 100, stop=lambda: union <= set(a.goset.keys) and union <= set(b.goset.keys))
    assert union <= set(a.goset.keys) and union <= set(b.goset.keys)


def test_streaming_is_bounded_per_period():
    a, b, _ = pair(50, 20, 0)
    req = X.DMX + b"r" + a.ext.tag
    sent = 0
    for i in range(200):
        sent += len(a.on_packet(req + (1 + 3 * (i % 40)).to_bytes(2, "big") + b"\x06", 100))
    assert sent == X.STREAM_BUDGET
    assert a.counters["ext_budget"] > 0


def test_want_is_keyed_by_a_set_a_neighbour_showed_and_not_sent_without_one():
    lone, _, _ = pair(5, 1, 0, seed=3)
    sent = []
    for t in range(0, 60000, 100):
        sent.extend(k for k, _ in lone.tick_kinds(t))
    assert "want" not in sent and "chnk" not in sent and "beacon" in sent
    a, b, _ = pair(5, 1, 0)
    bus, t = agree(a, b)
    # b learned a's set from its beacon: b keys WANTs by it, and a answers them
    w = b._want_tick(bus.now + 1)
    assert w is not None and w[:7] == want_dmx(a.announced().state)
    assert a.spaces.lookup(w[:7]) is not None


def test_spaces_that_brought_data_are_asked_first_and_empty_sets_are_no_space():
    from tinyssb.spaces import EXPLORE, FAILED, Spaces
    sp = Spaces()
    assert sp.add_view([], bytes(32), 0) is None
    r = Rand(3)
    good = sp.add_view([r.key()], r.key(), 0)
    junk = [sp.add_view([r.key()], r.key(), 10 + i) for i in range(3)]
    good.used = 5
    junk[0].used = FAILED
    firsts = [sp.next_shared(100)[0] for _ in range(4 * EXPLORE)]
    assert firsts.count(good) == 3 * EXPLORE            # the useful one, but ...
    assert junk[2] in firsts and junk[0] not in firsts  # ... the newest untried is tried
    for _ in range(20):                                 # a flood of views: good stays
        sp.add_view([r.key()], r.key(), 200)
    assert good in sp.views


def test_an_empty_set_is_announced_once_and_beacons_back_off_only_when_they_can():
    lone = node(1, [])
    kinds = []
    for t in range(0, 200000, 100):
        kinds.extend(k for k, _ in lone.tick_kinds(t))
    assert kinds.count("beacon") == 1          # the empty set, at start

    def beacons(n, heard):
        sent = []
        for t in range(0, 300000, 100):
            if heard and t % 10000 == 0:
                n.on_packet(X.DMX + b"r" + b"zz" + b"\x00\x01\x03", t)   # one of ours near
            if any(k == "beacon" for k, _ in n.tick_kinds(t)):
                sent.append(t)
        return max(b - a for a, b in zip(sent, sent[1:]))
    # none of our nodes heard: Trickle doubles up to 80 s
    assert beacons(node(2, [Rand(4).key()]), False) > 70000
    # one of ours heard, but it shares no set with us: our beacon is how it will name its
    # set to us, so the period stays 20 s
    assert beacons(node(3, [Rand(5).key()]), True) <= 21000
