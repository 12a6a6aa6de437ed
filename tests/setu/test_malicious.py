"""Malicious peers: one test per abort condition (draft section 8). Each must raise SetuError
with its reason, quickly and with bounded work."""
import random

import pytest

from tssb.setu import constants as C
from tssb.setu import messages as M
from tssb.setu import strata as S
from tssb.setu.errors import SetuError
from tssb.setu.machine import Config, Reconciler, ERROR
from tssb.setu.profiles import Tssb2Profile

from helpers import make_sets, pump

H = lambda i: bytes([i]) * 64  # noqa: E731


def _run(common, a_only, b_only, tamper, cfg_a=None, cfg_b=None, seed=1):
    A, B = make_sets(common, a_only, b_only, seed)
    a, b = Reconciler(A, True, cfg_a), Reconciler(B, False, cfg_b)
    with pytest.raises(SetuError) as ei:
        pump(a, b, tamper)
    assert a.state == ERROR or b.state == ERROR
    return ei.value.reason


def _replace(direction, mtype, fn, once=True):
    """Tamper hook: apply fn(msg_bytes) -> list to the first (or every) message of a type."""
    hit = []

    def t(d, m):
        if d == direction and M.decode(m).type == mtype and not (once and hit):
            hit.append(1)
            return fn(m)
        return [m]
    return t


def _responder(eset_size=100, cfg=None):
    A, _ = make_sets(eset_size, 0, 0)
    return Reconciler(A, False, cfg or Config())


def _opreq(count=100, app=None, appdata=None):
    return M.operation_request(count, app or Config().app_id,
                               M.app_data(C.PROFILE_TSSB2, 0, 24) if appdata is None else appdata)


def test_unknown_application():
    r = _responder()
    with pytest.raises(SetuError) as e:
        r.receive(_opreq(app=bytes(64)))
    assert e.value.reason == "unknown application" and r.state == ERROR


def test_profile_not_agreed():
    r = _responder(cfg=Config(allowed_profiles=(C.PROFILE_TSSB2,)))
    with pytest.raises(SetuError) as e:
        r.receive(_opreq(appdata=M.app_data(C.PROFILE_GNUNET, 0, 24)))
    assert e.value.reason == "profile not agreed"


def test_forced_mode_refused_by_default():
    r = _responder()
    with pytest.raises(SetuError) as e:
        r.receive(_opreq(appdata=M.app_data(C.PROFILE_TSSB2, M.FLAG_FORCE_FULL, 24)))
    assert e.value.reason == "forced mode refused"


def test_byzantine_bound_on_element_count():
    r = _responder(cfg=Config(upper_bound=1000, lower_bound=10))
    with pytest.raises(SetuError) as e:
        r.receive(_opreq(count=5000))
    assert e.value.reason == "byzantine bound"
    r = _responder(cfg=Config(upper_bound=1000, lower_bound=10))
    with pytest.raises(SetuError) as e:
        r.receive(_opreq(count=3))
    assert e.value.reason == "byzantine bound"


def test_byzantine_bound_on_remote_set_size():
    def lie(m):
        d = M.decode(m)
        return [M.strata(d.se_count, 10 ** 9, d.blob, d.compressed)]
    assert _run(100, 5, 5, _replace("ba", C.MSG_SEC, lie), Config(upper_bound=10 ** 6)) == "byzantine bound"


def test_strata_estimator_that_does_not_decode():
    def junk(m):
        d = M.decode(m)
        se = S.StrataEstimator(Tssb2Profile, d.se_count)
        r = random.Random(0)
        for est in se.strata:
            for ibf in est:
                for i in range(ibf.size):
                    ibf.count[i] = r.randrange(2, 200)
                    ibf.ids[i] = r.getrandbits(64)
        return [M.strata(d.se_count, d.set_size, S.compress(se.encode()), True)]
    assert _run(100, 5, 5, _replace("ba", C.MSG_SEC, junk)) == "strata estimator does not decode"


def test_strata_estimator_bad_length_and_inflate_bomb():
    for blob in (b"\x00" * 10, S.compress(bytes(S.ESTIMATOR_BYTES * 9))):
        def bad(m, blob=blob):
            d = M.decode(m)
            return [M.strata(1, d.set_size, blob, True)]
        assert _run(100, 5, 5, _replace("ba", C.MSG_SEC, bad)) == "bad strata estimator"


def test_unexpected_message_in_state():
    r = _responder()
    with pytest.raises(SetuError) as e:
        r.receive(M.done(C.MSG_DONE, bytes(64)))
    assert e.value.reason == "unexpected message"


def test_message_after_error_is_refused():
    r = _responder()
    with pytest.raises(SetuError):
        r.receive(b"\x00")
    with pytest.raises(SetuError):
        r.receive(_opreq())


def _ibf_msg(size, offset=0, salt=0, bits=1, n=None, last=True):
    n = size - offset if n is None else n
    return M.ibf_slice(last, size, offset, salt, bits, bytes(12 * n + (n * bits + 7) // 8))


def test_oversized_or_implausible_ibf():
    for size in (C.MAX_IBF_SIZE * 2, 3 * (1 << 14), 50):  # too big, too big for 100+100, not 3*2^j
        r = _responder()
        r.receive(_opreq(count=100))
        with pytest.raises(SetuError) as e:
            r.receive(_ibf_msg(size, n=1, last=False))
        assert e.value.reason == "implausible ibf"


@pytest.mark.parametrize("msgs,reason", [
    ([_ibf_msg(96, offset=48, n=48)], "bad ibf slice"),                       # first offset not 0
    ([_ibf_msg(96, n=48, last=False), _ibf_msg(96, offset=40, n=56)], "bad ibf slice"),  # gap
    ([_ibf_msg(96, n=48, last=False), _ibf_msg(96, offset=48, n=48, salt=3)], "bad ibf slice"),
    ([_ibf_msg(96, n=48, last=False), _ibf_msg(96, offset=48, n=40)], "bad ibf slice"),  # short
    ([_ibf_msg(96, salt=5)], "bad ibf slice"),                                # first salt not 0
])
def test_bad_ibf_slices(msgs, reason):
    r = _responder()
    r.receive(_opreq(count=100))
    with pytest.raises(SetuError) as e:
        for m in msgs:
            r.receive(m)
    assert e.value.reason == reason


def test_endless_role_swaps_are_cut_at_30():
    """A peer answering every IBF with a fresh undecodable one."""
    A, _ = make_sets(300, 0, 0)
    r = Reconciler(A, False, Config())
    r.receive(_opreq(count=300))
    rnd = random.Random(1)
    salt, sent = 0, 0
    with pytest.raises(SetuError) as e:
        while sent < 100:
            size = 48
            body = b"".join(rnd.getrandbits(64).to_bytes(8, "little") for _ in range(size))
            body += bytes(4 * size) + bytes([0xFF]) * ((size * 4 + 7) // 8)
            out = r.receive(M.ibf_slice(True, size, 0, salt, 4, body))
            sent += 1
            assert M.decode(out[0]).type in (C.MSG_IBF, C.MSG_IBF_LAST)
            salt += 2
    assert e.value.reason == "too many role swaps"
    assert sent <= C.MAX_ROLE_SWAPS // 2 + 2


def _active_responder():
    """A responder that decoded an IBF showing it misses one element (it sent an INQUIRY)."""
    A, B = make_sets(200, 0, 1, seed=3)   # the initiator (B) holds one element A lacks
    r = Reconciler(A, False, Config())
    init = Reconciler(B, True, Config())
    out = r.receive(init.start()[0])
    ibf_msgs = init.receive(out[0])
    res = []
    for m in ibf_msgs:
        res = r.receive(m)
    return r, init, res


def test_unrequested_offer():
    r, _, _ = _active_responder()
    with pytest.raises(SetuError) as e:
        r.receive(M.hashes(C.MSG_OFFER, [H(1)]))
    assert e.value.reason == "unrequested offer"


def test_duplicate_offer():
    r, init, out = _active_responder()
    inq = [m for m in out if M.decode(m).type == C.MSG_INQUIRY]
    offer = [m for m in init.receive(inq[0]) if M.decode(m).type == C.MSG_OFFER][0]
    r.receive(offer)
    with pytest.raises(SetuError) as e:
        r.receive(offer)
    assert e.value.reason == "duplicate offer"


def test_unrequested_demand_and_duplicate_demand():
    A, B = make_sets(200, 1, 0, seed=4)   # responder A holds one extra element -> it offers
    r = Reconciler(A, False, Config())
    init = Reconciler(B, True, Config())
    out = r.receive(init.start()[0])
    for m in init.receive(out[0]):
        out = r.receive(m)
    offer = [M.decode(m) for m in out if M.decode(m).type == C.MSG_OFFER][0]
    with pytest.raises(SetuError) as e:
        Reconciler.receive(r, M.hashes(C.MSG_DEMAND, [H(9)]))
    assert e.value.reason == "unrequested demand"
    r2 = Reconciler(A, False, Config())
    out = r2.receive(Reconciler(B, True, Config()).start()[0])
    init2 = Reconciler(B, True, Config())
    init2.start()
    for m in init2.receive(out[0]):
        out = r2.receive(m)
    d = M.hashes(C.MSG_DEMAND, offer.hashes)
    r2.receive(d)
    with pytest.raises(SetuError) as e:
        r2.receive(d)
    assert e.value.reason == "duplicate demand"


def test_unrequested_element():
    r, _, _ = _active_responder()
    with pytest.raises(SetuError) as e:
        r.receive(M.element(0, b"never demanded"))
    assert e.value.reason == "unrequested element"


def test_element_failing_application_check():
    A, B = make_sets(300, 0, 3, seed=5)
    A.check = lambda data: False
    with pytest.raises(SetuError) as e:
        pump(Reconciler(A, True, Config()), Reconciler(B, False, Config()))
    assert e.value.reason == "element rejected by application check"


def test_bad_final_checksum():
    def flip(m):
        return [M.done(C.MSG_DONE, bytes(64))]
    # initiator is passive first: its DONE#2 carries the checksum the responder verifies
    assert _run(300, 3, 3, _replace("ab", C.MSG_DONE, flip)) == "final checksum mismatch"


def test_done_before_decoding_finished_is_unexpected():
    r = _responder()
    r.receive(_opreq(count=100))
    with pytest.raises(SetuError) as e:
        r.receive(M.done(C.MSG_DONE, bytes(64)))
    assert e.value.reason == "unexpected message"


def test_duplicate_and_wrong_salt_inquiry():
    A, B = make_sets(200, 2, 0, seed=6)     # initiator A has 2 extra; responder inquires
    a, b = Reconciler(A, True, Config()), Reconciler(B, False, Config())
    out = b.receive(a.start()[0])
    ibf_msgs = a.receive(out[0])
    for m in ibf_msgs:
        out = b.receive(m)
    inq = [m for m in out if M.decode(m).type == C.MSG_INQUIRY][0]
    a.receive(inq)
    with pytest.raises(SetuError) as e:
        a.receive(inq)
    assert e.value.reason == "duplicate inquiry"
    a2 = Reconciler(A, True, Config())
    out = b.__class__(B, False, Config()).receive(a2.start()[0])
    a2.receive(out[0])
    with pytest.raises(SetuError) as e:
        a2.receive(M.inquiry(7, M.decode(inq).keys))
    assert e.value.reason == "bad inquiry"


def test_full_mode_duplicate_element():
    def dup(m):
        return [m, m]
    r = _run(50, 5, 5, _replace("ab", C.MSG_FULL_ELEMENT, dup),
             Config(force="full"), Config(allow_force=True))
    assert r == "duplicate element"


def test_full_mode_too_many_and_too_few_elements():
    extra = M.full_element(0, b"x" * 24)

    def more(m):
        return [extra, m]
    assert _run(10, 5, 5, _replace("ab", C.MSG_FULL_DONE, more), Config(force="full"),
                Config(allow_force=True)) == "too many elements"

    def drop(m):
        return []
    assert _run(10, 5, 5, _replace("ab", C.MSG_FULL_ELEMENT, drop), Config(force="full"),
                Config(allow_force=True)) == "too few elements"


def test_full_mode_known_element_returned():
    A, B = make_sets(20, 3, 3, seed=2)
    known = next(iter(A.elements.values()))

    def ret(m):
        return [M.full_element(0, known), m]
    assert _run(20, 3, 3, _replace("ba", C.MSG_FULL_DONE, ret), Config(force="full"),
                Config(allow_force=True), seed=2) == "implausible full sync"


def test_full_mode_flood_of_duplicates_is_implausible():
    """Claimed differences large, but the stream is all elements the receiver already has."""
    A, B = make_sets(3000, 0, 0, seed=3)
    r2 = Reconciler(B, False, Config(allow_force=True))
    r2.receive(_opreq(count=6000, appdata=M.app_data(C.PROFILE_TSSB2, M.FLAG_FORCE_FULL, 24)))
    r2.receive(M.full_request(C.MSG_SEND_FULL, 3000, 3000, 3000))
    with pytest.raises(SetuError) as e:
        for data in A.elements.values():
            r2.receive(M.full_element(0, data))
    assert e.value.reason == "implausible full sync"


def test_full_request_with_wrong_size_claim():
    r = _responder(cfg=Config(allow_force=True))
    r.receive(_opreq(count=100))
    with pytest.raises(SetuError) as e:
        r.receive(M.full_request(C.MSG_REQUEST_FULL, 5, 99, 5))
    assert e.value.reason == "implausible full sync"


def test_full_request_contradicting_cost_model():
    r = _responder()
    r.receive(_opreq(count=100))
    with pytest.raises(SetuError) as e:  # 1 + 1 differences in 100: differential is cheaper
        r.receive(M.full_request(C.MSG_REQUEST_FULL, 1, 100, 1))
    assert e.value.reason == "implausible full sync"
