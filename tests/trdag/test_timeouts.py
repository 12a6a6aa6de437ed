"""Issue 15, item 7: a dropped trDAG frame stalled both sides for ever (the driver waited
with no timeout). Now every wait on the peer ends after the driver's timeout."""
import asyncio

import pytest

from tssb.channel import memory_pair
from tssb.trdag import dagstore, driver, session
from tssb.trdag.errors import TrdagError

from test_sync import partitioned


class Lossy:
    """A channel end that loses its n-th outgoing frame (the link dropped it)."""

    def __init__(self, channel, lose):
        self._ch = channel
        self._lose = lose
        self._n = 0

    async def send(self, frame):
        self._n += 1
        if self._n != self._lose:
            await self._ch.send(frame)

    def __getattr__(self, name):
        return getattr(self._ch, name)


def _sync_losing(monkeypatch, lose):
    """Both sides' results (stats, or the TrdagError) when a's frame `lose` is lost."""
    monkeypatch.setattr(driver, "PEER_TIMEOUT_S", 0.3, raising=False)
    a, b, root = partitioned(5, 30, 10, 10, 2)

    async def go():
        ca, cb = memory_pair()
        return await asyncio.gather(
            driver.sync(Lossy(ca, lose), dagstore.Dag(a), root, True, session.FAST),
            driver.sync(cb, dagstore.Dag(b), None, False), return_exceptions=True)

    return asyncio.run(asyncio.wait_for(go(), 10))


@pytest.mark.parametrize("lose", range(1, 9))
def test_dropped_frame_ends_both_sides(monkeypatch, lose):
    """Whichever frame is lost, both sides end soon: the side that misses something
    fails with a TrdagError (a gap the protocol sees, e.g. round_mismatch or
    missing_messages, or a wait that timed out); none waits for ever."""
    ra, rb = _sync_losing(monkeypatch, lose)
    errors = [r for r in (ra, rb) if isinstance(r, TrdagError)]
    assert errors and len(errors) + sum(isinstance(r, tuple) for r in (ra, rb)) == 2, (ra, rb)


def test_lost_hello_times_out_on_both_sides(monkeypatch):
    reasons = sorted(r.reason for r in _sync_losing(monkeypatch, 1))
    # whoever waited first says why; the other hears it in the ABORT, or times out too
    assert reasons in (["timeout", "timeout"], ["peer_abort", "timeout"]), reasons


def test_silent_peer_times_out_at_the_given_timeout():
    a, _, root = partitioned(6, 5, 0, 0)

    async def go():
        ca, _cb = memory_pair()
        return await driver.sync(ca, dagstore.Dag(a), root, True, session.FAST, timeout=0.2)

    with pytest.raises(TrdagError) as e:
        asyncio.run(asyncio.wait_for(go(), 10))
    assert e.value.reason == "timeout"
