"""A board stand-in on one side of a pseudo-terminal: the firmware's node code
(tssbfw.corelink.NodeLink over MemStore) and its SerialBridge, in a thread.

Frames the node sends count as transmitted at once (no radio); `noise` mangles the bytes
the device writes (flip, drop, duplicate, cut frames) to test the host's resync. The pty
plumbing is the package's (tssb.sim.usb.Pty, also used by the demo's board).
"""
import threading
import time

from tinyssb.frames import add_crc
from tinyssb.node import Node
from tinyssb.store import MemStore
from tssbfw.bridge import SerialBridge
from tssbfw.corelink import NodeLink
from tssb.sim.usb import Pty

from bridge_helpers import FAST


class _Clock:
    def now(self):
        return int(time.monotonic() * 1000)


class Noise:
    """Deterministic line noise: each byte flipped / dropped / duplicated with prob p."""

    def __init__(self, p, seed=1):
        import random
        self.p = p
        self.r = random.Random(seed)
        self.counts = {"flip": 0, "drop": 0, "dup": 0, "cut": 0}

    def __call__(self, data):
        out = bytearray()
        r = self.r
        if r.random() < self.p * 10:           # partial frame: lose the tail
            data = data[:r.randrange(1, len(data))]
            self.counts["cut"] += 1
        for b in data:
            x = r.random()
            if x < self.p:
                out.append(b ^ (1 << r.randrange(8)))
                self.counts["flip"] += 1
            elif x < 2 * self.p:
                self.counts["drop"] += 1
            elif x < 3 * self.p:
                out.append(b)
                out.append(b)
                self.counts["dup"] += 1
            else:
                out.append(b)
        return bytes(out)


class Device:
    def __init__(self, identity, store=None, noise=None):
        self.pty = Pty()
        self.port_name = self.pty.name
        self.clock = _Clock()
        self.store = store if store is not None else MemStore()
        self.noise = noise
        self.link = NodeLink(self.store, identity=(identity.seed, identity.public),
                             node_factory=lambda s, i, log, rand: Node(s, identity=i, timing=FAST))
        self.bridge = SerialBridge(self.pty.read, self._write, name="dev",
                                   info={"fid": identity.public.hex()})
        self.bridge.attach(self)
        self.replies = []
        self._stop = threading.Event()
        self._t = None

    def _write(self, data):
        if self.noise is not None:
            data = self.noise(data)
        self.pty.write(data)

    def enqueue(self, pkt):
        self.bridge.on_radio_tx(add_crc(pkt))

    def start(self):
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.is_set():
            for c in self.bridge.poll():
                if c[0] == "send":
                    continue
                res = {"feeds": len(self.store.feeds())} if c[0] == "status" else {"ok": True}
                self.replies.append(c)
                self.bridge.reply(c, res)
            for p in self.link.tick(self.clock.now()):
                self.enqueue(p)
            time.sleep(0.005)

    def stop(self, close=True):
        self._stop.set()
        if self._t is not None:
            self._t.join(5)
        if close:
            self.pty.close()
