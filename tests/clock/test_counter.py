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


# -- participation by timestamp, temporary hold, plans ------------------------------------

def test_participation_read_by_timestamp_not_arrival_order():
    ss, init, st = setup()
    s = ss[0]
    leave = C.participate(s, init.eid, [init.eid], T0 + 500, active=False)
    back = C.participate(s, init.eid, [init.eid], T0 + 900, active=True)
    a, b = C.CounterState(init), C.CounterState(init)
    for x in list(st.msgs.values())[1:]:
        a.ingest(x, None)
        b.ingest(x, None)
    a.ingest(leave, None)
    a.ingest(back, None)
    b.ingest(back, None)
    b.ingest(leave, None)
    pub = crypto.publickey(s)
    for x in (a, b):
        assert x.participant_at(pub, T0 + 100) and not x.participant_at(pub, T0 + 600)
        assert x.participant_at(pub, T0 + 900) and x.participants[pub]


def test_increment_after_leaving_is_not_participant():
    ss, init, st = setup()
    s = chosen(st, init.eid, ss)
    st.ingest(C.participate(s, init.eid, [init.eid], T0 + 500, active=False), None)
    ev = C.make_increment(s, st, [init.eid], chain(T0 + 1), T0 + T + 5)
    expect_block(st, ev, T0 + 2 * T, "not_participant")


def test_missing_join_waits_unless_final():
    ss, init, _ = setup()
    st = C.CounterState(init)
    s = None
    for cand in ss:
        if C.select(st.hashes[init.eid], crypto.publickey(cand), 2):
            s = cand
            break
    ev = C.make_increment(s, st, [init.eid], chain(T0 + 1), T0 + T + 5)
    with pytest.raises(ClockError) as ei:
        st.ingest(ev, T0 + 2 * T, final=False)
    assert ei.value.reason == "unknown_participant" and not st.blocked
    st.ingest(C.participate(s, init.eid, [init.eid], T0 + 1), None)
    assert st.ingest(ev, T0 + 2 * T, final=False) == "increment"


def test_check_verifies_without_recording_or_blocking():
    ss, init, st = setup()
    bad = C.make_increment(chosen(st, init.eid, ss, want=False), st, [init.eid], chain(T0 + 1),
                           T0 + T + 5)
    with pytest.raises(CounterError) as ei:
        st.check(bad, T0 + 2 * T)
    assert ei.value.reason == "not_selected" and ei.value.author == bad.author
    assert not st.blocked and bad.eid not in st.msgs
    good = C.make_increment(chosen(st, init.eid, ss), st, [init.eid], chain(T0 + 1), T0 + T + 5)
    assert st.check(good, T0 + 2 * T) == "increment" and good.eid not in st.msgs


def test_holds_spares_increments_and_late_joiners():
    ss, init, st = setup()
    s = chosen(st, init.eid, ss)
    late = C.participate(s, init.eid, [init.eid], T0 + T + 1)
    early = C.participate(s, init.eid, [init.eid], T0 + T - 1)
    assert st.holds(late) and not st.holds(early)
    inc = C.make_increment(s, st, [init.eid], chain(T0 + 1), T0 + T + 5)
    assert not st.holds(inc)                       # the designated increment must travel
    newcomer = hashlib.sha256(b"newcomer").digest()
    st.ingest(C.participate(newcomer, init.eid, [init.eid], T0 + T + 2), None)
    # designated or not, it joined after the earliest next increment: never held for it
    assert not st.held(crypto.publickey(newcomer), T0 + 5 * T)
    st.ingest(inc, T0 + 2 * T)                      # frontier moves: the hold is re-read
    assert not st.holds(late)


def test_plan_names_the_rule():
    ss, init, st = setup(max_range=0)
    outsider = hashlib.sha256(b"nobody").digest()
    for seed, reason in ((outsider, "not_participant"),
                         (chosen(st, init.eid, ss, want=False), "not_selected"),
                         (chosen(st, init.eid, ss), "range")):
        with pytest.raises(CounterError) as ei:
            st.plan(crypto.publickey(seed), T0 + 100)
        assert ei.value.reason == reason and reason in C.RULES
    ss, init, st = setup()
    s = chosen(st, init.eid, ss)
    refs, earliest = st.plan(crypto.publickey(s), T0 + 100)
    assert refs == [init.eid] and earliest == T0 + T
    st.blocked[crypto.publickey(s)] = "bad_chain"
    with pytest.raises(CounterError) as ei:
        st.plan(crypto.publickey(s), T0 + 100)
    assert ei.value.reason == "blocked"


# -- persistence ---------------------------------------------------------------------------

def _repo(path):
    import sqlite3
    from tssb.clock.repo import ThreadRepo
    return ThreadRepo(sqlite3.connect(path), 128, 4)


def test_blocks_persist_across_reopening(tmp_path):
    ss, init, st = setup()
    path = str(tmp_path / "c.db")
    r = _repo(path)
    for x in st.msgs.values():
        r.post(x)
    bad = C.make_increment(chosen(st, init.eid, ss, want=False), st, [init.eid], chain(T0 + 1),
                           T0 + T + 5)
    with pytest.raises(ClockError) as ei:
        r.admit(bad)
    assert ei.value.reason == "rejected:not_selected"
    r.db.close()
    r = _repo(path)
    assert r.counter(init.eid).blocked == {bad.author: "not_selected"}
    (author, reason, eid, ts), = r.blocked(init.eid)
    assert (author, reason, eid) == (bad.author, "not_selected", bad.eid) and ts > 0
    later = C.participate(_seed_of(bad.author), init.eid, [init.eid], T0 + 2 * T)
    with pytest.raises(ClockError) as ei:
        r.admit(later)
    assert ei.value.reason == "rejected:blocked"
    assert r.blocked(b"\x00" * 20) == []           # per counter


def test_stored_invalid_message_rejected_on_rebuild(tmp_path):
    """A message stored unverified (older data) is left out and its author blocked."""
    ss, init, st = setup()
    r = _repo(str(tmp_path / "c.db"))
    for x in st.msgs.values():
        r.post(x)
    bad = C.make_increment(chosen(st, init.eid, ss, want=False), st, [init.eid], chain(T0 + 1),
                           T0 + T + 5)
    r._insert(bad)                                  # as an unverifying version would have
    assert r.counter(init.eid).blocked == {bad.author: "not_selected"}
    assert bad.eid not in r.load(init.eid) and [e.eid for e, _ in r.rejected(init.eid)] == [bad.eid]


def test_old_blocked_table_layout_replaced(tmp_path):
    import sqlite3
    path = str(tmp_path / "old.db")
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE clock_blocked (author BLOB PRIMARY KEY, reason TEXT NOT NULL, eid BLOB)")
    db.commit()
    r = _repo(path)
    cols = [c[1] for c in r.db.execute("PRAGMA table_info(clock_blocked)")]
    assert cols[:2] == ["root", "author"] and "ts" in cols


# -- `tssb counter` --------------------------------------------------------------------------

def _tssb(capsys, home, *argv):
    from tssb import cli
    with pytest.raises(SystemExit) as e:
        cli.main(["--init", "counter", "--home", home] + list(argv))
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_cli_increment_refusals_and_show_lists_blocks(tmp_path, capsys):
    home = str(tmp_path / "h")
    code, out, _ = _tssb(capsys, home, "init", "--delay-ms", "3600000", "--ratio", "1")
    assert code == 0
    root = out.split()[0]
    code, _, err = _tssb(capsys, home, "increment", root)
    assert code == 1 and "not_participant (Rule 1" in err
    assert _tssb(capsys, home, "join", root)[0] == 0
    # R = 1 designates everyone, but T = 1 h after the Initiate has not passed: refused
    # before building the chain, saying when it becomes allowed.
    code, _, err = _tssb(capsys, home, "increment", root)
    assert code == 1 and "too_early (Rule 1/2: minimum delay" in err and "allowed from" in err
    # an offender's increment reaches us: blocked, and `show` says so after reopening
    from tssb.context import Context
    ctx = Context.open(home)
    r = _repo_ctx(ctx)
    st = r.counter(bytes.fromhex(root))
    off = hashlib.sha256(b"offender").digest()
    r.admit(C.participate(off, st.root, [st.root], st.init.ts + 1))
    r.save(C.participate(off, st.root, [st.root], st.init.ts + 1))
    with pytest.raises(ClockError):
        r.admit(C.make_increment(off, r.counter(st.root), [st.root], [st.init.ts + 1] * LINKS,
                                 st.init.ts + 1))
    ctx.close()
    code, out, _ = _tssb(capsys, home, "show", root)
    assert code == 0 and "blocked=1" in out
    assert "blocked %s reason=" % crypto.publickey(off).hex() in out


def _repo_ctx(ctx):
    from tssb.clock.repo import ThreadRepo
    from tssb.clock.service import store_db
    return ThreadRepo(store_db(ctx.store), 128, 4)


def test_cli_increment_succeeds_after_waiting(tmp_path, capsys):
    home = str(tmp_path / "h")
    root = _tssb(capsys, home, "init", "--delay-ms", "40", "--links", "2", "--ratio", "1")[1].split()[0]
    assert _tssb(capsys, home, "join", root)[0] == 0
    code, out, err = _tssb(capsys, home, "increment", root, "--wait")
    assert code == 0, err
    # One increment raises the incrementer's k = 2 cells of n = 64; both indices come
    # from its (random) key and coincide for about 1 key in 64: the reading is then 2.
    from tssb.clock.bloom import rof
    from tssb.context import Context
    ctx = Context.open(home)
    cells = rof(ctx.identity.public, 64, 2)
    ctx.close()
    want = max(cells.count(i) for i in cells)
    assert "counter now %d" % want in out
    code, out, _ = _tssb(capsys, home, "show", root)
    assert "counter=%d increments=1 participants=1 blocked=0" % want in out
