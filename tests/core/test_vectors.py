from tinyssb import bipf, vectors
from tinyssb.errors import WireError

DMX = bytes(range(7))


def test_want_roundtrip_no_padding():
    p = vectors.encode_want(DMX, 3, [302, 104, 27])
    assert p[:7] == DMX and len(p) == 7 + len(bipf.encode([3, 302, 104, 27]))
    assert vectors.decode_want(p) == (3, [302, 104, 27])


def test_want_from_esp32_reads_unsigned():
    assert vectors.decode_want(DMX + bytes.fromhex("240a000ac8")) == (0, [200])


def test_chnk_roundtrip_and_esp32_form():
    t = [(1, 5, 0), (2, 130, 3)]
    assert vectors.decode_chnk(vectors.encode_chnk(DMX, t)) == t
    esp = DMX + bytes.fromhex("74340a010a050a00340a020a820a03")
    assert vectors.decode_chnk(esp) == t


def test_bad_vectors():
    for payload, fn in ((bipf.encode([]), vectors.decode_want),
                        (bipf.encode([1, "x"]), vectors.decode_want),
                        (bipf.encode({"a": 1}), vectors.decode_want),
                        (bipf.encode([[1, 2]]), vectors.decode_chnk),
                        (bipf.encode([[1, 2, b"x"]]), vectors.decode_chnk),
                        (bipf.encode(5), vectors.decode_chnk),
                        (b"\x24\x0a", vectors.decode_want)):
        try:
            fn(DMX + payload)
            assert False, payload
        except WireError:
            pass


def test_plan_want_budget_and_rotation():
    big = lambda i: 2 ** 31 - 1 - i  # 5 bytes each: the worst case
    seqs, nxt = vectors.plan_want(100, 0, big)
    assert 0 < len(seqs) < 100
    assert len(vectors.encode_want(DMX, 99, seqs)) <= 120
    # a truncated vector continues where it stopped: every feed is asked in turn
    seen = set()
    offs = 0
    for _ in range(6):
        seqs, new = vectors.plan_want(100, offs, big)
        for i in range(len(seqs)):
            seen.add((offs + i) % 100)
        offs = new
    assert len(seen) == 100
    # all fit: the start advances by one per round
    seqs, nxt = vectors.plan_want(5, 2, lambda i: i + 1)
    assert seqs == [3, 4, 5, 1, 2] and nxt == 3


def test_plan_chnk_budget_and_per_feed_limit():
    chains = lambda i: [(s, 0) for s in range(1, 9)]
    trip = vectors.plan_chnk(3, 1, chains)
    assert trip[0] == (1, 1, 0)
    assert sum(1 for t in trip if t[0] == 1) == vectors.MAX_CHAINS_PER_FEED
    big = lambda i: [(2 ** 31 - s, 2 ** 20) for s in range(1, 5)]
    trip = vectors.plan_chnk(50, 0, big)
    assert len(vectors.encode_chnk(DMX, trip)) <= 120


def test_round_robin_is_bounded_and_fair():
    data = {"a": 10, "b": 1, "c": 10}
    fetch = lambda k, i: (k, i) if i < data[k] else None
    out = vectors.round_robin([("a", 0), ("b", 0), ("c", 5)], fetch, 5)
    assert out == [("a", 0), ("b", 0), ("c", 5), ("a", 1), ("c", 6)]
    assert vectors.round_robin([("a", 0)], fetch, 100) == [("a", i) for i in range(10)]
