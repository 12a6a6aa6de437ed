# Coded symbols (shared/tinyssb/codedsym.py): pinned mapping and symbol bytes, incremental
# encoder, peeling decoder, bounds. Runs under CPython (pytest) and MicroPython (mptest).
from tinyssb import codedsym as CS
from tinyssb import hotloops
from support import Rand


def _raises(reason, fn, *args):
    try:
        fn(*args)
    except CS.CodedSymbolError as e:
        assert e.reason == reason, e.reason
        return
    assert False, "no CodedSymbolError(%s)" % reason


def _sha(b):
    from hashlib import sha256
    return sha256(b).digest()


def test_index_vectors():
    # Pinned: a board and a host must compute exactly these (integer-only mapping).
    assert CS.indices(bytes(8), 1000) == [0, 8, 13, 19, 63, 194, 525]
    assert CS.indices(bytes(range(32)), 100000) == [
        0, 1, 3, 7, 11, 12, 13, 28, 31, 41, 48, 193, 223, 352, 642, 948, 4607, 18249,
        18572, 64135]
    assert CS.indices(bytes(8), 0) == []
    assert CS.indices(bytes(8), 1) == [0]


def test_isqrt_is_exact_at_the_edges():
    for x in (1, 2, 3, 4, 65535 * 65535 - 1, 65535 * 65535, 65536 * 65536 - 1,
              (1 << 31) - 1, 1 << 31, 12345678):
        s = CS._isqrt(x)
        assert s * s <= x < (s + 1) * (s + 1)


def test_mapping_density_about_one_over_one_plus_half_i():
    r = Rand(5)
    n = 1000
    hits = [0] * 64
    for _ in range(n):
        for i in CS.indices(r.bytes(8), 64):
            hits[i] += 1
    assert hits[0] == n
    for lo, hi in ((1, 2), (2, 6), (6, 16), (16, 64)):     # expected vs observed per band
        want = sum(n / (1 + i / 2) for i in range(lo, hi))
        got = sum(hits[lo:hi])
        assert 0.85 < got / want < 1.15, (lo, hi, got / want)


def test_symbol_bytes_vectors():
    cd = CS.Codec(8, 3, 1)
    e = CS.Encoder(cd, 40)
    for i in range(20):
        e.add(bytes([i]) * 8)
    assert e.encode(0, 3) == bytes.fromhex(
        "00000000000000002e0088141313131313131313cb9d700b050505050505050570390f04")
    assert _sha(e.encode(0, 40))[:8] == bytes.fromhex("5674075c5ae134bc")
    host = CS.Codec(5, 3, 0)
    e = CS.Encoder(host, 16)
    for i in range(10):
        e.add(bytes([i]) * 5)
    assert e.encode(0, 4) == bytes.fromhex(
        "0101010101d9e8f60000000000ee32170b0b0b0b0ba04b930c0c0c0c0c858061")


def test_counts_wrap_and_sign():
    cd = CS.Codec(4, 2, 1)
    assert cd.encode_count(-1) == b"\xff" and cd.decode_count(b"\xff") == -1
    assert cd.encode_count(300) == bytes([300 - 256])
    assert CS.Codec(4, 2, 2).decode_count(CS.Codec(4, 2, 2).encode_count(-2)) == -2
    assert CS.Codec(4, 2, 0).encode_count(5) == b""


def test_xor_at_fast_and_plain_agree():
    r = Rand(9)
    for off, n in ((0, 8), (3, 11), (20, 12)):
        a = bytearray(r.bytes(40))
        b = bytearray(a)
        d = r.bytes(n)
        hotloops.xor_into_at(a, off, d)
        hotloops.xor_into_at_plain(b, off, d)
        assert a == b
    try:
        hotloops.xor_into_at(bytearray(4), 2, b"abc")
        assert False
    except ValueError:
        pass


def test_encoder_add_remove_extend_serialise():
    cd = CS.Codec(8, 3, 1)
    r = Rand(11)
    keys = [r.bytes(8) for _ in range(30)]
    a = CS.Encoder(cd, 10)
    for k in keys:
        a.add(k)
    a.extend(50)
    b = CS.Encoder(cd, 50)
    extra = r.bytes(8)
    for k in keys + [extra]:
        b.add(k)
    b.remove(extra)
    assert a.encode(0, 50) == b.encode(0, 50) and a.n == b.n == 30
    c = CS.Encoder.from_bytes(cd, a.to_bytes(), keys)
    assert c.encode(0, 50) == a.encode(0, 50) and c.n == 30
    c.extend(60)
    a.extend(60)
    assert c.encode(0, 60) == a.encode(0, 60)
    _raises("bad state", CS.Encoder.from_bytes, cd, a.to_bytes()[:-1])
    _raises("bad state", CS.Encoder.from_bytes, CS.Codec(8, 3, 0), a.to_bytes())
    _raises("cannot extend", CS.Encoder(cd, 4, keep_keys=False).extend, 8)
    _raises("bad key", a.add, b"short")
    # O(log m) per insert: a key touches only a handful of 4096 symbols
    assert len(CS.indices(keys[0], 4096)) < 40


def _sync(cd, na, nb, common, seed, batch=3, is_local=None):
    r = Rand(seed)
    shared = [r.bytes(cd.key_len) for _ in range(common)]
    only_a = [r.bytes(cd.key_len) for _ in range(na)]
    only_b = [r.bytes(cd.key_len) for _ in range(nb)]
    A, B = CS.Encoder(cd, 0), CS.Encoder(cd, 0)
    for k in shared + only_a:
        A.add(k)
    for k in shared + only_b:
        B.add(k)
    if is_local is not None:
        bset = set(shared + only_b)
        is_local = bset.__contains__
    dec = CS.Decoder(cd, B, 10 * (na + nb) + 64, na + nb + 1, is_local)
    i = 0
    while not dec.done:
        A.extend(i + batch)
        dec.add(i, A.encode(i, i + batch))
        i += batch
    assert sorted(dec.remote_keys) == sorted(only_a)
    assert sorted(dec.local_keys) == sorted(only_b)
    return i


def test_decoder_difference_shapes():
    cd = CS.Codec(8, 3, 1)
    for seed, (na, nb) in enumerate(((0, 0), (1, 0), (0, 1), (3, 4), (12, 0), (0, 9), (15, 15))):
        _sync(cd, na, nb, 20, seed + 1)
    assert _sync(cd, 0, 0, 20, 3, batch=1) == 1   # identical sets: symbol 0 suffices


def test_decoder_without_count_uses_lookup_and_32_byte_keys():
    _sync(CS.Codec(5, 3, 0), 6, 7, 30, 21, batch=2, is_local=True)
    _sync(CS.Codec(32, 4, 1), 5, 5, 10, 22, batch=4)


def test_decoder_bounds_and_errors():
    cd = CS.Codec(8, 3, 1)
    local = CS.Encoder(cd, 0)
    dec = CS.Decoder(cd, local, 8, 4)
    _raises("out of order", dec.add, 1, bytes(12))
    _raises("bad symbols", dec.add, 0, bytes(13))
    r = Rand(4)
    junk = r.bytes(12 * 8)
    dec.add(0, junk)                      # random symbols: nothing decodes
    assert not dec.done and dec.received == 8
    _raises("too many symbols", dec.add, 8, r.bytes(12))
    # more keys than allowed
    src = CS.Encoder(cd, 40)
    for _ in range(10):
        src.add(r.bytes(8))
    dec = CS.Decoder(cd, CS.Encoder(cd, 0), 100, 3)
    _raises("too many keys", dec.add, 0, src.encode(0, 40))
    try:
        CS.Decoder(CS.Codec(8, 3, 0), local, 8, 4)
        assert False
    except ValueError:
        pass


def test_residual_and_known_keys_hand_over_a_partial_decode():
    # R decodes what it can from A's first symbols; A finishes from R's residual (already a
    # difference), R's own later symbols and the keys R resolved.
    cd = CS.Codec(5, 3, 0)
    r = Rand(31)
    shared = [r.bytes(5) for _ in range(40)]
    only_a = [r.bytes(5) for _ in range(12)]
    only_b = [r.bytes(5) for _ in range(12)]
    A, B = CS.Encoder(cd, 0), CS.Encoder(cd, 0)
    for k in shared + only_a:
        A.add(k)
    for k in shared + only_b:
        B.add(k)
    sa, sb = set(shared + only_a), set(shared + only_b)
    k1 = 6
    A.extend(k1)
    rdec = CS.Decoder(cd, B, 200, 100, sb.__contains__)
    rdec.add(0, A.encode(0, k1))
    assert not rdec.done
    adec = CS.Decoder(cd, A, 200, 100, sa.__contains__)
    adec.add_diff(0, rdec.residual(0, k1))
    for key in rdec.remote_keys:          # R's remote is A: local-only for A
        adec.known(key, -1)
    for key in rdec.local_keys:
        adec.known(key, 1)
    m = k1
    while not adec.done:
        B.extend(m + 4)
        adec.add(m, B.encode(m, m + 4))
        m += 4
    assert sorted(adec.remote_keys + rdec.local_keys) == sorted(only_b)
    assert sorted(adec.local_keys + rdec.remote_keys) == sorted(only_a)
    _raises("bad range", rdec.residual, 0, k1 + 1)


def test_resolve_a_key_found_elsewhere_unblocks_peeling():
    # Two keys on opposite sides stuck together; the side that holds one of them resolves it
    # and the other falls out.
    cd = CS.Codec(5, 3, 0)
    r = Rand(41)
    for _ in range(200):
        a, b = r.bytes(5), r.bytes(5)
        if CS.indices(a, 6) == CS.indices(b, 6):
            break
    else:
        assert False, "no pair with equal first indices"
    A, B = CS.Encoder(cd, 6), CS.Encoder(cd, 6)
    A.add(a)
    B.add(b)
    dec = CS.Decoder(cd, B, 50, 10, {b}.__contains__)
    dec.add(0, A.encode(0, 6))
    assert not dec.done and not dec.remote_keys
    assert dec.resolve(b, -1) == 2
    assert dec.done and dec.remote_keys == [a] and dec.local_keys == [b]
    assert dec.resolve(b, -1) == 0


def _two_sided(seed, n, d, split):
    """Symbols decoded until done, three at a time, for sets of n keys with d keys only on
    each side; checks what was decoded."""
    cd = CS.Codec(32, 3, 1)
    r = Rand(seed)
    common = [r.bytes(32) for _ in range(n - d)]
    only_a = [r.bytes(32) for _ in range(d)]
    only_b = [r.bytes(32) for _ in range(d)]
    A, B = CS.Encoder(cd, 0), CS.Encoder(cd, 0)
    for k in common + only_a:
        A.add(k)
    for k in common + only_b:
        B.add(k)
    dec = CS.Decoder(cd, B, 300, 100)
    m = 0
    while not dec.done:
        A.extend(m + 3)
        dec.add(m, A.encode(m, m + 3))
        m += 3
        if split and not dec.done:
            dec.split_pairs()
        assert m < 300
    assert sorted(dec.remote_keys) == sorted(only_a)
    assert sorted(dec.local_keys) == sorted(only_b)
    return m


def test_split_pairs_decodes_one_key_each_way_with_fewer_symbols():
    plain = split = 0
    for seed in range(1, 9):
        plain += _two_sided(seed, 40, 4, False)
        split += _two_sided(seed, 40, 4, True)
    assert split < plain * 0.85, (split, plain)
    # one key each way sits in symbol 0 itself: three symbols suffice
    assert _two_sided(99, 30, 1, True) == 3


def test_split_pairs_needs_the_local_keys():
    cd = CS.Codec(32, 3, 1)
    local = CS.Encoder(cd, 4, keep_keys=False)
    dec = CS.Decoder(cd, local, 10, 10)
    dec.add(0, CS.Encoder(cd, 4).encode(0, 4))
    assert dec.split_pairs() == 0
