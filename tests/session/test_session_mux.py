"""Multiplexer over an in-memory frame pipe: named streams, fragmentation, credit
back-pressure (bounded buffers), half close, refusal, and misbehaving peers."""
import asyncio

import pytest

from tssb.channel import ChannelClosed
from tssb.session import mux as M
from tssb.session.errors import ProtocolError, StreamRefused


class Link:
    """Two Muxes connected by ordered in-memory pipes; errors of either side are kept."""

    def __init__(self, on_open_server):
        self.errors = []
        self.qa, self.qb = asyncio.Queue(), asyncio.Queue()
        self.client = M.Mux(self.qa.put, True)
        self.server = M.Mux(self.qb.put, False, on_open_server)
        self.tasks = [asyncio.create_task(self._pump(self.qa, self.server)),
                      asyncio.create_task(self._pump(self.qb, self.client)),
                      asyncio.create_task(self.client.flush_control()),
                      asyncio.create_task(self.server.flush_control())]

    async def _pump(self, q, dst):
        while True:
            body = await q.get()
            try:
                dst.on_frame(body)
            except ProtocolError as e:
                self.errors.append(e.reason)
                dst.shutdown("protocol error")
                return

    def stop(self):
        for t in self.tasks:
            t.cancel()


async def settle():
    for _ in range(50):
        await asyncio.sleep(0)


def accept_all(accepted):
    def on_open(name, stream):
        accepted.append((name, stream))
        return None
    return on_open


def test_streams_carry_messages_both_ways_and_fragment_large_ones():
    async def main():
        acc = []
        link = Link(accept_all(acc))
        a = await link.client.open("setu")
        b = await link.client.open("clock")
        assert [n for n, _ in acc] == ["setu", "clock"] and a.sid != b.sid
        big = bytes(i % 251 for i in range(M.MAX_MESSAGE))
        await a.send(b"")
        await a.send(big)
        await b.send(b"tick")
        sa, sb = acc[0][1], acc[1][1]
        assert await sa.recv() == b""
        assert await sa.recv() == big
        assert await sb.recv() == b"tick"
        await sa.send(b"reply")
        assert await a.recv() == b"reply"
        assert (a.sent_msgs, sa.recv_msgs, sa.recv_bytes) == (2, 2, len(big))
        with pytest.raises(ValueError):
            await a.send(bytes(M.MAX_MESSAGE + 1))
        assert link.errors == []
        link.stop()
    asyncio.run(main())


def test_credit_bounds_what_a_slow_reader_buffers():
    async def main():
        acc = []
        link = Link(accept_all(acc))
        a = await link.client.open("setu")
        srv = acc[0][1]
        msg = bytes(4096)
        sent = 0

        async def producer():
            nonlocal sent
            for _ in range(1000):
                await a.send(msg)
                sent += 1
        task = asyncio.create_task(producer())
        await settle()
        # the sender is stuck: everything it sent fits in one window at the receiver
        assert not task.done()
        assert srv._held <= M.WINDOW
        cost = 2 * M.FRAME_COST + len(msg)
        assert sent * cost <= M.WINDOW + cost
        stuck_at = sent
        await settle()
        assert sent == stuck_at
        for _ in range(1000):
            assert await srv.recv() == msg
        await task
        assert sent == 1000 and link.errors == []
        link.stop()
    asyncio.run(main())


def test_half_close_and_end_of_stream():
    async def main():
        acc = []
        link = Link(accept_all(acc))
        a = await link.client.open("trdag")
        srv = acc[0][1]
        await a.send(b"last words")
        a.close()
        with pytest.raises(ChannelClosed):
            await a.send(b"after close")
        assert await srv.recv() == b"last words"
        with pytest.raises(ChannelClosed):
            await srv.recv()
        with pytest.raises(ChannelClosed):   # and stays closed
            await srv.recv()
        await srv.send(b"still open this way")
        assert await a.recv() == b"still open this way"
        srv.close()
        with pytest.raises(ChannelClosed):
            await a.recv()
        await settle()
        assert link.client.streams == {} and link.server.streams == {}
        link.stop()
    asyncio.run(main())


def test_refusal_reaches_the_opener_with_its_reason():
    async def main():
        link = Link(lambda name, stream: "not implemented: %s" % name)
        with pytest.raises(StreamRefused) as e:
            await link.client.open("certs")
        assert e.value.reason == "not implemented: certs"
        client_only = Link(None)
        # a client refuses streams opened by the server
        with pytest.raises(StreamRefused):
            await client_only.server.open("anything")
        link.stop()
        client_only.stop()
    asyncio.run(main())


def test_stream_limit():
    async def main():
        link = Link(accept_all([]))
        for i in range(M.MAX_STREAMS):
            await link.client.open("s%d" % i)
        with pytest.raises(ValueError):
            await link.client.open("one too many")
        link.stop()
    asyncio.run(main())


def test_session_end_wakes_readers_writers_and_openers():
    async def main():
        acc = []
        link = Link(accept_all(acc))
        a = await link.client.open("setu")
        reader = asyncio.create_task(a.recv())
        await settle()
        link.client.shutdown("connection lost")
        with pytest.raises(ChannelClosed):
            await reader
        with pytest.raises(ChannelClosed):
            await a.send(b"x")
        with pytest.raises(ChannelClosed):
            await link.client.open("again")
        link.stop()
    asyncio.run(main())


@pytest.mark.parametrize("frames,reason", [
    # more data than the granted window
    ([(M.OPEN, 1, b"s")] + [(M.LAST, 1, bytes(M.MAX_FRAGMENT))] * (M.WINDOW // M.MAX_FRAGMENT + 1),
     "credit exceeded"),
    ([(M.MORE, 9, b"x")], "unknown stream"),
    ([(M.OPEN, 2, b"s")], "stream id"),                 # the server's parity from the client
    ([(M.OPEN, 1, b"s"), (M.OPEN, 1, b"s")], "stream id"),
    ([(M.OPEN, 1, b"s"), (M.CLOSE, 1, b""), (M.LAST, 1, b"x")], "data after close"),
    ([(M.OPEN, 1, b"s"), (M.MORE, 1, b"x"), (M.CLOSE, 1, b"")], "close inside message"),
    ([(M.OPEN, 1, b"s"), (M.CREDIT, 1, (1).to_bytes(4, "big"))], "credit overflow"),
    ([(M.ACCEPT, 5, b"")], "unexpected answer"),
])
def test_misbehaving_peer_is_a_protocol_error(frames, reason):
    server = M.Mux(None, False, lambda name, stream: None)
    with pytest.raises(ProtocolError) as e:
        for kind, sid, payload in frames:
            server.on_frame(M.encode_frame(kind, sid, payload))
    assert e.value.reason == reason


def test_message_size_limit_on_receive():
    server = M.Mux(None, False, lambda name, stream: None)
    server.on_frame(M.encode_frame(M.OPEN, 1, b"s"))
    with pytest.raises(ProtocolError) as e:
        for _ in range(M.MAX_MESSAGE // M.MAX_FRAGMENT + 2):
            server.on_frame(M.encode_frame(M.MORE, 1, bytes(M.MAX_FRAGMENT)))
    assert e.value.reason == "message too long"
