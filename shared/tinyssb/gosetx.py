"""GOSET extension: our nodes agree on feed sets with coded symbols, in a packet or two.

Deployed nodes reconcile GOSETs with claims (105 bytes, split region by region over
rounds of 5 s). Between our nodes the same question is answered with the rateless coded
symbols of codedsym (the construction of the host's rateless SETU profile: XOR of keys,
checksum sum and count per symbol, full 32-byte key sums so a decoded key needs no
follow-up), under a DMX of its own that deployed nodes do not know and therefore ignore.

What a node announces is the set of keys it vouches for: followed here, or with an entry
verified here (goset.PINNED; Node.announced()). Keys anyone can inject with a NOVELTY or
a CLAIM never enter it, so junk does not disturb this reconciliation, and what neighbours
learn from it they keep as EXT keys (goset.py) until an entry verifies.

Packets (DMX = SHA256("tinyssb-toolkit GOset coded 1")[0:7]; TAG = first 2 bytes of the
announced set's XOR, FULL = first 4 bytes of the sender's whole GOSET XOR):
    BEACON   DMX 'b' FULL(4) SYM0(36)              48 B  periodic: "my set is this"
    REPLY    DMX 'B' FULL(4) SYM0(36)              48 B  "yours did not reconcile; mine"
    SYMBOLS  DMX 's' TAG(2) START(2) SYM(36) x k   12 + 36k B, k = 1..3
    REQUEST  DMX 'r' TAG(2) START(2) COUNT(1)      13 B  "more of set TAG from START"
    KEYS     DMX 'k' TAG(2) KEY(32) x k           10 + 32k B, k = 1..3: keys you lack
A symbol is KEYSUM(32) || CHKSUM(3) || COUNT(1) (codedsym.Codec(32, 3, 1)); symbol 0 is
the XOR, checksum sum and count of the whole set (COUNT read unsigned: capacity <= 255).

On a beacon of a set S_n it has no view of, a node tries in turn:
  1. S_n is a subset of our GOSET: the keys it lacks are the ones whose XOR is the XOR
     difference (xorsolve), checked by count and checksum sum. The view costs nothing;
     if the FULL tags differ we send KEYS for the vouched-for keys it lacks.
  2. Symbol 0 alone decodes (one key of difference, or one each way: found by trying our
     keys against the checksum).
  3. Otherwise: a periodic beacon is answered with a REPLY (our symbol 0), so a sender
     holding a superset solves it (1) and sends KEYS; a REPLY we cannot settle makes us
     stream our symbols from 1 (REQUEST asks for more). The decoder finishes early once
     what is left of symbol 0 is settled by (1) or (2) over our keys.
When decoding ends, the node knows S_n exactly: it learns the keys it lacked (EXT), keeps S_n
as a view (spaces.py) so WANT/CHNK can be keyed by it, and sends KEYS for the keys S_n lacks
that it vouches for. KEYS carry the sender's TAG, so the keys named under one tag plus our
set make the sender's set, a view at once. Beacons follow Trickle: every 20 s, doubling up
to 80 s while all that is heard is known, skipped while a neighbour beacons our very set;
the first goes earlier the fuller the set (a one-key difference then costs one beacon), the
second BOOT_MS later. A key that became vouched for here is named in KEYS with its entry
as proof (announce; Node). Everything is bounded by local limits: decoders (a fed one is
never pushed out), streamed packets per period, symbols per stream, keys per decode, one
REPLY per period.
"""
from hashlib import sha256

from tinyssb import codedsym
from tinyssb.errors import WireError
from tinyssb.goset import EXT, KEY_LEN
from tinyssb.hotloops import xor_bytes, xor_into

EXT_STR = b"tinyssb-toolkit GOset coded 1"
DMX = sha256(EXT_STR).digest()[:7]
BEACON, REPLY, SYMBOLS, REQUEST, KEYS = 0x62, 0x42, 0x73, 0x72, 0x6B   # b B s r k
CODEC = codedsym.Codec(KEY_LEN, 3, 1)
SYM = CODEC.size              # 36
SUM = CODEC.sum_len           # 35
BEACON_LEN = 12 + SYM         # 48
PER_PACKET = 3                # symbols per SYMBOLS packet: 12 + 3 x 36 = 120
KEYS_PER_PACKET = 3           # 10 + 3 x 32 = 106

BEACON_MS = 20000             # as the deployed full claim
BEACON_MAX_MS = 80000         # doubled while every beacon heard is one we know
BOOT_MS = 5000                # the period after the first beacon (then doubling as above)
BEACON_JITTER_MS = 1000
RANK_MS = 250                 # first beacon: this much later per key fewer (see tick) ...
RANK_STEPS = 4                # ... for up to this many keys (then as late as that)
BEACON_SOON_MS = 1000         # after our announced set changed
BEACON_GAP_MS = 5000          # at most one early beacon per this
ECHOES = 1                    # Trickle's redundancy constant k: our beacon is skipped when
                              # this many beacons of our very set were heard in the period
                              # (with 1, the middle of a line falls silent: it hears its
                              # upstream neighbour and suppresses what downstream needs)
REPLY_GAP_MS = 5000           # one REPLY per this while our set stays the same
CROSS_MS = 2000               # a beacon heard this soon after ours crossed it: the sender
                              # has our symbol 0 already, so no REPLY; the smaller set
                              # state decodes, the other streams when asked
CROSS_WAIT_MS = 1500          # the decoder then waits this long for KEYS before asking
MAX_DECODERS = 2              # remote sets decoded at once
MAX_HEARD = 8                 # beacons remembered (to retry when our set grows)
HEARD_MS = 120000             # and for how long (also: FULL tags of our neighbours)
DECODE_WAIT_MS = 4000         # re-request after this without symbols
DECODE_TRIES = 4              # requests per decoder before it is dropped
STREAM_BURST = 2              # packets per request or reply (6 symbols)
STREAM_BUDGET = 40            # packets streamed per BEACON_MS (4.8 KB): a peer asking
                              # for more gets nothing until the window turns
PAIR_FRESH_MS = HEARD_MS // 2  # neighbours still know the FULL tag of a beacon this old
PAIR_LEFT = 10                # see _endgame
SPLIT_BUDGET = 64              # local keys tried as pair halves per SYMBOLS packet (one
                              # hash each): keeps a packet within ~2 ms on the unix port
KEYS_GAP_MS = 60000           # KEYS for one remote set at most once per this (a set that
                              # stays the same after our KEYS could not take them)


def symbols_per_set(capacity):
    """Longest stream we send or decode: ~1.4 symbols per difference for large ones, and
    two sets of `capacity` differ in at most 2 x capacity keys."""
    return 3 * capacity


class _Snapshot:
    """A copy of an Encoder's prefix (the decoder's local side), extended in doubling
    steps so a stream arriving three symbols at a time does not re-walk every key each
    time."""

    def __init__(self, enc):
        e = codedsym.Encoder(enc.codec, 0)
        e.m, e.n = enc.m, enc.n
        e.sums = bytearray(enc.sums)
        e.counts = list(enc.counts)
        e.keys = dict(enc.keys)
        e._walk = dict((k, list(w)) for k, w in enc._walk.items())
        self.enc = e
        self.keys = e.keys

    @property
    def m(self):
        return self.enc.m

    def symbol(self, i):
        return self.enc.symbol(i)

    def extend(self, m2):
        self.enc.extend(max(m2, 2 * self.enc.m, 12))


class _Decode:
    __slots__ = ("dec", "keys", "state", "count", "tag", "full", "t", "tries", "asked", "fed")

    def __init__(self, dec, keys, state, count, full, now):
        self.dec = dec
        self.keys = keys      # the local snapshot decoded against (sorted list)
        self.state = state
        self.count = count
        self.tag = state[:2]
        self.full = full
        self.t = now
        self.tries = 0
        self.asked = 1        # symbols asked for so far (symbol 0 came with the beacon)
        self.fed = now        # ms of the last symbols (or of the start)

    def idle(self, now):
        return now - self.fed >= DECODE_WAIT_MS


def _chk(key):
    return sha256(key).digest()[4:4 + CODEC.chk_len]


def _sym0(sym):
    """(state, chk, count) of a wire symbol 0; the count is unsigned (capacity <= 255)."""
    return bytes(sym[:KEY_LEN]), bytes(sym[KEY_LEN:SUM]), sym[SUM]


class Extension:
    """The extension's state machine inside one Node (extended mode)."""

    dmx = DMX

    def __init__(self, node):
        self.node = node
        cap = node.goset.capacity
        self.max_symbols = symbols_per_set(cap)
        self.enc = None           # Encoder over our announced set
        self.state = None         # its XOR
        self.tag = None
        self.decoders = []
        self.heard = []           # [state, chk, count, full, ms]
        self.replied = None       # our announced state when we last sent a REPLY ...
        self.replied_ms = 0       # ... and when
        self.keys_sent = {}       # remote state -> ms of our KEYS
        self.told = None          # the key announce() named, until our set has it
        self.heard_ms = None      # ms of the last extension packet received
        self.keys_heard = {}      # TAG of a KEYS sender -> the keys it named (its set: ours
                                  # plus these, once they add up to its tag)
        self.due = None           # next beacon
        self.period = BEACON_MS
        self.changed = False
        self.last_beacon = None
        self.quiet = True         # every beacon heard this period was known
        self.echoed = 0           # beacons of our own set heard this period
        self.window = 0           # start of the streaming budget window
        self.streamed = 0
        self.counters = node.counters
        self.now = 0              # latest time the node passed in
        self.told_tag = None      # FULL tag of our last beacon ...
        self.told_ms = 0          # ... and when
        self._chk_cache = (None, None)

    # -- our set ----------------------------------------------------------------------

    def announced_changed(self, sp):
        """The node's announced set may have changed: update the encoder key by key
        (O(log m) each), beacon soon."""
        if self.enc is not None and sp.state == self.state and self.enc.n == len(sp.keys):
            return
        if self.enc is None:
            self.enc = codedsym.Encoder(CODEC, 1)
        enc = self.enc
        now = set(sp.keys)
        gone = [k for k in enc.keys if k not in now]
        added = [k for k in sp.keys if k not in enc.keys]
        for k in gone:
            enc.remove(k)
        for k in added:
            enc.add(k)
        told = self.told
        self.told = None
        self.state = sp.state
        self.tag = sp.state[:2]
        self.changed = True
        self.period = BEACON_MS
        if self.due is not None and not (not gone and added == [told]) and self._near():
            # (a key we named in KEYS with its proof needs no early beacon; nor does any
            # change while none of our nodes is heard: deployed ones ignore beacons)
            t = self.now + BEACON_SOON_MS
            if self.last_beacon is not None:
                t = max(t, self.last_beacon + BEACON_GAP_MS)
            self.due = min(self.due, t)

    def _near(self):
        """One of our nodes was heard (any extension packet) within HEARD_MS."""
        return self.heard_ms is not None and self.now - self.heard_ms < HEARD_MS

    def _full_tag(self):
        return self.node.goset.state[:4]

    def ours(self, xor):
        """True when a claim's XOR is the whole set of a neighbour of ours (its beacons'
        FULL tag): that claim is no sign of a deployed node."""
        t = bytes(xor[:4])
        for h in self.heard:
            if h[3] == t:
                return True
        return False

    def paired_beacon(self, now):
        """A beacon to send just before our periodic deployed claim, or None when one
        with the same FULL tag went out recently: its FULL tag is that claim's XOR, so our
        neighbours tell our claims from a deployed node's."""
        if self.told_tag == self._full_tag() and now - self.told_ms < PAIR_FRESH_MS:
            return None
        return self._beacon(BEACON)

    def _beacon(self, typ):
        self.enc.extend(1)
        self.told_tag = self._full_tag()
        self.told_ms = self.now
        return DMX + bytes((typ,)) + self._full_tag() + self.enc.encode(0, 1)

    def _symbols(self, start, stop):
        m = self.enc.m
        if stop > m:
            self.enc.extend(max(stop, min(2 * m, self.max_symbols)))
        out = []
        for s in range(start, stop, PER_PACKET):
            e = min(stop, s + PER_PACKET)
            out.append(("symbols", DMX + bytes((SYMBOLS,)) + self.tag + s.to_bytes(2, "big")
                        + self.enc.encode(s, e)))
        return out

    def _stream(self, start, count, now):
        """Up to `count` of our symbols from `start`, within the streaming budget."""
        if now - self.window >= BEACON_MS:
            self.window = now
            self.streamed = 0
        stop = min(start + count, self.max_symbols)
        packets = min(-(-(stop - start) // PER_PACKET), STREAM_BURST,
                      STREAM_BUDGET - self.streamed)
        if packets <= 0 or start >= stop:
            if start < stop:
                self.counters["ext_budget"] = self.counters.get("ext_budget", 0) + 1
            return []
        stop = min(stop, start + packets * PER_PACKET)
        self.streamed += packets
        return self._symbols(start, stop)

    # -- timers -------------------------------------------------------------------------

    def next_deadline(self, now):
        t = now if self.due is None else self.due
        for d in self.decoders:
            t = min(t, d.t + DECODE_WAIT_MS)
        return t

    def tick(self, now):
        self.now = now
        if self.due is None:
            # The first beacon after start: the fuller a set, the earlier (RANK_MS per key
            # short of capacity, up to RANK_STEPS). A neighbour holding one key less then
            # decodes it from symbol 0 alone: a one-key difference costs one packet.
            first = self.node.timing["claim"][0]
            n = 0 if self.enc is None else self.enc.n
            rank = min(self.node.goset.capacity - n, RANK_STEPS)
            jitter = RANK_MS // 2 if rank < RANK_STEPS else BEACON_JITTER_MS
            self.due = now + first + rank * RANK_MS + self.node.rand(jitter)
        out = []
        if now >= self.due and self.echoed >= ECHOES and not self.changed:
            # a neighbour beaconed our very set this period (Trickle suppression)
            self.echoed = 0
            self.period = min(self.period * 2, BEACON_MAX_MS)
            self.due = now + self.period + self.node.rand(BEACON_JITTER_MS)
            self.counters["beacon_suppressed"] = self.counters.get("beacon_suppressed", 0) + 1
        elif now >= self.due and self.enc is not None and (
                self.enc.n > 0 or self.last_beacon is None):
            # (an empty set is announced once, at start: a neighbour that solves it names
            # its keys)
            self.echoed = 0
            out.append(("beacon", self._beacon(BEACON)))
            # Trickle: the period doubles while every beacon heard was known and our set
            # stayed; anything new starts it over. After the first beacon the period
            # starts at BOOT_MS: neighbours powered on together lose first beacons to
            # each other
            if self.last_beacon is None:
                self.period = BOOT_MS
            elif self.quiet and not self.changed and (self.node.spaces.shared(now)
                                                       or not self._near()):
                # (not while one of our nodes is heard but shares no set with us: then
                # our beacon is how it comes to name its set to us, with KEYS)
                self.period = min(self.period * 2, BEACON_MAX_MS)
            else:
                self.period = BEACON_MS
            self.last_beacon = now
            self.quiet = True
            self.changed = False
            self.due = now + self.period + self.node.rand(BEACON_JITTER_MS)
        elif now >= self.due:
            self.due = now + self.period
        for d in list(self.decoders):
            if now - d.t >= DECODE_WAIT_MS:
                d.tries += 1
                if d.tries > DECODE_TRIES:
                    self.decoders.remove(d)
                    self.counters["ext_gave_up"] = self.counters.get("ext_gave_up", 0) + 1
                    continue
                d.t = now
                out.append(self._request(d))
        self.heard = [h for h in self.heard if now - h[4] < HEARD_MS]
        return out

    # -- receiving ----------------------------------------------------------------------

    def on_packet(self, pkt, now):
        """Returns (kind, packet) replies. Raises WireError for malformed packets."""
        self.now = now
        n = len(pkt)
        typ = pkt[7]
        self.counters["rx_ext"] = self.counters.get("rx_ext", 0) + 1
        self.heard_ms = now
        if typ == BEACON or typ == REPLY:
            if n != BEACON_LEN:
                raise WireError("bad_ext_length")
            return self._on_beacon(bytes(pkt[8:12]), bytes(pkt[12:]), typ == REPLY, now)
        if typ == SYMBOLS:
            k = n - 12
            if k <= 0 or k % SYM or k // SYM > PER_PACKET:
                raise WireError("bad_ext_length")
            return self._on_symbols(bytes(pkt[8:10]), int.from_bytes(pkt[10:12], "big"),
                                    bytes(pkt[12:]), now)
        if typ == REQUEST:
            if n != 13:
                raise WireError("bad_ext_length")
            if self.tag is None or bytes(pkt[8:10]) != self.tag:
                return []       # another node's set
            start = int.from_bytes(pkt[10:12], "big")
            if start == 0 or start >= self.max_symbols:
                raise WireError("bad_ext_request")
            return self._stream(start, max(1, pkt[12]), now)
        if typ == KEYS:
            k = n - 10
            if k <= 0 or k % KEY_LEN or k // KEY_LEN > KEYS_PER_PACKET:
                raise WireError("bad_ext_length")
            keys = [bytes(pkt[10 + i:10 + i + KEY_LEN]) for i in range(0, k, KEY_LEN)]
            self.node.learn(keys, EXT, now)
            self._sender_set(bytes(pkt[8:10]), keys, now)
            return self._retry(now)
        raise WireError("unknown_ext_type")

    def _sender_set(self, tag, keys, now):
        """KEYS name every key of the sender's announced set that ours lacks (it solved
        our beacon): once ours plus the keys heard under its TAG has that tag, that is
        its set, a view to key WANT/CHNK by without waiting for its beacon."""
        got = self.keys_heard.pop(tag, None) or []
        for k in keys:
            if k not in got and len(got) < 2 * self.node.goset.capacity:
                got.append(k)
        self.keys_heard[tag] = got
        if len(self.keys_heard) > MAX_HEARD:
            self.keys_heard.pop(next(iter(self.keys_heard)))
        own = self.node.spaces.announced
        if own is None:
            return
        view = list(own.keys)
        agg = bytearray(own.state)
        for k in got:
            if k not in own.keys:
                view.append(k)
                xor_into(agg, k)
        if bytes(agg[:2]) == tag and len(view) > len(own.keys):
            view.sort()
            self.node.spaces.add_view(view, bytes(agg), now)
            self.keys_heard.pop(tag, None)

    def _heard(self, state, chk, count, full, now):
        for h in self.heard:
            if h[0] == state:
                h[1], h[2], h[3], h[4] = chk, count, full, now
                return
        self.heard.append([state, chk, count, full, now])
        if len(self.heard) > MAX_HEARD:
            self.heard.pop(0)

    def _on_beacon(self, full, sym, reply, now):
        state, chk, count = _sym0(sym)
        self._heard(state, chk, count, full, now)
        node = self.node
        sp = node.spaces
        known = sp.view(state)
        own = node.spaces.announced
        if own is not None and own.state == state:
            self.echoed += 1            # a neighbour announced our set: ours can wait
            if known is None:
                known = sp.add_view(own.keys, state, now)
                if known is None:
                    return []           # both empty
        if known is not None:
            sp.seen(state, now)
            self._relearn(known, now)
            if reply or full != self._full_tag():
                return self._keys_for(known.keys, state, now)
            return []
        self.quiet = False
        crossed = (not reply and self.last_beacon is not None
                   and now - self.last_beacon < CROSS_MS)
        out = self._settle(state, chk, count, full, now, True, crossed)
        if out is not None:
            return out
        if self.tag is None:
            return []
        mine = node.spaces.announced.state
        if reply:
            d = self._find(state)
            if d is not None and mine < state:
                return []   # both replied: the smaller state decodes, the other streams
            if d is not None:
                self.decoders.remove(d)
            return self._stream(1, STREAM_BURST * PER_PACKET, now)
        if crossed:
            if mine < state:
                d = self._decoder(state, count, full, sym, now)
                if d is not None:
                    d.t = now - DECODE_WAIT_MS + CROSS_WAIT_MS
            return []
        return self._reply_and_wait(state, count, full, sym, now)

    def _relearn(self, view, now):
        """Keys of a known view that left our GOSET (evicted while provisional) come back
        while their holder keeps announcing them (aged-out ones stay out: goset.shunned)."""
        g = self.node.goset
        gone = [k for k in view.keys if g.index(k) < 0]
        if gone:
            self.node.learn(gone, EXT, now)

    def _find(self, state):
        for d in self.decoders:
            if d.state == state:
                return d
        return None

    def _settle(self, state, chk, count, full, now, tell=True, crossed=False):
        """Try to know the remote set from its symbol 0 alone; the replies, or None."""
        view = self._solve(state, chk, count)
        if view is None:
            view = self._pair(state, chk, count)
        if view is None:
            return None
        return self._known(view, state, full, now, tell, crossed)

    def _solve(self, state, chk, count):
        """The remote set if it is a subset of our GOSET (sorted keys), else None."""
        g = self.node.goset
        d = len(g) - count
        if d < 0:
            return None
        if d == 0:
            if g.state != state:
                return None
            return list(g.keys) if self._chk_of(g.keys) == chk else None
        lack = g.solve(xor_bytes(g.state, state), d)
        if lack is None:
            return None
        c = bytearray(self._chk_of(g.keys))
        for k in lack:
            xor_into(c, _chk(k))
        if bytes(c) != chk:
            return None
        lack = set(lack)
        return [k for k in g.keys if k not in lack]

    def _chk_of(self, keys):
        st = self.node.goset.state
        if keys is self.node.goset.keys and self._chk_cache[0] == st:
            return self._chk_cache[1]
        c = bytearray(CODEC.chk_len)
        for k in keys:
            xor_into(c, _chk(k))
        c = bytes(c)
        if keys is self.node.goset.keys:
            self._chk_cache = (st, c)
        return c

    def _pair(self, state, chk, count):
        """Symbol 0 holds one key each way (or one more key there): found by trying our
        keys (checksums make a wrong pick a 2^-24 event)."""
        keys = self._local_keys()
        n = len(keys)
        xs = bytearray(state)
        mine = bytearray(KEY_LEN)
        cs = bytearray(chk)
        for k in keys:
            xor_into(mine, k)
            xor_into(cs, _chk(k))
        xor_into(xs, mine)           # XOR of the difference
        diff = bytes(xs)
        if count == n + 1:
            if _chk(diff) == bytes(cs) and diff not in keys:
                return sorted(keys + [diff])
            return None
        if count != n:
            return None
        for k in keys:
            r = xor_bytes(diff, k)
            if xor_bytes(_chk(r), _chk(k)) == bytes(cs) and r not in keys:
                out = [x for x in keys if x != k]
                out.append(r)
                return sorted(out)
        return None

    def _local_keys(self):
        """What we decode against: our announced set (not keys from CLAIM/NOVELTY: junk
        would only widen the difference)."""
        own = self.node.spaces.announced
        return [] if own is None else list(own.keys)

    def _known(self, view, state, full, now, tell=True, crossed=False):
        node = self.node
        have = node.goset
        new = [k for k in view if have.index(k) < 0]
        if new:
            node.learn(new, EXT, now)
            node._soon("want", now)     # feeds to fetch, keyed by the new view
        node.spaces.add_view(view, state, now)
        self.counters["ext_views"] = self.counters.get("ext_views", 0) + 1
        if tell and full != self._full_tag():
            return self._keys_for(view, state, now, 2 if crossed else 1)
        return []

    def _keys_for(self, keys, state, now, least=1):
        """KEYS for the keys we vouch for that the remote set (`keys`, with XOR `state`)
        lacks (rate-limited), when at least `least` are missing (after crossed beacons a
        single missing key is decoded from our symbol 0 by the other side)."""
        last = self.keys_sent.get(state)
        if last is not None and now - last < KEYS_GAP_MS:
            return []
        own = self.node.spaces.announced
        if own is None:
            return []
        theirs = set(keys)
        lack = [k for k in own.keys if k not in theirs]
        if len(lack) < least:
            return []
        self.keys_sent[state] = now
        if len(self.keys_sent) > MAX_HEARD:
            self.keys_sent.pop(next(iter(self.keys_sent)))
        out = []
        for i in range(0, len(lack), KEYS_PER_PACKET):
            out.append(("keys", DMX + bytes((KEYS,)) + self.tag
                        + b"".join(lack[i:i + KEYS_PER_PACKET])))
        return out

    def announce(self, key):
        """KEYS naming one key we just came to vouch for (the node sends its proof after
        it)."""
        if self.tag is None:
            return []
        if self.node.spaces.shared(self.now):
            self.told = key     # (a node that shares no set with a neighbour still beacons)
        return [("keys", DMX + bytes((KEYS,)) + self.tag + key)]

    def _reply_and_wait(self, state, count, full, sym, now):
        d = self._decoder(state, count, full, sym, now)
        # A REPLY is our symbol 0, the same for every neighbour (and heard by all): one
        # per REPLY_GAP_MS while our set stays, however many beacons ask for it
        if self.replied == self.state and now - self.replied_ms < REPLY_GAP_MS:
            return []
        if d is not None:
            d.asked = 1 + STREAM_BURST * PER_PACKET   # what a REPLY brings (see below)
        self.replied = self.state
        self.replied_ms = now
        return [("reply", self._beacon(REPLY))]

    def _decoder(self, state, count, full, sym, now):
        """The decoder of a remote set, started if needed; None when MAX_DECODERS run and
        none of them is idle (a flood of beacons cannot push out a decode that is fed)."""
        d = self._find(state)
        if d is not None:
            return d
        if len(self.decoders) >= MAX_DECODERS:
            idle = [x for x in self.decoders if x.idle(now)]
            if not idle:
                self.counters["ext_decoders_busy"] = self.counters.get(
                    "ext_decoders_busy", 0) + 1
                return None
            self.decoders.remove(idle[0])
        keys = self._local_keys()
        # Our own announced set's encoder is that set's prefix already: a copy is the
        # snapshot to decode against (no hashing), grown in doubling steps.
        dec = codedsym.Decoder(CODEC, _Snapshot(self.enc), self.max_symbols,
                               2 * self.node.goset.capacity)
        dec.add(0, sym)
        d = _Decode(dec, keys, state, count, full, now)
        self.decoders.append(d)
        return d

    def _on_symbols(self, tag, start, data, now):
        d = None
        for x in self.decoders:
            if x.tag == tag:
                d = x
                break
        if d is None:
            return []   # a stream we did not ask for (or for another neighbour)
        dec = d.dec
        if start > dec.received:
            d.t = now
            return [self._request(d)]
        skip = dec.received - start
        if skip * SYM >= len(data):
            return []
        first = dec.received
        try:
            dec.add(first, data[skip * SYM:])
            if not dec.done:
                dec.split_pairs(SPLIT_BUDGET)
            if not dec.done:
                self._local_pairs(d, first)
        except codedsym.CodedSymbolError as e:
            self.decoders.remove(d)
            raise WireError("ext_" + e.reason.replace(" ", "_"))
        d.t = d.fed = now
        d.tries = 0
        view = self._finish(d)
        if view is not None:
            self.decoders.remove(d)
            return self._known(view, d.state, d.full, now)
        if dec.received >= d.asked:
            return [self._request(d)]
        return []

    def _local_pairs(self, d, first):
        """New symbols holding just two keys of ours (COUNT -2): both map there, so the
        pair is among the local keys split_pairs indexed at that symbol (one XOR and one
        lookup each, no hashing until a pair is found; checked by checksum). Each is
        resolved and peeling goes on. (Symbol 0 is _endgame's.)"""
        dec = d.dec
        at = dec._at        # codedsym split_pairs' index: symbol -> local keys mapping there
        for i in range(max(first, 1), dec.received):
            if dec.counts[i] != -2:
                continue
            rest = dec.residual(i, i + 1)
            s = rest[:KEY_LEN]
            cands = at.get(i, ())
            cset = set(cands)
            for k in cands:
                r = xor_bytes(s, k)
                if k < r and r in cset and xor_bytes(_chk(k), _chk(r)) == rest[KEY_LEN:SUM]:
                    dec.resolve(k, -1)
                    dec.resolve(r, -1)
                    break

    def _request(self, d):
        have = d.dec.received
        # the stream's first burst is STREAM_BURST packets; later ones one packet, as the
        # decoder is then near its end (fewer symbols sent past the point it finishes)
        want = PER_PACKET if have > STREAM_BURST * PER_PACKET else STREAM_BURST * PER_PACKET
        d.asked = have + want
        return ("request", DMX + bytes((REQUEST,)) + d.tag + have.to_bytes(2, "big")
                + bytes((want,)))

    def _finish(self, d):
        """The remote set once decoding settles it (sorted keys), else None."""
        dec = d.dec
        local = set(dec.local_keys)
        remote = list(dec.remote_keys)
        if not dec.done:
            rest = dec.residual(0, 1)
            end = self._endgame(d, rest, local)
            if end is None:
                return None
            remote.extend(end[0])
            for k in end[1]:
                local.add(k)
        view = [k for k in d.keys if k not in local] + remote
        view.sort()
        if len(view) != d.count:
            return None
        agg = bytearray(KEY_LEN)
        for k in view:
            xor_into(agg, k)
        return view if bytes(agg) == d.state else None

    def _endgame(self, d, rest, found):
        """What is left of symbol 0 after peeling, settled over our keys: only our keys
        (xorsolve), or one key each way. Returns (remote keys, local keys) or None."""
        s, c, cnt = rest[:KEY_LEN], rest[KEY_LEN:SUM], CODEC.decode_count(rest[SUM:])
        cand = [k for k in d.keys if k not in found]
        if cnt < 0:
            # over our whole GOSET (its basis is kept up to date): with independent keys
            # the solution is unique, and must lie among the snapshot's unfound keys
            got = self.node.goset.solve(s, -cnt)
            if got is None:
                return None
            cset = set(cand)
            for k in got:
                if k not in cset:
                    return None
            cs = bytearray(CODEC.chk_len)
            for k in got:
                xor_into(cs, _chk(k))
            return ([], got) if bytes(cs) == c else None
        if cnt == 0 and d.dec._nonzero <= PAIR_LEFT:
            # one key each way left: found by trying our keys (one hash each), tried only
            # once few symbols are left non-zero (two keys map to ~2 ln(m) + 2 of them)
            cset = set(cand)
            for k in cand:
                r = xor_bytes(s, k)
                if r not in cset and xor_bytes(_chk(r), _chk(k)) == c:
                    return [r], [k]
        return None

    def _retry(self, now):
        """Our GOSET grew: beacons we could not settle may settle now."""
        out = []
        for h in list(self.heard):
            if self.node.spaces.view(h[0]) is not None:
                continue
            # no KEYS: this beacon's FULL tag predates what we just learned
            r = self._settle(h[0], h[1], h[2], h[3], now, False)
            if r is not None:
                for x in list(self.decoders):
                    if x.state == h[0]:
                        self.decoders.remove(x)
                out.extend(r)
        return out
