"""asyncio driver: runs a SyncSession over a tssb.channel Channel.

Reading and writing run concurrently: both ends push DATA at the same time, and with
channel back-pressure a side that only wrote would wait for a reader that is also only
writing. Our outgoing queue holds our own frames only (bounded by our own DAG).
"""
import asyncio
import time

from tssb.channel import ChannelClosed
from tssb.trdag.errors import TrdagError
from tssb.trdag.session import SyncSession

_STOP = object()


async def run(channel, session, progress=None):
    """Drive `session` over `channel` until it is done.

    Args:
        channel: a Channel (contract 2); session: a fresh SyncSession.
        progress: optional function(stats) called after each received frame.
    Returns: the session's Stats (with duration_ms added).
    Raises: TrdagError (after sending ABORT to the peer when the fault is ours to report).
    """
    t0 = time.monotonic()
    out = asyncio.Queue()

    async def writer():
        while True:
            f = await out.get()
            if f is _STOP:
                return
            await channel.send(f)

    wtask = asyncio.create_task(writer())
    failed = True
    try:
        for f in session.start():
            out.put_nowait(f)
        while not session.done:
            try:
                frame = await channel.recv()
            except ChannelClosed:
                raise TrdagError("channel_closed")
            try:
                frames = session.receive(frame)
            except TrdagError as e:
                if e.reason not in ("peer_abort",):
                    out.put_nowait(session.abort_frame(e))
                raise
            for f in frames:
                out.put_nowait(f)
            if progress is not None:
                progress(session.stats)
        failed = False
    finally:
        out.put_nowait(_STOP)
        try:   # let our last frames (ABORT, FINAL) go out; a stalled peer gets a short wait
            await asyncio.wait_for(wtask, 2 if failed else 30)
        except (ChannelClosed, asyncio.TimeoutError, ConnectionError):
            wtask.cancel()
    session.stats.duration_ms = int((time.monotonic() - t0) * 1000)
    return session.stats


async def sync(channel, dag, root=None, initiator=True, options=None, progress=None):
    """Convenience: build a SyncSession and run it. Returns (session, stats)."""
    kw = {} if options is None else {"options": options}
    s = SyncSession(dag, root, initiator, **kw)
    st = await run(channel, s, progress)
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
