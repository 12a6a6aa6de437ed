"""IBF structure: packing, slices, folding, decoders, and the check-hash flaw of GNUnet."""
import random

from hypothesis import given, strategies as st

from tssb.setu import constants as C
from tssb.setu import ibf as I
from tssb.setu.profiles import GnunetProfile, Tssb2Profile


@given(st.integers(1, 64).flatmap(
    lambda b: st.tuples(st.just(b), st.lists(st.integers(0, (1 << b) - 1), max_size=40))))
def test_pack_roundtrip(args):
    bits, counts = args
    assert I.unpack_counters(I.pack_counters(counts, bits), len(counts), bits) == counts


def _random_ibf(profile, size, n, seed):
    r = random.Random(seed)
    f = I.IBF(profile, size)
    for _ in range(n):
        f.insert(r.getrandbits(64))
    return f


def test_slice_roundtrip_packed_and_padded():
    f = _random_ibf(GnunetProfile, 101, 500, 1)
    bits = I.counter_bits(f.count)
    for padded in (False, True):
        g = I.IBF(GnunetProfile, 101)
        body = f.write_slice(0, 101, bits, padded)
        assert len(body) == I.slice_payload_size(101, bits, padded)
        n = I.slice_bucket_count(len(body), bits, 101, last=True)
        g.read_slice(0, n, bits, body)
        assert (g.count, g.ids, g.hashes) == (f.count, f.ids, f.hashes)


def test_slices_fit_the_64k_limit():
    for bits in (1, 8, 20, 64):
        n = I.max_buckets_per_message(bits, C.IBF_MSG_HEADER)
        assert C.IBF_MSG_HEADER + I.slice_payload_size(n, bits) <= C.MAX_MESSAGE_SIZE
        assert C.IBF_MSG_HEADER + I.slice_payload_size(n + 1, bits) > C.MAX_MESSAGE_SIZE
    # GNUnet's (1<<16)/20 = 3276 buckets would make a 65,536-byte message
    assert I.max_buckets_per_message(64, C.IBF_MSG_HEADER, padded=True) == 3275


def test_fold_equals_direct_build():
    r = random.Random(3)
    keys = [r.getrandbits(64) for _ in range(2000)]
    big = I.IBF(Tssb2Profile, 3 * 256)
    small = I.IBF(Tssb2Profile, 3 * 32)
    for k in keys:
        big.insert(k)
        small.insert(k)
    f = big.fold(3 * 32)
    assert (f.count, f.ids, f.hashes) == (small.count, small.ids, small.hashes)


def test_subtract_decode_both_profiles():
    r = random.Random(5)
    for prof, size in ((GnunetProfile, 201), (Tssb2Profile, 192)):
        common = [r.getrandbits(64) for _ in range(1000)]
        a_only = [r.getrandbits(64) for _ in range(40)]
        b_only = [r.getrandbits(64) for _ in range(30)]
        a, b = I.IBF(prof, size), I.IBF(prof, size)
        for k in common + a_only:
            a.insert(k)
        for k in common + b_only:
            b.insert(k)
        ok, pos, neg, _ = a.subtract(b).decode()
        assert ok and sorted(pos) == sorted(a_only) and sorted(neg) == sorted(b_only)


def test_gnunet_check_hash_is_affine_so_impure_buckets_pass():
    r = random.Random(9)
    for _ in range(200):
        a, b, c = (r.getrandbits(64) for _ in range(3))
        assert GnunetProfile.check_hash(a ^ b ^ c) == (
            GnunetProfile.check_hash(a) ^ GnunetProfile.check_hash(b) ^ GnunetProfile.check_hash(c))
        # tssb2's check hash is not linear: a three-key bucket is rejected
        assert Tssb2Profile.check_hash(a ^ b ^ c) != (
            Tssb2Profile.check_hash(a) ^ Tssb2Profile.check_hash(b) ^ Tssb2Profile.check_hash(c))


def _false_pure_decodes(prof, size, d, seed):
    r = random.Random(seed)
    keys = {r.getrandbits(64) for _ in range(d)}
    f = I.IBF(prof, size)
    for i, k in enumerate(keys):  # both signs, as in a set difference
        f.insert(k) if i % 2 else f.remove(k)
    ok, pos, neg, _ = f.decode()
    return len(set(pos + neg) - keys)


def test_tssb2_never_decodes_false_keys_where_gnunet_does():
    # GNUnet sizing (L = 2d+1): its linear CRC check lets impure buckets through (ref. 1.3).
    gn = sum(_false_pure_decodes(GnunetProfile, 401, 200, s) for s in range(40))
    t2 = sum(_false_pure_decodes(Tssb2Profile, 384, 200, s) for s in range(40))
    assert t2 == 0
    assert gn > 0


def test_decode_is_bounded_by_limit():
    f = _random_ibf(Tssb2Profile, 96, 40, 2)
    ok, pos, neg, why = f.decode(limit=5)
    assert not ok and why == "decode limit" and len(pos) + len(neg) == 5


def test_tssb2_sizes():
    for d in (0, 1, 10, 1000, 10 ** 5, 10 ** 7):
        s = Tssb2Profile.initial_size(d)
        assert Tssb2Profile.valid_size(s) and s >= min(2 * d, Tssb2Profile.max_size)
    assert GnunetProfile.initial_size(10) == 37 and GnunetProfile.initial_size(100) == 201
