"""Message channels between two protocol ends (host side, asyncio).

Every host-to-host protocol (SETU, trDAG, Bloom-clock sync, certificates) talks over a
`Channel`: an ordered, reliable sequence of whole binary messages in each direction. The
secure session layer (secret handshake + box stream + multiplexer) provides channels over
TCP; `memory_pair()` provides two connected in-memory ends for tests and benchmarks.

Channel interface:
  await send(msg: bytes)      queue one message (waits while the peer is too far behind)
  await recv() -> bytes       next message; raises ChannelClosed when the peer closed
  close()                     no more messages from this end
  sent_bytes, recv_bytes, sent_msgs, recv_msgs   counters for summaries
"""
import asyncio

# The longest any protocol driver waits for the peer: for its next message, or for it to
# take one of ours (draft-summermatter-set-union-01 section 8 purges idle operations; one
# minute is far above the round trips of a loaded host). Every driver names its timeout.
PEER_TIMEOUT_S = 60.0


class ChannelClosed(Exception):
    """The other end closed the channel (or the session under it ended)."""


_EOF = object()


class _Pipe:
    """One direction: an unbounded queue plus a semaphore for back-pressure, so the
    end-of-stream marker always fits and close() never blocks."""

    def __init__(self, max_queue):
        self.q = asyncio.Queue()
        self.room = asyncio.Semaphore(max_queue)


class MemoryChannel:
    def __init__(self, inbox, outbox):
        self._in = inbox
        self._out = outbox
        self._closed = False
        self.sent_bytes = self.recv_bytes = self.sent_msgs = self.recv_msgs = 0

    async def send(self, msg):
        if self._closed:
            raise ChannelClosed("send on closed channel")
        msg = bytes(msg)
        await self._out.room.acquire()
        self._out.q.put_nowait(msg)
        self.sent_bytes += len(msg)
        self.sent_msgs += 1

    async def recv(self):
        msg = await self._in.q.get()
        if msg is _EOF:
            self._in.q.put_nowait(_EOF)  # stay closed for later callers
            raise ChannelClosed("peer closed")
        self._in.room.release()
        self.recv_bytes += len(msg)
        self.recv_msgs += 1
        return msg

    def close(self):
        if not self._closed:
            self._closed = True
            self._out.q.put_nowait(_EOF)


def memory_pair(max_queue=64):
    """Two connected in-memory channel ends with back-pressure after `max_queue` messages."""
    a_to_b = _Pipe(max_queue)
    b_to_a = _Pipe(max_queue)
    return MemoryChannel(b_to_a, a_to_b), MemoryChannel(a_to_b, b_to_a)
