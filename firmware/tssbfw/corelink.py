"""The one module that couples the firmware to the protocol core's Node.

Everything else in the firmware sees a `NodeLink`: on_packet / tick / next_deadline /
post / counters, all with integer milliseconds passed in (the core has no clock).
Changing how the Node is built or what it reports is done here only.
"""
from tssbfw.flashstore import StoreFull


def crypto():
    """The core's crypto module (PyNaCl on hosts, pure Python on boards)."""
    from tinyssb import crypto as c
    return c


class NodeLink:
    def __init__(self, store, identity=None, events=None, rand=None, node_factory=None):
        """Build the Node over `store`.

        Args:
            store: a feed store (FlashStore on boards).
            identity: (seed, public) of the node's own feed, or None.
            events: object with emit(event, **fields), or None.
            rand: function(n) -> int in [0, n).
            node_factory: function(store, identity, log, rand) -> node (tests); default
                builds tinyssb.node.Node.
        """
        self.events = events
        self.counters = {}
        log = self._log if events is not None else None
        if node_factory is None:
            crypto()
            from tinyssb.node import Node
            self.node = Node(store, identity=identity, rand=rand, log=log)
        else:
            self.node = node_factory(store, identity, log, rand)
        self.store = store

    def _log(self, event, fields):
        self.events.emit(event, **fields)

    def _check_error(self):
        # The Node never raises on a received packet; a store refusal surfaces as its
        # last_error and is re-counted here under its own name.
        err = getattr(self.node, "last_error", None)
        if isinstance(err, StoreFull):
            self.counters["store_full"] = self.counters.get("store_full", 0) + 1
            self.node.last_error = None

    def on_packet(self, pkt, now_ms):
        """Packets to send in reply to a received packet (never raises)."""
        out = self.node.on_packet(pkt, now_ms)
        self._check_error()
        return out

    def tick(self, now_ms):
        """Periodic packets due at now_ms."""
        return self.node.tick(now_ms)

    def next_deadline(self, now_ms):
        """When tick() next has work (ms); now_ms when unknown."""
        f = getattr(self.node, "next_deadline", None)
        return now_ms if f is None else f(now_ms)

    def post(self, content):
        """Append `content` to the node's own feed; returns the seq.

        Raises:
            StoreFull: the store refused it.
        """
        return self.node.post(content)

    def node_counters(self):
        """The node's counters merged with the link's own."""
        out = dict(getattr(self.node, "counters", {}))
        for k in self.counters:
            out[k] = out.get(k, 0) + self.counters[k]
        return out
