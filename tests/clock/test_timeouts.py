"""Issue 15, item 7: every wait of the clock and certs drivers on the peer has a timeout."""
import asyncio

import pytest

from tssb.certs.service import CertClient, ServiceError
from tssb.channel import memory_pair
from tssb.clock import driver
from tssb.clock.sync import ERROR, SyncMachine

from clock_helpers import feed_repo


def test_clock_sync_with_a_silent_peer_ends_with_timeout(monkeypatch):
    monkeypatch.setattr(driver, "PEER_TIMEOUT_S", 0.2, raising=False)

    async def main():
        ours, theirs = memory_pair()
        res = await driver.run_sync(ours, SyncMachine(feed_repo(), "feeds"))
        sent = []
        while theirs._in.q.qsize():       # what we sent: our opening, then the error
            sent.append(await theirs.recv())
        return res, sent

    res, sent = asyncio.run(asyncio.wait_for(main(), 10))
    assert not res["ok"] and res["reason"] == "timeout"
    assert sent[-1][0] == ERROR and sent[-1].endswith(b"timeout")


def test_certs_client_times_out_on_a_silent_server():
    async def main():
        ours, _theirs = memory_pair()
        with pytest.raises(ServiceError) as e:
            await CertClient(ours, timeout=0.2).front(bytes(32))
        return e.value
    err = asyncio.run(asyncio.wait_for(main(), 10))
    assert str(err) == "timeout"


def test_pending_events_are_charged_to_the_session_budget():
    """Events held until their references arrive count as unverified elements (one unit
    each, one per chunk they carry), so a peer's orphans stop at the session's budget."""
    import types

    from tssb.session.budget import BudgetExceeded, Limits, Pool
    m = SyncMachine(feed_repo(), "feeds")
    m.budget = Pool(Limits(unverified=9)).budget()
    ev = [types.SimpleNamespace(eid=bytes([i]) * 32, chunks=(b"c",) * i) for i in range(4)]
    for e in ev[:3]:
        m._pend(e)                  # 1 + 2 + 3 units
    assert m.budget.held["unverified"] == 6
    with pytest.raises(BudgetExceeded):
        m._pend(ev[3])              # 4 more would pass 9
    m._unpend(ev[1].eid)
    assert m.budget.held["unverified"] == 4
    m.release()
    assert m.budget.held["unverified"] == 0
