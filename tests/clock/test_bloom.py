import math
import random

import pytest
from hypothesis import given, settings, strategies as st

from tssb.clock import bloom as B
from tssb.clock.bloom import BloomClock
from tssb.clock.errors import ClockError

N, K = 32, 3
cells = st.lists(st.integers(0, 40), min_size=N, max_size=N).map(lambda c: BloomClock(N, K, c))


@given(cells, cells)
def test_merge_commutative(a, b):
    assert a.merge(b) == b.merge(a)


@given(cells, cells, cells)
def test_merge_associative(a, b, c):
    assert a.merge(b).merge(c) == a.merge(b.merge(c))


@given(cells)
def test_merge_idempotent(a):
    assert a.merge(a) == a


@given(cells, cells)
def test_merge_dominates_both(a, b):
    m = a.merge(b)
    assert a <= m and b <= m


@settings(max_examples=60)
@given(st.data())
def test_happened_before_never_after_or_concurrent(data):
    """Random histories of 4 processes exchanging messages: for every pair of events
    where a happened before b, compare(a, b) is before or equal, never after/concurrent."""
    rng = random.Random(data.draw(st.integers(0, 2 ** 32)))
    procs = [BloomClock(8, 2) for _ in range(4)]  # tiny clock: many collisions
    hist = []   # (clock, set of event ids in its causal past incl. itself)
    past = [set() for _ in range(4)]
    for step in range(40):
        p = rng.randrange(4)
        if rng.random() < 0.3:
            q = rng.randrange(4)
            procs[p] = procs[p].merge(procs[q])
            past[p] = past[p] | past[q]
        procs[p] = procs[p].copy().increment(rng.randbytes(8))
        past[p] = past[p] | {step}
        hist.append((procs[p].copy(), frozenset(past[p]), step))
    for ca, pa, sa in hist:
        for cb, pb, sb in hist:
            if sa in pb:  # a happened before (or is) b
                assert ca.compare(cb) in (B.BEFORE, B.EQUAL)


def test_compare_cases():
    a = BloomClock(8, 1).increment(b"x")
    b = a.copy().increment(b"y")
    assert a.compare(b) == B.BEFORE and b.compare(a) == B.AFTER and a.compare(a.copy()) == B.EQUAL
    c = BloomClock(8, 1, [0] * 7 + [5])
    d = BloomClock(8, 1, [5] + [0] * 7)
    assert c.compare(d) == B.CONCURRENT


def test_events_between_exact_on_chain_and_distance():
    a = BloomClock(64, 4)
    for i in range(5):
        a.increment(b"a%d" % i)
    b = a.copy()
    for i in range(7):
        b.increment(b"b%d" % i)
    assert a.events_between(b) == 7
    assert b.events_between(a) == 0
    assert a.distance(b) == 28


def test_remove_tracked():
    c = BloomClock(16, 3, track=True)
    before = c.copy()
    c.increment(b"e1").increment(b"e2")
    c.remove(b"e1")
    assert c == BloomClock(16, 3).increment(b"e2")
    c.remove(b"e2")
    assert c == before
    with pytest.raises(ClockError) as ei:
        c.remove(b"e2")
    assert ei.value.reason == "not_tracked"


@given(st.lists(st.integers(0, 2 ** 32 - 1), min_size=N, max_size=N),
       st.sampled_from([None, B.FMT_DENSE32, B.FMT_SPARSE]))
def test_encode_roundtrip(cs, fmt):
    c = BloomClock(N, K, cs)
    assert BloomClock.decode(c.encode(fmt), K) == c


@pytest.mark.parametrize("fmt", [B.FMT_DENSE4, B.FMT_DENSE8, B.FMT_DENSE16, B.FMT_DENSE32, B.FMT_SPARSE])
def test_each_format_roundtrip(fmt):
    c = BloomClock(33, 2, [100 + (i % 7) for i in range(33)])
    data = c.encode(fmt)
    assert data[0] == fmt
    assert BloomClock.decode(data, 2) == c


def test_auto_format_picks_shortest():
    sparse = BloomClock(128, 4).increment(b"one")
    assert sparse.encode()[0] == B.FMT_SPARSE
    dense = BloomClock(128, 4, [1000 + i % 10 for i in range(128)])
    enc = dense.encode()
    assert enc[0] == B.FMT_DENSE4 and len(enc) == 1 + 2 + 2 + 64   # N=128 and base 1000: 2-byte varints


def test_format_too_small_refused():
    with pytest.raises(ClockError):
        BloomClock(4, 1, [0, 0, 0, 16]).encode(B.FMT_DENSE4)


@pytest.mark.parametrize("data,reason", [
    (b"", "short"),
    (bytes([0x99, 4, 0]), "format"),
    (bytes([B.FMT_DENSE8, 4, 0, 1, 2]), "short"),
    (bytes([B.FMT_DENSE8, 4, 0, 1, 2, 3, 4, 5]), "trailing"),
    (bytes([B.FMT_SPARSE, 4, 0, 2, 1, 1, 1, 1]), "sparse_order"),
    (bytes([B.FMT_SPARSE, 4, 0, 1, 9, 1]), "range"),
    (bytes([B.FMT_DENSE8, 0x80, 0x40, 0]), "range"),       # N = 8192 > MAX_N
    (bytes([B.FMT_DENSE32, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 1]), "range"),
])
def test_decode_rejects(data, reason):
    with pytest.raises(ClockError) as ei:
        BloomClock.decode(data, 1)
    assert ei.value.reason == reason


def test_params_mismatch():
    with pytest.raises(ClockError):
        BloomClock(8, 1) <= BloomClock(16, 1)


@pytest.mark.parametrize("n,k,ny,nz", [(16, 2, 2, 20), (32, 3, 3, 40)])
def test_false_positive_rate_matches_formula(n, k, ny, nz):
    """Concurrent histories y (ny events) and z (nz events): the measured rate of the
    false answer "y before z" agrees with the Kshemkalyani-Misra formula within 4 standard
    errors, and Ramabaja's Bloom-filter estimate (which ignores cell counts > 1) bounds it
    from above."""
    rng = random.Random(7)
    trials = 1500
    hits = 0
    f_km = f_ra = 0.0
    for _ in range(trials):
        y, z = BloomClock(n, k), BloomClock(n, k)
        for _ in range(ny):
            y.increment(rng.randbytes(20))
        for _ in range(nz):
            z.increment(rng.randbytes(20))
        hits += y <= z
        f_km += y.fp_kshemkalyani(z)
        f_ra += y.fp_ramabaja(z)
    measured = hits / trials
    p_km, p_ra = f_km / trials, f_ra / trials
    se = math.sqrt(p_km * (1 - p_km) / trials)
    assert abs(measured - p_km) < 4 * se + 0.01
    assert measured < p_ra + 4 * se
    # the deployed ordering of the same formula is off by orders of magnitude
    assert BloomClock(n, k).increment(b"a").fp_ramabaja(
        BloomClock(n, k, [3] * n), order="apollo") < 1e-6
