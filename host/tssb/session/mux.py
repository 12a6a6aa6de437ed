"""Stream multiplexer: several named message channels over one box stream.

Every box-stream body is one frame:  kind:u8 | stream id:u16 BE | payload.

  OPEN    payload = service name (UTF-8, 1..64 bytes); opener picks the id
          (client odd, server even, so ids never collide)
  ACCEPT  empty                      REFUSE  payload = reason (UTF-8, <= 200 bytes)
  MORE    a fragment, more follow    LAST    the last fragment of one message
  CREDIT  payload = u32 BE bytes granted back to the sender
  CLOSE   empty: the sender sends no more on this stream (half close)
  REFUSE on stream 0 (no stream has that id): the sender ends the whole session, and
  says why (a server busy, or a peer cut off for exceeding a budget); a goodbye follows

Back-pressure is credit based, per stream: a sender may have at most WINDOW "cost units"
unacknowledged (a fragment costs its length + FRAME_COST, so even empty messages are
bounded); the receiver grants units back as the application consumes whole messages.
Hence receive buffers never exceed WINDOW per stream and MAX_STREAMS streams per session;
a peer that overruns its credit is a protocol error. MAX_MESSAGE <= WINDOW / 2 keeps one
message always deliverable.

What a peer can make us queue is charged to the session's Budget (budget.py): control
frames waiting for a peer that does not read (CREDITs of one stream coalesce into one
frame), and streams it opened (held until both ends closed and the service has ended).
A queue past its limit cuts the peer off (`on_fail`); a stream past its limit is refused.
"""
import asyncio

from tssb.channel import ChannelClosed
from tssb.session.boxstream import MAX_BODY
from tssb.session.budget import BudgetExceeded, Pool
from tssb.session.errors import ProtocolError, SessionRefused, StreamRefused

OPEN, ACCEPT, REFUSE, MORE, LAST, CREDIT, CLOSE = 1, 2, 3, 4, 5, 6, 7
_KINDS = (OPEN, ACCEPT, REFUSE, MORE, LAST, CREDIT, CLOSE)
FRAME_HEADER = 3
MAX_FRAGMENT = MAX_BODY - FRAME_HEADER
FRAME_COST = 16            # per-fragment charge so empty messages still use credit
MAX_NAME = 64
MAX_REASON = 200
MAX_MESSAGE = 512 * 1024   # largest channel message (SETU IBFs of a few thousand cells fit)
WINDOW = 1024 * 1024       # per-stream credit; >= 2 * MAX_MESSAGE plus fragment charges
MAX_STREAMS = 16           # concurrently open streams per session
GRANT_THRESHOLD = WINDOW // 4  # batch CREDIT frames
SESSION_SID = 0            # REFUSE on this id ends the session (no stream uses it)


def encode_frame(kind, sid, payload=b""):
    """Returns: one frame (bytes). Raises: ValueError on a caller bug."""
    if kind not in _KINDS or not 0 <= sid <= 0xFFFF or len(payload) > MAX_FRAGMENT:
        raise ValueError("bad frame")
    return bytes((kind, sid >> 8, sid & 0xFF)) + bytes(payload)


def decode_frame(body):
    """Parse one frame. Returns: (kind, sid, payload). Raises: ProtocolError."""
    if len(body) < FRAME_HEADER:
        raise ProtocolError("short frame", len(body))
    kind, sid, payload = body[0], (body[1] << 8) | body[2], bytes(body[3:])
    if kind not in _KINDS:
        raise ProtocolError("frame kind", kind)
    if kind == OPEN and not 0 < len(payload) <= MAX_NAME:
        raise ProtocolError("stream name length", len(payload))
    if kind in (ACCEPT, CLOSE) and payload:
        raise ProtocolError("frame payload", kind)
    if kind == REFUSE and len(payload) > MAX_REASON:
        raise ProtocolError("refuse reason length", len(payload))
    if kind == CREDIT and len(payload) != 4:
        raise ProtocolError("credit length", len(payload))
    if kind in (OPEN, REFUSE):
        try:
            payload = payload.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("text not utf-8")
    elif kind == CREDIT:
        payload = int.from_bytes(payload, "big")
    return kind, sid, payload


class Stream:
    """One named stream: a Channel (tssb.channel contract) over the session."""

    def __init__(self, mux, sid, name):
        self._mux = mux
        self.sid = sid
        self.name = name
        self._inbox = asyncio.Queue()   # complete messages, then None for end of stream
        self._parts = []                 # fragments of the message being reassembled
        self._parts_len = 0
        self._parts_cost = 0
        self._credit = WINDOW            # units we may still send
        self._credit_changed = asyncio.Event()
        self._held = 0                   # units received and not yet granted back
        self._consumed = 0               # units consumed by recv() not yet granted
        self.local_closed = False
        self.remote_closed = False
        self._dead = None                # reason once the session ended
        self._holds = 0                  # holders of a peer-opened stream's budget charge (Mux.on_frame)
        self.sent_bytes = self.recv_bytes = self.sent_msgs = self.recv_msgs = 0

    # -- Channel interface -----------------------------------------------------------

    async def send(self, msg):
        """Send one message, waiting for credit. Raises: ChannelClosed, ValueError (too big)."""
        msg = bytes(msg)
        if len(msg) > MAX_MESSAGE:
            raise ValueError("message longer than %d bytes" % MAX_MESSAGE)
        if self.local_closed or self._dead:
            raise ChannelClosed(self._dead or "send on closed channel")
        pos = 0
        while True:
            piece = msg[pos:pos + MAX_FRAGMENT]
            pos += len(piece)
            cost = len(piece) + FRAME_COST
            while self._credit < cost:
                self._credit_changed.clear()
                await self._credit_changed.wait()
                if self._dead or self.local_closed:
                    raise ChannelClosed(self._dead or "channel closed")
            self._credit -= cost
            await self._mux.write(encode_frame(LAST if pos >= len(msg) else MORE, self.sid, piece))
            if pos >= len(msg):
                break
        self.sent_bytes += len(msg)
        self.sent_msgs += 1

    async def recv(self):
        """Returns: the next message. Raises: ChannelClosed at end of stream."""
        item = await self._inbox.get()
        if item is None:
            self._inbox.put_nowait(None)  # stay closed for later callers
            raise ChannelClosed(self._dead or "peer closed")
        msg, cost = item
        self._consumed += cost
        if self._consumed >= GRANT_THRESHOLD or self._inbox.empty():
            self._mux.send_credit(self.sid, self._consumed)
            self._held -= self._consumed
            self._consumed = 0
        self.recv_bytes += len(msg)
        self.recv_msgs += 1
        return msg

    def close(self):
        """No more messages from this end (the peer's recv() then raises ChannelClosed)."""
        if not self.local_closed:
            self.local_closed = True
            self._credit_changed.set()
            if not self._dead:
                self._mux.send_control(CLOSE, self.sid)
            self._mux.maybe_forget(self)

    @property
    def budget(self):
        """The session's Budget (budget.py), for services that hold what the peer sends."""
        return self._mux.budget

    def release(self):
        """The service of a peer-opened stream has ended (see Mux.on_frame)."""
        self._unhold()

    def _unhold(self):
        if self._holds > 0:
            self._holds -= 1
            if self._holds == 0:
                self._mux.budget.give("streams")

    # -- driven by the mux -----------------------------------------------------------

    def _on_data(self, kind, payload):
        if self.remote_closed:
            raise ProtocolError("data after close")
        cost = len(payload) + FRAME_COST
        self._held += cost
        if self._held > WINDOW:
            raise ProtocolError("credit exceeded")
        self._parts_len += len(payload)
        if self._parts_len > MAX_MESSAGE:
            raise ProtocolError("message too long")
        self._parts.append(payload)
        self._parts_cost += cost
        if kind == LAST:
            msg = b"".join(self._parts)
            self._inbox.put_nowait((msg, self._parts_cost))
            self._parts, self._parts_len, self._parts_cost = [], 0, 0

    def _on_credit(self, n):
        self._credit += n
        if self._credit > WINDOW:
            raise ProtocolError("credit overflow")
        self._credit_changed.set()

    def _on_close(self):
        if self.remote_closed:
            raise ProtocolError("double close")
        if self._parts:
            raise ProtocolError("close inside message")
        self.remote_closed = True
        self._inbox.put_nowait(None)
        self._mux.maybe_forget(self)

    def _kill(self, reason):
        self._dead = reason
        self.remote_closed = True
        self._inbox.put_nowait(None)
        self._credit_changed.set()


class Mux:
    """Frame router of one session.

    Args:
        write: async function sending one frame (a box-stream body).
        initiator: True on the client (odd stream ids), False on the server.
        on_open: function(name, stream) -> None to accept or a reason string to refuse;
            None refuses every incoming stream. An accepted stream stays charged to the
            budget until the acceptor calls `stream.release()` and both ends closed it.
        budget: the session's budget.Budget (default: one of a private Pool).
        on_fail: function(BudgetExceeded) ending the session when a budget is exceeded
            outside on_frame (default: raise it to the caller).
    """

    def __init__(self, write, initiator, on_open=None, budget=None, on_fail=None):
        self._write = write
        self._on_open = on_open
        self.budget = budget if budget is not None else Pool().budget()
        self._on_fail = on_fail
        self._next_sid = 1 if initiator else 2
        self.streams = {}
        self._pending = {}   # sid -> (future, stream) awaiting ACCEPT/REFUSE
        self._control = []   # control frames queued by sync code, flushed by the writer
        self._credits = {}   # sid -> units to grant: one queued CREDIT frame per stream
        self._control_ready = asyncio.Event()
        self._write_lock = asyncio.Lock()
        self.closed_reason = None

    async def write(self, frame):
        """Send one frame after any queued control frames (so an ACCEPT always precedes
        the service's first data, and credit is never held back behind data)."""
        async with self._write_lock:
            await self._flush()
            await self._write(frame)

    async def _flush(self):
        # in order, then the coalesced credits (a CREDIT never precedes its stream's ACCEPT)
        while self._control or self._credits:
            if self._control:
                frame = self._control.pop(0)
            else:
                sid = next(iter(self._credits))
                frame = encode_frame(CREDIT, sid, self._credits.pop(sid).to_bytes(4, "big"))
            self.budget.give("control_frames")
            await self._write(frame)

    def send_control(self, kind, sid, payload=b""):
        """Queue a control frame from synchronous code (flush_control sends it).

        A peer that makes us queue more than the budget allows (it does not read) is
        cut off: on_fail, or BudgetExceeded raised when there is none.
        """
        if self._charge_control():
            self._control.append(encode_frame(kind, sid, payload))
            self._control_ready.set()

    def send_credit(self, sid, units):
        """Grant `units` of credit back on stream `sid` (merged with a queued grant)."""
        if sid in self._credits:
            units += self._credits[sid]
        elif not self._charge_control():
            return
        self._credits[sid] = units
        self._control_ready.set()

    def _charge_control(self):
        if self.closed_reason:
            return False
        try:
            self.budget.take("control_frames")
        except BudgetExceeded as e:
            self.fail(e)
            return False
        return True

    def fail(self, exc):
        """A budget was exceeded: end the session through on_fail (or raise)."""
        if self._on_fail is None:
            raise exc
        self._on_fail(exc)

    async def flush_control(self):
        """Writer task body: send queued control frames as they appear, until the end."""
        try:
            while True:
                await self._control_ready.wait()
                self._control_ready.clear()
                async with self._write_lock:
                    await self._flush()
        except ChannelClosed:
            pass

    async def open(self, name):
        """Open a stream to the peer's service `name`.

        Returns: Stream. Raises: StreamRefused, ChannelClosed (session ended), ValueError.
        """
        raw = name.encode("utf-8")
        if not 0 < len(raw) <= MAX_NAME:
            raise ValueError("stream name must be 1..%d bytes" % MAX_NAME)
        if self.closed_reason:
            raise ChannelClosed(self.closed_reason)
        if len(self.streams) + len(self._pending) >= MAX_STREAMS:
            raise ValueError("too many open streams")
        sid = self._next_sid
        while sid in self.streams or sid in self._pending:
            sid = self._step(sid)
        self._next_sid = self._step(sid)
        stream = Stream(self, sid, name)
        fut = asyncio.get_running_loop().create_future()
        self._pending[sid] = (fut, stream)
        await self.write(encode_frame(OPEN, sid, raw))
        reason = await fut
        if reason is not None:
            raise StreamRefused(name, reason)
        return stream

    @staticmethod
    def _step(sid):
        # ids keep their parity; wrap around within 1..0xFFFF
        nxt = sid + 2
        return nxt if nxt <= 0xFFFF else nxt - 0xFFFE

    def maybe_forget(self, stream):
        if stream.local_closed and stream.remote_closed:
            if self.streams.pop(stream.sid, None) is stream:
                stream._unhold()

    def on_frame(self, body):
        """Handle one incoming frame. Raises: ProtocolError (BudgetExceeded included
        when there is no on_fail)."""
        if self.closed_reason:
            return  # cut off while the rest of a read was being handled
        kind, sid, payload = decode_frame(body)
        if kind == OPEN:
            if sid in self.streams or (sid & 1) == (self._next_sid & 1):
                raise ProtocolError("stream id", sid)
            try:
                self.budget.take("streams")
            except BudgetExceeded as e:
                reason = b"too many streams" if e.scope == "session" else b"server busy"
                self.send_control(REFUSE, sid, reason)
                return
            stream = Stream(self, sid, payload)
            stream._holds = 2   # the stream table's entry and the service
            refusal = "no services here" if self._on_open is None else self._on_open(payload, stream)
            if refusal is not None:
                self.budget.give("streams")
                self.send_control(REFUSE, sid, refusal.encode("utf-8")[:MAX_REASON])
                return
            self.streams[sid] = stream
            self.send_control(ACCEPT, sid)
            return
        if kind == REFUSE and sid == SESSION_SID:
            raise SessionRefused(payload)
        if kind in (ACCEPT, REFUSE):
            pend = self._pending.pop(sid, None)
            if pend is None:
                raise ProtocolError("unexpected answer", sid)
            fut, stream = pend
            if kind == ACCEPT:
                self.streams[sid] = stream
                if not fut.done():
                    fut.set_result(None)
            elif not fut.done():
                fut.set_result(payload)
            return
        stream = self.streams.get(sid)
        if stream is None:
            if kind == CREDIT:
                return  # credit for a stream we already forgot: harmless
            raise ProtocolError("unknown stream", sid)
        if kind in (MORE, LAST):
            stream._on_data(kind, payload)
        elif kind == CREDIT:
            stream._on_credit(payload)
        else:
            stream._on_close()

    def shutdown(self, reason):
        """The session ended: every stream and pending open sees ChannelClosed."""
        if self.closed_reason:
            return
        self.closed_reason = reason
        for stream in list(self.streams.values()):
            stream._kill(reason)
        for fut, stream in self._pending.values():
            if not fut.done():
                fut.set_exception(ChannelClosed(reason))
        self._pending.clear()
        # Drop what we hold for the peer and our references to the session: without these
        # cycles (mux <-> streams, mux <-> session) what a cut-off peer left in our buffers
        # is freed at once, not at the next full garbage collection.
        self.streams.clear()
        self._control.clear()
        self._credits.clear()
        self._on_open = self._on_fail = None
