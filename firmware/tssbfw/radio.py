"""Radio adapter over micropython-lib's `lora` drivers (lora-sx126x / lora-sx127x with
lora-async or lora-sync), using only their documented API:

  constructors  SX1262(spi, cs, busy, dio1, dio2_rf_sw, dio3_tcxo_millivolts, reset,
                lora_cfg), SX1276(spi, cs, dio0, dio1, reset, lora_cfg); Async* variants
  send          [await] modem.send(packet)
  recv          [await] modem.recv(timeout_ms=...) -> RxPacket (bytearray with rssi in dBm,
                snr in dB*4, valid_crc) or None

On air a frame is `packet || CRC32` (big-endian) with the radio's own CRC off, as the
deployed nodes send it (tinyssb-wire.md 3.8); `RadioPort.accept` checks it, and drops and
counts everything else by reason.
"""
from binascii import hexlify

from tinyssb.errors import WireError
from tinyssb.eventlog import packet_id
from tinyssb.frames import strip_crc
from tssbfw.airtime import plan_airtime_ms
from tssbfw.regions import lora_cfg

SYNC_POLL_MS = 20  # how long a sync-driver recv blocks the loop per poll


def make_modem(board, plan, lora_mod=None, machine_mod=None, use_async=True):
    """Construct and configure the board's modem for a region plan.

    Args:
        board: tssb_boards.get(...) result; plan: regions.plan(...) result.
        lora_mod, machine_mod: the `lora` and `machine` modules (injected in tests).
        use_async: AsyncSX12xx (lora-async) when True, else the sync classes.
    Returns:
        the driver object (an async-capable one: sync drivers are wrapped).
    Raises:
        ValueError: the board's radio chip is unknown.
    """
    if lora_mod is None:
        import lora as lora_mod
    if machine_mod is None:
        import machine as machine_mod
    Pin = machine_mod.Pin
    s = board["spi"]
    spi = machine_mod.SPI(s["id"], baudrate=s["baudrate"], sck=Pin(s["sck"]),
                          mosi=Pin(s["mosi"]), miso=Pin(s["miso"]))
    p = board["lora"]
    cs = Pin(p["cs"], Pin.OUT, value=1)
    cfg = lora_cfg(plan)
    chip = board["radio"]
    prefix = "Async" if use_async else ""
    if chip in ("sx1261", "sx1262"):
        cls = getattr(lora_mod, prefix + chip.upper())
        modem = cls(spi, cs, busy=Pin(p["busy"], Pin.IN), dio1=Pin(p["dio1"], Pin.IN),
                    dio2_rf_sw=p.get("dio2_rf_sw", True),
                    dio3_tcxo_millivolts=p.get("tcxo_mv"),
                    reset=Pin(p["reset"], Pin.OUT), lora_cfg=cfg)
    elif chip in ("sx1276", "sx1277", "sx1278", "sx1279"):
        cls = getattr(lora_mod, prefix + chip.upper())
        dio1 = p.get("dio1")
        modem = cls(spi, cs, dio0=Pin(p["dio0"], Pin.IN),
                    dio1=None if dio1 is None else Pin(dio1, Pin.IN),
                    reset=Pin(p["reset"], Pin.OUT), lora_cfg=cfg)
    else:
        raise ValueError("unsupported radio chip %r" % chip)
    return modem if use_async else SyncModem(modem)


class SyncModem:
    """Async face over a lora-sync driver: recv polls with a short timeout and yields."""

    def __init__(self, modem):
        self.modem = modem

    def configure(self, cfg):
        self.modem.configure(cfg)

    async def send(self, frame):
        return self.modem.send(frame)

    async def recv(self, timeout_ms=None):
        import asyncio
        while True:
            rx = self.modem.recv(timeout_ms=SYNC_POLL_MS)
            if rx is not None:
                return rx
            await asyncio.sleep(0)


class RadioPort:
    """Frame checks and accounting between the modem and the node."""

    def __init__(self, plan, events=None):
        self.plan = plan
        self.events = events
        self.counters = {"rx": 0, "tx": 0, "rx_bytes": 0, "tx_bytes": 0}

    def _drop(self, reason, length):
        self.counters[reason] = self.counters.get(reason, 0) + 1
        if self.events is not None:
            self.events.emit("drop", reason=reason, length=length)

    def accept(self, rx):
        """Check a received frame.

        Args:
            rx: an RxPacket (or bytes; rssi/snr/valid_crc read when present).
        Returns:
            the packet without its CRC, or None when dropped (counted by reason:
            radio_crc, frame_too_short, frame_too_long, bad_crc).
        """
        n = len(rx)
        if not getattr(rx, "valid_crc", True):
            self._drop("radio_crc", n)
            return None
        try:
            pkt = strip_crc(bytes(rx))
        except WireError as e:
            self._drop(e.reason, n)
            return None
        self.counters["rx"] += 1
        self.counters["rx_bytes"] += n
        if self.events is not None:
            snr = getattr(rx, "snr", None)
            # src: the sender, known only where the channel says (the simulator's frames)
            self.events.emit("rx", dmx=hexlify(pkt[:7]).decode(), kind=kind_of(pkt),
                             length=n, rssi=getattr(rx, "rssi", None),
                             snr=None if snr is None else snr / 4,
                             airtime_ms=plan_airtime_ms(self.plan, n), pkt=packet_id(pkt),
                             src=getattr(rx, "src", None), freq_khz=_khz(self.plan))
        return pkt

    def sent(self, frame):
        """Account a frame the modem transmitted."""
        n = len(frame)
        self.counters["tx"] += 1
        self.counters["tx_bytes"] += n
        if self.events is not None:
            pkt = frame[:n - 4]
            self.events.emit("tx", dmx=hexlify(frame[:7]).decode(), kind=kind_of(pkt),
                             length=n, airtime_ms=plan_airtime_ms(self.plan, n),
                             pkt=packet_id(pkt), freq_khz=_khz(self.plan))


def _khz(plan):
    # freq_khz on tx/rx: the report reads the region's duty-cycle rule from it
    f = plan.get("freq")
    return f // 1000 if f else None


GOSET_DMX = b"\x61\x3d\xfa\x70\xc4\x7a\xba"  # SHA256("tinySSB-0.1 GOset 1")[0:7]


def kind_of(pkt):
    """A coarse kind for the event log: 'goset', 'pkt120' (entry or chunk) or 'vector'
    (WANT/CHNK and anything else); the node itself tells entries from chunks."""
    if pkt[:7] == GOSET_DMX:
        return "goset"
    if len(pkt) == 120:
        return "pkt120"
    return "vector"
