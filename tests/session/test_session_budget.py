"""Session budgets (issue 15, items 4 and "Sessions and every service on them"): what one
peer may make a server hold is bounded by configured limits; a peer past one is cut off
with a stable reason; heavy work runs off the event loop."""
import asyncio
import socket
import sys
import threading
import tracemalloc
import types

import pytest

from tssb.session import StreamRefused, connect, start_server
from tssb.session import mux as M
from tssb.session.budget import BudgetExceeded, Limits, Pool, offload

from test_session_net import _until, hosts  # noqa: F401 (fixture: two homes, b allowed by a)

ECHO = "tssb_test_budget_echo"


async def _echo(channel, ctx, peer):
    while True:
        await channel.send(await channel.recv())


@pytest.fixture(autouse=True)
def echo_module():
    sys.modules[ECHO] = types.SimpleNamespace(serve=_echo)
    yield
    sys.modules.pop(ECHO, None)


def run(coro, limit=60):
    return asyncio.run(asyncio.wait_for(coro, limit))


def test_open_flood_from_a_peer_that_never_reads_is_cut_off(hosts):
    """Item 4: every refused OPEN queued a REFUSE with no limit (2.2 M OPENs: +270 MiB)."""
    a, b = hosts
    closed = []

    async def main():
        srv = await start_server(a, "127.0.0.1", 0, services={"echo": ECHO},
                                 log=closed.append)
        s = await connect("127.0.0.1", srv.port, b, peer=a.identity.public)
        s._tasks[0].cancel()        # the attacker never reads what the server sends
        sock = s._writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        await asyncio.sleep(0)
        (server_side,) = srv.sessions
        open_frame = M.encode_frame(M.OPEN, 1, b"no such service")   # refused: id reusable
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        worst_queue = sent = 0
        try:
            for sent in range(1, 300001):
                await s._write_body(open_frame)
                if sent % 1000 == 0:
                    worst_queue = max(worst_queue, len(server_side.mux._control))
                    if server_side.closed:
                        break
        except Exception:            # the server reset the connection: cut off
            pass
        growth = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        assert await _until(lambda: server_side.closed)
        assert server_side.close_reason == "budget: control_frames"
        assert worst_queue <= Limits().session["control_frames"]
        assert srv.pool.exceeded.get("budget: control_frames") == 1
        assert growth < 16 << 20, growth
        assert srv.pool.held["streams"] == 0
        await s.close()
        await srv.close()
        return sent
    sent = run(main())
    assert sent < 300000
    assert any("budget: control_frames" in line for line in closed)


def test_credit_frames_of_a_stream_coalesce():
    """A peer that sends many small messages and does not read our frames leaves one
    queued CREDIT per stream, not one per message."""
    async def main():
        stall = asyncio.Event()

        async def write(frame):       # the peer does not read: the first write never ends
            await stall.wait()
        acc = []
        server = M.Mux(write, False, lambda name, st: acc.append(st))
        flusher = asyncio.create_task(server.flush_control())
        server.on_frame(M.encode_frame(M.OPEN, 1, b"x"))
        await asyncio.sleep(0)
        (st,) = acc
        for _ in range(5000):
            server.on_frame(M.encode_frame(M.LAST, 1, b"m"))
            assert await st.recv() == b"m"
        assert server._credits == {1: 5000 * (1 + M.FRAME_COST)}
        assert server.budget.held["control_frames"] <= 2
        flusher.cancel()
    asyncio.run(main())


def test_streams_per_service_and_release_when_the_service_ends(hosts):
    a, b = hosts

    async def main():
        srv = await start_server(a, "127.0.0.1", 0, services={"echo": ECHO})
        s = await connect("127.0.0.1", srv.port, b, peer=a.identity.public)
        one = await s.open_stream("echo")
        two = await s.open_stream("echo")
        with pytest.raises(StreamRefused) as e:
            await s.open_stream("echo")
        assert e.value.reason == "too many echo streams"
        assert srv.pool.held["streams"] == 2
        one.close()                     # the echo service ends on our close
        assert await _until(lambda: srv.pool.held["streams"] == 1)
        three = await s.open_stream("echo")
        await three.send(b"hi")
        assert await three.recv() == b"hi"
        await s.close()
        assert await _until(lambda: srv.pool.held["streams"] == 0)
        await srv.close()
        del two
    run(main())


def test_total_stream_budget_refuses_politely(hosts):
    a, b = hosts

    async def main():
        limits = Limits(streams=4, streams_per_service=4, total={"streams": 3})
        srv = await start_server(a, "127.0.0.1", 0, services={"echo": ECHO}, limits=limits)
        s = await connect("127.0.0.1", srv.port, b, peer=a.identity.public)
        for _ in range(3):
            await s.open_stream("echo")
        with pytest.raises(StreamRefused) as e:
            await s.open_stream("echo")
        assert e.value.reason == "server busy"
        assert not s.closed            # refused, not cut off
        await s.close()
        await srv.close()
    run(main())


def test_budget_take_give_totals_and_close():
    pool = Pool(Limits(ibf_buckets=100, total={"ibf_buckets": 150}))
    one, two = pool.budget(), pool.budget()
    one.take("ibf_buckets", 90)
    with pytest.raises(BudgetExceeded) as e:
        one.take("ibf_buckets", 11)
    assert (e.value.reason, e.value.scope, e.value.limit) == ("budget: ibf_buckets", "session", 100)
    two.take("ibf_buckets", 60)
    with pytest.raises(BudgetExceeded) as e:
        one.take("ibf_buckets", 1)     # past the total, and one holds more than its half
    assert (e.value.scope, e.value.limit, e.value.wanted) == ("total", 150, 151)
    assert pool.held["ibf_buckets"] == 150 and pool.exceeded["budget: ibf_buckets"] == 2
    one.give("ibf_buckets", 30)
    assert pool.held["ibf_buckets"] == 120
    one.close()                        # the session ended: all it held goes back
    assert pool.held["ibf_buckets"] == 60
    one.give("ibf_buckets", 70)        # a late give changes nothing
    assert pool.held["ibf_buckets"] == 60
    with pytest.raises(BudgetExceeded) as e:
        one.take("unverified")         # a job of a dead session stops at its next take
    assert e.value.scope == "closed"
    with pytest.raises(ValueError):
        Limits(unverified=0)


def test_one_key_gets_at_most_its_share_and_gives_way_to_others():
    """Issue 34 item 3: 8 sessions of one key each holding their session's limit filled
    the total, and a legitimate sync of another key was cut off. Now one key's sessions
    together hold at most KEY_FACTOR sessions' worth, and when the total is reached the
    key holding the most beyond its fair share gives way to a key below its share."""
    pool = Pool(Limits(unverified=100, total={"unverified": 400}))
    greedy = [pool.budget(b"G" * 32) for _ in range(8)]
    greedy[0].take("unverified", 100)
    greedy[1].take("unverified", 100)
    with pytest.raises(BudgetExceeded) as e:
        greedy[2].take("unverified", 1)
    assert (e.value.scope, e.value.limit) == ("key", 2 * 100)
    assert pool.key_held(b"G" * 32)["unverified"] == 200
    others = [pool.budget(bytes([k]) * 32) for k in (1, 2)]
    others[0].take("unverified", 100)
    others[1].take("unverified", 100)           # the total is reached: 400
    legit = pool.budget(b"L" * 32)
    cut = []

    async def main():
        for b in greedy + others:
            b.attach(cut.append)
        legit.take("unverified", 3)     # below its share (400 / 4 keys): G gives way
        await asyncio.sleep(0)
    asyncio.run(main())
    assert legit.held["unverified"] == 3
    assert greedy[0].closed and not greedy[1].closed and not any(b.closed for b in others)
    assert [(c.reason, c.scope) for c in cut] == [("budget: unverified", "fair share")]
    assert pool.held["unverified"] == 303
    with pytest.raises(BudgetExceeded) as e:   # room again: within the total, no one cut
        legit.take("unverified", 98)
    assert e.value.scope == "session" and not cut[1:]


def test_offload_runs_off_the_loop_one_job_per_session_and_in_total():
    pool = Pool()
    a, b = pool.budget(), pool.budget()
    running, peak, threads = [0], [0], set()
    lock = threading.Lock()
    gate = threading.Event()

    def job(x):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        threads.add(threading.get_ident())
        gate.wait(5)
        with lock:
            running[0] -= 1
        return x * 2

    async def main():
        tasks = [asyncio.create_task(bud.offload(job, i)) for i, bud in
                 enumerate((a, a, b, b))]
        await asyncio.sleep(0.1)
        assert running[0] == 1          # HEAVY_JOBS = 1 in all
        gate.set()
        assert await asyncio.gather(*tasks) == [0, 2, 4, 6]
        assert await offload(None, job, 5) == 10
    asyncio.run(main())
    assert peak[0] == 1
    assert threading.get_ident() not in threads


def test_heavy_jobs_take_turns_across_keys():
    """Issue 34 item 1: heavy jobs ran first come, first served, so a legitimate peer's
    job waited behind every job another key had queued. The next job is now always of
    the key with the least recent heavy time."""
    pool = Pool()
    greedy = [pool.budget(b"G" * 32) for _ in range(5)]
    legit = pool.budget(b"L" * 32)
    order = []
    gate = threading.Event()

    def job(name):
        if name == "G0":
            gate.wait(5)          # the greedy key's first job runs while the rest queue
        order.append(name)
        return name

    async def main():
        tasks = [asyncio.create_task(b.offload(job, "G%d" % i)) for i, b in enumerate(greedy)]
        await asyncio.sleep(0.05)
        tasks.append(asyncio.create_task(legit.offload(job, "L")))
        await asyncio.sleep(0.05)
        assert pool.jobs_queued == 5
        gate.set()
        await asyncio.gather(*tasks)
    asyncio.run(main())
    assert order[:2] == ["G0", "L"]            # not behind G1..G4
    assert sorted(order) == ["G0", "G1", "G2", "G3", "G4", "L"]


def test_a_cancelled_waiting_job_leaves_the_queue_and_the_slot_count_exact():
    pool = Pool()
    a, b, c = (pool.budget(bytes([k]) * 32) for k in (1, 2, 3))
    gate = threading.Event()

    async def main():
        first = asyncio.create_task(a.offload(gate.wait, 5))
        await asyncio.sleep(0.05)
        waiting = asyncio.create_task(b.offload(lambda: "b"))
        third = asyncio.create_task(c.offload(lambda: "c"))
        await asyncio.sleep(0.05)
        waiting.cancel()
        await asyncio.sleep(0)
        assert pool.jobs_queued == 1
        gate.set()
        assert await third == "c" and await first
        assert pool._jobs.free == 1
    asyncio.run(main())
