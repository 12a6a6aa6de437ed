import hashlib

import pytest

from tssb.clock import counter as C
from tssb.clock import crypto
from tssb.clock.errors import ClockError, CounterError

T = 1000        # minimum delay between increments (ms)
LINKS = 4
T0 = 1_000_000


def seeds(n):
    return [hashlib.sha256(b"p%d" % i).digest() for i in range(n)]


def setup(max_range=50, ratio=2):
    ss = seeds(12)
    params = C.Params(64, 2, max_range, T, ratio, LINKS)
    # An Initiate whose hash is divisible by R would designate everybody; pick an
    # initiator for which SELECT really selects (fixed data, no randomness).
    for i in range(64):
        init = C.initiate(hashlib.sha256(b"init%d" % i).digest(), params, T0)
        if int.from_bytes(hashlib.sha256(init.raw).digest(), "big") % ratio:
            break
    st = C.CounterState(init)
    for i, s in enumerate(ss):
        st.ingest(C.participate(s, init.eid, [init.eid], T0 + 1 + i), T0 + 100)
    return ss, init, st


def chain(start):
    return [start + i * (T // LINKS) for i in range(LINKS)]


def chosen(st, ref, ss, want=True):
    """A participant SELECT does (want=True) or does not designate after `ref`."""
    h = st.hashes[ref]
    for s in ss:
        if C.select(h, crypto.publickey(s), st.params.ratio) == want:
            return s
    pytest.skip("no such participant for this hash")


def test_select_formula():
    h = (6).to_bytes(32, "big")
    assert C.select(h, (5).to_bytes(32, "big"), 3)
    assert not C.select(h, (5).to_bytes(32, "big"), 4)


def test_valid_chain_of_increments_counts_up():
    ss, init, st = setup()
    ref, ts = init.eid, T0
    for step in range(3):
        s = chosen(st, ref, ss)
        ev = C.make_increment(s, st, [ref], chain(ts + 1), ts + T + 10)
        assert st.ingest(ev, ts + T + 10) == "increment"
        ref, ts = ev.eid, ts + T + 10
    assert 1 <= st.value() <= 3    # three increments; some may hit other cells
    assert st.top() == [ref]
    assert st.min_next_ts() == ts + T


def test_join_of_two_branches():
    ss, init, st = setup()
    designated = [s for s in ss if C.select(st.hashes[init.eid], crypto.publickey(s), 2)]
    if len(designated) < 2:
        pytest.skip("need two designated incrementers")
    a = C.make_increment(designated[0], st, [init.eid], chain(T0 + 1), T0 + T + 5)
    b = C.make_increment(designated[1], st, [init.eid], chain(T0 + 2), T0 + T + 6)
    st.ingest(a, T0 + 2 * T)
    st.ingest(b, T0 + 2 * T)
    s = None
    for cand in ss:
        if any(C.select(st.hashes[x], crypto.publickey(cand), 2) for x in (a.eid, b.eid)):
            s = cand
            break
    j = C.make_increment(s, st, [a.eid, b.eid], chain(T0 + T + 6), T0 + 2 * T + 10)
    st.ingest(j, T0 + 3 * T)
    assert st.stamps[a.eid] <= st.stamps[j.eid] and st.stamps[b.eid] <= st.stamps[j.eid]


def expect_block(st, ev, now, reason):
    with pytest.raises(CounterError) as ei:
        st.ingest(ev, now)
    assert ei.value.reason == reason
    assert ev.author in st.blocked
    with pytest.raises(CounterError) as ei:   # blocked definitively
        st.ingest(C.participate(_seed_of(ev.author), st.root, [st.root], now), now)
    assert ei.value.reason == "blocked"


_SEEDS = {crypto.publickey(s): s for s in seeds(12)}


def _seed_of(pub):
    return _SEEDS[pub]


def test_wrong_select_rejected():
    ss, init, st = setup()
    s = chosen(st, init.eid, ss, want=False)
    ev = C.make_increment(s, st, [init.eid], chain(T0 + 1), T0 + T + 5)
    expect_block(st, ev, T0 + 2 * T, "not_selected")


def test_too_early_rejected():
    ss, init, st = setup()
    s = chosen(st, init.eid, ss)
    ev = C.make_increment(s, st, [init.eid], [T0 + 1 + i * (T // LINKS) for i in range(LINKS)],
                          T0 + T - 1)
    expect_block(st, ev, T0 + 2 * T, "too_early")


def test_bad_chain_rejected():
    ss, init, st = setup()
    s = chosen(st, init.eid, ss)
    good = chain(T0 + 1)
    for bad in ([T0 + 1, T0 + 2, T0 + 3, T0 + 4],         # gaps shorter than T / links
                good[:-1],                                 # too few links
                [T0 - 5] + good[1:]):                      # starts before the reference
        st2 = C.CounterState(init)
        for x in list(st.msgs.values())[1:]:
            st2.ingest(x, T0 + 100)
        ev = C.make_increment(s, st2, [init.eid], bad, T0 + T + 5)
        expect_block(st2, ev, T0 + 2 * T, "bad_chain")
    # a tampered final hash (signature re-made by the author over the bad body)
    from tssb.clock import events as E
    ev = C.make_increment(s, st, [init.eid], good, T0 + T + 5)
    body = ev.body[:-32] + bytes(32)
    forged = E.make_signed_event(s, init.eid, ev.prevs, ev.ts, body)
    expect_block(st, forged, T0 + 2 * T, "bad_chain")


def test_range_exceeded_rejected():
    ss, init, st = setup(max_range=0)
    s = chosen(st, init.eid, ss)
    ev = C.make_increment(s, st, [init.eid], chain(T0 + 1), T0 + T + 5)
    expect_block(st, ev, T0 + 2 * T, "range")


def test_bad_stamp_and_future_and_non_participant():
    from tssb.clock import events as E
    ss, init, st = setup()
    s = chosen(st, init.eid, ss)
    ev = C.make_increment(s, st, [init.eid], chain(T0 + 1), T0 + T + 5)
    stamp = st.expected_stamp([init.eid], crypto.publickey(s))
    stamp.cells[0] += 1
    body = bytes([C.T_INCR]) + stamp.encode() + ev.body[1 + len(st.expected_stamp(
        [init.eid], crypto.publickey(s)).encode()):]
    expect_block(st, E.make_signed_event(s, init.eid, ev.prevs, ev.ts, body), T0 + 2 * T, "bad_stamp")
    ss, init, st = setup()
    s = chosen(st, init.eid, ss)
    ev = C.make_increment(s, st, [init.eid], chain(T0 + 1), T0 + 100 * T)
    expect_block(st, ev, T0 + 2 * T, "future")
    outsider = hashlib.sha256(b"outsider").digest()
    _SEEDS[crypto.publickey(outsider)] = outsider
    st = C.CounterState(init)
    if not C.select(st.hashes[init.eid], crypto.publickey(outsider), 2):
        return
    ev = C.make_increment(outsider, st, [init.eid], chain(T0 + 1), T0 + T + 5)
    expect_block(st, ev, T0 + 2 * T, "not_participant")


def test_unknown_reference_is_not_blocking():
    ss, init, st = setup()
    other = C.CounterState(init)
    for x in list(st.msgs.values())[1:]:
        other.ingest(x, T0 + 100)
    s = chosen(st, init.eid, ss)
    first = C.make_increment(s, other, [init.eid], chain(T0 + 1), T0 + T + 5)
    other.ingest(first, T0 + 2 * T)
    s2 = chosen(other, first.eid, ss)
    nxt = C.make_increment(s2, other, [first.eid], chain(T0 + T + 6), T0 + 2 * T + 10)
    with pytest.raises(ClockError) as ei:
        st.ingest(nxt, T0 + 3 * T)
    assert ei.value.reason == "unknown_ref" and not st.blocked


def test_held_designated_incrementer():
    ss, init, st = setup()
    s = chosen(st, init.eid, ss)
    pub = crypto.publickey(s)
    assert st.held(pub, T0 + T + 1) and not st.held(pub, T0 + T - 1)
    other = chosen(st, init.eid, ss, want=False)
    assert not st.held(crypto.publickey(other), T0 + 10 * T)
