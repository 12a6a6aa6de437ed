"""Both ends end with the union: random sets, difference shapes, modes and both profiles."""
import asyncio

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tssb.channel import memory_pair
from tssb.setu import constants as C
from tssb.setu.driver import reconcile
from tssb.setu.machine import Config, FINISHED

from helpers import make_sets, sync

PROFILES = [C.PROFILE_GNUNET, C.PROFILE_TSSB2]
FORCES = [None, "full", "differential"]


def _check_union(A, B, a, b, total):
    assert a.state == FINISHED and b.state == FINISHED
    assert len(A) == len(B) == total
    assert set(A.elements) == set(B.elements)
    assert A.checksum == B.checksum


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(common=st.sampled_from([0, 1, 5, 50, 300, 2000]),
       a_only=st.sampled_from([0, 1, 3, 20, 150]),
       b_only=st.sampled_from([0, 1, 4, 30, 200]),
       profile=st.sampled_from(PROFILES), force=st.sampled_from(FORCES),
       seed=st.integers(0, 10 ** 6))
def test_union_property(common, a_only, b_only, profile, force, seed):
    A, B = make_sets(common, a_only, b_only, seed)
    a, b = sync(A, B, Config(profile_id=profile, force=force), Config(allow_force=True))
    _check_union(A, B, a, b, common + a_only + b_only)
    if force == "full":
        assert a.stats["mode"].startswith("full")
    if force == "differential" and common + a_only and common + b_only:
        assert a.stats["mode"] == "differential"


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("shape", [(3000, 60, 0), (3000, 0, 60), (3000, 40, 40), (3000, 0, 0)])
def test_differential_shapes(profile, shape):
    A, B = make_sets(*shape, seed=shape[1] * 7 + shape[2])
    a, b = sync(A, B, Config(profile_id=profile), Config())
    _check_union(A, B, a, b, sum(shape))
    assert a.stats["mode"] == "differential"
    assert a.stats["elements_sent"] + a.stats["elements_recv"] == shape[1] + shape[2]


@pytest.mark.parametrize("profile", PROFILES)
def test_retry_after_decode_failure(profile):
    # An estimate far too small (strata lie is impossible here, so shrink the first IBF by
    # forcing differential with a big real difference): the first IBF cannot decode.
    A, B = make_sets(2000, 400, 400, seed=11)
    cfg = Config(profile_id=profile, force="differential")
    cfg_b = Config(allow_force=True)
    from tssb.setu import machine
    orig = machine.Reconciler._send_ibf

    def tiny_first(self, size, salt, out):
        return orig(self, self.profile.min_size if salt == 0 else size, salt, out)

    machine.Reconciler._send_ibf = tiny_first
    try:
        a, b = sync(A, B, cfg, cfg_b)
    finally:
        machine.Reconciler._send_ibf = orig
    _check_union(A, B, a, b, 2800)
    assert a.stats["decode_failures"] + b.stats["decode_failures"] >= 1
    assert a.stats["rounds"] + b.stats["rounds"] >= 2


@pytest.mark.parametrize("profile", PROFILES)
def test_async_driver_over_memory_channel(profile):
    A, B = make_sets(1500, 25, 35, seed=4)

    async def go():
        ca, cb = memory_pair(max_queue=4)
        return await asyncio.gather(reconcile(ca, A, True, Config(profile_id=profile)),
                                    reconcile(cb, B, False, Config()))

    ra, rb = asyncio.run(go())
    assert A.checksum == B.checksum and len(A) == 1560
    assert ra["ok"] and rb["ok"] and ra["mode"] == "differential"
    assert ra["bytes_sent"] == rb["bytes_recv"] and ra["bytes_recv"] == rb["bytes_sent"]
    assert ra["elements_recv"] == 35 and ra["elements_sent"] == 25


def test_incremental_state_is_reused():
    A, B = make_sets(4000, 0, 0, seed=8)
    sync(A, B, Config(), Config())
    base = A._base
    assert base is not None
    A.add(b"one more element")
    assert A._base is base  # updated in place, not rebuilt
    a, b = sync(A, B, Config(), Config())
    assert A.checksum == B.checksum and a.stats["elements_sent"] == 1
    assert A._base is base
