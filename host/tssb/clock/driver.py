"""asyncio driver: runs a SyncMachine over a Channel (contract 2) and reports a summary.

A writer task drains an unbounded local outbox into the channel, so the reading loop
never blocks on the channel's back-pressure while the peer is itself blocked sending.
Every wait on the peer ends after `timeout` seconds with the reason "timeout" (a round in
progress, or the peer taking one of our messages); only a converged session kept open for
maintenance waits without one (the session's idle timeout bounds it). Each received
message yields to the event loop once it is handled.
"""
import asyncio
import time

from tssb import synclog
from tssb.channel import PEER_TIMEOUT_S, ChannelClosed
from tssb.clock.errors import ClockError



async def run_sync(channel, machine, first=None, events=None, peer=b"", maintain=None,
                   timeout=None):
    """Drive one end of a clock sync until both ends agree (or it fails).

    Args:
        channel: a Channel.
        machine: a fresh SyncMachine.
        first: a message already read from the channel (the service peeks at HELLO).
        events: event-log writer with .emit(event, **fields), or None.
        peer: the peer's public key (for the log).
        maintain: optional asyncio.Queue; when given, keep the session open after
            convergence (maintenance, spec step 6): put any object when local events
            were added (starts a new round), None to end the session.
        timeout: seconds to wait for the peer (default PEER_TIMEOUT_S).
    Returns:
        dict with the `sync_done` fields plus trips, joins_sent, joins_recv, forks_found
        (fork proofs found in arriving events), joins_made (our own new joins),
        chunks_sent and chunks_recv (side-chain chunks sent, and stored here).
    """
    proto = "clock"   # the event schema's protocol name; the mode goes into `mode`
    if timeout is None:
        timeout = PEER_TIMEOUT_S
    peer_hex = peer.hex() if isinstance(peer, (bytes, bytearray)) else str(peer)
    synclog.start(events, proto, peer)
    t0 = time.monotonic()
    outbox = asyncio.Queue()
    ok, reason = False, None

    async def writer():
        while True:
            msg = await outbox.get()
            if msg is None:
                return
            await asyncio.wait_for(channel.send(msg), timeout)

    wtask = asyncio.ensure_future(writer())
    try:
        if first is None:
            out = machine.start()
        else:  # responder: HELLO first fixes the entity; our HELLO still goes out first
            reply = machine.receive(first)
            out = machine.start() + reply
        for m in out:
            outbox.put_nowait(m)
        recv_task = None
        while True:
            if machine.converged and maintain is None:
                break
            if recv_task is None:
                recv_task = asyncio.ensure_future(channel.recv())
            if maintain is not None and machine.converged:
                # Maintenance (spec step 6): idle until the peer starts a round or we
                # have new local events (or are told to stop).
                upd = asyncio.ensure_future(maintain.get())
                done, _ = await asyncio.wait({recv_task, upd}, return_when=asyncio.FIRST_COMPLETED)
                if upd in done:
                    if upd.result() is None:
                        recv_task.cancel()
                        break
                    for m in machine.update():
                        outbox.put_nowait(m)
                    continue
                upd.cancel()
            done, _ = await asyncio.wait({recv_task}, timeout=timeout)
            if not done:
                recv_task.cancel()
                machine.reason = "timeout"
                raise ClockError("timeout", "no message for %g s" % timeout)
            msg = recv_task.result()
            recv_task = None
            for m in machine.receive(msg):
                outbox.put_nowait(m)
            await asyncio.sleep(0)
        ok = True
    except ClockError as e:
        reason = e.reason
        if e.reason != "peer_error":
            outbox.put_nowait(machine.error_message())
    except ChannelClosed:
        if maintain is not None and machine.converged:
            ok = True    # the peer ended a maintained session in a consistent state
        else:
            reason = "closed"
    finally:
        outbox.put_nowait(None)
        try:
            await asyncio.wait_for(wtask, 10)
        except (ChannelClosed, asyncio.TimeoutError):
            wtask.cancel()
        if maintain is not None:
            channel.close()
    summary = {
        "proto": proto, "peer": peer_hex, "mode": machine.mode,
        "rounds": machine.stats["rounds"], "trips": machine.stats["trips"],
        "bytes_sent": channel.sent_bytes, "bytes_recv": channel.recv_bytes,
        "msgs_sent": channel.sent_msgs, "msgs_recv": channel.recv_msgs,
        "elements_sent": machine.stats["events_sent"], "elements_recv": machine.stats["events_recv"],
        "duration_ms": int((time.monotonic() - t0) * 1000), "ok": ok, "reason": reason,
        "joins_sent": machine.stats["joins_sent"], "joins_recv": machine.stats["joins_recv"],
        "forks_found": len(machine.forks_found), "joins_made": len(machine.joins_made),
        "chunks_sent": machine.stats["chunks_sent"], "chunks_recv": machine.stats["chunks_recv"],
    }
    synclog.done(events, proto, peer, ok, reason, machine.mode,
                 **{k: summary[k] for k in synclog.COUNTS})
    return summary
