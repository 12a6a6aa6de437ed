"""One simulated board: the firmware's own Firmware, NodeLink, Scheduler, TxLimiter and
RadioPort around a tinyssb Node, on the simulator's virtual clock.

Only two thin subclasses are added, both for accounting, not behaviour: the Node tells
which kind of packet (claim, novelty, want, chnk, entry, chunk) each outgoing packet is
(the firmware's log only knows goset/pkt120/vector), and Firmware.enqueue remembers that
kind for the frames it queued, so airtime can be charged per kind when a frame is sent.
"""
from tinyssb.eventlog import VIRTUAL_EPOCH_MS
from tinyssb.goset import DEPLOYED, EXTENDED
from tinyssb.node import Node
from tinyssb.store import MemStore
from tssbfw import corelink
from tssbfw.app import Firmware
from tssbfw.events import DeviceEvents

MAX_KIND_MEMO = 256  # frames remembered per board; the send queue holds at most 10


class VirtualClock:
    """The simulator's clock, shared by all boards (integer ms since the start)."""

    def __init__(self):
        self.t = 0

    def now(self):
        return self.t


class RxFrame(bytes):
    """A received frame with the attributes micropython-lib's RxPacket carries:
    rssi in dBm, snr in quarter dB, valid_crc; plus src, the sender's name, which only the
    simulated channel knows (it goes into the rx event)."""

    def __new__(cls, data, rssi, snr_db, src=None):
        self = bytes.__new__(cls, data)
        self.src = src
        self.rssi = int(round(rssi))
        self.snr = int(round(snr_db * 4))
        self.valid_crc = True
        return self


class _KindNode(Node):
    """A Node that keeps the kind of each packet its last call returned."""

    kind_hint = {}

    def on_packet(self, pkt, now=0):
        out = self.on_packet_kinds(pkt, now)
        self.kind_hint = {p: k for k, p in out}
        return [p for _, p in out]

    def tick(self, now):
        out = self.tick_kinds(now)
        self.kind_hint = {p: k for k, p in out}
        return [p for _, p in out]


class _SimFirmware(Firmware):
    def __init__(self, *args, **kw):
        Firmware.__init__(self, *args, **kw)
        self.queued_kinds = {}   # packet -> kind, for frames in the send queue

    def enqueue(self, pkt):
        reason = Firmware.enqueue(self, pkt)
        if reason is None:
            memo = self.queued_kinds
            if len(memo) >= MAX_KIND_MEMO:   # frames the limiter refused never pop
                del memo[next(iter(memo))]
            pkt = bytes(pkt)
            memo[pkt] = self.link.node.kind_hint.get(pkt, "other")
        return reason

    def frame_kind(self, frame):
        """The kind of a frame popped from the scheduler (forgets it)."""
        return self.queued_kinds.pop(bytes(frame[:-4]), "other")


class _Events:
    """Event sink for one board: the simulator's hook first, then the JSONL log."""

    def __init__(self, index, hook, device_events):
        self.index = index
        self.hook = hook
        self.dev = device_events

    def emit(self, event, **fields):
        self.hook(self.index, event, fields)
        if self.dev is not None:
            self.dev.emit(event, **fields)


class Board:
    """Args:
        index: board number; name: node name for the log; plan: region plan.
        clock: VirtualClock; rand: function(n) for node and scheduler jitter.
        identity: (seed, public) when this board posts, else None.
        hook: function(index, event, fields) the simulator observes events with.
        sink: function(line) for JSONL lines, or None for no log.
        deployed: run the deployed tinySSB behaviour (goset.DEPLOYED) instead of ours.
    """

    def __init__(self, index, name, plan, clock, rand, identity=None, hook=None, sink=None,
                 run="sim", deployed=False):
        dev = None
        if sink is not None:
            dev = DeviceEvents(name, clock, sink, run=run)
            dev.set_epoch(VIRTUAL_EPOCH_MS + clock.now())
        self.index = index
        self.name = name
        self.identity = identity   # kept so the board can boot again (tssb.sim.usb)
        self.events = _Events(index, hook or _ignore, dev)
        self.store = MemStore()
        self.deployed = deployed
        mode = DEPLOYED if deployed else EXTENDED
        self.link = corelink.NodeLink(
            self.store, identity, self.events, rand,
            node_factory=lambda st, ident, log, r: _KindNode(st, identity=ident, rand=r,
                                                             log=log, mode=mode))
        self.fw = _SimFirmware(plan, self.link, None, clock, self.events, rand=rand)
        if deployed:
            self.fw.sched.burst = None   # the ESP32's slots: 250 + rand(300) ms after each
        self.node = self.link.node
        self.tx_end = 0      # end of the current transmission (ms); half-duplex
        self.tx_airtime_ms = 0
        self.wake_at = None  # time of this board's pending wake event


def _ignore(index, event, fields):
    pass
