"""The sans-IO tinySSB node.

A Node holds a GOSET, one Replica per feed and a store. Drivers (the board's asyncio
loop over the radio, the simulator's virtual clock, the host's WebSocket/UDP/serial
gateways) call

    out = node.on_packet(pkt, now_ms)   # packets to send in reply
    out = node.tick(now_ms)             # periodic packets that are due
    node.next_deadline()                # when tick() next has something to do

and send whatever comes back. The node never raises on a received packet: anything
malformed or unexpected is dropped and counted in `node.counters` by reason.

Demultiplexing as deployed: the first 7 bytes select GOSET, WANT, CHNK or the next entry
of a feed; in addition every 120-byte packet is hashed and looked up among the chunk
hashes expected, so one packet may serve both.

Two modes (goset.DEPLOYED, goset.EXTENDED), one implementation; they differ in policy.

DEPLOYED behaves as the deployed ESP32 (tinyssb-wire.md 4-5): WANT and CHNK are keyed by
the GOSET state and sent only while no claim seen covers more keys than the node holds;
timers are the ESP32's (full claim every 20 s, pending-claim work every 5-5.5 s, WANT and
CHNK every 1.5-2 s). The simulator runs it for deployed-behaviour boards.

EXTENDED is what our boards and hosts run. Same packets towards deployed nodes, plus:
  - GOSET policy: trust classes (keys from unauthenticated packets stay provisional
    until an entry verifies), eviction and ageing of keys nobody vouches for, exact
    answers to claims (goset.py); candidates a deployed claim names by XOR, confirmed by
    a WANT probe keyed by its set (peerset.py); the GOSET extension between our nodes
    (gosetx.py). A feed that becomes vouched for here is named to our neighbours in
    KEYS with its entry as proof.
  - WANT/CHNK are keyed by any set a neighbour showed it holds (spaces.py), those that
    brought verified data first, and answered under any set we know; with no such sign,
    none are sent.
  - A WANT or CHNK we cannot serve yet is remembered (DEFER_MS); the entry or chunk goes
    out as soon as it arrives, so a new entry travels a hop in about its own airtime
    instead of waiting for the requester's next timer, and once more REPUSH_MS later
    unless the requester asked on. An entry that opens a side chain goes out with the
    chain once complete, and a WANT reply pushes a chain's first chunks: no hop
    transmits while the hop before it still does (hidden nodes).
  - While a side chain arrives we send no WANT, ask for nothing of it and hold our
    replies and periodic packets (CHAIN_BUSY_MS, POSTPONE_MS): half duplex would cost us
    its next chunk.
  - Signs that a neighbour holds more (its WANT asks beyond our newest entry, its CHNK
    beyond our newest chunk) bring our WANT/CHNK forward, after its holders' replies
    (AHEAD_MS); a WANT or CHNK that brought nothing (a push after ANSWER_MS does not
    count as an answer) doubles the period up to WANT_MAX_MS, so an idle mesh stays
    quiet.
  - Entries and chunks that arrive before their predecessor are kept (ORPHANS).
  - Any number of stored feeds: the GOSET holds the followed ones, then the most recently
    active, up to capacity - RESERVE; the rest stay in the store, dormant (capacity
    policy, not GOSetFull at start).
All of it only shapes what the node itself sends; every packet is a deployed one or
travels under the extension's own DMX.
"""
from hashlib import sha256

from tinyssb import entry
from tinyssb import vectors
from tinyssb.aggregate import Aggregate
from tinyssb.dmx import GOSET_DMX, want_dmx
from tinyssb.errors import WireError
from tinyssb.goset import (CAPACITY, CLAIM, CLAIM_LEN, EXTENDED, KEY_LEN, PINNED, GOSet,
                           GOSetFull)
from tinyssb.replica import MAX_CHAIN_CHUNKS, Replica
from tinyssb.spaces import FAILED, Spaces

try:
    import random as _random

    def _default_rand(n):
        return _random.getrandbits(16) % n if n > 1 else 0
except ImportError:  # pragma: no cover
    def _default_rand(n):
        return 0

# name: (first run after start, period, jitter) in ms
TIMING = {
    "claim": (500, 20000, 0),
    "goset": (1000, 5000, 500),
    "want": (2000, 1500, 500),
    "chnk": (4000, 1500, 500),
}

# Extended mode.
RESERVE = 10            # GOSET slots kept free of stored feeds for feeds the mesh announces
BUSY_FEED_MS = 60000    # a feed with a new entry this recently is not made dormant to keep
                        # that reserve (its replication, a neighbour's set we agree on,
                        # would be undone); the reserve comes back once it idles
WANT_MAX_MS = 12000     # longest WANT/CHNK period when they bring nothing (8 x 1.5 s)
PROMPT_MS = 100         # delay of a WANT/CHNK brought forward (replies of one packet batch)
PROMPT_GAP_MS = 500     # at most one brought-forward WANT (or CHNK) per this
AHEAD_MS = 1500         # a WANT that shows its sender holds more is answered by its
                        # holders first: ours follows this (plus up to 1 s) later, not
                        # into their replies (the sender would lose them, half duplex)
DEFER_MS = 30000        # a request we could not serve is kept this long: > 2 x WANT_MAX_MS
MAX_DEFERRED = 32       # remembered side-chain requests (entry requests: one per feed)
DEPLOYED_MS = 60000     # a deployed neighbour counts as present this long after its last
                        # claim we cannot attribute to our nodes (3 full-claim periods)
DISCOVERY_CLAIMS = 15   # without one, every 15th claim period (300 s, the age of junk
                        # keys) still claims: a deployed node with an empty set says
                        # nothing until it learns
GOSET_SOON_MS = 1000    # GOSET round brought forward while claims or novelties wait
REACT_NOVELTIES = 4     # novelties sent at once in answer to a claim (the rest: rounds)
CHAIN_BUSY_MS = 1500    # a side chain that got a chunk this recently is still arriving (a
                        # sender's next chunk follows within a slot, <= 550 ms + airtime):
                        # what we owe from it goes out once it is complete, so we do not
                        # send while the hop before us does (half duplex, hidden nodes)
CHNK_HOLD_MS = 4000     # our CHNK waits this long after a neighbour asked for chunks we
                        # lack too (its holders answer; our request would only collide)
ORPHANS = 8             # 120-byte packets that arrived before the one naming them
POSTPONE_MS = 5000      # replies wait at most this long while a side chain arrives
MAX_POSTPONED = 10      # and at most this many (the board's send queue holds 10)
PUSH_CHUNKS = 3         # chunks sent right after the entries of one reply that open side
                        # chains (the requester would ask for them next; the board's send
                        # queue holds 10 frames, a WANT reply up to 5 entries)
NO_WANT = 0x7FFF        # WANT seq for a feed we do not replicate: beyond any log, and
                        # within the ESP32's 16-bit request seq
REPUSH_MS = 700         # an entry pushed to a neighbour's standing WANT goes once more this
REPUSH_JITTER = 300     # (+ rand(REPUSH_JITTER), + CHUNK_SLOT_MS per chunk pushed with it)
                        # later, unless the requester asked for it or beyond meanwhile: a
                        # push lost to a hidden node's transmission would otherwise wait
                        # for the requester's next WANT (up to WANT_MAX_MS). Blind, as no
                        # sign tells a loss (a copy we hear may be the hop before us
                        # pushing again); one entry frame per hop against a stall of
                        # seconds (tools/bench_sim.py latency cases)
CHUNK_SLOT_MS = 700     # one chunk frame and its send slot (124 B, 250-550 ms gap)
ANSWER_MS = 3000        # what arrives this soon after our WANT (CHNK) answers it: a reply
                        # waits behind at most a few frames in the sender's queue


class Node:
    """A tinySSB replication node.

    Args:
        store: a feed store (see tinyssb.store).
        identity: optional (seed, public_key) of this node's own feed, for post().
        verify: function(pub, msg, sig) -> bool; default tinyssb.crypto.verify.
        capacity: GOSET capacity (deployed: 100).
        timing: overrides of TIMING entries.
        rand: function(n) -> int in [0, n), for jitter and CHNK start (seedable in sims).
        log: optional function(event, fields_dict) for the event log.
        mode: goset.EXTENDED (our nodes, default) or goset.DEPLOYED.
        follow: feed IDs to replicate whatever else the store holds (never made dormant).
        banned: feed IDs never replicated (see ban()).
        feeds: stored feed IDs, most recently active first (default: store.feeds()).
        extension: run the coded-symbol GOSET extension (extended mode only).
    """

    def __init__(self, store, identity=None, verify=None, capacity=CAPACITY, timing=None,
                 rand=None, log=None, max_chain=MAX_CHAIN_CHUNKS, mode=EXTENDED, follow=(),
                 feeds=None, extension=True, banned=()):
        if verify is None or identity is not None:
            from tinyssb import crypto
            if verify is None:
                verify = crypto.verify
        self.store = store
        self.verify = verify
        self.max_chain = max_chain
        self.rand = rand or _default_rand
        self.log = log
        self.mode = mode
        self.extended = mode == EXTENDED
        self.timing = dict(TIMING)
        if timing:
            self.timing.update(timing)
        self.goset = GOSet(capacity, mode)
        for f in banned:
            self.goset.ban(f)
        self.spaces = Spaces()
        self.replicas = {}   # fid -> Replica
        self.by_dmx = {}     # DMX of a feed's next entry -> Replica
        self.by_hash = {}    # expected chunk hash -> [(Replica, seq), ...]
        self.counters = {}
        self.last_error = None
        self._due = None
        self.author = None
        self.followed = set()
        self.fresh = {}            # fid -> ms of its last new entry (capacity policy)
        self.deferred = {}         # fid -> [seq, credit, expires]: entries owed
        self.deferred_chunks = {}  # (fid, seq) -> [next cnr, credit, expires]: chunks owed
        self.outbox = []           # (kind, packet) owed outside on_packet (post)
        self.chain_t = {}          # (fid, seq) -> ms of the chain's last chunk
        self.chnk_hold = 0         # no CHNK of ours before this (ms)
        self.orphans = []          # (packet, hash) kept for a later predecessor
        self.postponed = []        # (kind, packet, ms) held while a side chain arrives
        self.deployed_ms = None    # last GOSET packet that no neighbour of ours explains
        self._claims = 0           # claim periods so far
        self._last = {"want": None, "chnk": None}   # ms each was last sent
        self._idle = {"want": 0, "chnk": 0}         # sent and brought nothing, in a row
        self._got = {"want": False, "chnk": False}  # something arrived since the last one
        self._under = {"want": None, "chnk": None}  # the Space the last one was keyed by
        self.ext = None
        self.unacked = {}          # fid -> [seq pushed, ms to push again, extra ms]
        self.clock = 0             # the latest time passed in (ms)
        own = None
        if identity is not None:
            own = bytes(identity[1])
        for f in follow:
            self.followed.add(bytes(f))
        if own is not None:
            self.followed.add(own)
        self._load(own, follow, store.feeds() if feeds is None else feeds)
        if identity is not None:
            seed = identity[0]
            r = self.replicas[own]
            self.author = entry.Author(own, lambda m: crypto.sign(seed, m), r.max_seq, r.prev)
        if self.extended and extension:
            from tinyssb.gosetx import Extension
            self.ext = Extension(self)
        self._refresh()

    # -- feeds -------------------------------------------------------------------------

    def _load(self, own, follow, stored):
        """Choose the feeds the GOSET holds at start (capacity policy, never GOSetFull)."""
        cap = self.goset.capacity
        budget = cap if not self.extended else cap - min(RESERVE, cap // 2)
        order = []
        if own is not None:
            order.append(own)
        for f in follow:
            order.append(bytes(f))
        n = len(order)
        order.extend(bytes(f) for f in stored)
        for i in range(len(order)):
            fid = order[i]
            if fid in self.replicas or fid in self.goset.banned:
                continue
            mine = i < n
            if len(self.goset) >= (cap if mine else budget):
                if mine:
                    self._count("dormant_followed")
                continue
            if not mine and self.extended and self.store.front(fid)[0] == 0:
                continue    # a stored feed with no entry: nothing vouches for it
            self.goset.add(fid, PINNED)
            self._add_replica(fid)
        for i in range(len(order)):
            self.fresh.setdefault(order[i], -i)   # store order: most recent first

    def _add_replica(self, fid, persist=True):
        r = Replica(self.store, fid, self.verify, self.max_chain, persist)
        self.replicas[fid] = r
        self.by_dmx[r.next_dmx] = r
        for seq, c in r.chains.items():
            self._arm(c.expect, r, seq)
        return r

    def _drop_replica(self, fid):
        r = self.replicas.pop(fid, None)
        if r is None:
            return
        if self.by_dmx.get(r.next_dmx) is r:
            del self.by_dmx[r.next_dmx]
        for h in list(self.by_hash):
            lst = [w for w in self.by_hash[h] if w[0] is not r]
            if lst:
                self.by_hash[h] = lst
            else:
                del self.by_hash[h]
        self.deferred.pop(fid, None)
        for k in [k for k in self.chain_t if k[0] == fid]:
            del self.chain_t[k]
        for k in [k for k in self.deferred_chunks if k[0] == fid]:
            del self.deferred_chunks[k]

    def _settle(self):
        """Drop replicas of keys the GOSET evicted or aged out; refresh if it changed."""
        gone = self.goset.removed
        if not gone:
            return False
        self.goset.removed = []
        for k in gone:
            self._drop_replica(k)
        return True

    def follow(self, fid):
        """Add a feed to replicate (and to the GOSET).

        Raises:
            GOSetFull: every slot holds a followed feed (deployed mode: at capacity).
            ValueError: the feed is banned.
        """
        fid = bytes(fid)
        if fid in self.goset.banned:
            raise ValueError("feed is banned")
        self.followed.add(fid)
        try:
            self.goset.add(fid, PINNED)
        except GOSetFull:
            if not self._make_room():
                raise
            self.goset.add(fid, PINNED)
        r = self.replicas.get(fid)
        if r is None:
            r = self._add_replica(fid)
        elif not r.stored:
            self.store.add_feed(fid)
            r.stored = True
        self._settle()
        self._refresh()
        return r

    def ban(self, fid):
        """Stop replicating a feed and never take its key again (a blocked author)."""
        fid = bytes(fid)
        self.followed.discard(fid)
        self.goset.ban(fid)
        self._settle()
        self._drop_replica(fid)     # also a probe's replica, which the GOSET never held
        self._refresh()

    def unban(self, fid):
        """Take a banned feed's key again when the network announces it."""
        self.goset.banned.discard(bytes(fid))

    def reload(self, fid):
        """Read feed `fid` from the store again: another writer of the same store (a
        second process on a host) appended entries or chunks this node did not see.
        A stored feed the node does not replicate yet is taken up if the GOSET has room.
        New entries of our own feed are pushed as a post's are.

        Returns: True if the node's view of the feed changed.
        """
        fid = bytes(fid)
        r = self.replicas.get(fid)
        if r is None:
            cap = self.goset.capacity
            room = cap if not self.extended else cap - min(RESERVE, cap // 2)
            if len(self.goset) >= room or not self.store.has_feed(fid) or \
                    self.store.front(fid)[0] == 0:
                return False      # as _load chooses at start
            self.goset.add(fid, PINNED)
            self._add_replica(fid)
            self._refresh()
            return True
        old = (r.max_seq, [(s, c.cnr) for s, c in r.chains.items()])
        # what neighbours asked of this feed stays owed (their WANT is still standing)
        owed = self.deferred.get(fid)
        owed_chunks = [(k, v) for k, v in self.deferred_chunks.items() if k[0] == fid]
        self._drop_replica(fid)
        r = self._add_replica(fid)
        if owed is not None:
            self.deferred[fid] = owed
        for k, v in owed_chunks:
            self.deferred_chunks[k] = v
        if old == (r.max_seq, [(s, c.cnr) for s, c in r.chains.items()]):
            return False
        if self.author is not None and fid == self.author.fid:
            self.author.seq, self.author.prev = r.max_seq, r.prev
            if self.extended:
                for seq in range(old[0] + 1, r.max_seq + 1):
                    self.outbox.extend(self._owed_entry(r, seq, None))
                    self.outbox.extend(self._owed_chunks(r, seq))
        return True

    def _make_room(self, now=None):
        """Make a verified feed dormant (not followed, least recently active, and with
        `now`: idle for BUSY_FEED_MS); True if one was found (extended mode)."""
        if not self.extended:
            return False
        best = None
        for k in self.goset.keys:
            if k in self.followed or self.goset.trust(k) != PINNED:
                continue
            if now is not None and now - self.fresh.get(k, 0) < BUSY_FEED_MS:
                continue
            if best is None or self.fresh.get(k, 0) < self.fresh.get(best, 0):
                best = k
        if best is None:
            return False
        self.goset.discard(best)
        self._count("dormant")
        return True

    def _pinned(self):
        n = 0
        for k in self.goset.keys:
            if self.goset.trust(k) == PINNED:
                n += 1
        return n

    def _verified(self, r):
        """An entry of r's feed verified here: the feed is vouched for."""
        g = self.goset
        if g.trust(r.fid) == PINNED:
            return
        g.pin(r.fid)
        self._keep_reserve()
        self._settle()
        self._refresh()

    def _keep_reserve(self):
        """Idle verified feeds beyond capacity less RESERVE go dormant (extended mode)."""
        g = self.goset
        if self.extended and self._pinned() > g.capacity - min(RESERVE, g.capacity // 2):
            self._make_room(self.clock)

    def _refresh(self):
        g = self.goset
        self.spaces.set_own("goset", g.keys, g.state)
        if self.extended:
            keys = []
            agg = Aggregate(KEY_LEN)
            for k in g.keys:
                if g.trust(k) == PINNED:
                    keys.append(k)
                    agg.add(k)
            sp = self.spaces.set_own("announced", keys, bytes(agg.xor))
            if self.ext is not None:
                self.ext.announced_changed(sp)

    @property
    def want_dmx(self):
        return self.spaces.goset.want_dmx

    @property
    def chnk_dmx(self):
        return self.spaces.goset.chnk_dmx

    def announced(self):
        """The Space of the keys this node vouches for (extended mode), else None."""
        return self.spaces.announced

    def _arm(self, h, r, seq):
        lst = self.by_hash.get(h)
        if lst is None:
            self.by_hash[h] = [(r, seq)]
        elif (r, seq) not in lst:
            lst.append((r, seq))

    def post(self, content, typ=entry.CHAIN20):
        """Append an entry with `content` to this node's own feed; return its seq."""
        if self.author is None:
            raise ValueError("node has no identity")
        seq, pkt, mid, chunks = self.author.next(content, typ)
        r = self.replicas[self.author.fid]
        old = r.next_dmx
        r.append_local(pkt, mid, chunks)
        self._rearm_entry(r, old)
        self._event("append", {"feed": r.fid.hex(), "seq": seq, "own": True})
        if self.extended:
            self.outbox.extend(self._owed_entry(r, seq, None))
            self.outbox.extend(self._owed_chunks(r, seq))
        return seq

    def _rearm_entry(self, r, old):
        if self.by_dmx.get(old) is r:
            del self.by_dmx[old]
        self.by_dmx[r.next_dmx] = r

    # -- receiving ---------------------------------------------------------------------

    def _count(self, key, n=1):
        self.counters[key] = self.counters.get(key, 0) + n

    def _event(self, name, fields):
        if self.log is not None:
            self.log(name, fields)

    def on_packet(self, pkt, now=0):
        """Process one received packet; return the packets to send in reply.

        Never raises: a bad packet is dropped and counted under its reason.
        """
        return [p for _, p in self.on_packet_kinds(pkt, now)]

    def on_packet_kinds(self, pkt, now=0):
        """As on_packet, but returns (kind, packet) pairs (kind: entry, chunk, novelty, ...)."""
        try:
            self.clock = now
            out = self._dispatch(pkt, now)
            self._count("rx")
            if out and self.extended and self._receiving(now):
                return self._postpone(out, now)
            return out
        except WireError as e:
            self._count("drop_" + e.reason)
            self._event("drop", {"reason": e.reason, "length": len(pkt)})
        except Exception as e:  # a bug must not take the node down; it is counted
            self.last_error = e
            self._count("drop_internal_error")
        return []

    def _dispatch(self, pkt, now):
        n = len(pkt)
        if n < 8 or n > entry.PKT_LEN:
            raise WireError("bad_length", n)
        pkt = bytes(pkt)
        d = pkt[:7]
        out = []
        handled = False
        hit = None
        if d == GOSET_DMX:
            out = self._on_goset(pkt, now)
            handled = True
        elif self.ext is not None and d == self.ext.dmx:
            out = self.ext.on_packet(pkt, now)
            handled = True
        else:
            hit = self.spaces.lookup(d)
            if hit is not None and not self.extended and hit[0] is not self.spaces.goset:
                hit = None
        if hit is not None:
            sp, is_want = hit
            if self.extended:
                sp.seen = now   # the sender holds this set
                self.spaces.seen(sp.state, now)
            out = self._on_want(sp, pkt, now) if is_want else self._on_chnk(sp, pkt, now)
            handled = True
        elif not handled and n == entry.PKT_LEN:
            r = self.by_dmx.get(d)
            if r is not None:
                out = self._on_entry(r, pkt, now)
                handled = True
        h = None
        if n == entry.PKT_LEN:
            h = sha256(pkt).digest()[:entry.HASH_LEN]
            waiting = self.by_hash.get(h)
            if waiting:
                out = out + self._on_chunk(h, waiting, pkt, now)
                handled = True
        if not handled:
            if self.extended and h is not None:
                self._orphan(pkt, h)
            raise WireError("unknown_dmx")
        if self.extended and self.orphans:
            out = out + self._adopt(now)
        return out

    def _orphan(self, pkt, h):
        # (most are copies of what we hold already: no sign to ask for anything)
        if len(self.orphans) >= ORPHANS:
            self.orphans.pop(0)
        self.orphans.append((pkt, h))

    def _adopt(self, now):
        """Orphans whose predecessor has arrived now (an entry or chunk lost to a
        collision is asked for again, the ones after it need not be)."""
        out = []
        again = True
        while again:
            again = False
            for o in self.orphans:
                pkt, h = o
                r = self.by_dmx.get(pkt[:7])
                waiting = self.by_hash.get(h)
                if r is None and not waiting:
                    continue
                self.orphans.remove(o)
                if r is not None:
                    try:
                        out.extend(self._on_entry(r, pkt, now))
                    except WireError as e:
                        self._count("drop_" + e.reason)
                waiting = self.by_hash.get(h)
                if waiting:
                    out.extend(self._on_chunk(h, waiting, pkt, now))
                self._count("rx_adopted")
                again = True
                break
        return out

    def _on_goset(self, pkt, now):
        self._count("rx_goset")
        g = self.goset
        claim = len(pkt) == CLAIM_LEN and pkt[7] == CLAIM
        if self.extended and claim and self.ext is not None and self.ext.ours(pkt[72:104]):
            # A claim of one of our nodes (it paired it with a beacon): the extension tells
            # us its set already; learning its boundary keys would only spread its junk.
            self._count("rx_goset_ours")
            if pkt[104] == len(g) and pkt[72:104] == g.state:
                self.spaces.goset.seen = now
            return []
        before = g.state
        new = g.on_packet(pkt, now)
        out = []
        if self.extended:
            # a claim none of our neighbours explains, or a novelty (a deployed node
            # holding one key announces it so; ours send novelties only in answer to
            # deployed claims): a deployed node is near
            self.deployed_ms = now
            if g.full_match_ms == now:
                self.spaces.goset.seen = now
            k = 0
            while g.novelties and k < REACT_NOVELTIES:
                out.append(("novelty", g.novelty(g.novelties.pop(0))))
                k += 1
            for p in g.asks_out:
                out.append(("claim", p))
            self._count("tx_goset", len(g.asks_out))
            g.asks_out = []
            if g.busy():
                self._soon("goset", now, GOSET_SOON_MS)
        self._learned(new, now)
        if self._settle() or g.state != before:
            self._refresh()
            self._event("goset", {"count": len(g), "state": g.state.hex()})
        if self.extended and g.peer.candidates:
            # before our novelties: a probe is keyed by the set the neighbour holds now
            out = self._probe(now) + out
        return out

    def _probe(self, now):
        """WANTs for the first entry of candidate keys (peerset.py): keyed by the deployed
        neighbour's set, at the candidate's index there. The entry that answers verifies
        under the candidate and makes it ours."""
        out = []
        for k, state, i in self.goset.peer.probes(now):
            if k in self.goset.banned:
                continue
            if k not in self.replicas:
                self._add_replica(k, persist=False)   # armed for entry 1, not in the set
            out.append(("probe", vectors.encode_want(want_dmx(state), i, [1])))
            self._count("tx_probe")
        return out

    def _learned(self, keys, now):
        """Replicas for keys that joined the GOSET from the network."""
        for k in keys:
            if k in self.replicas:
                continue
            r = self._add_replica(k, persist=not self.extended)
            if self.extended and r.max_seq > 0:
                self.fresh[k] = now  # a dormant stored feed a neighbour announced again
                self._verified(r)

    def learn(self, keys, cls, now):
        """Keys announced by one of our neighbours (gosetx); returns the new ones."""
        g = self.goset
        before = g.state
        new = g.learn(keys, cls, now)
        self._learned(new, now)
        if self._settle() or g.state != before:
            self._refresh()
            self._event("goset", {"count": len(g), "state": g.state.hex()})
        return new

    def _on_entry(self, r, pkt, now):
        old = r.next_dmx
        seq, chain = r.add_entry(pkt)
        self._rearm_entry(r, old)
        if chain is not None:
            self._arm(chain.expect, r, seq)
        self._count("rx_entry")
        self._event("append", {"feed": r.fid.hex(), "seq": seq})
        self._answered("want", now)
        self.fresh[r.fid] = now
        if not self.extended:
            return []
        probes = []
        if r.fid not in self.goset:
            # a candidate's probe was answered: the entry verified under it
            g = self.goset
            g.peer.confirmed(r.fid)
            try:
                g.add(r.fid, PINNED, now)
            except GOSetFull:
                pass
            self._count("rx_confirmed")
            self._refresh()
            g.remainder(now)        # the last key may follow from the whole set now
            if g.busy():
                self._soon("goset", now, GOSET_SOON_MS)
            if g.peer.candidates:
                probes = self._probe(now)
        proof = []
        if self.goset.trust(r.fid) != PINNED and self.ext is not None and \
                self.spaces.lacking(r.fid, now):
            # The feed's key was provisional here and is vouched for now: we name it to
            # our neighbours (KEYS) with this entry as its proof, so each verifies it at
            # once and passes it on the same way, rather than decoding our next beacon
            # and asking for the entry (held like any reply while its chain arrives)
            proof = self.ext.announce(r.fid) + [("entry", pkt)]
            self._count("tx_proof")
        self._verified(r)
        if chain is not None:
            # our nodes push a chain's first chunks after its entry: ask only if none
            # arrive within CHAIN_BUSY_MS (deployed senders wait for our CHNK). An entry
            # we owe goes out with its chain, once complete: a neighbour that learns of it
            # earlier would ask while the hop before us still sends (hidden nodes).
            self.chain_t[(r.fid, seq)] = now
            self._soon("chnk", now, CHAIN_BUSY_MS)
            return probes + proof
        out = self._owed_entry(r, seq, now)
        if proof:
            out = proof[:-1] + (out or proof[-1:])
        return probes + out

    def _on_chunk(self, h, waiting, pkt, now):
        del self.by_hash[h]
        out = []
        for r, seq in waiting:
            c = r.chains.get(seq)
            cnr = c.cnr if c is not None else -1
            try:
                chain = r.add_chunk(seq, pkt)
            except WireError as e:
                self._count("drop_" + e.reason)
                continue
            self._count("rx_chunk")
            self._answered("chnk", now)
            self._event("chunk", {"feed": r.fid.hex(), "seq": seq, "cnr": cnr})
            if chain is not None:
                self._arm(chain.expect, r, seq)
            if self.extended:
                if chain is None:
                    self.chain_t.pop((r.fid, seq), None)
                    owed = self._owed_entry(r, seq, now)   # entry and chain at once
                    out.extend(owed if owed else self._owed_chunks(r, seq))
                else:
                    self.chain_t[(r.fid, seq)] = now
        return out

    def _on_want(self, sp, pkt, now):
        self._count("rx_want")
        offs, seqs = vectors.decode_want(pkt)
        keys = sp.keys
        n = len(keys)
        if n == 0:
            return []
        reqs = []
        ahead = False
        for i in range(len(seqs)):
            s = seqs[i]
            fid = keys[(offs + i) % n]
            r = self.replicas.get(fid)
            if r is None:
                continue
            if self.unacked:
                self._acked(fid, s)     # it asks for what we pushed, or beyond
            if 1 <= s <= r.max_seq:
                reqs.append((fid, s))
            elif self.extended and 1 <= s <= vectors.MAX_SEQ:
                if s == r.max_seq + 1:
                    self._defer_entry(fid, s, now)
                elif s != NO_WANT:
                    ahead = True    # the sender holds entries we lack
        if ahead:
            self._soon("want", now, AHEAD_MS + self.rand(1000))

        sent = []

        def fetch(fid, s):
            p = self.store.entry(fid, s)
            if p is not None:
                sent.append((fid, s))
            return p
        out = vectors.round_robin(reqs, fetch, vectors.WANT_CREDIT)
        self._count("tx_entry", len(out))
        out = [("entry", p) for p in out]
        if self.extended:
            out.extend(self._chains_after(sent, now))
        return out

    def _chains_after(self, sent, now, budget=PUSH_CHUNKS):
        """Side chains of entries we just sent: a requester's next step is to ask for
        them, so the first PUSH_CHUNKS go out at once; a chain still arriving here is owed
        (sent when complete, so we do not transmit while the hop before us does)."""
        out = []
        for fid, s in sent:
            r = self.replicas.get(fid)
            if r is None:
                continue
            if s in r.chains:
                self._defer_chunks(fid, s, 0, now)
                continue
            k = 0
            while budget > 0:
                p = self.store.chunk(fid, s, k)
                if p is None:
                    break
                out.append(("chunk", p))
                budget -= 1
                k += 1
            if budget <= 0:
                break
        self._count("tx_pushed", len(out))
        return out

    def _on_chnk(self, sp, pkt, now):
        self._count("rx_chnk")
        keys = sp.keys
        n = len(keys)
        reqs = []
        for fidx, seq, cnr in vectors.decode_chnk(pkt):
            if fidx < n and 1 <= seq <= vectors.MAX_SEQ and cnr <= self.max_chain:
                reqs.append(((keys[fidx], seq), cnr))
        serve = reqs
        if self.extended:
            serve = self._chnk_signs(reqs, now)
        store = self.store
        out = vectors.round_robin(serve, lambda k, c: store.chunk(k[0], k[1], c),
                                  vectors.CHNK_CREDIT)
        self._count("tx_chunk", len(out))
        return [("chunk", p) for p in out]

    def _chnk_signs(self, reqs, now):
        """What a neighbour's CHNK tells, and which of its requests to serve now.

        A chain we are still receiving is not served from (its chunks are owed and go out
        once it is complete); chunks it waits for that we lack too are owed; a request
        beyond our chain shows it holds more (our CHNK soon, after its holders' replies);
        one at or below our position shows it asks its holders already (ours waits)."""
        chnk_soon = False
        serve = []
        for req in reqs:
            (fid, seq), cnr = req
            r = self.replicas.get(fid)
            if r is None:
                continue
            if seq > r.max_seq:
                continue    # its holders answer it; our WANT is owed there already
            c = r.chains.get(seq)
            if c is None:
                serve.append(req)
                continue
            if cnr > c.cnr:
                chnk_soon = True
                continue
            self.chnk_hold = now + CHNK_HOLD_MS
            busy = now - self.chain_t.get((fid, seq), now - CHAIN_BUSY_MS) < CHAIN_BUSY_MS
            if busy or c.cnr == cnr:
                self._defer_chunks(fid, seq, cnr, now)
            else:
                serve.append(req)   # stalled: what we have helps
                self._defer_chunks(fid, seq, c.cnr, now)
        if chnk_soon:
            self.chnk_hold = 0
            self._soon("chnk", now, AHEAD_MS + self.rand(1000))
        return serve

    # -- owed replies (extended) ---------------------------------------------------------

    def _defer_entry(self, fid, seq, now):
        # One per feed (at most one per replica): the seq asked is always our max + 1.
        self.deferred[fid] = [seq, vectors.WANT_CREDIT, now + DEFER_MS]

    def _defer_chunks(self, fid, seq, cnr, now):
        d = self.deferred_chunks
        k = (fid, seq)
        if k not in d and len(d) >= MAX_DEFERRED:
            self._expire_owed(now)
            if len(d) >= MAX_DEFERRED:
                return
        old = d.get(k)
        if old is None or cnr < old[0]:
            d[k] = [cnr, vectors.CHNK_CREDIT, now + DEFER_MS]
        else:
            old[2] = now + DEFER_MS

    def _expire_owed(self, now):
        d = self.deferred_chunks
        for k in [k for k, v in d.items() if v[2] <= now]:
            del d[k]

    def _owed_entry(self, r, seq, now):
        """The entry seq of r if a neighbour asked for it (and keep it asking for seq + 1,
        within the WANT's credit)."""
        v = self.deferred.get(r.fid)
        if v is None or v[0] != seq:
            return []
        if now is not None and v[2] <= now:
            del self.deferred[r.fid]
            return []
        if v[1] > 1:
            v[0] += 1
            v[1] -= 1
        else:
            del self.deferred[r.fid]
        p = self.store.entry(r.fid, seq)
        self._count("tx_owed")
        if p is None:
            return []
        chain = self._chains_after([(r.fid, seq)], now or 0, vectors.CHNK_CREDIT)
        self._pushed(r.fid, seq, len(chain), now)
        return [("entry", p)] + chain

    def _pushed(self, fid, seq, chunks, now):
        """We pushed entry seq of fid to a neighbour's standing WANT: it goes once more
        (REPUSH_MS) unless the requester asks beyond it first. (now None: posted; the
        time starts when the outbox goes, at the next tick.)"""
        if len(self.unacked) >= self.goset.capacity and fid not in self.unacked:
            return
        extra = chunks * CHUNK_SLOT_MS
        due = None if now is None else now + REPUSH_MS + self.rand(REPUSH_JITTER) + extra
        self.unacked[fid] = [seq, due, extra]

    def _acked(self, fid, seq):
        u = self.unacked.get(fid)
        if u is not None and u[0] <= seq <= vectors.MAX_SEQ and seq != NO_WANT:
            del self.unacked[fid]

    def _repush(self, now):
        out = []
        for fid in list(self.unacked):
            u = self.unacked[fid]
            if u[1] is None:
                u[1] = now + REPUSH_MS + self.rand(REPUSH_JITTER) + u[2]
                continue
            if u[1] > now:
                continue
            del self.unacked[fid]
            p = self.store.entry(fid, u[0])
            if p is not None and fid in self.replicas:
                out.append(("entry", p))
                self._count("tx_repushed")
        return out

    def _owed_chunks(self, r, seq):
        """The chunks of a now complete chain that a neighbour asked for."""
        v = self.deferred_chunks.pop((r.fid, seq), None)
        if v is None:
            return []
        out = []
        for cnr in range(v[0], v[0] + v[1]):
            p = self.store.chunk(r.fid, seq, cnr)
            if p is None:
                break
            out.append(("chunk", p))
        self._count("tx_owed", len(out))
        return out

    # -- periodic work -------------------------------------------------------------------

    def _start(self, now):
        self._due = {}
        for name in self.timing:
            self._due[name] = now + self.timing[name][0]

    def _reschedule(self, name, now):
        first, period, jitter = self.timing[name]
        if self.extended and name in self._idle:
            period = min(period << self._idle[name], WANT_MAX_MS)
        elif self.extended and name == "goset" and self.goset.busy():
            period = GOSET_SOON_MS
        self._due[name] = now + period + (self.rand(jitter) if jitter else 0)

    def _soon(self, name, now, delay=PROMPT_MS):
        """Bring periodic work forward (extended mode)."""
        if self._due is None:
            return
        t = now + delay
        if name in self._idle:
            self._idle[name] = 0
            last = self._last[name]
            if last is not None and t < last + PROMPT_GAP_MS:
                t = last + PROMPT_GAP_MS
        if t < self._due[name]:
            self._due[name] = t

    def deployed_present(self, now):
        """A deployed neighbour was heard recently (extended mode: send our claims)."""
        return self.deployed_ms is not None and now - self.deployed_ms < DEPLOYED_MS

    def _postpone(self, out, now):
        """Hold our replies while a side chain arrives (half duplex: sending now would
        cost us its next chunk); tick() sends them once it is complete or POSTPONE_MS on.
        Returns what goes out now (the rest when the postponed list is full)."""
        p = self.postponed
        room = MAX_POSTPONED - len(p)
        for o in out[:room]:
            p.append((o[0], o[1], now))
        self._count("postponed", min(room, len(out)))
        return out[room:] if room < len(out) else []

    def _release(self, now):
        p = self.postponed
        if p and (not self._receiving(now) or now - p[0][2] >= POSTPONE_MS):
            self.postponed = []
            return [(k, x) for k, x, _ in p]
        return []

    def next_deadline(self, now=0):
        """Time (ms) at which tick() next has work."""
        if self._due is None or self.outbox:
            return now
        t = min(self._due.values())
        if self.postponed:
            t = min(t, self.postponed[0][2] + POSTPONE_MS)
            for c in self.chain_t.values():
                t = min(t, c + CHAIN_BUSY_MS)
        if self.ext is not None:
            t = min(t, self.ext.next_deadline(now))
        for u in self.unacked.values():
            t = min(t, now if u[1] is None else u[1])
        return t

    def tick(self, now):
        """Return the periodic packets due at `now` (ms)."""
        return [p for _, p in self.tick_kinds(now)]

    def tick_kinds(self, now):
        """As tick, but returns (kind, packet) pairs (claim, novelty, want, chnk, ...)."""
        if self._due is None:
            self._start(now)
        self.clock = now
        out = self.outbox + self._release(now)
        self.outbox = []
        if self.unacked:
            out.extend(self._repush(now))
        due = self._due
        g = self.goset
        gs = []
        if now >= due["claim"]:
            self._claims += 1
            if (not self.extended or (self.deployed_present(now) and not g.peer.heard(now))
                    or self._claims % DISCOVERY_CLAIMS == 0):
                p = g.full_claim(now)
                if p is not None:
                    b = self.ext.paired_beacon(now) if self.ext is not None else None
                    if b is not None:
                        out.append(("beacon", b))   # tells our nodes this claim is ours
                    gs.append(p)
            self._reschedule("claim", now)
        if now >= due["goset"]:
            before = g.state
            if self.extended and not self.deployed_present(now):
                # claims and novelties are for deployed neighbours; none is around
                g.expire(now)
                g.novelties = []
                g.pending = []
            else:
                gs.extend(g.round(now))
                self._learned(g.added, now)
                g.added = []
            self._keep_reserve()    # (feeds verified in a burst went beyond it)
            if self._settle() or g.state != before:
                self._refresh()
                self._event("goset", {"count": len(g), "state": g.state.hex()})
            self._reschedule("goset", now)
            if g.wake is not None:
                # the next round when the other half of a claimed region may go (see
                # goset.HALF_AGAIN_MS), half a second or so later than its period
                if not g.busy():
                    self._due["goset"] = g.wake
                g.wake = None
        for p in gs:
            out.append(("claim" if p[7] == 0x63 else "novelty", p))
        self._count("tx_goset", len(gs))
        if self.ext is not None:
            out.extend(self.ext.tick(now))
        if now >= due["want"]:
            p = self._want_tick(now)
            if p is not None:
                out.append(("want", p))
                self._count("tx_want")
            self._reschedule("want", now)
        if now >= due["chnk"]:
            p = self._chnk_tick(now)
            if p is not None:
                out.append(("chnk", p))
                self._count("tx_chnk")
            self._reschedule("chnk", now)
        if self.extended and out and self._receiving(now):
            # nothing periodic goes out while a side chain arrives (half duplex: it would
            # cost us its next chunk); what we owe from our own posts goes at once
            own = [o for o in out if o[0] in ("entry", "chunk")]
            held = [o for o in out if o[0] not in ("entry", "chunk")]
            return own + self._postpone(held, now)
        return out

    def _want_tick(self, now):
        if not self.extended:
            return self.want_vector()
        if self._receiving(now):
            return None     # half duplex: a WANT now would cost us a chunk
        self.spaces.drop_stale(now)
        for sp in self.spaces.next_shared(now):
            p = self._want_in(sp, now)
            if p is not None:
                self._note("want", now, sp)
                return p
        return None

    def _chnk_tick(self, now):
        if not self.extended:
            return self.chnk_vector()
        if now < self.chnk_hold:
            return None
        for sp in self.spaces.shared(now):
            p = self._chnk_in(sp, now)
            if p is not None:
                self._note("chnk", now, sp)
                return p
        return None

    def _receiving(self, now):
        """A side chain is arriving (a chunk or its entry within CHAIN_BUSY_MS)."""
        for t in self.chain_t.values():
            if now - t < CHAIN_BUSY_MS:
                return True
        return False

    def _answered(self, name, now):
        """Something arrived. It answers our last WANT (CHNK) if it came within ANSWER_MS
        of it (later it is a push to a standing request: no reason to ask sooner)."""
        last = self._last[name]
        if last is None or not self.extended or now - last < ANSWER_MS:
            self._got[name] = True

    def _note(self, name, now, sp):
        """Back-off bookkeeping: did the previous request bring anything? (Then the space
        it was keyed by is one a neighbour really holds: spaces.py.)"""
        if self._last[name] is not None:
            prev = self._under[name]
            if self._got[name]:
                self._idle[name] = 0
                if prev is not None:
                    prev.used = now
            else:
                # (a request that tried a set nobody answered yet is no sign of an idle
                # mesh while another set still brings data)
                if self._idle[name] < 3 and not (prev is not None and prev.rank()[0]
                                                 and self.spaces.useful(now)):
                    self._idle[name] += 1
                if prev is not None:
                    prev.used = FAILED
        self._got[name] = False
        self._last[name] = now
        self._under[name] = sp

    def want_vector(self, space=None):
        """The next WANT packet keyed by `space` (default: our GOSET), or None when there
        is nothing to ask (deployed mode: or the GOSET is not settled, GOSet.in_sync)."""
        if space is None:
            space = self.spaces.goset
            if not self.extended and not self.goset.in_sync():
                return None
        return self._want_in(space)

    def _want_in(self, sp, now=None):
        keys = sp.keys
        if not keys:
            return None
        reps = self.replicas
        own = self.author.fid if self.author is not None and self.extended else None
        g = self.goset

        def next_seq(i):
            r = reps.get(keys[i])
            # our own feed: nobody holds newer entries, and asking makes neighbours owe
            # us our own next entry (they would echo it back)
            if r is None or r.fid == own:
                return NO_WANT
            if r.max_seq == 0 and now is not None:
                g.fetch(r.fid, now)    # provisional: kept while its answer may come
            return r.max_seq + 1

        start = sp.offs % len(keys)
        seqs, sp.offs = vectors.plan_want(len(keys), start, next_seq)
        if self.extended and all(s == NO_WANT for s in seqs):
            return None     # nothing to ask under this set (our own feed only)
        return vectors.encode_want(sp.want_dmx, start, seqs)

    def chnk_vector(self, space=None):
        """The next CHNK packet, or None when no side chain is incomplete."""
        if space is None:
            space = self.spaces.goset
            if not self.extended and not self.goset.in_sync():
                return None
        return self._chnk_in(space)

    def _chnk_in(self, sp, now=None):
        keys = sp.keys
        if not keys:
            return None
        reps = self.replicas
        busy = self.chain_t

        def chains(i):
            r = reps.get(keys[i])
            if r is None:
                return []
            out = r.open_chains()
            if now is not None and busy:
                # not the chains still arriving: asking would only add a transmission
                # the hop before us collides with
                out = [c for c in out if now - busy.get((r.fid, c[0]), -CHAIN_BUSY_MS)
                       >= CHAIN_BUSY_MS]
            return out

        trip = vectors.plan_chnk(len(keys), self.rand(len(keys)), chains)
        if not trip:
            return None
        return vectors.encode_chnk(sp.chnk_dmx, trip)
