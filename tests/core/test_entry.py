from hashlib import sha256

from tinyssb import crypto, entry
from tinyssb.dmx import GOSET_DMX, chnk_dmx, entry_dmx, nam, want_dmx
from tinyssb.errors import WireError
from support import identity

SEED, FID = identity(1)


def sign(m):
    return crypto.sign(SEED, m)


def test_constant_and_keyed_dmx():
    assert GOSET_DMX.hex() == "613dfa70c47aba"  # SHA256("tinySSB-0.1 GOset 1")[0:7]
    state = bytes(range(32))
    assert want_dmx(state) == sha256(b"tinyssb-v0" + b"want" + state).digest()[:7]
    assert chnk_dmx(state) == sha256(b"tinyssb-v0" + b"blob" + state).digest()[:7]


def test_entry_layout_signature_mid_and_genesis_prev():
    prev = entry.genesis_prev(FID)
    assert prev == FID[:20]  # deployed rule, not 20 zero bytes
    payload = entry.plain48(b"hi")
    pkt, mid = entry.build(FID, 1, prev, entry.PLAIN48, payload, sign)
    assert len(pkt) == 120
    name = b"tinyssb-v0" + FID + b"\x00\x00\x00\x01" + prev
    assert nam(FID, 1, prev) == name and len(name) == 66
    assert pkt[:7] == sha256(name).digest()[:7] == entry_dmx(FID, 1, prev)
    assert pkt[7] == 0 and pkt[8:56] == b"hi" + bytes(46)
    assert crypto.verify(FID, name + pkt[:56], pkt[56:])
    assert mid == sha256(name + pkt).digest()[:20]
    assert entry.check(pkt, FID, 1, prev, crypto.verify) == mid


def test_check_rejects_tampering():
    prev = FID[:20]
    pkt, _ = entry.build(FID, 1, prev, entry.PLAIN48, entry.plain48(b"x"), sign)
    cases = []
    for i in (0, 7, 30, 55, 56, 119):
        b = bytearray(pkt)
        b[i] ^= 0x01
        cases.append((bytes(b), "bad_dmx" if i < 7 else "bad_signature"))
    cases.append((pkt[:119], "bad_length"))
    for p, reason in cases:
        try:
            entry.check(p, FID, 1, prev, crypto.verify)
            assert False, reason
        except WireError as e:
            assert e.reason == reason, (e.reason, reason)
    # right bytes, wrong position in the chain
    for seq, pv in ((2, prev), (1, bytes(20))):
        try:
            entry.check(pkt, FID, seq, pv, crypto.verify)
            assert False
        except WireError as e:
            assert e.reason == "bad_dmx"


def chain_case(n):
    content = bytes((i * 7 + 3) & 0xFF for i in range(n))
    payload, chunks = entry.chain20(content)
    return content, payload, chunks


def test_chain20_28_byte_rule():
    # |V| = 1 for L < 128: 27 bytes fit inline; one more needs a chunk
    for n, expect in ((0, 0), (1, 0), (27, 0), (28, 1), (127, 1), (128, 2), (226, 2), (227, 3),
                      (228, 3), (1000, 10)):
        content, payload, chunks = chain_case(n)
        v = len(entry.bipf.varint_encode(n))
        assert len(chunks) == expect, (n, len(chunks))
        want = 0 if n <= 28 - v else (n - (28 - v) + 99) // 100
        assert len(chunks) == want
        assert len(payload) == 48


def test_chain20_pointers_back_to_front_and_reassembly():
    content, payload, chunks = chain_case(555)
    pkt, _ = entry.build(FID, 1, FID[:20], entry.CHAIN20, payload, sign)
    info = entry.chain_info(pkt)
    assert info.length == 555 and info.n_chunks == len(chunks) == 6
    assert pkt[36:56] == info.hptr == sha256(chunks[0]).digest()[:20]
    for k in range(len(chunks) - 1):
        assert chunks[k][100:] == sha256(chunks[k + 1]).digest()[:20]
    assert chunks[-1][100:] == bytes(20)
    assert all(len(c) == 120 for c in chunks)
    assert entry.content(pkt, chunks) == content
    assert entry.content(pkt, chunks[:2]) == content[:26 + 200]


def test_short_chain_has_zero_pointer():
    content, payload, chunks = chain_case(20)
    assert chunks == [] and payload[28:] == bytes(20)
    assert payload[0] == 20 and payload[1:21] == content


def test_chain_info_rejects_overlong_varint():
    payload = b"\xff\xff\xff\xff\x01" + bytes(43)
    pkt, _ = entry.build(FID, 1, FID[:20], entry.CHAIN20, payload, sign)
    try:
        entry.chain_info(pkt)
        assert False
    except WireError as e:
        assert e.reason == "bad_chain_length"


def test_author_chains_prev():
    a = entry.Author(FID, sign)
    s1, p1, m1, _ = a.next(b"one")
    s2, p2, m2, _ = a.next(b"two" * 40)
    assert (s1, s2) == (1, 2)
    assert entry.check(p1, FID, 1, FID[:20], crypto.verify) == m1
    assert entry.check(p2, FID, 2, m1, crypto.verify) == m2
