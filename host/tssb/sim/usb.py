"""A board on a host's USB port, with the USB cable replaced by a pseudo-terminal.

`UsbBoard` boots a board's store and identity the way the firmware's `main()` does on a
real board (tssbfw.app): a NodeLink over the store, DeviceEvents whose lines go up the
link, the Firmware's four asyncio tasks (rx, tx, tick, host) and a SerialBridge on the
console. Two things differ, both below the firmware: the console is the device end of
an `os.openpty()` pair (the host opens `port_name` as it would /dev/ttyUSB0) and the
radio is a `QuietModem` (a frame takes its airtime and reaches no one; it hears only the
frames `UsbBoard.hear()` hands it, as if a neighbour had sent them).
The firmware loop runs in a thread with its own asyncio loop.

`Pty` alone is the device end used by the bridge tests' board stand-in.
"""
import asyncio
import collections
import os
import threading
import time

from tssbfw.airtime import plan_airtime_ms
from tssbfw.app import Firmware
from tssbfw.bridge import SerialBridge
from tssbfw.clock import Clock
from tssbfw.corelink import NodeLink
from tssbfw.events import DeviceEvents
from tssb.sim.board import RxFrame

WRITE_TIMEOUT_S = 2.0  # a host that stops reading must not hang the device thread
RECV_IDLE_S = 0.2      # QuietModem.recv: how long "nothing heard" takes
HEARD_MAX = 256        # frames handed to QuietModem.hear() and not yet received
STOP_JOIN_S = 5.0


class Pty:
    """The device end of a pseudo-terminal: non-blocking reads, whole writes.

    The slave end stays open here too, so the pty survives the host closing and
    reopening its side (as a board survives the host's serial port being reopened). It is
    raw from the start (no echo, no line editing, no signal characters), as a USB serial
    port is: a host tool that does not set the mode itself gets the bytes as sent.

    Args:
        write_timeout_s: how long write() waits for a host that does not read.
    """

    def __init__(self, write_timeout_s=WRITE_TIMEOUT_S):
        import tty
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        os.set_blocking(self.master, False)
        self.name = os.ttyname(self.slave)
        self.write_timeout_s = write_timeout_s

    def read(self, n):
        """Up to n bytes waiting from the host, or None."""
        try:
            return os.read(self.master, n)
        except (BlockingIOError, OSError):
            return None

    def write(self, data):
        """Write all of data.

        Raises:
            OSError: the host has not read for write_timeout_s (SerialBridge counts it).
        """
        view = memoryview(data)
        end = time.monotonic() + self.write_timeout_s
        while view:
            try:
                view = view[os.write(self.master, view):]
            except BlockingIOError:
                if time.monotonic() > end:
                    raise OSError("pty write timed out")
                time.sleep(0.001)

    def close(self):
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass


class QuietModem:
    """The radio of a board alone on its channel: send() takes the frame's airtime,
    recv() hears only what hear() was given. Same coroutine API as the lora-async drivers.
    """

    def __init__(self, plan, scale=1):
        self.plan = plan
        self.scale = scale
        self.sent = 0
        self._heard = collections.deque((), HEARD_MAX)
        self._loop = None
        self._wake = None

    def hear(self, frame):
        """Queue a received frame (an RxFrame: bytes with rssi, snr); any thread."""
        self._heard.append(frame)
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._wake.set)
            except RuntimeError:
                pass    # the board was stopped

    async def send(self, frame):
        await asyncio.sleep(plan_airtime_ms(self.plan, len(frame)) / 1000 / self.scale)
        self.sent += 1

    async def recv(self, timeout_ms=None):
        if self._wake is None:
            self._wake = asyncio.Event()
            self._loop = asyncio.get_running_loop()
        if not self._heard:
            try:
                await asyncio.wait_for(self._wake.wait(), RECV_IDLE_S)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
        return self._heard.popleft() if self._heard else None


class UsbBoard:
    """Args:
        store: the board's feed store (kept: this is the board's flash).
        identity: (seed, public) of the board's own feed, or None.
        plan: the board's region plan (tssbfw.regions.plan).
        name: node name (HELLO and event lines).
        scale: virtual ms per real ms of the board's clock (1 = real time; tests
            run faster, as the firmware's own tests do with a scaled Clock).
        rand: function(n) for jitter, or None for the firmware's default.
        epoch_ms: Unix ms of "now" for the event lines' "ts" (the simulator aligns its
            boards the same way); None leaves it to the host's TIME request.
    """

    def __init__(self, store, identity, plan, name="board", scale=1, rand=None, epoch_ms=None):
        self.store = store
        self.pty = Pty()
        self.port_name = self.pty.name
        self.clock = Clock(scale=scale)
        info = {"fid": identity[1].hex()} if identity is not None else {}
        self.bridge = SerialBridge(self.pty.read, self.pty.write, name, info)
        self.events = DeviceEvents(name, self.clock, self.bridge.on_event)
        if epoch_ms is not None:
            self.events.set_epoch(epoch_ms)
        self.link = NodeLink(store, identity, self.events, rand=rand)
        self.modem = QuietModem(plan, scale)
        self.fw = Firmware(plan, self.link, self.modem, self.clock, self.events, rand=rand,
                           bridge=self.bridge, time_scale=scale)
        self.bridge.attach(self.fw)
        self._loop = None
        self._task = None
        self._thread = None

    def start(self):
        """Boot: say HELLO on the console and run the firmware loop in a thread."""
        self._loop = asyncio.new_event_loop()
        self._task = self._loop.create_task(self.fw.run())
        self._thread = threading.Thread(target=self._main, name="tssb-usb-board", daemon=True)
        self._thread.start()

    def _main(self):
        self.bridge.say_hello()
        try:
            self._loop.run_until_complete(self._task)
        except asyncio.CancelledError:
            pass
        finally:
            self._loop.close()

    def hear(self, pkt, rssi=-90, snr_db=7.5):
        """Let the board's radio receive `pkt` (framed with its CRC32, as on air) with
        this signal, as if a neighbour sent it. Thread-safe."""
        from tinyssb.frames import add_crc
        self.modem.hear(RxFrame(add_crc(pkt), rssi, snr_db))

    def stop(self):
        """Stop the firmware loop and unplug (close the pty)."""
        t = self._thread
        if t is not None and t.is_alive():
            self._loop.call_soon_threadsafe(self._task.cancel)
            t.join(STOP_JOIN_S)
        self.pty.close()
