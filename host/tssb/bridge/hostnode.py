"""The host's tinySSB node: one `tinyssb.node.Node` over the host store, driven by asyncio.

Every transport (serial board, WebSocket peer, UDP multicast group) is a *port*: an object
with `name` and a non-blocking `send(pkt)`. Received packets go to `receive()`; the node's
replies and periodic packets go to every attached port, so a board on USB reaches phones
and pubs through the host (store and forward, as the deployed Python pub does).
"""
import asyncio
import time

from tinyssb.node import Node

from tssb.store import BLOCK

# Longest sleep of the tick loop: bounds how late a new port sees the first claim.
MAX_IDLE_MS = 200


class HostNode:
    """Args:
        store: tssb.store.Store (or any tinyssb.store implementation).
        identity: object with .seed and .public, or None (no own feed).
        events: object with emit(event, **fields), or None.
        timing: Node timing overrides (tests use shorter periods).
        clock: function() -> ms (default: monotonic).
    """

    def __init__(self, store, identity=None, events=None, timing=None, clock=None):
        self.store = store
        self.events = events
        self.clock = clock or (lambda: int(time.monotonic() * 1000))
        ident = (identity.seed, identity.public) if identity is not None else None
        # Any number of stored feeds: the GOSET holds the followed ones (goset_keys), then
        # the most recent, up to its capacity policy; the rest stay dormant in the store.
        follow = store.goset_keys() if hasattr(store, "goset_keys") else ()
        feeds = store.recent_feeds() if hasattr(store, "recent_feeds") else None
        banned = [r[0] for r in store.blocked(BLOCK)] if hasattr(store, "blocked") else ()
        self.node = Node(store, identity=ident, timing=timing, follow=follow, feeds=feeds,
                         log=self._log if events is not None else None, banned=banned)
        self.ports = []
        self.listeners = []   # function(port_name, direction, pkt, info), before the node
        self.watchers = []    # function(port_name, pkt, info), after the node handled it
        self.stats = {"rx": 0, "tx": 0}
        self._wake = None

    def _log(self, event, fields):
        try:
            self.events.emit(event, **fields)
        except ValueError:
            pass   # a field the schema does not know must not stop replication

    def attach(self, port):
        self.ports.append(port)
        if self._wake is not None:
            self._wake.set()

    def detach(self, port):
        if port in self.ports:
            self.ports.remove(port)

    def receive(self, pkt, port=None, info=None):
        """Hand a received packet to the node and send its replies to all ports."""
        self.stats["rx"] += 1
        name = getattr(port, "name", "?")
        for f in self.listeners:
            f(name, "rx", pkt, info)
        replies = self.node.on_packet(pkt, self.clock())
        for f in self.watchers:
            f(name, pkt, info)
        for p in replies:
            self.broadcast(p)

    def broadcast(self, pkt):
        self.stats["tx"] += 1
        for port in list(self.ports):
            port.send(pkt)

    def post(self, content):
        """Append content to the host's own feed (side chain when long); returns seq."""
        seq = self.node.post(content)
        if self._wake is not None:
            self._wake.set()
        return seq

    def tick(self):
        for p in self.node.tick(self.clock()):
            self.broadcast(p)

    async def run(self):
        """Drive the node's periodic work until cancelled."""
        self._wake = asyncio.Event()
        while True:
            self.tick()
            now = self.clock()
            wait = max(1, min(self.node.next_deadline(now) - now, MAX_IDLE_MS))
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), wait / 1000)
            except asyncio.TimeoutError:
                pass
