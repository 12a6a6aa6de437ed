from tinyssb import frames, hotloops
from tinyssb.aggregate import Aggregate
from tinyssb.errors import WireError
from support import Rand


def test_crc32_check_value():
    assert hotloops.crc32(b"123456789") == 0xCBF43926
    assert hotloops.crc32_plain(b"123456789") == 0xCBF43926


def test_fast_and_plain_loops_agree():
    r = Rand(7)
    for n in (0, 1, 7, 32, 124, 300):
        data = r.bytes(n)
        assert hotloops.crc32(data) == hotloops.crc32_plain(data)
        half = n // 2
        assert hotloops.crc32(data[half:], hotloops.crc32(data[:half])) == hotloops.crc32(data)
    for _ in range(20):
        a, b = r.bytes(32), r.bytes(32)
        x, y = bytearray(a), bytearray(a)
        hotloops.xor_into(x, b)
        hotloops.xor_into_plain(y, b)
        assert x == y
        assert hotloops.xor_bytes(hotloops.xor_bytes(a, b), b) == a


def test_frame_roundtrip_and_errors():
    pkt = bytes(range(100))
    f = frames.add_crc(pkt)
    assert len(f) == 104 and f[-4:] == hotloops.crc32(pkt).to_bytes(4, "big")
    assert frames.strip_crc(f) == pkt
    bad = bytearray(f)
    bad[3] ^= 1
    for frame, reason in ((bytes(bad), "bad_crc"), (f[:11], "frame_too_short"),
                          (bytes(128), "frame_too_long")):
        try:
            frames.strip_crc(frame)
            assert False
        except WireError as e:
            assert e.reason == reason


def test_aggregate_union_minus_single():
    r = Rand(3)
    keys = [r.bytes(32) for _ in range(10)]
    a = Aggregate.of(32, keys[:6])
    b = Aggregate.of(32, keys[6:])
    u = a.union(b)
    assert u == Aggregate.of(32, keys)
    assert u.minus(b) == a
    assert Aggregate.of(32, keys[:1]).single() == keys[0]
    assert Aggregate.of(32, []).is_empty()
    one = Aggregate.of(32, keys[:1])
    one.remove(keys[0])
    assert one.is_empty()
