"""Decoder fuzzing: every message decoder and the state machine only ever raise SetuError."""
from hypothesis import given, settings, strategies as st

from tssb.setu import constants as C
from tssb.setu import messages as M
from tssb.setu import strata as S
from tssb.setu.errors import SetuError
from tssb.setu.ibf import IBF, slice_bucket_count
from tssb.setu.machine import Config, Reconciler
from tssb.setu.profiles import GnunetProfile

from helpers import make_sets

VALID = [
    M.operation_request(5, Config().app_id, M.app_data(1, 0, 24)),
    M.strata(1, 5, S.compress(bytes(S.ESTIMATOR_BYTES)), True),
    M.ibf_slice(True, 48, 0, 0, 3, bytes(12 * 48 + 18)),
    M.element(0, b"abc"), M.full_element(0, b"abcd"),
    M.hashes(C.MSG_OFFER, [bytes(64)]), M.hashes(C.MSG_DEMAND, [bytes(64)] * 2),
    M.inquiry(0, [1, 2]), M.done(C.MSG_DONE, bytes(64)), M.done(C.MSG_FULL_DONE, bytes(64)),
    M.full_request(C.MSG_REQUEST_FULL, 1, 2, 3), M.full_request(C.MSG_SEND_FULL, 1, 2, 3),
]


def _mutate(data, draw_ops):
    b = bytearray(data)
    for pos, val, op in draw_ops:
        if not b:
            break
        i = pos % len(b)
        if op == 0:
            b[i] = val
        elif op == 1:
            del b[i:]
        else:
            b[i:i] = bytes([val]) * (val % 9)
    return bytes(b)


def _decode_only_setu_errors(buf):
    try:
        M.decode(buf)
    except SetuError:
        pass


@settings(max_examples=600, deadline=None)
@given(st.binary(max_size=300))
def test_decode_random_bytes(buf):
    _decode_only_setu_errors(buf)


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(VALID),
       st.lists(st.tuples(st.integers(0, 10 ** 6), st.integers(0, 255), st.integers(0, 2)), max_size=4))
def test_decode_mutated_messages(msg, ops):
    _decode_only_setu_errors(_mutate(msg, ops))


def test_valid_messages_roundtrip():
    for m in VALID:
        assert M.decode(m).type in C.MSG_NAMES


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(1, 64), st.integers(1, 100), st.booleans())
def test_ibf_slice_reader(payload, bits, remaining, last):
    n = slice_bucket_count(len(payload), bits, remaining, last)
    if n is not None:
        ibf = IBF(GnunetProfile, remaining)
        try:
            ibf.read_slice(0, n, bits, payload)
        except SetuError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4000), st.sampled_from([1, 2, 4, 8]))
def test_strata_decoders(blob, count):
    for fn in (lambda: S.decompress(blob, count),
               lambda: S.StrataEstimator.decode(GnunetProfile, count, blob)):
        try:
            fn()
        except SetuError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(VALID), st.binary(max_size=80)), max_size=6),
       st.booleans())
def test_state_machine_only_raises_setu_error(msgs, initiator):
    A, _ = make_sets(30, 0, 0)
    r = Reconciler(A, initiator, Config(allow_force=True))
    if initiator:
        r.start()
    for m in msgs:
        try:
            r.receive(m)
        except SetuError:
            break
