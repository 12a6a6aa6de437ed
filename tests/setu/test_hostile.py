"""A hostile SETU peer against the `setu` service (issue 15, items 5 and 6): fake full-mode
elements, maximum IBFs, a peer that does not read; every one is stopped by the session
budget with a stable reason and bounded memory, and heavy decoding runs off the loop."""
import asyncio
import os
import threading
import tracemalloc
import types

import pytest

from tinyssb.store import MemStore
from tssb.store import Store
from tssb.channel import memory_pair
from tssb.session.budget import BudgetExceeded, Limits, Pool
from tssb.setu import constants as C
from tssb.setu import ibf as I
from tssb.setu import messages as M
from tssb.setu import policy, service
from tssb.setu.driver import reconcile
from tssb.setu.machine import DEFAULT_APP_ID, Config
from tssb.setu.tinyssb_elements import ELEMENT_TYPE, StoreSource, make_chunk_element

from helpers import make_feed as _feed

PEER = bytes(32)


def _ctx(n=50):
    store = Store(":memory:")     # the service's set provider reads SQLite
    _feed(store, b"server", n)
    return types.SimpleNamespace(store=store, events=types.SimpleNamespace(emit=lambda *a, **k: None))


class Attack:
    """The service on one end of an in-memory channel carrying a session budget; the
    test plays the peer on the other end."""

    def __init__(self, limits, max_queue=64, n=50):
        self.ctx = _ctx(n)
        self.peer, end = memory_pair(max_queue)
        self.pool = Pool(limits)
        end.budget = self.pool.budget()
        self.task = asyncio.ensure_future(service.serve(end, self.ctx, PEER))

    async def send(self, msg):
        """False once the service has stopped reading (it ended)."""
        try:
            await asyncio.wait_for(self.peer.send(msg), 2)
            return not self.task.done()
        except asyncio.TimeoutError:
            return False

    async def result(self):
        try:
            await asyncio.wait_for(self.task, 20)
        except BudgetExceeded as e:
            return e
        return None


async def _request(attack, count, profile=C.PROFILE_TSSB2):
    await attack.send(M.operation_request(count, DEFAULT_APP_ID, M.app_data(profile, 0, 160)))
    se = M.decode(await attack.peer.recv())
    return se.set_size


def _peak_growth(coro):
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    try:
        out = asyncio.run(asyncio.wait_for(coro, 60))
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return out, peak


def test_fake_full_mode_elements_stop_at_the_unverified_budget():
    """Item 5: chunks are only shape-checked on arrival, so a peer declaring 2**26
    elements could make us hold that many fakes (~740 B each)."""
    limit = 2000

    async def main():
        attack = Attack(Limits(unverified=limit))
        theirs = 1 << 26
        ours = await _request(attack, theirs)
        # numbers that make our cost model agree that the peer sends everything first
        assert policy.decide_operation_mode(160, theirs, ours, theirs, 0) == policy.FULL_LOCAL_FIRST
        await attack.send(M.full_request(C.MSG_SEND_FULL, 0, ours, theirs))
        sent = 0
        for i in range(10 * limit):
            fake = make_chunk_element(os.urandom(32), 1 + i % 7, i % 900, os.urandom(120))
            if not await attack.send(M.full_element(ELEMENT_TYPE, fake)):
                break
            sent += 1
        err = await attack.result()
        return err, sent, attack.pool.held["unverified"]

    (err, sent, held), peak = _peak_growth(main())
    assert isinstance(err, BudgetExceeded) and err.reason == "budget: unverified"
    assert sent <= limit + 64 + 1       # what the budget and the channel's queue admit
    assert held == 0                    # released when the sync ended
    assert peak < 6 << 20, peak         # 20,000 fakes held would be ~15 MiB


def test_maximum_ibf_per_stream_stops_at_the_ibf_budget():
    """Item 6: an IBF of any size up to 2**20 buckets was accepted after an operation
    request declaring 2**26 elements (136-151 MiB per stream, about 1 s of decoding)."""
    size = 3 * (1 << 15)                # 98,304 buckets: fits the budget, its decoding not

    async def main():
        attack = Attack(Limits(ibf_buckets=size + size // 2), n=50)
        await _request(attack, 1 << 26)
        per = I.max_buckets_per_message(8, C.IBF_MSG_HEADER)
        off = 0
        while off < size:
            n = min(per, size - off)
            payload = os.urandom(12 * n) + os.urandom(n)    # random IDs, hashes, 8-bit counts
            if not await attack.send(M.ibf_slice(off + n == size, size, off, 0, 8, payload)):
                break
            off += n
        return await attack.result(), attack.pool.held["ibf_buckets"]

    (err, held), peak = _peak_growth(main())
    assert isinstance(err, BudgetExceeded) and err.reason == "budget: ibf_buckets"
    assert held == 0
    # the received table (20 B a bucket) and the slices in flight; as lists it was 3 tables
    # of ~95 B a bucket (~28 MiB) plus the twice larger IBF sent back
    assert peak < 8 << 20, peak


def test_a_peer_that_does_not_read_cannot_grow_our_outbox():
    """Role swaps make us answer each junk IBF with one twice its size: a peer that sends
    them and reads nothing is cut off at the session's buffered-bytes budget."""
    async def main():
        attack = Attack(Limits(buffered_bytes=256 << 10), max_queue=2)
        await _request(attack, 1000)
        per = I.max_buckets_per_message(8, C.IBF_MSG_HEADER)
        size, salt = 48, 0
        while size <= 3 * (1 << 14):
            off = 0
            while off < size:
                n = min(per, size - off)
                payload = os.urandom(12 * n) + os.urandom(n)
                if not await attack.send(M.ibf_slice(off + n == size, size, off, salt, 8, payload)):
                    return await attack.result()
                off += n
            size, salt = size * 4, salt + 2     # our answer was twice as large; double it
        return await attack.result()

    err = asyncio.run(asyncio.wait_for(main(), 60))
    assert isinstance(err, BudgetExceeded) and err.reason == "budget: buffered_bytes"


def test_ibf_decoding_runs_off_the_event_loop(monkeypatch):
    loop_thread = threading.get_ident()
    seen = []
    real = I.IBF.decode

    def spy(self, limit=None):
        seen.append(threading.get_ident())
        return real(self, limit)

    monkeypatch.setattr(I.IBF, "decode", spy)
    s1, s2 = MemStore(), MemStore()
    _feed(s1, b"common", 300)
    _feed(s2, b"common", 290)
    _feed(s2, b"other", 5)

    async def main():
        a, b = StoreSource(s1), StoreSource(s2)
        a.refresh()
        b.refresh()
        x, y = memory_pair()
        cfg = Config(force="differential", allow_force=True)
        return await asyncio.gather(reconcile(x, a.eset, True, cfg), reconcile(y, b.eset, False, cfg))

    ra, rb = asyncio.run(asyncio.wait_for(main(), 60))
    assert ra["mode"] == "differential" and s1.front(_feed(MemStore(), b"other", 0))[0] == 5
    assert s2.entry(_feed(MemStore(), b"common", 0), 300) is not None
    assert seen and loop_thread not in seen


@pytest.mark.parametrize("lazy", [False, True])
def test_full_transfer_is_built_as_it_is_sent(lazy):
    """With lazy_output the machine returns our whole set as one generator (the driver
    builds each FULL_ELEMENT when it sends it), else the same messages as a list."""
    from tssb.setu.machine import Reconciler
    src = StoreSource(_ctx(20).store)
    src.refresh()
    m = Reconciler(src.eset, False)
    m.lazy_output = lazy
    m.receive(M.operation_request(0, DEFAULT_APP_ID, M.app_data(C.PROFILE_TSSB2, 0, 0)))
    out = m.receive(M.full_request(C.MSG_REQUEST_FULL, 0, 20, 0))
    if lazy:
        assert len(out) == 1 and not isinstance(out[0], bytes)
        out = list(out[0])
    assert [M.decode(x).type for x in out] == [C.MSG_FULL_ELEMENT] * 20 + [C.MSG_FULL_DONE]


def test_a_cut_off_peer_leaves_nothing_behind(tmp_path):
    """What a cut-off peer made us hold (its fake elements, its stream buffers) is freed
    when its session ends, by reference counting: no cycles left for a full garbage
    collection that might come much later (the memory would add up over reconnections)."""
    import gc
    from tssb.context import Context
    from tssb.session import connect, start_server

    a = Context.open(str(tmp_path / "a"))
    b = Context.open(str(tmp_path / "b"))
    b.set_network_key(a.network_key)
    a.store.add_peer(b.identity.public)
    _feed(a.store, b"server", 30)

    async def main():
        srv = await start_server(a, "127.0.0.1", 0, limits=Limits(unverified=6000))
        base = tracemalloc.get_traced_memory()[0]
        s = await connect("127.0.0.1", srv.port, b, peer=a.identity.public)
        ch = await s.open_stream("setu")
        await ch.send(M.operation_request(1 << 26, DEFAULT_APP_ID, M.app_data(C.PROFILE_TSSB2, 0, 160)))
        ours = M.decode(await ch.recv()).set_size
        await ch.send(M.full_request(C.MSG_SEND_FULL, 0, ours, 1 << 26))
        try:
            for i in range(20000):
                await ch.send(M.full_element(ELEMENT_TYPE, make_chunk_element(
                    os.urandom(32), 1, i % 900, os.urandom(120))))
        except Exception:
            pass
        for _ in range(500):
            if not srv.sessions and srv.pool.held["unverified"] == 0:
                break
            await asyncio.sleep(0.01)
        await s.close()
        await asyncio.sleep(0.1)
        left = tracemalloc.get_traced_memory()[0] - base
        exceeded = dict(srv.pool.exceeded)
        await srv.close()
        return left, exceeded

    gc.disable()
    tracemalloc.start()
    try:
        left, exceeded = asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        tracemalloc.stop()
        gc.enable()
        a.close()
        b.close()
    assert exceeded == {"budget: unverified": 1}
    assert left < 2 << 20, left     # 6000 fakes held were ~5 MiB
