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
hashes expected, so one packet may serve both. WANT and CHNK are keyed by the GOSET state,
so they only reach peers with the identical set, and (as on the ESP32) a node sends them
only when no claim it has seen covers more keys than it holds.

Timing defaults are the ESP32's (tinyssb-wire.md 5.1): full GOSET claim every 20 s,
pending-claim work every 5-5.5 s, WANT and CHNK every 1.5-2 s.
"""
from hashlib import sha256

from tinyssb import entry
from tinyssb.dmx import GOSET_DMX, chnk_dmx, want_dmx
from tinyssb.errors import WireError
from tinyssb.goset import CAPACITY, GOSet
from tinyssb.replica import MAX_CHAIN_CHUNKS, Replica
from tinyssb import vectors

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
    """

    def __init__(self, store, identity=None, verify=None, capacity=CAPACITY, timing=None,
                 rand=None, log=None, max_chain=MAX_CHAIN_CHUNKS):
        if verify is None or identity is not None:
            from tinyssb import crypto
            if verify is None:
                verify = crypto.verify
        self.store = store
        self.verify = verify
        self.max_chain = max_chain
        self.rand = rand or _default_rand
        self.log = log
        self.timing = dict(TIMING)
        if timing:
            self.timing.update(timing)
        self.goset = GOSet(capacity)
        self.replicas = {}   # fid -> Replica
        self.by_dmx = {}     # DMX of a feed's next entry -> Replica
        self.by_hash = {}    # expected chunk hash -> [(Replica, seq), ...]
        self.counters = {}
        self.last_error = None
        self._due = None
        self.want_offs = 0
        self.author = None
        for fid in store.feeds():
            self._follow(fid)
        if identity is not None:
            seed, pub = identity
            self._follow(pub)
            r = self.replicas[pub]
            self.author = entry.Author(pub, lambda m: crypto.sign(seed, m), r.max_seq, r.prev)
        self._refresh()

    # -- feeds -------------------------------------------------------------------------

    def _follow(self, fid):
        fid = bytes(fid)
        if fid in self.replicas:
            return self.replicas[fid]
        self.goset.add(fid)
        return self._add_replica(fid)

    def _add_replica(self, fid):
        r = Replica(self.store, fid, self.verify, self.max_chain)
        self.replicas[fid] = r
        self.by_dmx[r.next_dmx] = r
        for seq, c in r.chains.items():
            self._arm(c.expect, r, seq)
        return r

    def follow(self, fid):
        """Add a feed to replicate (and to the GOSET). Raises GOSetFull at capacity."""
        r = self._follow(fid)
        self._refresh()
        return r

    def _refresh(self):
        state = self.goset.state
        self.want_dmx = want_dmx(state)
        self.chnk_dmx = chnk_dmx(state)

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
        """As on_packet, but returns (kind, packet) pairs (kind: entry or chunk)."""
        try:
            out = self._dispatch(pkt, now)
            self._count("rx")
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
        if d == GOSET_DMX:
            self._on_goset(pkt)
            handled = True
        elif d == self.want_dmx:
            out = self._on_want(pkt)
            handled = True
        elif d == self.chnk_dmx:
            out = self._on_chnk(pkt)
            handled = True
        elif n == entry.PKT_LEN:
            r = self.by_dmx.get(d)
            if r is not None:
                self._on_entry(r, pkt)
                handled = True
        if n == entry.PKT_LEN:
            h = sha256(pkt).digest()[:entry.HASH_LEN]
            waiting = self.by_hash.get(h)
            if waiting:
                self._on_chunk(h, waiting, pkt)
                handled = True
        if not handled:
            raise WireError("unknown_dmx")
        return out

    def _on_goset(self, pkt):
        self._count("rx_goset")
        new = self.goset.on_packet(pkt)
        for k in new:
            self._add_replica(k)
        if new:
            self._refresh()
            self._event("goset", {"count": len(self.goset), "state": self.goset.state.hex()})

    def _on_entry(self, r, pkt):
        old = r.next_dmx
        seq, chain = r.add_entry(pkt)
        self._rearm_entry(r, old)
        if chain is not None:
            self._arm(chain.expect, r, seq)
        self._count("rx_entry")
        self._event("append", {"feed": r.fid.hex(), "seq": seq})

    def _on_chunk(self, h, waiting, pkt):
        del self.by_hash[h]
        for r, seq in waiting:
            c = r.chains.get(seq)
            cnr = c.cnr if c is not None else -1
            try:
                chain = r.add_chunk(seq, pkt)
            except WireError as e:
                self._count("drop_" + e.reason)
                continue
            self._count("rx_chunk")
            self._event("chunk", {"feed": r.fid.hex(), "seq": seq, "cnr": cnr})
            if chain is not None:
                self._arm(chain.expect, r, seq)

    def _on_want(self, pkt):
        self._count("rx_want")
        offs, seqs = vectors.decode_want(pkt)
        keys = self.goset.keys
        n = len(keys)
        if n == 0:
            return []
        reqs = []
        for i in range(len(seqs)):
            s = seqs[i]
            fid = keys[(offs + i) % n]
            r = self.replicas.get(fid)
            if r is not None and 1 <= s <= r.max_seq:
                reqs.append((fid, s))
        out = vectors.round_robin(reqs, self.store.entry, vectors.WANT_CREDIT)
        self._count("tx_entry", len(out))
        return [("entry", p) for p in out]

    def _on_chnk(self, pkt):
        self._count("rx_chnk")
        keys = self.goset.keys
        n = len(keys)
        reqs = []
        for fidx, seq, cnr in vectors.decode_chnk(pkt):
            if fidx < n and 1 <= seq <= vectors.MAX_SEQ and cnr <= self.max_chain:
                reqs.append(((keys[fidx], seq), cnr))
        store = self.store
        out = vectors.round_robin(reqs, lambda k, c: store.chunk(k[0], k[1], c),
                                  vectors.CHNK_CREDIT)
        self._count("tx_chunk", len(out))
        return [("chunk", p) for p in out]

    # -- periodic work -------------------------------------------------------------------

    def _start(self, now):
        self._due = {}
        for name in self.timing:
            self._due[name] = now + self.timing[name][0]

    def _reschedule(self, name, now):
        first, period, jitter = self.timing[name]
        self._due[name] = now + period + (self.rand(jitter) if jitter else 0)

    def next_deadline(self, now=0):
        """Time (ms) at which tick() next has work."""
        if self._due is None:
            return now
        return min(self._due.values())

    def tick(self, now):
        """Return the periodic packets due at `now` (ms)."""
        return [p for _, p in self.tick_kinds(now)]

    def tick_kinds(self, now):
        """As tick, but returns (kind, packet) pairs (claim, novelty, want, chnk)."""
        if self._due is None:
            self._start(now)
        out = []
        due = self._due
        if now >= due["claim"]:
            p = self.goset.full_claim()
            if p is not None:
                out.append(p)
            self._reschedule("claim", now)
        if now >= due["goset"]:
            out.extend(self.goset.round())
            self._reschedule("goset", now)
        out = [("claim" if p[7] == 0x63 else "novelty", p) for p in out]
        self._count("tx_goset", len(out))
        if now >= due["want"]:
            p = self.want_vector()
            if p is not None:
                out.append(("want", p))
                self._count("tx_want")
            self._reschedule("want", now)
        if now >= due["chnk"]:
            p = self.chnk_vector()
            if p is not None:
                out.append(("chnk", p))
                self._count("tx_chnk")
            self._reschedule("chnk", now)
        return out

    def want_vector(self):
        """The next WANT packet, or None when there is nothing to ask (or the GOSET is not
        settled: see GOSet.in_sync)."""
        keys = self.goset.keys
        if not keys or not self.goset.in_sync():
            return None
        reps = self.replicas
        start = self.want_offs % len(keys)
        seqs, self.want_offs = vectors.plan_want(
            len(keys), start, lambda i: reps[keys[i]].max_seq + 1)
        return vectors.encode_want(self.want_dmx, start, seqs)

    def chnk_vector(self):
        """The next CHNK packet, or None when no side chain is incomplete."""
        keys = self.goset.keys
        if not keys or not self.goset.in_sync():
            return None
        reps = self.replicas
        trip = vectors.plan_chnk(len(keys), self.rand(len(keys)),
                                 lambda i: reps[keys[i]].open_chains())
        if not trip:
            return None
        return vectors.encode_chnk(self.chnk_dmx, trip)
