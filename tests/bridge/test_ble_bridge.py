"""`tssb bridge --ble`: the host node reaches a board over BLE through the bleak API.

There is no Bluetooth adapter here, so bleak itself is replaced at its API boundary by
`FakeBleak` (BleakClient's constructor, connect, start_notify, write_gatt_char,
disconnect, is_connected), which talks to the firmware's real BLE port (tssbfw.ble) on the
fake MicroPython `bluetooth` stack of the firmware tests.
"""
import asyncio
import os
import sys

import pytest

from tssb.bridge import ble as bleport
from tssb.bridge import runner
from bridge_helpers import FAST, has_all, host, wait_for

sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "firmware", "fakes"))
import bluetooth  # noqa: E402  (the fake stack)

from tinyssb import crypto  # noqa: E402
from tinyssb.node import Node  # noqa: E402
from tinyssb.store import MemStore  # noqa: E402
from tssbfw import ble, corelink, regions  # noqa: E402
from tssbfw.app import Firmware  # noqa: E402
from tssbfw.clock import Clock  # noqa: E402

LONG = b"over the air and into the host " * 5
BLUEZ_MTU = 517


class FakeBleak:
    """bleak.BleakClient's surface over a fake `bluetooth.Central`."""

    def __init__(self, address, disconnected_callback=None):
        self.address = address
        self.gone = disconnected_callback
        self.c = None
        self.notify = None
        self.handles = {}

    @property
    def is_connected(self):
        return self.c is not None and self.c.connected

    async def connect(self):
        c = bluetooth.Central()
        c._deliver = self._deliver
        c.connect()                      # OSError(ETIMEDOUT) when nothing advertises
        c.exchange_mtu(BLUEZ_MTU)
        for _, chars in c.discover():
            for uuid, props, vh, descs in chars:
                self.handles[repr(uuid)] = (vh, descs)
        self.c = c

    def _h(self, uuid):
        return self.handles[repr(bluetooth.UUID(uuid))]

    async def start_notify(self, uuid, callback):
        vh, descs = self._h(uuid)
        self.notify = (vh, callback)
        self.c.write(descs[0][1], bluetooth.CCCD_NOTIFY)

    def _deliver(self, handle, data):
        if self.notify and handle == self.notify[0]:
            self.notify[1](handle, bytearray(data))

    async def write_gatt_char(self, uuid, data, response=True):
        self.c.write(self._h(uuid)[0], data, response)

    async def disconnect(self):
        if self.is_connected:
            self.c.disconnect()


class Board:
    """The firmware's node with its BLE port, driven like its BLE and tick tasks."""

    def __init__(self):
        bluetooth.reset()
        seed = b"\x61" * 32
        ident = (seed, crypto.publickey(seed))
        link = corelink.NodeLink(MemStore(), ident, node_factory=lambda s, i, log, r: Node(
            s, identity=i, timing=FAST))
        self.fw = Firmware(regions.plan("US915.a"), link, None, Clock())
        self.port = ble.BlePort(self.fw, ident[1], "tinySSB-test", bluetooth)
        self.fw.faces.append(self.port)

    async def run(self):
        while True:
            now = self.fw.clock.now()
            self.fw.on_tick(now)
            self.port.drain(now)
            self.port.flush(now)
            self.port.refresh_status(now)
            await asyncio.sleep(0.005)


@pytest.fixture
def fast(monkeypatch):
    monkeypatch.setattr(bleport, "RETRY_S", 0.05)
    monkeypatch.setattr(bleport, "POLL_S", 0.05)
    monkeypatch.setattr(ble, "OUT_GAP_MS", 5)


def test_host_and_board_replicate_over_ble_and_reconnect(fast):
    async def main():
        board = Board()
        h = host()
        states = []
        tasks = [asyncio.ensure_future(board.run()), asyncio.ensure_future(h.run()),
                 asyncio.ensure_future(bleport.connect_forever(
                     h, "24:0A:C4:00:00:01", states.append, FakeBleak))]
        try:
            bfid = board.fw.link.node.author.fid
            for c in (b"board 1", LONG, b"board 3"):
                board.fw.link.post(c)
            h.post(b"host 1")
            assert await wait_for(lambda: has_all(h.store, bfid, 3) and
                                  h.store.chunk_count(bfid, 2) == 2 and
                                  has_all(board.fw.link.store, h.node.author.fid, 1))
            assert states[0] == "ble connected 24:0A:C4:00:00:01"
            port = [p for p in h.ports if p.name.startswith("ble:")][0]
            assert port.counters["rx"] > 0 and port.counters["tx"] > 0
            # the board drops the link; the host reconnects and goes on replicating
            conn = board.port._conns[0]
            bluetooth.BLE().gap_disconnect(conn)
            board.fw.link.post(b"board 4")
            assert await wait_for(lambda: has_all(h.store, bfid, 4))
            assert port.counters["connects"] == 2 and board.port.counters["connects"] == 2
            # bad sizes from a confused peer are counted, not passed on
            port.on_notify(None, b"")
            port.on_notify(None, bytes(200))
            assert port.counters["bad"] == 2
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    asyncio.run(main())


def test_no_board_advertising_retries_and_queue_is_bounded(fast):
    async def main():
        bluetooth.reset()
        bluetooth.BLE().active(True)          # a stack, but nothing advertises
        h = host()
        states = []
        t = asyncio.ensure_future(bleport.connect_forever(h, "24:0A:C4:00:00:02",
                                                          states.append, FakeBleak))
        await wait_for(lambda: len(states) >= 1, 5)
        await asyncio.sleep(0.2)
        t.cancel()
        await asyncio.gather(t, return_exceptions=True)
        assert states and all("24:0A:C4:00:00:02" in s for s in states)
        assert h.ports == []                  # never attached while down
        p = bleport.BlePort(h, "x")
        for i in range(bleport.SEND_QUEUE + 5):
            p.send(bytes([i % 256]) * 20)
        assert p.counters["dropped"] == 5
    asyncio.run(main())


def test_runner_without_bleak_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(bleport, "client_class", lambda: (_ for _ in ()).throw(
        OSError("BLE needs bleak: pip install bleak")))
    from tssb.context import Context
    ctx = Context.open(str(tmp_path / "home"))
    try:
        with pytest.raises(OSError, match="bleak"):
            asyncio.run(runner.run(ctx, None, ble=["24:0A:C4:00:00:03"], duration=0.1,
                                   say=lambda m: None))
    finally:
        ctx.close()
