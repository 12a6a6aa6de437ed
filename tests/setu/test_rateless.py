"""The rateless SETU profile: union property over sizes and difference shapes, the numpy prefix
against the shared module, bounds against a malicious peer, persistent state, `tssb sync`."""
import contextlib
import random

import pytest
from hypothesis import given, settings, strategies as st

from tinyssb import codedsym
from tssb.setu import constants as C
from tssb.setu import rateless as RL
from tssb.setu.errors import SetuError
from tssb.setu.machine import Config, Reconciler
from tssb.setu.rateless_prefix import CODEC, RatelessPrefix

from helpers import make_feed as _feed, make_sets, pump, served_homes, tssb_cli

RATELESS = Config(profile_id=C.PROFILE_RATELESS)


def rl_sync(A, B, cfg_a=None, cfg_b=None, tamper=None):
    a = Reconciler(A, True, cfg_a or RATELESS)
    b = Reconciler(B, False, cfg_b or Config())
    pump(a, b, tamper)
    return a, b


def _spread_sets(common, a_only, b_only, seed):
    """Like make_sets, but the differing elements are inserted first, at the old end of the
    kept key order (no search may rely on newest-first order)."""
    r = random.Random(seed)
    a_extra = [r.randbytes(24) for _ in range(a_only)]
    b_extra = [r.randbytes(24) for _ in range(b_only)]
    both = [r.randbytes(24) for _ in range(common)]
    from tssb.setu.setstate import ElementSet
    A, B = ElementSet(), ElementSet()
    for e in a_extra:
        A.add(e)
    for e in b_extra:
        B.add(e)
    for e in both:
        A.add(e)
        B.add(e)
    return A, B


def assert_union(A, B, a, b):
    assert a.finished and b.finished
    assert A.checksum == B.checksum and set(A.elements) == set(B.elements)


@settings(max_examples=25, deadline=None)
@given(common=st.integers(0, 300), a_only=st.integers(0, 60), b_only=st.integers(0, 60),
       seed=st.integers(0, 10 ** 6))
def test_union_property(common, a_only, b_only, seed):
    A, B = make_sets(common, a_only, b_only, seed)
    want = set(A.elements) | set(B.elements)
    a, b = rl_sync(A, B)
    assert_union(A, B, a, b)
    assert set(A.elements) == want
    assert a.stats["profile"] == "rateless" and b.stats["profile"] == "rateless"


def test_elements_the_initiator_finds_from_the_residual_alone_are_taken():
    """A small one-sided difference: R answers with the residual of the first flight and
    no stream, I's own-key search finds its 18 elements, and R took them as more than a
    decode of what it sent could yield (2 x 0 streamed symbols + 16): `too many
    elements` (found by test_union_property). The residual counts as k1 symbols sent."""
    A, B = make_sets(78, 18, 0, seed=0)
    a, b = rl_sync(A, B)
    assert_union(A, B, a, b)
    assert b.stats["symbols_sent"] == 0 and b.stats["elements_recv"] == 18


@pytest.mark.parametrize("placement", [make_sets, _spread_sets])
@pytest.mark.parametrize("shape", [(0, 0, 0), (50, 0, 0), (0, 7, 0), (0, 0, 7), (200, 1, 0),
                                   (200, 0, 1), (500, 5, 5), (400, 60, 0), (400, 0, 60),
                                   (300, 150, 150), (20, 300, 0), (20, 0, 300)])
def test_difference_shapes(shape, placement):
    A, B = placement(*shape, seed=sum(shape))
    a, b = rl_sync(A, B)
    assert_union(A, B, a, b)
    d = shape[1] + shape[2]
    assert a.stats["elements_sent"] + b.stats["elements_sent"] == d


def test_first_flight_decodes_small_differences_in_one_or_two_round_trips():
    A, B = make_sets(1000, 0, 1, seed=3)
    a, b = rl_sync(A, B)
    assert_union(A, B, a, b)
    assert a.stats["symbols_recv"] == 0 and b.stats["symbols_sent"] == 0   # R decoded at once
    assert a.stats["rounds"] == 1 and b.stats["rounds"] == 1
    assert a.stats["round_trips"] == b.stats["round_trips"] == 1


def test_round_trips_counted_by_both_ends():
    A, B = make_sets(2000, 60, 60, seed=12)
    a, b = rl_sync(A, B)
    assert_union(A, B, a, b)
    assert a.stats["round_trips"] == b.stats["round_trips"] == (a.stats["flights"] + 1) // 2
    assert a.stats["flights"] in (3, 4)


def test_own_keys_free_a_stalled_first_flight():
    # Find sets whose first symbols stall the plain peeling; the responder's search of its
    # own keys must then finish the decode in the first flight.
    for seed in range(60):
        A, B = make_sets(400, 5, 5, seed=seed)
        dec = codedsym.Decoder(CODEC, B.rateless(RL.prefix_length(len(B))), 100, 100,
                               B.has_rateless_key)
        dec.add(0, A.rateless(RL.prefix_length(len(A))).encode(0, RL.FIRST_SYMBOLS))
        if not dec.done:
            break
    else:
        pytest.fail("no stalled first flight in 60 seeds")
    a, b = rl_sync(A, B)
    assert_union(A, B, a, b)
    assert b.stats["assisted"] > 0 and b.stats["symbols_sent"] == 0
    assert a.stats["round_trips"] == 2


@pytest.mark.parametrize("placement", [make_sets, _spread_sets])
def test_short_stream_recovered_by_the_own_key_search_in_two_round_trips(monkeypatch, placement):
    # Force the responder to stream about 1.0 symbol per difference (plain peeling needs
    # 1.35-1.7): the initiator's own-key search must finish the decode, no MORE exchange.
    monkeypatch.setattr(RL, "STREAM_FACTOR", 1.0)
    monkeypatch.setattr(RL, "STREAM_FACTOR_SMALL", 1.0)
    monkeypatch.setattr(RL, "estimate_difference", lambda obs, lo, hi: max(lo, 400))
    recovered = 0
    for seed in range(4):
        A, B = placement(3000, 200, 200, seed)
        a, b = rl_sync(A, B)
        assert_union(A, B, a, b)
        if a.stats["more_rounds"] == 0:
            assert a.stats["round_trips"] == 2 and a.stats["assisted"] > 0
            assert 0 < a.stats["search_tests"] <= RL.SEARCH_MAX_TESTS
            recovered += 1
    assert recovered >= 3


def test_search_budget_bounds_the_work_and_falls_back_to_more(monkeypatch):
    monkeypatch.setattr(RL, "STREAM_FACTOR", 1.0)
    monkeypatch.setattr(RL, "STREAM_FACTOR_SMALL", 1.0)
    monkeypatch.setattr(RL, "estimate_difference", lambda obs, lo, hi: max(lo, 400))
    A, B = make_sets(3000, 200, 200, seed=1)
    cfg = Config(profile_id=C.PROFILE_RATELESS, rl_search_tests=50)
    a, b = rl_sync(A, B, cfg)
    assert_union(A, B, a, b)
    assert a.stats["search_tests"] <= 50
    assert a.stats["more_rounds"] >= 1 and a.stats["round_trips"] == 3


def test_a_first_flight_stalled_on_a_few_keys_is_finished_by_the_initiator():
    # Two keys only I holds that map to the same first symbols stall every peeling and R's
    # search; R then sends its residual without a stream (one distinct value: 8 bytes) and
    # I's own-key search separates them: still 2 round trips, no MORE.
    seen = 0
    for seed in range(400):
        A, B = make_sets(600, 5, 5, seed=seed, size=32)
        a, b = rl_sync(A, B)
        assert_union(A, B, a, b)
        if b.stats["estimate"] is not None and b.stats["symbols_sent"] == 0:
            assert a.stats["round_trips"] == 2 and a.stats["more_rounds"] == 0
            assert a.stats["assisted"] > 0
            seen += 1
            if seen == 3:
                break
    assert seen == 3


def test_residual_packs_repeated_values_once_and_rejects_malformed_ones():
    z, v, w = bytes(8), b"\x01" * 8, b"\x02" * 8
    syms = [v, z, v, w, z, v]
    p = RL.pack_residual(0, syms)
    assert len(p) == 3 + 2 + 16            # start, count, nval, 6 x 2 bits, two values
    assert RL.unpack_residual(p, 64) == (0, b"".join(syms))
    assert RL.unpack_residual(RL.pack_residual(3, [z, z]), 64) == (3, bytes(16))
    every = [bytes([i]) * 8 for i in range(1, 22)]         # 21 values: references implied
    assert len(RL.pack_residual(0, every)) == 3 + 168
    assert RL.unpack_residual(RL.pack_residual(0, every), 64) == (0, b"".join(every))
    with pytest.raises(SetuError) as e:
        RL.unpack_residual(p, 5)                              # more symbols than allowed
    assert e.value.reason == "bad symbols"
    for bad in (p[:-1], p + b"\x00", RL._varint(0) + RL._varint(2) + RL._varint(3) + bytes(25),
                RL._varint(0) + RL._varint(2) + RL._varint(2) + b"\x03" + v + w):  # ref 3 of 2
        with pytest.raises(SetuError) as e:
            RL.unpack_residual(bad, 64)
        assert e.value.reason == "bad message"


def test_search_keeps_its_expected_false_keys_in_budget():
    # each test at index i passes by chance with 2^-24 x ~2 / (i + 2): the budget on that
    # sum bounds the tests, most of all at the first symbols
    A, B = make_sets(3000, 8, 8, seed=2)
    pa = A.rateless(RL.prefix_length(len(A)))
    pb = B.rateless(RL.prefix_length(len(B)))
    dec = codedsym.Decoder(CODEC, pb, 10 ** 5, 10 ** 5, B.has_rateless_key)
    dec.add(0, pa.encode(0, 8))
    assert not dec.done
    budget = 50 * 2.0 ** -24                   # 50 tests at index 0, or ~300 at index 10
    found, tests = RL.own_key_search(dec, pb, 10 ** 6, 0, max_false=budget)
    assert 0 < tests <= 50 * 5 * RL.SEARCH_SHARE_FLOOR   # 8 symbols: 2 / (i + 2) >= 0.2
    found, more = RL.own_key_search(dec, pb, 10 ** 6, 0)
    assert more > tests


def test_search_never_runs_below_its_reach():
    # far too few symbols for the difference: the search declines at once (no tests)
    A, B = make_sets(500, 100, 100, seed=3)
    pa = A.rateless(RL.prefix_length(len(A)))
    pb = B.rateless(RL.prefix_length(len(B)))
    dec = codedsym.Decoder(CODEC, pb, 10 ** 5, 10 ** 5, B.has_rateless_key)
    dec.add(0, pa.encode(0, 60))
    assert not dec.done
    assert RL.search_when_stalled(dec, pb, 10 ** 6, 200) == (0, 0)
    found, tests = RL.own_key_search(dec, pb, 7, 200)
    assert tests <= 7


def test_stuck_candidates_match_the_mapping():
    from tssb.setu.rateless_prefix import stuck_candidates
    import numpy as np
    r = random.Random(8)
    keys = [r.randbytes(5) for _ in range(300)]
    pre = RatelessPrefix(32)
    for k in keys:
        pre.add_key(k)
    pre.flush()
    nonzero = np.array([r.random() < 0.6 for _ in range(20)], dtype=bool)
    nonzero[0] = True
    want = [p for p, k in enumerate(keys) if all(nonzero[i] for i in codedsym.indices(k, 20))]
    items, seeds = pre.keys_items()
    assert list(stuck_candidates(items, seeds, nonzero)) == want


def test_difference_beyond_the_prefix_extends_it():
    A, B = make_sets(3000, 100, 100, seed=5)
    cfg = Config(profile_id=C.PROFILE_RATELESS, rl_prefix=64)
    a, b = rl_sync(A, B, cfg, Config(rl_prefix=64))
    assert_union(A, B, a, b)
    assert a.stats["prefix_extended"] or b.stats["prefix_extended"]


def test_difference_as_large_as_the_set_falls_back_to_keys():
    A, B = make_sets(10, 400, 0, seed=6)
    a, b = rl_sync(A, B)
    assert_union(A, B, a, b)
    assert b.stats["fallback"] == "keys" and a.stats["fallback"] == "keys"


def test_numpy_prefix_equals_shared_module_and_survives_serialising():
    r = random.Random(2)
    keys = [r.randbytes(5) for _ in range(700)]
    enc = codedsym.Encoder(CODEC, 300)
    pre = RatelessPrefix(100)
    for k in keys:
        enc.add(k)
        pre.add_key(k)
    pre.flush()
    pre.extend(300)
    assert pre.encode(0, 300) == enc.encode(0, 300)
    back = RatelessPrefix.from_bytes(pre.to_bytes())
    back.extend(500)
    enc.extend(500)
    assert back.encode(0, 500) == enc.encode(0, 500)
    with pytest.raises(ValueError):
        RatelessPrefix.from_bytes(pre.to_bytes()[:-1])


def test_estimate_is_near_the_difference():
    ests = []
    for seed in range(3):
        A, B = make_sets(2000, 150, 150, seed=seed)
        a, b = rl_sync(A, B)
        assert_union(A, B, a, b)
        ests.append(b.stats["estimate"])
    assert all(100 <= e <= 900 for e in ests), ests


def test_stream_size_lands_in_the_measured_window_from_both_tails_of_the_estimate():
    # A stream of m symbols passes (2 round trips, <= 2.0 x 32 d bytes) when it holds at least
    # ~1.1 d (d = 100) to 0.95 d (d = 1000) symbols and at most 3.69 d - 36 (docs/setu.md,
    # "What holds now"). The estimate's 1-99 % range lies within 0.6-1.75 d: streams sized
    # from both ends must land inside; the factor rises from 1.55 (d = 100, where the window
    # is narrowest) to 1.8 (d = 1000, where a short stream is the risk).
    k1 = RL.FIRST_SYMBOLS
    for d, need in ((100, 1.1), (300, 1.0), (1000, 0.95)):
        assert RL.stream_length(k1, int(0.6 * d)) >= need * d
        assert RL.stream_length(k1, int(1.75 * d)) <= 3.69 * d - 36
    assert RL.stream_length(k1, 184) <= 3.69 * 100 - 36        # the 99.9 % quantile at d = 100
    assert RL.stream_length(k1, 550) >= 0.95 * 1000            # ~the 0.2 % quantile at d = 1000
    sizes = [RL.stream_length(k1, e) for e in range(1, 5000, 7)]
    assert sizes == sorted(sizes)
    assert RL.stream_factor(50) == RL.STREAM_FACTOR_SMALL and RL.stream_factor(3000) == RL.STREAM_FACTOR


def test_responder_streams_what_the_rule_gives_for_its_estimate():
    A, B = make_sets(2000, 120, 120, seed=4)
    a, b = rl_sync(A, B)
    assert_union(A, B, a, b)
    est = b.stats["estimate"]
    assert b.stats["symbols_sent"] == RL.stream_length(RL.FIRST_SYMBOLS, est) - RL.FIRST_SYMBOLS


def test_one_sided_difference_is_never_underestimated():
    # |n_I - n_R| bounds the difference from below (exactly, when one side holds it all), so
    # the responder's stream never falls short of a one-sided difference
    for seed in range(6):
        A, B = make_sets(3000, 300, 0, seed=seed)
        a, b = rl_sync(A, B)
        assert_union(A, B, a, b)
        assert b.stats["estimate"] >= 300 and a.stats["more_rounds"] == 0
        A, B = make_sets(3000, 0, 300, seed=seed)
        a, b = rl_sync(A, B)
        assert_union(A, B, a, b)
        assert b.stats["estimate"] >= 300 and a.stats["more_rounds"] == 0


def test_gnunet_only_responder_refuses_the_profile():
    A, B = make_sets(20, 1, 1)
    b_cfg = Config(allowed_profiles=(C.PROFILE_GNUNET, C.PROFILE_TSSB2))
    with pytest.raises(SetuError) as e:
        rl_sync(A, B, RATELESS, b_cfg)
    assert e.value.reason == "profile not agreed"


# -- a malicious peer ---------------------------------------------------------------------

def _rl_msg(sections, flags=RL.FLAG_END):
    f = RL.Flight()
    for tag, payload in sections:
        f.add(tag, payload)
    return f.messages(flags)


def _responder_after_f1(common=100, a_only=0, b_only=0, seed=1, cfg_b=None):
    A, B = make_sets(common, a_only, b_only, seed)
    a = Reconciler(A, True, RATELESS)
    b = Reconciler(B, False, cfg_b or Config())
    return A, B, a, b, a.start()


def _reason(fn, *args):
    with pytest.raises(SetuError) as e:
        fn(*args)
    return e.value.reason


def test_symbols_that_never_decode_are_cut_off():
    A, B = make_sets(300, 40, 40, seed=9)
    r = random.Random(1)

    def junk(direction, msg):
        flags, secs = RL.parse(msg) if msg[2:4] == C.MSG_RL.to_bytes(2, "big") else (None, None)
        if direction != "ba" or flags is None:
            return [msg]
        out = []
        for tag, p in secs:
            if tag == RL.SEC_SYMBOLS:
                start, q = RL._read_varint(p, 0)
                p = p[:q] + r.randbytes(len(p) - q)
            out.append((tag, p))
        return _rl_msg(out, flags)

    a = Reconciler(A, True, RATELESS)
    b = Reconciler(B, False, Config())
    with pytest.raises(SetuError) as e:
        pump(a, b, junk)
    # I gives up after its MORE rounds, or R refuses a MORE past its bound: either way the
    # stream stays within a few times the sets' size
    assert e.value.reason in ("symbols never decode", "too many symbols")
    assert b.stats["symbols_sent"] <= 3 * (len(A) + len(B)) + 64
    # junk makes the initiator search its own keys: within one operation's budget
    assert a.stats["search_tests"] <= RATELESS.rl_search_tests


def _request(sections, flags=RL.FLAG_END, count=100, version=RL.RL_VERSION, app_id=None):
    """An RL_REQUEST as a peer may send it: any header fields, any sections."""
    tag = RL.app_tag(app_id or Config().app_id)
    first = _rl_msg(sections, flags)[0]
    return RL.M._frame(C.MSG_RL_REQUEST, bytes((version,)) + tag + RL._varint(count) + first[4:])


def _first_symbols(k=18):
    return (RL.SEC_SYMBOLS, RL._varint(0) + bytes(8 * k))


def test_request_is_one_message_with_the_first_flight():
    A, B, a, b, f1 = _responder_after_f1(100, 1, 0)
    assert len(f1) == 1 and f1[0][2:4] == C.MSG_RL_REQUEST.to_bytes(2, "big")
    version, tag, count, first = RL.parse_request(f1[0])
    assert (version, tag, count) == (RL.RL_VERSION, Config().app_id[:4], len(A))
    flags, secs = RL.parse(first)
    assert flags == RL.FLAG_END and [t for t, _ in secs] == [RL.SEC_SYMBOLS, RL.SEC_PROBES]
    assert len(f1[0]) == 1 + 4 + 1 + len(first)      # version, tag, 1-byte count: no app id
    b.receive(f1[0])
    assert b.stats["profile"] == "rateless" and b.stats["round_trips"] == 1


def test_request_header_checks():
    A, B, a, b, f1 = _responder_after_f1()
    assert _reason(b.receive, _request([_first_symbols()], count=1 << 30)) == "byzantine bound"
    A, B, a, b, f1 = _responder_after_f1()
    assert _reason(b.receive, _request([_first_symbols()], app_id=bytes(64))) \
        == "unknown application"
    A, B, a, b, f1 = _responder_after_f1()
    assert _reason(b.receive, _request([_first_symbols()], version=3)) == "profile not agreed"
    req = f1[0]
    for bad in (req[:9], req[:4] + b"\x01" + req[5:9] + b"\xff\xff\xff\xff\xff\xff",
                req[:-1], b"\x00\x09" + req[2:9]):
        A, B, a, b, _ = _responder_after_f1()
        assert _reason(b.receive, bad) == "bad message"


def test_absurd_sizes_and_counts():
    A, B, a, b, f1 = _responder_after_f1()
    big = [(RL.SEC_SYMBOLS, RL._varint(0) + bytes(8 * 300))]  # a first flight of 300 symbols
    assert _reason(b.receive, _request(big)) == "too many symbols"
    A, B, a, b, f1 = _responder_after_f1()
    probes = RL._varint(10 ** 6) + bytes(10)
    msg = _request([_first_symbols(), (RL.SEC_PROBES, probes)])
    assert _reason(b.receive, msg) == "too many probes"
    A, B, a, b, f1 = _responder_after_f1()
    msg = _request([_first_symbols(), (RL.SEC_PROBES, RL._varint(40) + bytes(3))])
    assert _reason(b.receive, msg) == "bad message"


def test_flood_and_malformed_messages():
    A, B, a, b, f1 = _responder_after_f1()
    b.receive(_request([(RL.SEC_WANTS, bytes(5))], 0))          # a first flight without END
    not_end = _rl_msg([(RL.SEC_WANTS, bytes(5))], 0)[0]
    with pytest.raises(SetuError) as e:
        for _ in range(5000):
            b.receive(not_end)
    assert e.value.reason == "flood"
    A, B, a, b, f1 = _responder_after_f1()
    b.receive(_request([(RL.SEC_WANTS, bytes(5))], 0))
    fat = _rl_msg([(RL.SEC_WANTS, bytes(5 * 13000))], 0)[0]        # 65 KB, never an END
    with pytest.raises(SetuError) as e:
        for _ in range(RL.MAX_FLIGHT_BYTES // len(fat) + 2):
            b.receive(fat)
    assert e.value.reason == "flood"
    A, B, a, b, f1 = _responder_after_f1()
    req = f1[0]
    body = 10                         # header, version, tag, 1-byte count: then the RL flags
    for bad, reason in ((req[:-1], "bad message"),
                        (req[:body] + b"\x80" + req[body + 1:], "bad message"),
                        (_request([]), "missing section"),
                        (_request([(RL.SEC_PROBES, b"\x00")]), "missing section"),
                        (req[:body + 1] + b"\x09\x00", "bad message"),
                        (req[:body + 1] + b"\x04\x05\x01", "bad message")):
        if bad[:2] != len(bad).to_bytes(2, "big"):
            bad = len(bad).to_bytes(2, "big") + bad[2:]
        c = Reconciler(B.copy(), False)
        assert _reason(c.receive, bad) == reason


def test_an_older_peers_operation_request_for_the_profile_is_refused():
    # before RL_REQUEST, the profile was proposed in the OPERATION_REQUEST's application
    # data and its first flight followed; that flight's layout differs, so it is refused
    # with the reason a responder without the profile gives
    from tssb.setu import messages as M
    A, B = make_sets(50, 1, 1)
    old = M.operation_request(len(A), Config().app_id, M.app_data(C.PROFILE_RATELESS, 0, 24))
    b = Reconciler(B, False, Config())
    assert _reason(b.receive, old) == "profile not agreed"


def test_unknown_and_duplicate_wants_and_unrequested_elements():
    # R decodes at once; its reply is replaced by wants we never offered / elements unasked.
    A, B, a, b, f1 = _responder_after_f1(100, 0, 2, seed=4)
    reply = _rl_msg([(RL.SEC_WANTS, b"\x01\x02\x03\x04\x05")], RL.FLAG_END | RL.FLAG_DONE)[0]
    assert _reason(a.receive, reply) == "unknown key wanted"
    A, B, a, b, f1 = _responder_after_f1(100, 2, 0, seed=4)
    key = next(iter(A.rateless_keys()))
    reply = _rl_msg([(RL.SEC_WANTS, key + key)], RL.FLAG_END | RL.FLAG_DONE)[0]
    assert _reason(a.receive, reply) == "duplicate want"
    A, B, a, b, f1 = _responder_after_f1(100, 0, 0, seed=4)
    known = next(iter(A.elements.values()))
    reply = _rl_msg([(RL.SEC_ELEMENTS, RL._varint(len(known)) + known)], RL.FLAG_END | RL.FLAG_DONE)[0]
    assert _reason(a.receive, reply) == "unrequested element"
    # the final elements must be exactly the wanted ones
    A, B, a, b, f1 = _responder_after_f1(100, 2, 0, seed=4)
    out = b.receive(f1[0])
    assert b.state == RL.R_WAIT_ELEMENTS and out
    stranger = random.Random(3).randbytes(24)
    final = _rl_msg([(RL.SEC_ELEMENTS, RL._varint(24) + stranger)], RL.FLAG_END | RL.FLAG_DONE)[0]
    assert _reason(b.receive, final) == "unrequested element"
    A, B, a, b, f1 = _responder_after_f1(100, 2, 0, seed=4)
    b.receive(f1[0])
    assert _reason(b.receive, _rl_msg([], RL.FLAG_END | RL.FLAG_DONE)[0]) == "wanted elements missing"


def test_too_many_unsolicited_elements_and_more_requests():
    A, B, a, b, f1 = _responder_after_f1(100, 0, 0, seed=8)
    r = random.Random(5)
    els = [r.randbytes(24) for _ in range(80)]     # more than a decode of 18 symbols yields
    reply = _rl_msg([(RL.SEC_ELEMENTS, RL._varint(24) + b"".join(els))], RL.FLAG_END | RL.FLAG_DONE)[0]
    assert _reason(a.receive, reply) == "too many elements"
    # a MORE beyond the responder's bounds
    A, B = make_sets(2000, 40, 40, seed=2)
    a = Reconciler(A, True, RATELESS)
    b = Reconciler(B, False, Config())
    f1 = a.start()
    f2 = b.receive(f1[0])
    assert b.state == RL.R_WAIT_F3 and f2 and b.stats["fallback"] is None   # streamed
    more = _rl_msg([(RL.SEC_MORE, RL._varint(10 ** 7))])[0]
    assert _reason(b.receive, more) == "too many symbols"


def test_more_after_a_key_list_is_refused():
    A, B = make_sets(10, 400, 0, seed=6)
    a = Reconciler(A, True, RATELESS)
    b = Reconciler(B, False, Config())
    f1 = a.start()
    b.receive(f1[0])
    assert b.stats["fallback"] == "keys"
    assert _reason(b.receive, _rl_msg([(RL.SEC_MORE, RL._varint(40))])[0]) == "unexpected section"


def test_unexpected_message_in_each_state():
    A, B, a, b, f1 = _responder_after_f1()
    rl = RL.parse_request(f1[0])[3]
    assert _reason(b.receive, rl) == "bad message"      # RL before the request: unknown type
    A, B, a, b, f1 = _responder_after_f1(100, 3, 3)
    b.receive(f1[0])
    assert b.state == RL.R_WAIT_ELEMENTS
    assert _reason(b.receive, f1[0]) == "unexpected message"   # a second request
    A, B, a, b, f1 = _responder_after_f1()
    assert _reason(b.receive, _request([_first_symbols(), (RL.SEC_MORE, RL._varint(40))])) \
        == "unexpected section"
    A, B, a, b, f1 = _responder_after_f1()
    b.receive(f1[0])
    assert b.state == "finished"
    assert _reason(b.receive, _rl_msg([(RL.SEC_MORE, RL._varint(40))])[0]) == "unexpected message"


# -- persistence and the store ------------------------------------------------------------

def _state(store):
    """What the kept state means: symbols, the keys' (item, seed) pairs, the key rows."""
    rows = sorted(store._q("SELECT key, fid, seq, cnr FROM setu_rl_keys"))
    p = RatelessPrefix.from_bytes(store._one("SELECT state FROM setu_rl_state")[0])
    return p.encode(0, p.m), sorted(zip(p._items.tolist(), p._seeds.tolist())), rows


def test_state_survives_a_restart_and_equals_a_rebuild(tmp_path):
    from tssb.setu.rateless_store import RatelessStoreSet
    from tssb.store import Store
    path = str(tmp_path / "s.sqlite")
    st = Store(path)
    _feed(st, b"a", 30)
    s1 = RatelessStoreSet(st)
    assert not s1.loaded and s1.refresh() == 30 and len(s1) == 30
    _feed(st, b"a", 5)
    _feed(st, b"b", 12)
    assert s1.refresh() == 17 and s1.refresh() == 0
    st.close()
    st = Store(path)
    s2 = RatelessStoreSet(st)
    assert s2.loaded and len(s2) == 47
    assert s2.prefix.encode(0, s2.prefix.m) == s1.prefix.encode(0, s1.prefix.m)
    kept = _state(st)
    for t in ("setu_rl_state", "setu_rl_keys", "setu_rl_cursor", "setu_rl_chains"):
        st.db.execute("DELETE FROM " + t)
    s3 = RatelessStoreSet(st)
    assert s3.refresh() == 47
    assert _state(st) == kept
    # a damaged blob is rebuilt, nothing lost
    st.db.execute("UPDATE setu_rl_state SET state = ?", (b"junk",))
    s4 = RatelessStoreSet(st)
    assert s4.refresh() == 47 and _state(st) == kept


def test_two_views_of_one_store_never_save_a_stale_prefix(tmp_path):
    from tssb.setu.rateless_store import RatelessStoreSet
    from tssb.store import Store
    st = Store(str(tmp_path / "s.sqlite"))
    _feed(st, b"a", 10)
    one = RatelessStoreSet(st)
    one.refresh()
    two = RatelessStoreSet(st)           # e.g. a second session of `tssb serve`
    _feed(st, b"a", 4)
    assert one.refresh() == 4
    _feed(st, b"b", 3)
    assert two.refresh() == 3 and len(two) == 17
    kept = _state(st)
    for t in ("setu_rl_state", "setu_rl_keys", "setu_rl_cursor", "setu_rl_chains"):
        st.db.execute("DELETE FROM " + t)
    RatelessStoreSet(st).refresh()
    assert _state(st) == kept


def test_responder_config_may_name_the_rateless_profile():
    A, B = make_sets(100, 3, 3, seed=2)
    a, b = rl_sync(A, B, RATELESS, RATELESS)
    assert_union(A, B, a, b)


def test_two_stores_reconcile_with_persistent_state():
    from tssb.setu.rateless_store import RatelessStoreSet, StoreSets
    from tssb.store import Store
    s1, s2 = Store(":memory:"), Store(":memory:")
    _feed(s1, b"one", 12)
    _feed(s2, b"two", 7)
    _feed(s1, b"both", 5)
    _feed(s2, b"both", 9)
    a = RatelessStoreSet(s1)
    a.refresh()
    sets = StoreSets(s2)
    ra = Reconciler(a, True, RATELESS)
    rb = Reconciler(sets, False, Config())
    pump(ra, rb)
    assert ra.finished and rb.finished
    a.refresh()
    sets.finish()
    for fid in set(s1.feeds()) | set(s2.feeds()):
        assert s1.front(fid) == s2.front(fid)
    assert len(a) == len(sets.used) == 12 + 7 + 9
    assert a.prefix.encode(0, 64) == sets.used.prefix.encode(0, 64)


# -- the command --------------------------------------------------------------------------

_tssb = tssb_cli


@contextlib.contextmanager
def _two_homes(tmp_path, capsys, posts_a, posts_b):
    """Homes a and b with these posts, b serving on loopback in a thread (a knows it as
    a peer). Yields (home a, context a, context b, b's address)."""
    with served_homes(tmp_path, capsys, posts_a, posts_b) as (ha, ca, cb, peer, _, _):
        yield ha, ca, cb, peer


def test_tssb_sync_rateless_end_to_end(tmp_path, capsys):
    posts_a = ["from a %d" % i for i in range(3)]
    with _two_homes(tmp_path, capsys, posts_a, ["from b"]) as (ha, ca, cb, peer):
        code, out, err = _tssb(capsys, "sync", "--home", ha, "--peer", peer)
        assert code == 0, err
        assert "profile rateless" in out and "symbols sent" in out
        code, out, err = _tssb(capsys, "sync", "--home", ha, "--peer", peer)   # nothing new: 0 new
        assert code == 0 and "(0 new since the kept state)" in err
    assert ca.store.front(cb.identity.public)[0] == 1
    assert cb.store.front(ca.identity.public)[0] == 3


def test_tssb_sync_answers_symbols_that_never_decode_with_tssb2(tmp_path, capsys, monkeypatch):
    # Symbols that never decode repeat for the same two sets (e.g. a false purity):
    # `tssb sync` says so in one line and reconciles with the estimator and IBFs instead.
    def never(self, flags, secs):
        raise SetuError(RL.NEVER_DECODES, "forced by the test")
    monkeypatch.setattr(RL.RatelessMachine, "_i_on_f2", never)

    with _two_homes(tmp_path, capsys, ["from a"], ["from b"]) as (ha, ca, cb, peer):
        code, out, err = _tssb(capsys, "sync", "--home", ha, "--peer", peer)
        assert code == 0, err
        assert "rateless sync did not decode" in err and "trying again with profile tssb2" in err
        assert "profile tssb2, after rateless did not decode" in out
        code, out, err = _tssb(capsys, "sync", "--home", ha, "--peer", peer, "--profile", "gnunet")
        assert code == 0, err         # other profiles never fall back
        assert "did not decode" not in err
    assert ca.store.front(cb.identity.public)[0] == 1
    assert cb.store.front(ca.identity.public)[0] == 1


def test_tssb_sync_answers_a_refused_request_with_tssb2(tmp_path, capsys, monkeypatch):
    # An older host of ours does not know RL_REQUEST (an unknown message type: it closes
    # the stream without a word); `tssb sync` then syncs with tssb2, which both speak.
    from tssb.setu.machine import Reconciler as R

    def older(self, buf):
        raise SetuError("bad message", "unknown type %d" % C.MSG_RL_REQUEST)
    monkeypatch.setattr(R, "_on_rl_request", older)

    with _two_homes(tmp_path, capsys, ["from a"], ["from b", "and b"]) as (ha, ca, cb, peer):
        code, out, err = _tssb(capsys, "sync", "--home", ha, "--peer", peer)
        assert code == 0, err
        assert "the peer closed at the rateless request" in err
        assert "profile tssb2, after rateless was refused" in out
    assert ca.store.front(cb.identity.public)[0] == 2
    assert cb.store.front(ca.identity.public)[0] == 1


def test_a_peer_claiming_a_common_key_as_found_is_cut_off():
    # R's second flight wants a key both sides hold, as if its decode had found it: the
    # initiator peels a key that is not in the difference, and the operation ends with a
    # stable reason, never with a wrong union.
    A, B = make_sets(2000, 60, 60, seed=7)
    A.rateless(RL.prefix_length(len(A)))
    B.rateless(RL.prefix_length(len(B)))
    common = next(k for k in A.rateless_keys() if B.has_rateless_key(k))

    def lie(direction, msg):
        if direction != "ba" or msg[2:4] != C.MSG_RL.to_bytes(2, "big"):
            return [msg]
        flags, secs = RL.parse(msg)
        if not any(t == RL.SEC_RESIDUAL for t, _ in secs):     # the streamed F2
            return [msg]
        return _rl_msg([(RL.SEC_WANTS, common)] + secs, flags)

    a = Reconciler(A, True, RATELESS)
    b = Reconciler(B, False, Config())
    with pytest.raises(SetuError) as e:
        pump(a, b, lie)
    assert e.value.reason in ("unrequested element", "symbols never decode", "too many symbols")


def test_prefix_items_are_the_shared_codecs():
    """The prefix's integer item and seed of a key equal codedsym.Codec.item's bytes."""
    from tssb.setu.rateless_prefix import item_and_seed
    rnd = random.Random(7)
    for key in [bytes(5), b"\xff" * 5] + [rnd.randbytes(5) for _ in range(500)]:
        item, seed = CODEC.item(key)
        assert item_and_seed(key) == (int.from_bytes(item, "little"), seed)
