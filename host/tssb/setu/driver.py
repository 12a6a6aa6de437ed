"""asyncio driver: runs a Reconciler over a Channel (host/tssb/channel.py).

Sending is decoupled from receiving through a local outbox task, so two ends that both
produce long bursts (element floods, demand answers) never deadlock on the channel's
back-pressure.
"""
import asyncio
import time

from ..channel import ChannelClosed
from .errors import SetuError
from .machine import Reconciler

DEFAULT_IDLE_TIMEOUT = 60.0   # seconds without a message before giving up (draft 8: purge)


async def reconcile(channel, eset, initiator, config=None, progress=None,
                    idle_timeout=DEFAULT_IDLE_TIMEOUT):
    """Run one SETU operation to completion.

    Args:
        channel: a Channel (send/recv/close, byte and message counters).
        eset: the local ElementSet; received elements are added to it.
        initiator: True for the side that sends the OPERATION_REQUEST.
        config: machine.Config (both ends must agree, see Config).
        progress: optional callable(stats dict) called every 256 messages.
        idle_timeout: seconds to wait for any one message.
    Returns:
        dict: the machine's stats plus bytes_sent, bytes_recv, msgs_sent, msgs_recv,
        duration_ms, ok=True.
    Raises:
        SetuError: protocol abort (reason in .reason), timeout or peer closed.
    """
    m = Reconciler(eset, initiator, config)
    t0 = time.monotonic()
    b0 = (channel.sent_bytes, channel.recv_bytes, channel.sent_msgs, channel.recv_msgs)
    outbox = asyncio.Queue()
    failure = []

    async def pump():
        while True:
            msg = await outbox.get()
            if msg is None:
                return
            try:
                await channel.send(msg)
            except ChannelClosed:
                failure.append(SetuError("peer closed"))
                return

    sender = asyncio.ensure_future(pump())
    try:
        if initiator:
            for msg in m.start():
                outbox.put_nowait(msg)
        n = 0
        while not m.finished:
            if failure:
                raise failure[0]
            try:
                buf = await asyncio.wait_for(channel.recv(), idle_timeout)
            except asyncio.TimeoutError:
                m.abort("timeout")
                raise SetuError("timeout", "no message for %.0f s" % idle_timeout)
            except ChannelClosed:
                m.abort("peer closed")
                raise SetuError("peer closed", "in state %s" % m.state)
            for msg in m.receive(buf):
                outbox.put_nowait(msg)
            n += 1
            if progress is not None and n % 256 == 0:
                progress(dict(m.stats, state=m.state))
        outbox.put_nowait(None)
        await sender
        if failure:
            raise failure[0]
    finally:
        if not sender.done():
            sender.cancel()
    res = dict(m.stats)
    res.update(bytes_sent=channel.sent_bytes - b0[0], bytes_recv=channel.recv_bytes - b0[1],
               msgs_sent=channel.sent_msgs - b0[2], msgs_recv=channel.recv_msgs - b0[3],
               duration_ms=int((time.monotonic() - t0) * 1000), ok=True)
    return res
