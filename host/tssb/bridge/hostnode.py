"""The host's tinySSB node: one `tinyssb.node.Node` over the host store, driven by asyncio.

Every transport (serial board, WebSocket peer, UDP multicast group) is a *port*: an object
with `name` and a non-blocking `send(pkt)`. Received packets go to `receive()`; the node's
replies and periodic packets go to every attached port, so a board on USB reaches phones
and pubs through the host (store and forward, as the deployed Python pub does).
"""
import asyncio
import logging
import time

from tinyssb.node import Node

from tssb import ownfeed
from tssb.store import BLOCK, StoreError

# Longest sleep of the tick loop: bounds how late a new port sees the first claim.
MAX_IDLE_MS = 200
# How often the node looks for what other processes of the home stored (a `tssb post`,
# a `tssb sync` beside a running bridge): within about a second it is sent on.
STORE_POLL_S = 0.5

log = logging.getLogger("tssb.bridge")


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
        self.identity = identity
        self.node = Node(store, identity=ident, timing=timing, follow=follow, feeds=feeds,
                         log=self._log if events is not None else None,
                         max_chain=ownfeed.MAX_CHAIN_CHUNKS, banned=banned)
        self.ports = []
        self.listeners = []   # function(port_name, direction, pkt, info), before the node
        self.watchers = []    # function(port_name, pkt, info), after the node handled it
        self.stats = {"rx": 0, "tx": 0, "reloaded": 0}
        self._wake = None
        self._version = self._data_version()

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
        errors = self.node.counters.get("drop_internal_error", 0)
        replies = self.node.on_packet(pkt, self.clock())
        if self.node.counters.get("drop_internal_error", 0) != errors and \
                isinstance(self.node.last_error, StoreError):
            # another process stored this feed's next entry or chunk first (the node
            # drops the packet and counts it): read what the store holds now
            self.reload()
        for f in self.watchers:
            f(name, pkt, info)
        for p in replies:
            self.broadcast(p)

    def broadcast(self, pkt):
        self.stats["tx"] += 1
        for port in list(self.ports):
            port.send(pkt)

    def post(self, content):
        """Append content to the host's own feed (side chain when long); returns seq.

        Written through tssb.ownfeed (on top of what the store holds, whoever appended
        it), then sent on like any entry another process stored.
        """
        if self.identity is None:
            raise ValueError("node has no identity")
        seq, _ = ownfeed.append(self.store, self.identity, content)
        if self.events is not None:
            self._log("append", {"feed": self.identity.public.hex(), "seq": seq, "own": True})
        self.node.reload(self.identity.public)
        if self._wake is not None:
            self._wake.set()
        return seq

    def _data_version(self):
        dv = getattr(self.store, "data_version", None)
        return dv() if dv is not None else None

    def reload(self):
        """Take up what other processes stored since the last look (see STORE_POLL_S).
        Returns: the number of feeds whose view changed."""
        version = self._data_version()
        if version is None or version == self._version:
            return 0
        self._version = version
        n = 0
        for fid in self.store.feeds():
            fid = bytes(fid)
            r = self.node.replicas.get(fid)
            if r is not None and not self._stale(r):
                continue
            if self.node.reload(fid):
                n += 1
        if n:
            self.stats["reloaded"] += n
            log.debug("took up what other processes stored: %d feed(s)", n)
            if self._wake is not None:
                self._wake.set()
        return n

    def _stale(self, r):
        st = self.store
        if st.front(r.fid)[0] != r.max_seq:
            return True
        return any(st.chunk_count(r.fid, seq) != c.cnr for seq, c in r.chains.items())

    def tick(self):
        for p in self.node.tick(self.clock()):
            self.broadcast(p)

    async def run(self):
        """Drive the node's periodic work until cancelled."""
        self._wake = asyncio.Event()
        next_poll = time.monotonic() + STORE_POLL_S
        while True:
            if time.monotonic() >= next_poll:
                next_poll = time.monotonic() + STORE_POLL_S
                self.reload()
            self.tick()
            now = self.clock()
            wait = max(1, min(self.node.next_deadline(now) - now, MAX_IDLE_MS))
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), wait / 1000)
            except asyncio.TimeoutError:
                pass
