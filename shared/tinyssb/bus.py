"""An in-memory broadcast medium for Nodes on a virtual clock.

Every packet a node sends reaches every other node it is linked to (all, by default),
as on a shared radio channel without collisions or airtime. Tests, benchmarks and the
small demo use it; the LoRa simulator (host/tssb/sim) adds the physical layer.
"""


class Bus:
    """Args:
        nodes: list of Node.
        links: optional set of (i, j) pairs that hear each other (symmetric); None = all.
        loss: function(src, dst, pkt) -> True to drop a delivery (e.g. seeded random loss).
    """

    def __init__(self, nodes, links=None, loss=None):
        self.nodes = list(nodes)
        self.links = links
        self.loss = loss
        self.now = 0
        self.packets = {}  # kind -> count sent
        self.bytes = {}    # kind -> bytes sent
        self.sent = {}     # (node index, kind) -> bytes sent

    def hears(self, i, j):
        return i != j and (self.links is None or (i, j) in self.links or (j, i) in self.links)

    def _sent(self, kind, pkt, src=None):
        self.packets[kind] = self.packets.get(kind, 0) + 1
        self.bytes[kind] = self.bytes.get(kind, 0) + len(pkt)
        k = (src, kind)
        self.sent[k] = self.sent.get(k, 0) + len(pkt)

    def step(self, now):
        """Run every node's tick at `now` and deliver all resulting traffic."""
        self.now = now
        queue = []
        for i, n in enumerate(self.nodes):
            for kind, p in n.tick_kinds(now):
                queue.append((i, kind, p))
        k = 0
        while k < len(queue):
            src, kind, p = queue[k]
            k += 1
            self._sent(kind, p, src)
            for j, n in enumerate(self.nodes):
                if not self.hears(src, j) or (self.loss and self.loss(src, j, p)):
                    continue
                for kind2, r in n.on_packet_kinds(p, now):
                    queue.append((j, kind2, r))

    def run(self, until, step=100, stop=None):
        """Advance the clock to `until` in steps; stop early when stop() is true.
        Returns the time reached."""
        t = self.now
        while t < until:
            t += step
            self.step(t)
            if stop is not None and stop():
                break
        return t

    def total(self):
        return sum(self.packets.values()), sum(self.bytes.values())


def same_stores(nodes):
    """True when every node holds the same feeds, entries and chunks."""
    ref = nodes[0]
    want = _snapshot(ref)
    for n in nodes[1:]:
        if _snapshot(n) != want:
            return False
    return True


def _snapshot(node):
    st = node.store
    out = []
    for fid in sorted(st.feeds()):
        seq, mid = st.front(fid)
        chunks = 0
        for s in range(1, seq + 1):
            chunks += st.chunk_count(fid, s)
        out.append((fid, seq, mid, chunks))
    return out
