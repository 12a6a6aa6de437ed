"""A board on USB serial: pyserial without resetting the board, reconnecting after unplug.

A reader thread owns the blocking reads and hands decoded link messages to the asyncio
loop (`on_message` runs there); writes happen under a lock from any thread. When the port
goes away (unplug: read raises) the link closes it, waits RECONNECT_S, asks `resolve()`
for the port again (auto-detection may find it under a new name) and reopens.
"""
import asyncio
import threading

import serial
from tinyssb import link

BAUD = 115200          # MicroPython's REPL/CDC default on ESP32 boards
READ_TIMEOUT_S = 0.05  # reader wakes this often to notice stop()
WRITE_TIMEOUT_S = 2.0  # a board that stops reading must not hang the host
RECONNECT_S = 1.0


def open_no_reset(port, baud=BAUD):
    """Open a serial port without resetting an ESP32 board.

    ESP32 dev boards wire DTR/RTS to IO0/EN (auto-reset for flashing); pyserial asserts
    both on open by default, which resets the board. Setting them deasserted on the
    unopened port makes pyserial apply that state right at open. The port is locked
    (pyserial's `exclusive`, as mpremote opens it): a second program fails to open it
    instead of reading half of the board's bytes.

    Raises:
        serial.SerialException: the port cannot be opened.
    """
    s = serial.Serial()
    s.port = port
    s.baudrate = baud
    s.timeout = READ_TIMEOUT_S
    s.write_timeout = WRITE_TIMEOUT_S
    s.dtr = False
    s.rts = False
    # one process per board: a second bridge (or listen, config, web --serial) on the same
    # port would split the board's frames between them (flock on POSIX)
    s.exclusive = True
    try:
        s.open()
    except serial.SerialException as e:
        if "exclusively lock" in str(e):
            raise PortBusy(port) from None
        raise
    return s


class PortBusy(serial.SerialException):
    """Another process holds the serial port (its flock)."""

    def __init__(self, port):
        super().__init__("%s is in use by another process (a `tssb bridge`, `tssb listen` "
                         "or `tssb web --serial`?): stop it first" % port)
        self.port = port


class SerialLink:
    """Args:
        resolve: function() -> port name (raises to mean "not there yet").
        on_message: function(msg tuple) called in the asyncio loop.
        loop: the asyncio loop (None: call on_message in the reader thread).
        hello: bytes sent after each (re)connect (a link.hello frame).
        opener: function(port) -> serial object (tests may wrap it).
        on_state: function(str) for "connected PORT" / "lost PORT: why" messages.
    """

    def __init__(self, resolve, on_message, loop=None, hello=None, opener=open_no_reset,
                 on_state=None, reconnect_s=RECONNECT_S):
        self.resolve = resolve
        self.on_message = on_message
        self.loop = loop
        self.hello = hello
        self.opener = opener
        self.on_state = on_state or (lambda s: None)
        self.reconnect_s = reconnect_s
        self.decoder = link.Decoder()
        self.ser = None
        self.port = None
        self.connects = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.write_drops = 0
        self._wlock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    @property
    def connected(self):
        return self.ser is not None

    def start(self):
        self._thread = threading.Thread(target=self._run, name="tssb-serial", daemon=True)
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self._close()

    def write(self, frame):
        """Write one frame; dropped (counted) while disconnected. Thread-safe."""
        with self._wlock:
            s = self.ser
            if s is None:
                self.write_drops += 1
                return False
            try:
                s.write(frame)
                self.bytes_out += len(frame)
                return True
            except (serial.SerialException, OSError):
                self.write_drops += 1
                return False

    def _close(self):
        with self._wlock:
            s, self.ser = self.ser, None
        if s is not None:
            try:
                s.close()
            except (serial.SerialException, OSError):
                pass

    def _deliver(self, msgs):
        for m in msgs:
            if self.loop is None:
                self.on_message(m)
            else:
                self.loop.call_soon_threadsafe(self.on_message, m)

    def _run(self):
        while not self._stop.is_set():
            try:
                port = self.resolve()
                s = self.opener(port)
            except Exception as e:   # not plugged in (yet), no permission, busy
                self.on_state("waiting for board: %s" % e)
                self._stop.wait(self.reconnect_s)
                continue
            with self._wlock:
                self.ser = s
            self.port = port
            self.connects += 1
            # a frame cut by the unplug must not swallow the first one after it
            self.decoder.feed(bytes([link.FEND]))
            self.on_state("connected %s" % port)
            if self.hello:
                self.write(self.hello)
            try:
                while not self._stop.is_set():
                    data = s.read(max(1, min(s.in_waiting, 4096)))
                    if data:
                        self.bytes_in += len(data)
                        self._deliver(self.decoder.feed(data))
            except (serial.SerialException, OSError, TypeError) as e:
                # pyserial reports an unplugged device as a SerialException (or, on some
                # versions, a TypeError from a closed fd)
                self.on_state("lost %s: %s" % (port, e))
            self._close()
            if not self._stop.is_set():
                self._stop.wait(self.reconnect_s)


class BoardPort:
    """A HostNode port for a SerialLink: packets to the board go out as link TX frames.

    Incoming RX/TX messages reach the node; EVENT lines go to `on_event`; replies to
    status/config requests resolve the futures of `request()`. A board has no wall clock:
    when it says HELLO (after every connect or reset) it gets TIME from `clock`
    (function() -> Unix ms; None: not sent), so its event lines carry real timestamps.
    """

    def __init__(self, hostnode, serial_link=None, on_event=None, name="serial", clock=None):
        self.name = name
        self.clock = clock
        self.hostnode = hostnode
        self.link = serial_link
        self.on_event = on_event
        self.device = None      # the board's HELLO
        self.counts = {"rx": 0, "tx_mirror": 0, "events": 0}
        self.heard = 0          # link messages from the board, of any kind
        self._rid = 0
        self._waiting = {}

    def send(self, pkt):
        if self.link is not None:
            self.link.write(link.tx(pkt))

    def on_message(self, m):
        self.heard += 1
        kind = m[0]
        if kind == "rx":
            self.counts["rx"] += 1
            self.hostnode.receive(m[1], self, {"rssi": m[2], "snr": m[3] / 4.0, "src": "air"})
        elif kind == "tx":
            self.counts["tx_mirror"] += 1
            self.hostnode.receive(m[1], self, {"src": "board"})
        elif kind == "event":
            self.counts["events"] += 1
            if self.on_event is not None:
                self.on_event(m[1])
        elif kind == "hello":
            self.device = m[1]
            if self.clock is not None and self.link is not None:
                self._rid = self._rid % 255 + 1   # the board's REPLY is not waited for
                self.link.write(link.time_sync(self._rid, int(self.clock())))
        elif kind in ("reply", "status", "error"):
            fut = self._waiting.pop(m[1], None)
            if fut is not None and not fut.done():
                if kind == "error":
                    fut.set_exception(RuntimeError(m[2]))
                else:
                    fut.set_result(m[2])

    async def request(self, make, timeout=3.0):
        """Send a request frame made by make(rid); return the board's answer.

        Raises:
            asyncio.TimeoutError: no answer; RuntimeError: the board's error reason.
        """
        self._rid = self._rid % 255 + 1
        rid = self._rid
        fut = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        self.link.write(make(rid))
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            self._waiting.pop(rid, None)
