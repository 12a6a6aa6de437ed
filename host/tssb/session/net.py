"""Asyncio driver: TCP client and server running the secret handshake, the box stream
and the multiplexer, and dispatching incoming streams to host services by name.
"""
import asyncio
import collections
import importlib
import logging
import time

from tssb.channel import ChannelClosed
from tssb.session import shs
from tssb.session.boxstream import BoxReader, BoxWriter
from tssb.session.budget import BudgetExceeded, Pool, log_cut_off
from tssb.session.errors import ProtocolError, SessionRefused
from tssb.session.mux import MAX_REASON, REFUSE, SESSION_SID, Mux, encode_frame
from tssb.session.policy import HANDSHAKE_TIMEOUT, IDLE_TIMEOUT, PeerPolicy

_LOG = logging.getLogger("tssb.session")

# Stream name -> module defining `async def serve(channel, ctx, peer)` (contract 3).
SERVICES = {"setu": "tssb.setu.service", "trdag": "tssb.trdag.service",
            "clock": "tssb.clock.service", "certs": "tssb.certs.service"}
READ_SIZE = 64 * 1024      # bytes per socket read: bounds what one BoxReader.feed holds
CLOSE_WAIT_S = 2.0         # our goodbye sent: how long to wait for the peer's
END_GRACE_S = 5.0          # after a session ends, services may still finish its last messages
DEFAULT_PORT = 8008        # the SSB convention for its TCP port
LAG_TICK_S = 0.05          # loop-lag probe period: finer than the 100 ms stall we must see
# Details of a refused client handshake (ProtocolError.reason stays "handshake refused").
# A server closes silently before the handshake also when connections come faster than it
# allows or too many handshakes run at once (a busy server that knows who we are says so:
# SessionRefused).
REFUSED_AT_HELLO = ("the server did not accept our hello: it uses another network key, "
                    "or it is refusing connections for now (too many at once: try again)")
REFUSED_AT_AUTH = ("the server refused our key: it does not list us as a peer, or it is "
                   "not the host whose key we have for it")


class Session:
    """An authenticated, encrypted connection carrying named streams.

    Attributes: peer (the remote's 32-byte Ed25519 key), initiator (True on the client),
    bytes_sent / bytes_recv (wire bytes after the handshake), close_reason, budget (what
    the peer may make us hold: budget.Budget; exceeding it ends the session with the
    reason "budget: <resource>"), refusal (what the peer said when it ended the session,
    or None), last_frame (time.monotonic() of the last data received), busy (a service
    of ours is running for the peer).
    """

    def __init__(self, reader, writer, keys, initiator, on_open=None, idle_timeout=IDLE_TIMEOUT,
                 budget=None):
        self.peer = keys.peer
        self.initiator = initiator
        self._reader = reader
        self._writer = writer
        self._box_w = BoxWriter(keys.send_key, keys.send_nonce)
        self._box_r = BoxReader(keys.recv_key, keys.recv_nonce)
        self._idle = idle_timeout
        self.budget = budget if budget is not None else Pool().budget()
        self.budget.attach(self.cut_off)
        self.mux = Mux(self._write_body, initiator, on_open, self.budget, self.cut_off)
        self.bytes_sent = self.bytes_recv = 0
        self.close_reason = None
        self.refusal = None
        self.last_frame = time.monotonic()
        self._done = asyncio.Event()
        self.service_tasks = set()
        self.services_running = collections.Counter()   # service name -> running streams
        self._tasks = [asyncio.create_task(self._read_loop()),
                       asyncio.create_task(self.mux.flush_control())]

    @property
    def busy(self):
        return bool(self.service_tasks)

    def _service_done(self, task, name):
        self.service_tasks.discard(task)
        self.services_running[name] -= 1
        if self.close_reason and not self.service_tasks:
            self.budget.close()

    async def _write_body(self, body):
        if self.close_reason:
            raise ChannelClosed(self.close_reason)
        wire = self._box_w.seal(body)
        self._writer.write(wire)
        self.bytes_sent += len(wire)
        try:
            await self._writer.drain()
        except (ConnectionError, OSError) as e:
            self._end("connection lost")
            raise ChannelClosed("connection lost") from e

    async def _read_loop(self):
        reason = "connection lost"
        try:
            while True:
                data = await asyncio.wait_for(self._reader.read(READ_SIZE), self._idle)
                if not data:
                    reason = "connection lost"  # TCP closed without a goodbye
                    break
                self.bytes_recv += len(data)
                self.last_frame = time.monotonic()
                for body in self._box_r.feed(data):
                    self.mux.on_frame(body)
                    if self.close_reason:
                        return    # cut off (budget) while handling this read
                if self._box_r.closed:
                    # the peer's goodbye: its own, or its answer to ours (close())
                    reason = "closed" if self._box_w.closed else "goodbye"
                    await self._say_goodbye()
                    break
        except asyncio.TimeoutError:
            reason = "idle timeout"
            await self._say_goodbye()   # a clean end: the peer sees a goodbye, not a reset
        except BudgetExceeded as e:
            self.cut_off(e)
            return
        except SessionRefused as e:
            self.refusal = reason = e.text
        except ProtocolError as e:
            reason = "protocol error: " + e.reason
        except (ConnectionError, OSError, ChannelClosed):
            reason = "connection lost"
        self._end(reason)

    async def _say_goodbye(self):
        if self._box_w.closed or self._writer.is_closing():
            return
        async with self.mux._write_lock:
            try:
                self._writer.write(self._box_w.goodbye())
                await asyncio.wait_for(self._writer.drain(), 5)
            except (ConnectionError, OSError, asyncio.TimeoutError):
                pass

    def cut_off(self, exc):
        """End the session because the peer exceeded a budget (BudgetExceeded): logged,
        the peer told why, and the socket closed (aborted within CLOSE_WAIT_S: a peer
        that does not read gets no more of our memory)."""
        if self.close_reason:
            return
        log_cut_off(self.peer, exc.reason, str(exc))
        self.end_with("cut off: %s (%d > %d, %s)" % (exc.reason, exc.wanted, exc.limit,
                                                     exc.scope), exc.reason)
        self.budget.close()     # its services' next take fails: they stop soon

    def end_with(self, text, reason=None):
        """End the session now, telling the peer why (`text`: a REFUSE on stream 0, then
        the goodbye; written at once, without waiting for the peer to read)."""
        if self.close_reason:
            return
        if not self._box_w.closed and not self._writer.is_closing():
            self._writer.write(refusal_bytes(self._box_w, text))
        self._end(reason or text, linger=True)

    def _end(self, reason, linger=False):
        if self.close_reason:
            return
        self.close_reason = reason
        self.mux.shutdown(reason)
        if not self.service_tasks:
            self.budget.close()     # else when the last service ends (_service_done)
        me = asyncio.current_task()
        for t in self._tasks:
            if t is not me:
                t.cancel()
        services = [t for t in self.service_tasks if t is not me]
        if services:
            # The services may not have read the peer's last (authenticated) messages yet.
            # Their streams are dead (recv drains what arrived, then ChannelClosed; send
            # fails), so they finish on their own; the grace only bounds a stuck one.
            asyncio.get_running_loop().call_later(
                END_GRACE_S, lambda: [t.cancel() for t in services])
        if linger:
            _close_after(self._writer)
        else:
            self._writer.close()
        self._done.set()

    async def open_stream(self, name):
        """Open a stream to the peer's service `name`.

        Returns: a Channel (tssb.channel contract).
        Raises: StreamRefused (with the peer's reason), SessionRefused (the peer ended
            the session and said why, e.g. "server busy: too many sessions"),
            ChannelClosed (session over).
        """
        try:
            return await self.mux.open(name)
        except ChannelClosed:
            if self.refusal is not None:
                raise SessionRefused(self.refusal) from None
            raise

    async def close(self):
        """Send the goodbye and end the session (streams then raise ChannelClosed)."""
        if not self.close_reason:
            await self._say_goodbye()
            # Keep reading until the peer's goodbye (or EOF): closing a socket with unread
            # data makes the kernel send a reset, which can destroy our last frames (and
            # the goodbye) before the peer has read them.
            try:
                await asyncio.wait_for(self._done.wait(), CLOSE_WAIT_S)
            except asyncio.TimeoutError:
                pass
            self._end("closed")
        await self.wait_closed()

    async def wait_closed(self):
        await self._done.wait()
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass

    @property
    def closed(self):
        return self.close_reason is not None


def _why(reason):
    """A refused handshake's reason as the server can tell it."""
    if reason == "hello hmac":
        return "hello hmac (the client uses another network key)"
    if reason == "peer not allowed":
        return "peer not allowed (its key is not in `tssb peer list`)"
    return reason


def refusal_bytes(box_writer, text):
    """Wire bytes ending a session with a reason: REFUSE on stream 0, then the goodbye."""
    frame = encode_frame(REFUSE, SESSION_SID, text.encode("utf-8")[:MAX_REASON])
    return box_writer.seal(frame) + box_writer.goodbye()


def _close_after(writer):
    """Close after what we wrote: our FIN now, the socket within CLOSE_WAIT_S. Closing at
    once with unread data from the peer would make the kernel reset the connection and
    could destroy the frames we just wrote (a reason the peer should read)."""
    try:
        if writer.can_write_eof():
            writer.write_eof()
    except (OSError, RuntimeError):
        pass
    asyncio.get_running_loop().call_later(CLOSE_WAIT_S, writer.transport.abort)


def _close_quietly(writer):
    # Failures close without a word; abort also skips the TCP linger of unsent data.
    writer.transport.abort()


async def client_handshake(reader, writer, network_key, seed, server_public):
    """Run the client side of SHS over a stream pair. Returns: BoxKeys. Raises: ProtocolError."""
    hs = shs.ClientHandshake(network_key, seed, server_public)
    # The server closes silently; where it closes tells what it refused (same reason,
    # detail for the user): our hello (its HMAC is keyed by the network key) or our
    # authentication (it does not allow our key, or it is not the key we expected).
    step = REFUSED_AT_HELLO
    try:
        writer.write(hs.hello())
        msg2 = await reader.readexactly(shs.HELLO_LEN)
        writer.write(hs.on_server_hello(msg2))
        step = REFUSED_AT_AUTH
        msg4 = await reader.readexactly(shs.SERVER_ACCEPT_LEN)
    except (asyncio.IncompleteReadError, ConnectionError, OSError):
        raise ProtocolError("handshake refused", step)
    return hs.on_server_accept(msg4)


async def server_handshake(reader, writer, network_key, seed, allows):
    """Run the server side of SHS. Returns: BoxKeys. Raises: ProtocolError."""
    hs = shs.ServerHandshake(network_key, seed)
    try:
        msg1 = await reader.readexactly(shs.HELLO_LEN)
        writer.write(hs.on_client_hello(msg1))
        msg3 = await reader.readexactly(shs.CLIENT_AUTH_LEN)
    except asyncio.IncompleteReadError:
        raise ProtocolError("truncated handshake")
    client = hs.on_client_auth(msg3)
    if not allows(client):
        raise ProtocolError("peer not allowed")
    writer.write(hs.accept())
    return hs.keys()


async def connect(host, port, ctx, peer=None, network_key=None, timeout=HANDSHAKE_TIMEOUT,
                  idle_timeout=IDLE_TIMEOUT, budget=None):
    """Open a session to a server.

    Args:
        host, port: where the server listens.
        ctx: tssb.context.Context (identity, network key, peers table).
        peer: the server's 32-byte public key; by default looked up in the peers table by
            the address "host:port".
        network_key: override ctx.network_key.
        timeout: seconds for connecting plus the handshake.
        idle_timeout: seconds without incoming frames before the session ends.
        budget: what the server may make us hold (budget.Budget; default: a private
            Pool's, with the default Limits).
    Returns: Session.
    Raises:
        ValueError: no server key known. ProtocolError: handshake failed or refused.
        OSError: no TCP connection.
    """
    if peer is None:
        peer = ctx.store.peer_by_addr("%s:%d" % (host, port))
        if peer is None:
            raise ValueError("no peer with address %s:%d; give its key" % (host, port))
    key = network_key if network_key is not None else ctx.network_key
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        keys = await asyncio.wait_for(
            client_handshake(reader, writer, key, ctx.identity.seed, peer), timeout)
    except asyncio.TimeoutError:
        _close_quietly(writer)
        raise ProtocolError("handshake timeout")
    except BaseException:
        _close_quietly(writer)
        raise
    return Session(reader, writer, keys, initiator=True, idle_timeout=idle_timeout, budget=budget)


def _runqueue_s():
    """Seconds this thread has spent runnable but waiting for a CPU (Linux schedstat), or
    None where the kernel does not say."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


class LagProbe:
    """Measures how late the event loop runs a timer: a task sleeping LAG_TICK_S at a time
    records how much later than asked it woke up.

    `worst_ms`: the largest lateness since start (or the last `reset()`), and
    `worst_runq_ms` how long, in that tick, the loop's thread waited for a CPU (the machine
    was busy with other processes). `worst_stall_ms`: the largest of each tick's lateness
    minus its wait for a CPU, i.e. what our process itself (our code, or a worker thread
    holding the GIL) kept the loop from running; without schedstat, as `worst_ms`."""

    def __init__(self, tick=LAG_TICK_S):
        self.tick = tick
        self.samples = 0
        self._task = None
        self.reset()

    def start(self):
        self._task = asyncio.create_task(self._run())

    async def _run(self):
        while True:
            t0, q0 = time.monotonic(), _runqueue_s()
            await asyncio.sleep(self.tick)
            late = (time.monotonic() - t0 - self.tick) * 1000.0
            q1 = _runqueue_s()
            runq = (q1 - q0) * 1000.0 if q0 is not None and q1 is not None else 0.0
            self.samples += 1
            if late > self.worst_ms:
                self.worst_ms, self.worst_runq_ms = late, runq
            self.worst_stall_ms = max(self.worst_stall_ms, late - runq)

    def reset(self):
        self.worst_ms = self.worst_runq_ms = self.worst_stall_ms = 0.0

    def stop(self):
        if self._task is not None:
            self._task.cancel()


class SessionServer:
    """Accepts sessions and dispatches each incoming stream by name to a service module.

    Args:
        ctx: tssb.context.Context (identity, store, network key); passed on to services.
        policy: PeerPolicy; default: ctx's network key and peers table as allow-list.
        services: name -> module path (default SERVICES).
        log: optional function(str) told about sessions starting and ending.
        limits: budget.Limits for every session and in total (default: the defaults).
    Attributes: pool (budget.Pool: totals held, budgets exceeded), lag (LagProbe).
    """

    def __init__(self, ctx, policy=None, services=None, log=None, limits=None):
        self.ctx = ctx
        self.policy = policy or PeerPolicy.from_context(ctx)
        self.services = dict(SERVICES if services is None else services)
        self.sessions = set()
        self.failures = {}   # reason -> count (handshake failures), for status and tests
        self.pool = Pool(limits)
        self.lag = LagProbe()
        self._server = None
        self._log = log or (lambda text: None)

    async def start(self, host="127.0.0.1", port=DEFAULT_PORT):
        """Listen. Returns: the bound port (useful with port 0)."""
        for modname in self.services.values():
            # now, not at a peer's first stream: an import (numpy for the rateless SETU
            # profile) holds the event loop for a tenth of a second or more
            try:
                importlib.import_module(modname)
            except ImportError:
                pass      # refused by name when a peer asks for it (_dispatch)
        self._server = await asyncio.start_server(self._handle, host, port)
        self.lag.start()
        return self.port

    @property
    def port(self):
        return self._server.sockets[0].getsockname()[1]

    def stats(self, reset_lag=False):
        """A snapshot for status lines: sessions, streams, what the budgets hold in total,
        budgets exceeded (reason -> count) and the worst loop lag (ms) since start, or
        since the last call with reset_lag."""
        out = {"sessions": len(self.sessions),
               "streams": sum(len(s.mux.streams) for s in self.sessions),
               "held": dict(self.pool.held), "exceeded": dict(self.pool.exceeded),
               "loop_lag_max_ms": round(self.lag.worst_ms, 1),
               "loop_lag_runq_ms": round(self.lag.worst_runq_ms, 1),
               "loop_stall_max_ms": round(self.lag.worst_stall_ms, 1)}
        if reset_lag:
            self.lag.reset()
        return out

    async def _handle(self, reader, writer):
        peername = writer.get_extra_info("peername") or ("?",)
        if self.policy.admit(peername[0]) is not None:
            _close_quietly(writer)
            return
        try:
            keys = await asyncio.wait_for(
                server_handshake(reader, writer, self.policy.network_key,
                                 self.ctx.identity.seed, self.policy.allows),
                self.policy.handshake_timeout)
        except Exception as e:  # any failure: count it, close without a word
            reason = getattr(e, "reason", None) or type(e).__name__
            self.failures[reason] = self.failures.get(reason, 0) + 1
            _LOG.warning("handshake from %s refused: %s", peername[0], _why(reason))
            _close_quietly(writer)
            return
        finally:
            self.policy.release()
        victims, why = self.policy.place(keys.peer, [s for s in self.sessions if not s.closed])
        if why is not None:     # an allowed peer: it may know why
            _LOG.warning("session of %s from %s refused: %s", keys.peer.hex()[:16],
                         peername[0], why)
            writer.write(refusal_bytes(BoxWriter(keys.send_key, keys.send_nonce), why))
            _close_after(writer)
            return
        for v in victims:
            _LOG.info("session %s ends to make room for %s", v.peer.hex()[:16],
                      keys.peer.hex()[:16])
            v.end_with("server busy: the session gave way to another peer's")
        holder = []
        session = Session(reader, writer, keys, initiator=False,
                          on_open=lambda name, stream: self._dispatch(holder[0], name, stream),
                          idle_timeout=self.policy.idle_timeout,
                          budget=self.pool.budget(keys.peer))
        holder.append(session)
        self.sessions.add(session)
        self._log("session %s from %s opened" % (session.peer.hex()[:16], peername[0]))
        try:
            await session.wait_closed()
        finally:
            self.sessions.discard(session)
            self._log("session %s closed: %s" % (session.peer.hex()[:16], session.close_reason))

    def _dispatch(self, session, name, stream):
        """Returns: None after starting the service, or the reason to refuse the stream."""
        modname = self.services.get(name)
        if modname is None:
            return "unknown service: %s" % name
        if session.services_running[name] >= self.pool.limits.streams_per_service:
            return "too many %s streams" % name
        try:
            module = importlib.import_module(modname)
        except ImportError:
            return "service not available: %s" % name
        serve = getattr(module, "serve", None)
        if serve is None:
            return "service not implemented: %s" % name
        task = asyncio.create_task(self._run_service(serve, stream, session))
        session.service_tasks.add(task)
        session.services_running[name] += 1
        task.add_done_callback(lambda t: session._service_done(t, name))
        return None

    async def _run_service(self, serve, stream, session):
        try:
            await serve(stream, self.ctx, session.peer)
        except ChannelClosed:
            pass
        except BudgetExceeded as e:   # the peer made the service hold too much
            session.cut_off(e)
        except Exception as e:  # a failing service ends its stream, never the server
            self.failures["service error"] = self.failures.get("service error", 0) + 1
            self.ctx.events.emit("drop", reason="service error: %s" % type(e).__name__, length=0)
            _LOG.info("service %s failed: %s: %s", stream.name, type(e).__name__, e)
        finally:
            stream.close()
            stream.release()

    async def close(self):
        """Stop listening and end every session with a goodbye."""
        self.lag.stop()
        if self._server is not None:
            self._server.close()
        for s in list(self.sessions):
            await s.close()
        if self._server is not None:
            await self._server.wait_closed()


async def start_server(ctx, host="127.0.0.1", port=DEFAULT_PORT, policy=None, services=None,
                       log=None, limits=None):
    """Start a SessionServer. Returns: the running server (see `.port`, `.close()`)."""
    server = SessionServer(ctx, policy, services, log, limits)
    await server.start(host, port)
    return server
