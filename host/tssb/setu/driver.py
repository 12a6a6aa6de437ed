"""asyncio driver: runs a Reconciler over a Channel (host/tssb/channel.py).

Sending is decoupled from receiving through a local outbox task, so two ends that both
produce long bursts (element floods, demand answers) never deadlock on the channel's
back-pressure. What waits in the outbox is charged to the session budget
("buffered_bytes"): a peer that keeps asking while it does not read is cut off. A full-set
transfer waits there as one generator, built message by message as it is sent.

Fairness: the heavy steps (strata estimators over our set, IBF decoding and building) run
off the event loop through the budget's `offload`; every other message yields to the loop
after it is handled, so one peer's burst never holds the loop for the others.
"""
import asyncio
import time

from tssb.channel import PEER_TIMEOUT_S, ChannelClosed
from tssb.session.budget import offload

from . import constants as C
from .errors import SetuError
from .machine import Reconciler

DEFAULT_IDLE_TIMEOUT = PEER_TIMEOUT_S  # seconds to wait for a message, or to send one
# Messages whose handling may touch every element of our set or every bucket of an IBF
# (or, for the rateless profile, peel coded symbols).
HEAVY = frozenset((C.MSG_OPERATION_REQUEST, C.MSG_SE, C.MSG_SEC, C.MSG_IBF_LAST,
                   C.MSG_RL_REQUEST, C.MSG_RL))


def _msg_type(buf):
    return (buf[2] << 8) | buf[3] if len(buf) >= C.HEADER_SIZE else 0


async def reconcile(channel, eset, initiator, config=None, progress=None,
                    idle_timeout=DEFAULT_IDLE_TIMEOUT, budget=None):
    """Run one SETU operation to completion.

    Args:
        channel: a Channel (send/recv/close, byte and message counters).
        eset: the local ElementSet; received elements are added to it.
        initiator: True for the side that sends the OPERATION_REQUEST.
        config: machine.Config (both ends must agree, see Config).
        progress: optional callable(stats dict) called every 256 messages.
        idle_timeout: seconds to wait for any one message from the peer, and for the
            peer to take any one of ours.
        budget: tssb.session.budget.Budget; default the channel's (`channel.budget`).
    Returns:
        dict: the machine's stats plus bytes_sent, bytes_recv, msgs_sent, msgs_recv,
        duration_ms, ok=True.
    Raises:
        SetuError: protocol abort (reason in .reason), timeout or peer closed ("peer
            closed"; its `unanswered` is True when the peer sent nothing at all).
        BudgetExceeded: the peer made us hold more than the budget allows.
    """
    if budget is None:
        budget = getattr(channel, "budget", None)
    m = Reconciler(eset, initiator, config)
    m.budget = budget
    m.lazy_output = True
    t0 = time.monotonic()
    b0 = (channel.sent_bytes, channel.recv_bytes, channel.sent_msgs, channel.recv_msgs)
    outbox = asyncio.Queue()
    failure = []

    def queue(items):
        for item in items:
            if budget is not None and isinstance(item, bytes):
                budget.take("buffered_bytes", len(item))
            outbox.put_nowait(item)

    async def send(msg):
        try:
            await asyncio.wait_for(channel.send(msg), idle_timeout)
        except asyncio.TimeoutError:
            raise SetuError("timeout", "peer took no message for %.0f s" % idle_timeout)

    async def pump():
        try:
            while True:
                item = await outbox.get()
                if item is None:
                    return
                if isinstance(item, bytes):
                    try:
                        await send(item)
                    finally:
                        if budget is not None:
                            budget.give("buffered_bytes", len(item))
                else:
                    for msg in item:
                        await send(msg)
        except ChannelClosed:
            failure.append(SetuError("peer closed"))
        except SetuError as e:
            failure.append(e)

    sender = asyncio.ensure_future(pump())
    try:
        if initiator:
            queue(m.start())
        n = 0
        while not m.finished:
            if failure:
                raise failure[0]
            try:
                buf = await asyncio.wait_for(channel.recv(), idle_timeout)
            except asyncio.TimeoutError:
                m.abort("timeout")
                raise SetuError("timeout", "no message for %.0f s" % idle_timeout)
            except ChannelClosed as e:
                state, confirming = m.state, m.confirming
                m.abort("peer closed")
                why = str(e) if str(e) not in ("", "peer closed") else ""
                err = SetuError("peer closed", "%s%s" % (
                    why or "in state %s%s" % (state, "" if n else ", before any answer"),
                    ", before confirming what it stored of ours" if confirming else ""))
                # e.g. a peer that refused our opening message (not one that said why)
                err.unanswered = not n and not why
                raise err
            if _msg_type(buf) in HEAVY:
                queue(await offload(budget, m.receive, buf))
            else:
                queue(m.receive(buf))
                await asyncio.sleep(0)
            n += 1
            if progress is not None and n % 256 == 0:
                progress(dict(m.stats, state=m.state))
        outbox.put_nowait(None)
        await sender
        if failure:
            raise failure[0]
    finally:
        m.close()       # whatever keeps this frame (a traceback) must not keep the set
        if not sender.done():
            sender.cancel()
        while not outbox.empty():   # what was never sent is no longer held for the peer
            item = outbox.get_nowait()
            if budget is not None and isinstance(item, bytes):
                budget.give("buffered_bytes", len(item))
    res = dict(m.stats)
    res.update(bytes_sent=channel.sent_bytes - b0[0], bytes_recv=channel.recv_bytes - b0[1],
               msgs_sent=channel.sent_msgs - b0[2], msgs_recv=channel.recv_msgs - b0[3],
               duration_ms=int((time.monotonic() - t0) * 1000), ok=True)
    return res
