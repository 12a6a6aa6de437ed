"""BLE GATT port: the tinySSB Android app reaches the board as it reaches deployed ESP32 nodes.

The service is the deployed one (`esp32/loramesh-TBeam/config.h`, `io.cpp`; the app's
`Constants.kt`, `BlePeers.kt`; tinyssb-wire.md 3.8 and 7.3):

  6e400001-7646-4b5b-9a50-71becce51558   service, advertised
    6e400003-...  TX  READ|NOTIFY   board -> phone, one packet per notification
    6e400004-...  ST  READ|NOTIFY   status text (see `status_text`)
    6e400002-...  RX  WRITE         phone -> board, one packet (1..127 bytes) per write
      6e400002-7646-4b5b-9a50-71becce51559  descriptor READ: the board's public key (the
                                            app reads it to name the peer)

No CRC and no framing (BLE has its own CRC); MTU 128. The phone is one more interface of
the firmware's Node: its packets go to the node like radio packets, the node's replies go
back over BLE only, and the node's periodic packets (GOSET, WANT, CHNK) go to the radio
and to BLE alike (`Firmware.on_tick`).

Only MicroPython's low-level `bluetooth` module is used (built into the ESP32 ports;
nothing to install). The stack calls `_irq` for each write (on the ESP32 synchronously,
from the BLE task); the handler only copies the value into a ring of RING_SLOTS
preallocated slots, and drops when the ring is full, as the deployed firmware does. The
BLE task (`run`) hands at most DRAIN_MAX packets to the node per turn, so a flood from a
phone cannot starve the radio tasks. The ring is single-producer single-consumer: the
handler only advances `_tail`, the task only `_head`, so no lock is needed.
"""
import asyncio

from tssbfw.scheduler import Scheduler

SERVICE_UUID = "6e400001-7646-4b5b-9a50-71becce51558"
RX_UUID = "6e400002-7646-4b5b-9a50-71becce51558"
TX_UUID = "6e400003-7646-4b5b-9a50-71becce51558"
ST_UUID = "6e400004-7646-4b5b-9a50-71becce51558"
NAME_UUID = "6e400002-7646-4b5b-9a50-71becce51559"

# Flags and IRQ event codes from MicroPython's bluetooth documentation (the module itself
# does not define them, to save space).
FLAG_READ = 0x0002
FLAG_WRITE = 0x0008
FLAG_NOTIFY = 0x0010
IRQ_CENTRAL_CONNECT = 1
IRQ_CENTRAL_DISCONNECT = 2
IRQ_GATTS_WRITE = 3
IRQ_MTU_EXCHANGED = 21

MTU = 128              # BLEDevice::setMTU(128) (io.cpp), requestMtu(128) (BlePeers.kt)
ATT_MTU_DEFAULT = 23   # until the phone exchanges the MTU (Bluetooth Core, ATT)
ATT_HEADER = 3         # opcode + handle: a notification carries at most MTU - 3 bytes
MAX_PKT = 127          # largest write accepted (io.cpp RXCallbacks: 0 < len <= 127)
RX_BUF = MAX_PKT + 1   # the stack truncates writes to this; one spare byte keeps an
                       # oversized write visible as oversized
RING_SLOTS = 8         # deployed: 3 slots drained by a 10 ms loop; ours also fills while the
                       # node verifies a signature, so a few more (8 x 127 B = 1 KB)
DRAIN_MAX = 2          # packets handed to the node per turn of the BLE task (an entry
                       # costs a signature check): 200/s, above what BLE writes deliver
POLL_MS = 10           # the BLE task's period (deployed loop: delay(10))
OUT_QUEUE = 10         # notifications waiting, duplicates dropped (as the radio's SCHED_MAX)
OUT_GAP_MS = 100       # one notification per 100 + rand(10) ms: the deployed BLE face's
OUT_JITTER_MS = 10     # UDP_INTERPACKET_TIME and io_dequeue's jitter (io.h, io.cpp)
MAX_CLIENTS = 3        # io.cpp stops advertising at 3 connected centrals
BAD_WRITES_MAX = 8     # malformed writes a client may make per BAD_WINDOW_MS before
BAD_WINDOW_MS = 10000  # it is disconnected (a correct app never makes one)
IDLE_MS = 60000        # a client silent this long is disconnected, so idle connections
                       # cannot hold the MAX_CLIENTS slots: the app sends a GOSET claim
                       # every 10 s (GOset.kt), our nodes every 20 s (deployed has no limit)
STATUS_MS = 1000       # status text refresh and idle check (deployed: on display refresh)
ADV_INTERVAL_US = 100000  # 100 ms: found within one low-power Android scan window
ADV_MAX = 31           # legacy advertising payload limit (Bluetooth Core, GAP)
NAME_MAX = ADV_MAX - 2 # the name travels in the scan response as one AD structure
NAME_PREFIX = "tinySSB-"  # deployed names: "tinySSB-XXXX" (LM/loramesh.h)

_AD_FLAGS = b"\x02\x01\x06"   # LE General Discoverable, BR/EDR not supported
_AD_UUID128 = 0x07            # complete list of 128-bit service UUIDs
_AD_NAME = 0x09               # complete local name


class _NoLimit:
    """BLE has no airtime law: the scheduler's limiter never asks for a wait."""

    def wait_ms(self, airtime_ms, now_ms):
        return 0

    def record(self, airtime_ms, now_ms):
        pass


def uuid_le(s):
    """The 16 bytes of a 128-bit UUID string in advertising (little-endian) order."""
    from binascii import unhexlify
    return bytes(reversed(unhexlify(s.replace("-", ""))))


def adv_payloads(name):
    """(advertising data, scan response) announcing the service UUID and the name."""
    u = uuid_le(SERVICE_UUID)
    adv = _AD_FLAGS + bytes((len(u) + 1, _AD_UUID128)) + u
    n = name.encode()
    return adv, bytes((len(n) + 1, _AD_NAME)) + n


def default_name(pub):
    return NAME_PREFIX + "%02x%02x" % (pub[0], pub[1])


def services(uuid):
    """The GATT definition for gatts_register_services; handles come back as
    ((tx, st, rx, name),). `uuid` is bluetooth.UUID."""
    return ((uuid(SERVICE_UUID), (
        (uuid(TX_UUID), FLAG_READ | FLAG_NOTIFY),
        (uuid(ST_UUID), FLAG_READ | FLAG_NOTIFY),
        (uuid(RX_UUID), FLAG_WRITE, ((uuid(NAME_UUID), FLAG_READ),)),
    )),)


class BlePort:
    """The GATT server and its queues, attached to a Firmware as one of its `faces`.

    Args:
        fw: the app.Firmware whose node the phone talks to.
        pub: the node's 32-byte public key (served in the name descriptor).
        name: advertised name (None: "tinySSB-" and two bytes of the key in hex).
        bluetooth_mod: the `bluetooth` module (injected in tests; default: import it).
    Raises:
        ImportError: this MicroPython has no `bluetooth` module.
        OSError: the BLE stack refused to start.
    """
    name = "ble"

    def __init__(self, fw, pub, name=None, bluetooth_mod=None):
        if bluetooth_mod is None:
            import bluetooth as bluetooth_mod
        self.fw = fw
        self.adv_name = name or default_name(pub)
        self.counters = {"rx": 0, "tx": 0, "connects": 0, "refused": 0, "kicked": 0,
                         "bad_empty": 0, "bad_too_long": 0, "ring_full": 0,
                         "queue_full": 0, "duplicate": 0, "mtu_small": 0,
                         "notify_failed": 0, "unknown_conn": 0, "idle": 0}
        self.clients = {}     # conn handle -> [mtu, bad writes in window, window start ms,
                              #                 last write ms]
        self._conns = ()      # snapshot of the connected handles (replaced, never mutated)
        self._ring = bytearray(RING_SLOTS * MAX_PKT)
        self._mv = memoryview(self._ring)
        self._lens = bytearray(RING_SLOTS)
        self._head = 0        # advanced by the task only, modulo 2 * RING_SLOTS
        self._tail = 0        # advanced by the IRQ handler only
        self.out = self._queue()
        self._status = None
        self._status_due = 0
        self.advertising = False
        ble = bluetooth_mod.BLE()
        self.ble = ble
        ble.active(True)
        ble.config(gap_name=self.adv_name, mtu=MTU)
        ble.irq(self._irq)
        ble.gap_advertise(None)   # services can only be registered while not advertising
        ((self._tx, self._st, self._rx, self._name),) = ble.gatts_register_services(
            services(bluetooth_mod.UUID))
        ble.gatts_set_buffer(self._rx, RX_BUF)
        ble.gatts_write(self._name, bytes(pub))
        self._adv = adv_payloads(self.adv_name)
        self.refresh_status(0)
        self._advertise()

    def _queue(self):
        # no idle slot wait: a phone's link is its own, nobody else's reply collides
        return Scheduler(lambda n: 0, _NoLimit(), self.fw.rand, OUT_QUEUE, OUT_GAP_MS,
                         OUT_JITTER_MS, idle_slot_ms=0)

    # -- stack events (IRQ context: no waiting, small allocations only) -----------------
    def _irq(self, event, data):
        if event == IRQ_GATTS_WRITE:
            if data[1] == self._rx:
                self._on_write(data[0])
        elif event == IRQ_CENTRAL_CONNECT:
            self._on_connect(data[0])
        elif event == IRQ_CENTRAL_DISCONNECT:
            self._forget(data[0])
            self._advertise()
        elif event == IRQ_MTU_EXCHANGED:
            c = self.clients.get(data[0])
            if c is not None:
                c[0] = data[1]

    def _on_connect(self, conn):
        self.advertising = False  # the stack stops advertising on a connection
        if len(self.clients) >= MAX_CLIENTS:
            self.counters["refused"] += 1
            self._hang_up(conn)
            return
        self.counters["connects"] += 1
        self.clients[conn] = [ATT_MTU_DEFAULT, 0, 0, self.fw.clock.now()]
        self._conns = tuple(self.clients)
        self._advertise()

    def _forget(self, conn):
        if self.clients.pop(conn, None) is not None:
            self._conns = tuple(self.clients)

    def _advertise(self):
        if len(self.clients) >= MAX_CLIENTS or self.advertising:
            return
        try:
            self.ble.gap_advertise(ADV_INTERVAL_US, adv_data=self._adv[0],
                                   resp_data=self._adv[1])
            self.advertising = True
        except OSError:
            self.advertising = False

    def _on_write(self, conn):
        c = self.clients.get(conn)
        if c is None:
            self.counters["unknown_conn"] += 1
            return
        data = self.ble.gatts_read(self._rx)
        n = len(data)
        if n == 0 or n > MAX_PKT:
            self.counters["bad_empty" if n == 0 else "bad_too_long"] += 1
            self._misbehaved(conn, c)
            return
        c[3] = self.fw.clock.now()
        used = (self._tail - self._head) % (2 * RING_SLOTS)
        if used >= RING_SLOTS:
            self.counters["ring_full"] += 1
            return
        i = self._tail % RING_SLOTS
        off = i * MAX_PKT
        self._mv[off:off + n] = data
        self._lens[i] = n
        self._tail = (self._tail + 1) % (2 * RING_SLOTS)

    def _misbehaved(self, conn, c):
        now = self.fw.clock.now()
        if now - c[2] > BAD_WINDOW_MS:
            c[1] = 0
            c[2] = now
        c[1] += 1
        if c[1] > BAD_WRITES_MAX:
            self.counters["kicked"] += 1
            self._hang_up(conn)
            if self.fw.events is not None:
                self.fw.events.emit("drop", reason="ble_client_dropped")

    def _hang_up(self, conn):
        self._forget(conn)
        try:
            self.ble.gap_disconnect(conn)
        except OSError:
            pass   # already gone
        self._advertise()

    # -- the BLE task --------------------------------------------------------------------
    def pending(self):
        """Writes waiting in the ring."""
        return (self._tail - self._head) % (2 * RING_SLOTS)

    def drain(self, now_ms, limit=DRAIN_MAX):
        """Hand up to `limit` received packets to the node; queue its replies for BLE.
        Returns how many were handed over."""
        link = self.fw.link
        n = 0
        while n < limit and self._head != self._tail:
            i = self._head % RING_SLOTS
            off = i * MAX_PKT
            pkt = bytes(self._mv[off:off + self._lens[i]])
            self._head = (self._head + 1) % (2 * RING_SLOTS)
            self.counters["rx"] += 1
            n += 1
            for p in link.on_packet(pkt, now_ms):
                self.send(p)
        return n

    def send(self, pkt):
        """Queue a packet for every connected client (dropped when nobody listens)."""
        if not self._conns:
            return None
        reason = self.out.push(pkt)
        if reason is not None:
            self.counters["queue_full" if reason == "queue_full" else "duplicate"] += 1
        return reason

    def flush(self, now_ms):
        """Notify the next queued packet when its slot has come; True if one went out.
        With nobody connected any more, what was queued for them is dropped."""
        if not self._conns:
            if len(self.out):
                self.out = self._queue()
            return False
        pkt = self.out.pop(now_ms)
        if pkt is None:
            return False
        self.ble.gatts_write(self._tx, pkt)   # TX is readable too: it holds the last packet
        self._notify_all(self._tx, len(pkt))
        return True

    def _notify_all(self, handle, n):
        for conn in self._conns:
            c = self.clients.get(conn)
            if c is None:
                continue
            if n > c[0] - ATT_HEADER:
                self.counters["mtu_small"] += 1   # the stack would cut the packet short
                continue
            try:
                self.ble.gatts_notify(conn, handle)
                if handle == self._tx:
                    self.counters["tx"] += 1
            except OSError:
                self.counters["notify_failed"] += 1   # out of buffers, or just gone

    def status_text(self):
        """The deployed status line "W:%d E:%d G:%d L:%d" (loramesh-TBeam.ino): WiFi
        clients (none here), BLE clients, GPS fix (none here), LoRa frames heard."""
        heard = 0
        for k, v in self.fw.port.counters.items():
            if k not in ("tx", "tx_bytes", "rx_bytes"):
                heard += v
        return "W:0 E:%d G:0 L:%d" % (len(self._conns), heard)

    def refresh_status(self, now_ms):
        """Every STATUS_MS: hang up on idle clients; write the status text when it
        changed and notify it."""
        if now_ms < self._status_due:
            return
        self._status_due = now_ms + STATUS_MS
        for conn in self._conns:
            c = self.clients.get(conn)
            if c is not None and now_ms - c[3] > IDLE_MS:
                self.counters["idle"] += 1
                self._hang_up(conn)
        text = self.status_text()
        if text == self._status:
            return
        self._status = text
        self.ble.gatts_write(self._st, text.encode())
        self._notify_all(self._st, len(text))

    def status(self):
        d = dict(self.counters)
        d["clients"] = len(self._conns)
        d["name"] = self.adv_name
        d["ring"] = self.pending()
        d["queue"] = len(self.out)
        return d

    async def run(self, fw):
        while fw._running:
            now = fw.clock.now()
            self.drain(now)
            self.flush(now)
            self.refresh_status(now)
            await asyncio.sleep(POLL_MS / 1000 / fw.time_scale)
