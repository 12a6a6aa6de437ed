"""WebSocket ports: one binary message per tinySSB packet (no CRC), as the deployed
Python pub and Android app exchange them.
"""
import asyncio

import websockets

# Packets queued per peer before we drop (a slow phone must not grow host memory).
SEND_QUEUE = 256
# A tinySSB packet is at most 120 bytes; refuse bigger messages at the protocol layer.
MAX_MESSAGE = 1024
RETRY_S = 1.0


class WsPort:
    def __init__(self, ws, name):
        self.ws = ws
        self.name = name
        self.q = asyncio.Queue(SEND_QUEUE)
        self.dropped = 0

    def send(self, pkt):
        try:
            self.q.put_nowait(bytes(pkt))
        except asyncio.QueueFull:
            self.dropped += 1

    async def pump(self):
        while True:
            await self.ws.send(await self.q.get())


async def _serve_peer(hostnode, ws, name):
    port = WsPort(ws, name)
    hostnode.attach(port)
    pump = asyncio.ensure_future(port.pump())
    try:
        async for msg in ws:
            if isinstance(msg, (bytes, bytearray)):
                hostnode.receive(bytes(msg), port)   # text frames are not tinySSB: ignored
    except websockets.ConnectionClosed:
        pass
    finally:
        hostnode.detach(port)
        pump.cancel()


async def serve(hostnode, host="127.0.0.1", port=8080):
    """Start a WebSocket server; returns the server object (close() / wait_closed())."""
    async def handler(ws, *rest):
        peer = ws.remote_address
        await _serve_peer(hostnode, ws, "ws:%s:%s" % (peer[0], peer[1]) if peer else "ws")
    return await websockets.serve(handler, host, port, max_size=MAX_MESSAGE)


async def connect_forever(hostnode, uri, on_state=None):
    """Keep a client connection to `uri` (reconnects after RETRY_S). Runs until cancelled."""
    on_state = on_state or (lambda s: None)
    while True:
        try:
            async with websockets.connect(uri, max_size=MAX_MESSAGE) as ws:
                on_state("connected %s" % uri)
                await _serve_peer(hostnode, ws, "ws:" + uri)
        except (OSError, websockets.WebSocketException, asyncio.TimeoutError) as e:
            on_state("ws %s: %s" % (uri, e))
        await asyncio.sleep(RETRY_S)
