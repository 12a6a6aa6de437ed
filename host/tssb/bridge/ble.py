"""BLE port of the host node: `tssb bridge --ble ADDRESS` reaches a board over Bluetooth LE
through bleak (BlueZ on Linux), so a host without USB can use it.

The host is a GATT central as the Python pub's BLE code is: connect, subscribe to TX
(`6e400003-...`), write each packet to RX (`6e400002-...`) with response; one tinySSB packet
per notification and per write, no CRC. The service and sizes are the board's
(`tssbfw.ble`). Works with boards running this firmware and with deployed ESP32 nodes.

Not tested on hardware (no Bluetooth adapter here): tests drive it through a fake at the
bleak API boundary (`BleakClient(address, disconnected_callback=...)`, `connect()`,
`start_notify(uuid, callback(sender, data))`, `write_gatt_char(uuid, data, response=True)`,
`disconnect()`, `is_connected`). Needs `pip install bleak`.
"""
import asyncio
import logging

from tssbfw.ble import MAX_PKT, RX_UUID, TX_UUID

log = logging.getLogger("tssb.bridge")

SEND_QUEUE = 64           # packets waiting for the board; a stalled link drops, never grows
CONNECT_TIMEOUT_S = 15.0  # a BlueZ connect that has not finished by then is given up
WRITE_TIMEOUT_S = 5.0     # a write with response the board has not answered by then
POLL_S = 1.0              # how often an idle session checks that the link is still up
RETRY_S = 3.0             # pause before reconnecting


def client_class():
    """bleak's BleakClient. Raises OSError when bleak is not installed."""
    try:
        from bleak import BleakClient
    except ImportError:
        raise OSError("BLE needs bleak: pip install bleak")
    return BleakClient


def _link_errors():
    errs = (OSError, asyncio.TimeoutError, EOFError)
    try:
        from bleak.exc import BleakError
        return errs + (BleakError,)
    except ImportError:
        return errs


class BlePort:
    """One board over BLE, as a port of a HostNode (`name`, non-blocking `send`)."""

    def __init__(self, hostnode, address):
        self.hostnode = hostnode
        self.address = address
        self.name = "ble:" + address
        self.q = asyncio.Queue(SEND_QUEUE)
        self.counters = {"rx": 0, "tx": 0, "dropped": 0, "bad": 0, "connects": 0}

    def send(self, pkt):
        try:
            self.q.put_nowait(bytes(pkt))
        except asyncio.QueueFull:
            self.counters["dropped"] += 1

    def on_notify(self, sender, data):
        """A notification on TX: one packet for the node (bad sizes counted, dropped)."""
        if not 0 < len(data) <= MAX_PKT:
            self.counters["bad"] += 1
            return
        self.counters["rx"] += 1
        self.hostnode.receive(bytes(data), self)

    async def session(self, client, gone):
        """Pump queued packets to the board until the link drops (`gone` is set)."""
        await client.start_notify(TX_UUID, self.on_notify)
        while not gone.is_set() and client.is_connected:
            try:
                pkt = await asyncio.wait_for(self.q.get(), POLL_S)
            except asyncio.TimeoutError:
                continue
            await asyncio.wait_for(client.write_gatt_char(RX_UUID, pkt, response=True),
                                   WRITE_TIMEOUT_S)
            self.counters["tx"] += 1


async def connect_forever(hostnode, address, on_state=None, client_factory=None):
    """Keep a BLE link to the board at `address` (reconnects after RETRY_S) until cancelled.

    Args:
        client_factory: BleakClient or a stand-in with its API (tests).
    Raises:
        OSError: bleak is not installed.
    """
    factory = client_factory or client_class()
    errors = _link_errors()
    on_state = on_state or (lambda s: None)
    port = BlePort(hostnode, address)
    while True:
        gone = asyncio.Event()
        client = factory(address, disconnected_callback=lambda c: gone.set())
        try:
            await asyncio.wait_for(client.connect(), CONNECT_TIMEOUT_S)
            port.counters["connects"] += 1
            hostnode.attach(port)
            on_state("ble connected %s" % address)
            await port.session(client, gone)
            on_state("ble %s: disconnected" % address)
        except errors as e:
            log.info("ble %s: %s", address, e)
            on_state("ble %s: %s" % (address, e or type(e).__name__))
        finally:
            hostnode.detach(port)
            try:
                await client.disconnect()
            except errors:
                pass
        await asyncio.sleep(RETRY_S)
