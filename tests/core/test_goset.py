from tinyssb.dmx import GOSET_DMX
from tinyssb.errors import WireError
from tinyssb.goset import EXTENDED, GOSet, GOSetFull
from tinyssb.hotloops import xor_bytes
from support import Rand


def keys(r, n):
    return [r.bytes(32) for _ in range(n)]


def test_claim_and_novelty_layout():
    g = GOSet()
    ks = [bytes([0x80]) + bytes(31), bytes([0x01]) * 32, bytes([0x7F]) * 32]
    for k in ks:
        g.add(k)
    assert g.keys == sorted(ks)  # unsigned byte order: 0x80.. sorts last
    c = g.full_claim()
    assert len(c) == 105 and c[:7] == GOSET_DMX and c[7] == 0x63
    assert c[8:40] == g.keys[0] and c[40:72] == g.keys[2] and c[104] == 3
    assert c[72:104] == xor_bytes(xor_bytes(ks[0], ks[1]), ks[2]) == g.state
    n = g.novelty(ks[0])
    assert len(n) == 40 and n[7] == 0x6E and n[8:] == ks[0]


def test_single_key_announced_as_novelty():
    g = GOSet()
    g.add(bytes([5]) * 32)
    assert g.full_claim()[7] == 0x6E


def exchange(a, b, rounds=60):
    """Run GOSET rounds between two sets; return (rounds used, packets, bytes)."""
    pk = by = 0
    for i in range(rounds):
        if a.keys == b.keys:
            return i, pk, by
        for src, dst in ((a, b), (b, a)):
            out = []
            if i % 4 == 0:
                fc = src.full_claim()
                if fc:
                    out.append(fc)
            out += src.round()
            for p in out:
                pk += 1
                by += len(p)
                dst.on_packet(p)
    return None, pk, by


def test_two_sets_converge():
    r = Rand(11)
    for common, only_a, only_b in ((20, 1, 0), (20, 0, 5), (50, 10, 10), (1, 30, 0), (0, 3, 4)):
        base = keys(r, common)
        a, b = GOSet(), GOSet()
        for k in base + keys(r, only_a):
            a.add(k)
        for k in base + keys(r, only_b):
            b.add(k)
        n, _, _ = exchange(a, b, 200)
        assert n is not None, (common, only_a, only_b)
        assert a.keys == b.keys and a.state == b.state
        assert len(a) == common + only_a + only_b


def test_capacity_limit_is_a_clear_error():
    g = GOSet(capacity=3)
    r = Rand(2)
    for k in keys(r, 3):
        g.add(k)
    try:
        g.add(r.bytes(32))
        assert False
    except GOSetFull as e:
        assert e.reason == "goset_full"
    # from the network the extra key is dropped and counted, not raised
    assert g.on_packet(g.novelty(r.bytes(32))) == []
    assert len(g) == 3 and g.full_count == 2


def test_middle_key_shortcut():
    r = Rand(5)
    ks = sorted(keys(r, 3))
    a, b = GOSet(), GOSet()
    for k in ks:
        a.add(k)
    b.add(ks[0])
    b.add(ks[2])
    assert b.on_packet(a.full_claim()) == [ks[1]]
    assert b.keys == a.keys


def test_bad_goset_packets():
    g = GOSet()
    k1, k2 = bytes([1]) * 32, bytes([2]) * 32
    bad = [GOSET_DMX + b"c" + k1 + k2 + bytes(32),           # 104 bytes
           GOSET_DMX + b"n" + k1 + b"x",                      # 41 bytes
           GOSET_DMX + b"q" + k1,                             # unknown type
           GOSET_DMX + b"c" + k2 + k1 + bytes(32) + b"\x02",  # lo > hi
           GOSET_DMX + b"c" + k1 + k2 + bytes(32) + b"\x00",  # count 0
           GOSET_DMX + b"c" + k1 + k2 + bytes(32) + b"\x01"]  # one key, two bounds
    for p in bad:
        try:
            g.on_packet(p)
            assert False, p
        except WireError:
            pass
    assert len(g) == 0
    # an all-zero LO is ignored as on the ESP32, a zero novelty key too
    assert g.on_packet(GOSET_DMX + b"c" + bytes(32) + k2 + bytes(32) + b"\x02") == []
    assert g.on_packet(GOSET_DMX + b"n" + bytes(32)) == []
    assert len(g) == 0


def test_in_sync_gate_follows_largest_claim():
    r = Rand(9)
    a, b = GOSet(), GOSet()
    for k in keys(r, 10):
        a.add(k)
    b.add(a.keys[0])
    b.on_packet(a.full_claim())
    assert not b.in_sync()  # saw a claim of 10, holds 3
    exchange(a, b, 200)
    assert b.in_sync() and a.in_sync()


def test_a_key_a_round_learns_is_handed_to_the_node():
    # A pending claim settled in a later round (Android's three-key shortcut, once our
    # region there holds just its two boundaries) teaches a key: it joins the set and
    # `added`, which the node drains to give the key a replica.
    r = Rand(41)
    lo, mid, hi = sorted(r.bytes(32) for _ in range(3))
    g = GOSet(mode=EXTENDED)
    g.learn([lo, hi], now=0)
    g._keep((3, lo, hi, xor_bytes(xor_bytes(lo, mid), hi)))
    g.round(1)
    assert mid in g and g.added == [mid]
