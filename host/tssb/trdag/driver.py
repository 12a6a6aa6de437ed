"""asyncio driver: runs a SyncSession over a tssb.channel Channel.

Reading and writing run concurrently: both ends push DATA at the same time, and with
channel back-pressure a side that only wrote would wait for a reader that is also only
writing. Our outgoing queue holds our own frames only (bounded by our own DAG).
Every wait on the peer (its next frame, or taking one of ours) ends after `timeout`
seconds with TrdagError("timeout"): a lost frame cannot stall either side for ever.
Each received frame yields to the event loop once it is handled (fairness between peers).
"""
import asyncio
import time

from tssb.channel import PEER_TIMEOUT_S, ChannelClosed
from tssb.trdag.errors import TrdagError
from tssb.trdag.session import SyncSession

_STOP = object()


async def run(channel, session, progress=None, timeout=None):
    """Drive `session` over `channel` until it is done.

    Args:
        channel: a Channel (contract 2); session: a fresh SyncSession.
        progress: optional function(stats) called after each received frame.
        timeout: seconds to wait for the peer's next frame, or for it to take one of ours
            (default PEER_TIMEOUT_S).
    Returns: the session's Stats (with duration_ms added).
    Raises: TrdagError (after sending ABORT to the peer when the fault is ours to report;
        "timeout" when the peer went silent).
    """
    if timeout is None:
        timeout = PEER_TIMEOUT_S
    t0 = time.monotonic()
    out = asyncio.Queue()

    async def writer():
        while True:
            f = await out.get()
            if f is _STOP:
                return
            await asyncio.wait_for(channel.send(f), timeout)

    wtask = asyncio.create_task(writer())
    failed = True
    try:
        for f in session.start():
            out.put_nowait(f)
        while not session.done:
            try:
                frame = await asyncio.wait_for(channel.recv(), timeout)
                frames = session.receive(frame)
            except ChannelClosed:
                raise TrdagError("channel_closed")
            except asyncio.TimeoutError:
                e = TrdagError("timeout", "no frame for %g s" % timeout)
                out.put_nowait(session.abort_frame(e))
                raise e
            except TrdagError as e:
                if e.reason not in ("peer_abort",):
                    out.put_nowait(session.abort_frame(e))
                raise
            for f in frames:
                out.put_nowait(f)
            if progress is not None:
                progress(session.stats)
            await asyncio.sleep(0)
        failed = False
    finally:
        out.put_nowait(_STOP)
        try:   # let our last frames (ABORT, FINAL) go out; a stalled peer gets a short wait
            await asyncio.wait_for(wtask, 2 if failed else 30)
        except (ChannelClosed, asyncio.TimeoutError, ConnectionError):
            wtask.cancel()
    session.stats.duration_ms = int((time.monotonic() - t0) * 1000)
    return session.stats


async def sync(channel, dag, root=None, initiator=True, options=None, progress=None,
               timeout=None):
    """Convenience: build a SyncSession and run it. Returns (session, stats)."""
    kw = {} if options is None else {"options": options}
    s = SyncSession(dag, root, initiator, **kw)
    st = await run(channel, s, progress, timeout)
    return s, st


def run_local(a, b):
    """Run two SyncSessions against each other in memory without asyncio (simulator,
    benchmarks): frames are delivered in order, alternating sides.

    Returns: None. Raises: the first TrdagError either side raises.
    """
    to_b = list(a.start())
    to_a = list(b.start())
    while to_a or to_b:
        if to_b:
            to_a.extend(b.receive(to_b.pop(0)))
        if to_a:
            to_b.extend(a.receive(to_a.pop(0)))
    if not (a.ok and b.ok):
        raise TrdagError("incomplete", "frames ran out before both sides finished")
