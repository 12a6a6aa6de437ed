"""GOSET: the grow-only set of feed IDs that peers agree on before WANT/CHNK.

Peers refer to feeds by index in the sorted set (unsigned byte order), so WANT and CHNK
only work between peers with the identical set; their DMX is keyed by the set's state
(XOR of all keys), which gates them automatically.

Packets (DMX = SHA256("tinySSB-0.1 GOset 1")[0:7]):
    CLAIM    DMX || 'c' || LO(32) || HI(32) || XOR(32) || CNT(1)    105 bytes
    NOVELTY  DMX || 'n' || KEY(32)                                  40 bytes
The seed text says 103 for CLAIM; every deployed node uses 105 (docs/interop.md).

Two modes share the wire format and the set; they differ in policy:

DEPLOYED is the deployed ESP32 algorithm (tinyssb-wire.md section 4), kept as it is so
the simulator can run deployed-behaviour boards: receiving a claim adds its boundary keys
and queues it as pending; every round the node works through pending claims smallest
first, asking for help (re-claiming the region) where it has fewer or equal keys and
helping (splitting the region, or sending a novelty once a region shrinks to one key)
where it has more, within per-round budgets. Plus Android's shortcut: a CNT=3 claim whose
LO and HI are adjacent here names the missing middle key (XOR ^ LO ^ HI). Every key is
kept for good, and WANT/CHNK wait until no claim seen covers more keys than we hold.

EXTENDED is what our nodes run. The packets are the same; what changes:
  - Keys carry a trust class. PINNED: followed here, or an entry of the feed verified
    here; never evicted. EXT: from one of our nodes' beacons or KEYS. WIRE: from a CLAIM
    or NOVELTY. Anyone can send those packets, so EXT and WIRE keys are provisional:
    never announced onward, a claim boundary or novelty only once a claim agreed with
    them (vouched). When the set is full a new key evicts the least trusted one (WIRE
    before EXT, then the one vouched for longest ago; not a key whose first entry we
    asked for within FETCH_MS); a WIRE key no claim vouched for within WIRE_AGE_MS, and
    an EXT key no entry verified within EXT_AGE_MS, ages out (an aged EXT key is not
    taken again for as long). So junk can neither fill the set for good nor push out
    feeds whose entries verify, nor travel beyond the node it reached. (A claim whose
    region agrees with ours vouches for the keys in it again: a deployed neighbour that
    holds them keeps them alive here.)
  - A claim is not a gate: nothing like the deployed largest-claim span exists (one
    claim with CNT 200 would stop WANT/CHNK for good). The node decides where to send
    WANT/CHNK from what neighbours show they share (node.py).
  - Claims are answered at once where the answer is exact. A region where we hold more
    keys than the claim says, and the claimant's keys are a subset of ours: the keys it
    lacks are the subset of ours whose XOR is the XOR difference (xorsolve), sent as
    novelties. A region where it holds one key more names a candidate key, confirmed by
    its entry (peerset.py), and so does the whole set's count and XOR once one key is
    left (PeerSet.remainder). Only what is left goes through the deployed ask/help
    rounds, with larger budgets, asks sent at once, shaped for its helper (two helps a
    round: our whole set in two halves; a region in part, the rest known from its claim;
    a region holding keys each way half by half) and the rounds brought forward while
    work waits (docs/interop.md, "The deployed claim dance, from our side").
"""
from tinyssb.aggregate import Aggregate
from tinyssb.dmx import GOSET_DMX
from tinyssb.errors import WireError
from tinyssb.hotloops import xor_bytes, xor_into
from tinyssb.peerset import PeerSet
from tinyssb.xorsolve import XorBasis

KEY_LEN = 32
CLAIM_LEN = 105
NOVELTY_LEN = 40
CLAIM = 0x63    # 'c'
NOVELTY = 0x6E  # 'n'
ZAP = 0x7A      # 'z': ESP32 debug reset, ignored (unmaintained upstream)

DEPLOYED = "deployed"
EXTENDED = "extended"

CAPACITY = 100        # deployed limit (LIB/goset.h, GOset.kt, goset.py); CNT is one byte: <= 255
MAX_PENDING = 10      # pending claims kept (ESP32 MAX_PENDING)
PENDING_KEEP = 5      # trimmed to this after each round (ESP32: MAX_PENDING - 5)
ASK_PER_ROUND = 1     # ESP32
HELP_PER_ROUND = 2    # ESP32 (Python 3)
NOVELTY_QUEUE = 10    # queued novelties beyond the one sent per round (deployed)

# Extended mode.
PINNED, EXT, WIRE = 0, 1, 2   # trust classes, most trusted first
EXT_ASKS = 2          # asks per round: a deployed helper helps 2 pending claims a round
WHOLE_SPLIT_MIN = 4   # our whole set, where a deployed neighbour holds this many more,
                      # is asked for in two halves: its round helps two claims, and one
                      # claim of the whole set would leave the second help unused
SUB_MIN = 3           # a region of its holding this many keys we lack is asked for in
SUB_KEYS = 6          # part (its lower two thirds, when it spans this many of our keys):
                      # its help halves the part, and the rest of the region follows from
                      # its claim: three regions per help rather than two
ASKS_WAITING = 2      # our asks for help waiting at a deployed neighbour at most: it
                      # helps two a round (HELP_PER_ROUND), smallest first
SPLIT_ASKS = 1        # a region asked for in up to this many parts at once (a deployed
                      # node keeps 5 pending claims between rounds, ESP32)
EXT_HELPS = 4         # (our helps are mostly novelties, 40 B)
HALF_AGAIN_MS = 6000  # the other half of a region holding keys each way: once a
                      # deployed round (5-5.5 s) has answered the first; a round of ours
                      # is brought to then (GOSet.wake)
ASK_AGAIN_MS = 11000  # a region is asked for again only after two deployed rounds (5-5.5 s each:
                      # a deployed node helps two pending claims a round)
NOVELTY_BATCH = 8     # novelties per round; the board's send queue holds 10 frames
WIRE_AGE_MS = 300000  # 5 min: longer than the slowest deployed dance measured (145 s)
EXT_AGE_MS = 600000   # 10 min: an EXT key no entry verified by then goes (and stays out
                      # as long): discovery is for feeds about to be replicated
FETCH_MS = 10000      # a provisional key whose first entry we asked for is not evicted by
                      # another provisional key for this long (the answer may wait behind
                      # a full send queue, 10 frames); junk cannot push it out meanwhile

ZERO_KEY = bytes(KEY_LEN)


class GOSetFull(WireError):
    def __init__(self):
        super().__init__("goset_full")


class GOSet:
    """Args:
        capacity: most keys held (1..255).
        mode: DEPLOYED or EXTENDED (see the module docstring).
    """

    def __init__(self, capacity=CAPACITY, mode=DEPLOYED):
        if not 1 <= capacity <= 255:
            raise ValueError("GOSET capacity must be 1..255 (CNT is one byte)")
        if mode not in (DEPLOYED, EXTENDED):
            raise ValueError("GOSET mode")
        self.capacity = capacity
        self.mode = mode
        self.keys = []
        self._xor = bytearray(KEY_LEN)
        self.state = bytes(KEY_LEN)
        self.meta = {}          # key -> [trust class, ms learned or last vouched for,
                                #         vouched: not WIRE, or a claim agreed with it]
        self.largest_claim_span = 0
        self.pending = []       # (cnt, lo, hi, xor) tuples
        self.novelties = []     # keys to announce
        self.removed = []       # keys evicted or aged out; the node drains this list
        self.added = []         # keys a round's pending claims taught us; the node drains it
        self.full_count = 0     # keys refused because the set is full
        self.full_match_ms = None  # last claim that described exactly our whole set
        self.solved = 0         # keys a neighbour lacked that a claim let us name
        self._basis = None
        self._asked = {}        # (lo, hi) -> ms of our last ask (extended)
        self._upper = {}        # (lo, hi) -> its upper half is next (extended)
        self._parts = {}        # (lo, hi) -> the (lo, hi) of the claims it was asked in
        self._out = []          # (lo, hi, ms) of our asks for help not helped yet
        self._subs = {}         # (lo, hi) of a part asked for -> (count, lo, hi, XOR, ms)
                                # of the claim of its whose region it is part of
        self.wake = None        # ms a round should run by (extended; the node reads it)
        self.shunned = {}       # EXT key -> ms it aged out: not taken again for EXT_AGE_MS
        self.fetching = {}      # provisional key -> ms we asked for its first entry
        self.peer = PeerSet(self) if mode == EXTENDED else None
        self.asks_out = []      # claims asking for help, to go out at once (extended)
        self.refused = 0        # keys refused for that
        self.banned = set()     # keys never taken (a host's blocked feeds)

    # -- set operations --------------------------------------------------------------

    def __len__(self):
        return len(self.keys)

    def __contains__(self, key):
        return self.index(key) >= 0

    def _pos(self, key):
        keys = self.keys
        lo, hi = 0, len(keys)
        while lo < hi:
            mid = (lo + hi) // 2
            if keys[mid] < key:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def index(self, key):
        """Index of key in the sorted set, or -1."""
        i = self._pos(key)
        return i if i < len(self.keys) and self.keys[i] == key else -1

    def trust(self, key):
        m = self.meta.get(key)
        return None if m is None else m[0]

    def add(self, key, cls=PINNED, now=0):
        """Add a key (or raise its trust class); return True if it is new.

        Raises:
            WireError: bad_key (not 32 bytes or all zero); GOSetFull when no key of equal
            or lower trust can make room (deployed mode: at capacity).
        """
        key = bytes(key)
        if len(key) != KEY_LEN or key == ZERO_KEY:
            raise WireError("bad_key")
        if key in self.banned:
            return False
        m = self.meta.get(key)
        if m is not None:
            if cls < m[0]:
                m[0] = cls
                m[1] = now
            elif cls == WIRE == m[0]:
                m[1] = now
            return False
        if cls != PINNED and key in self.shunned:
            if now - self.shunned[key] < EXT_AGE_MS:
                self.refused += 1
                return False
            del self.shunned[key]
        if len(self.keys) >= self.capacity:
            victim = self._victim(cls, now)
            if victim is None:
                self.full_count += 1
                raise GOSetFull()
            self._remove(victim)
        self.keys.insert(self._pos(key), key)
        xor_into(self._xor, key)
        self.state = bytes(self._xor)
        self.meta[key] = [cls, now, False]
        if self.peer is not None:
            self.peer.confirmed(key)   # a candidate no more (it counts as ours now)
        if self._basis is not None:
            self._basis.add(key)       # O(n); a removal rebuilds (lazily)
        if self.mode == DEPLOYED:
            if len(self.keys) >= self.largest_claim_span and len(self.novelties) < NOVELTY_QUEUE:
                self.novelties.append(key)
        return True

    def _remove(self, key):
        i = self.index(key)
        if i < 0:
            return
        del self.keys[i]
        xor_into(self._xor, key)
        self.state = bytes(self._xor)
        del self.meta[key]
        self.fetching.pop(key, None)
        self._basis = None
        if key in self.novelties:
            self.novelties.remove(key)
        self.removed.append(key)

    def discard(self, key):
        """Drop a key whatever its class (the node's capacity policy)."""
        self._remove(bytes(key))

    def ban(self, key):
        """Drop a key and never take it again, whoever announces it."""
        key = bytes(key)
        self.banned.add(key)
        self._remove(key)

    def _victim(self, cls, now):
        """The key a new key of class `cls` may push out, or None (extended mode only)."""
        if self.mode == DEPLOYED:
            return None
        best, rank = None, None
        fetching = self.fetching
        for k, m in self.meta.items():
            if m[0] == PINNED or m[0] < cls:
                continue
            if k in fetching and now - fetching[k] < FETCH_MS:
                continue
            r = (-m[0], m[1])   # least trusted first, then least recently vouched for
            if rank is None or r < rank:
                best, rank = k, r
        return best

    def pin(self, key):
        """A key became trusted here (entry verified, or followed)."""
        key = bytes(key)
        m = self.meta.get(key)
        if m is not None and m[0] != PINNED:
            m[0] = PINNED
        self.fetching.pop(key, None)

    def fetch(self, key, now):
        """We asked for the first entry of a provisional key (see FETCH_MS)."""
        m = self.meta.get(key)
        if m is not None and m[0] != PINNED:
            self.fetching[key] = now

    def expire(self, now):
        """Age out keys nobody vouched for (extended mode)."""
        if self.mode == DEPLOYED:
            return
        self.peer.expire(now)
        old = []
        for k, m in self.meta.items():
            if (m[0] == WIRE and now - m[1] >= WIRE_AGE_MS) or (
                    m[0] == EXT and now - m[1] >= EXT_AGE_MS):
                old.append(k)
        for k in old:
            if self.meta[k][0] == EXT:
                # our nodes announce EXT keys to each other: without this, a key nobody
                # verifies would bounce between two nodes' sets for ever
                if len(self.shunned) >= self.capacity:
                    self.shunned.pop(next(iter(self.shunned)))
                self.shunned[k] = now
            self._remove(k)

    def _corroborate(self, lo, hi, now):
        meta = self.meta
        for k in self.keys[lo:hi + 1]:
            m = meta[k]
            if m[0] != PINNED:
                m[1] = now
                m[2] = True

    def vouched(self, key):
        """PINNED, or a provisional key a claim agreed with (a deployed neighbour holds it
        too). Extended mode never shows others any other key (no novelty for it, never a
        boundary of our claims): junk that reached us stops here, where a deployed
        neighbour would keep it for good and pass it on."""
        m = self.meta.get(key)
        return m is not None and (self.mode == DEPLOYED or m[0] == PINNED or m[2])

    def _snap(self, lo, hi):
        """The index range within lo..hi whose ends are vouched keys, or None."""
        while lo <= hi and not self.vouched(self.keys[lo]):
            lo += 1
        while hi >= lo and not self.vouched(self.keys[hi]):
            hi -= 1
        return None if lo > hi else (lo, hi)

    def in_sync(self):
        """ESP32 gate for WANT/CHNK: no claim seen covers more keys than we hold."""
        return len(self.keys) >= self.largest_claim_span

    def region(self, lo, hi):
        return Aggregate.of(KEY_LEN, self.keys[lo:hi + 1])

    def solve(self, target, count):
        """The `count` keys of ours whose XOR is `target`, or None (see xorsolve)."""
        if self._basis is None:
            self._basis = XorBasis(self.keys)
        got = self._basis.solve(target)
        if got is None or len(got) != count:
            return None
        return got

    # -- packets -----------------------------------------------------------------------

    def claim(self, lo, hi):
        """CLAIM packet for the local keys with indices lo..hi (inclusive)."""
        agg = self.region(lo, hi)
        return (GOSET_DMX + bytes((CLAIM,)) + self.keys[lo] + self.keys[hi] + bytes(agg.xor)
                + bytes((agg.count,)))

    def novelty(self, key):
        return GOSET_DMX + bytes((NOVELTY,)) + key

    def on_packet(self, pkt, now=0):
        """Process a GOSET packet; return the list of keys that became new.

        Raises:
            WireError: bad_goset_length, bad_claim, unknown_goset_type (GOSetFull is not
            raised: keys beyond capacity are counted in full_count and dropped).
        """
        if len(pkt) < 8:
            raise WireError("bad_goset_length")
        typ = pkt[7]
        if typ == NOVELTY:
            if len(pkt) != NOVELTY_LEN:
                raise WireError("bad_goset_length")
            new = self.learn([pkt[8:40]], WIRE, now)
            if self.peer is not None:
                self.peer.novelty(bytes(pkt[8:40]), now)
                self.remainder(now)
            return new
        if typ == CLAIM:
            if len(pkt) != CLAIM_LEN:
                raise WireError("bad_goset_length")
            return self._on_claim(bytes(pkt[8:40]), bytes(pkt[40:72]), bytes(pkt[72:104]),
                                  pkt[104], now)
        if typ == ZAP:
            return []
        raise WireError("unknown_goset_type")

    def learn(self, keys, cls=WIRE, now=0):
        """Add keys heard from the network; return the new ones (full: counted, dropped)."""
        if self.mode == DEPLOYED:
            cls = PINNED    # the deployed set only grows
        new = []
        for k in keys:
            k = bytes(k)
            if k == ZERO_KEY or len(k) != KEY_LEN:
                continue
            try:
                if self.add(k, cls, now):
                    new.append(k)
            except GOSetFull:
                pass
        return new

    def _on_claim(self, lo, hi, xor, cnt, now):
        if lo == ZERO_KEY:
            return []  # ESP32 ignores such claims
        if cnt == 0 or hi < lo or (cnt == 1 and lo != hi) or (lo == hi and cnt != 1):
            raise WireError("bad_claim")
        if self.mode == EXTENDED:
            return self._on_claim_ext(lo, hi, xor, cnt, now)
        if cnt > self.largest_claim_span:
            self.largest_claim_span = cnt
        if cnt == len(self.keys) and xor == self.state:
            return []  # in sync
        new = self.learn([lo, hi], PINNED, now)
        ilo, ihi = self.index(lo), self.index(hi)
        if cnt == 3 and ilo >= 0 and ihi == ilo + 1:
            mid = xor_bytes(xor_bytes(xor, lo), hi)
            if lo < mid < hi:
                return new + self.learn([mid], PINNED, now)
        self._keep((cnt, lo, hi, xor))
        return new

    def _keep(self, c):
        if c not in self.pending and len(self.pending) < MAX_PENDING:
            self.pending.append(c)

    def _on_claim_ext(self, lo, hi, xor, cnt, now):
        if cnt == len(self.keys) and xor == self.state:
            self._corroborate(0, len(self.keys) - 1, now)
            self.full_match_ms = now
            return []
        new = self.learn([lo, hi], WIRE, now)
        self.peer.claim(lo, hi, xor, cnt, now)
        if not self._answer(lo, hi, xor, cnt, now, new):
            self._keep((cnt, lo, hi, xor))
            self._ask_now(lo, hi, cnt, now, xor)
        if self._subs:
            self._rests(now, new)
        self.remainder(now)
        self._ask_pending(now)
        return new

    def _ask_pending(self, now):
        """Its help rounds are what paces the dance: as soon as fewer than two of our asks
        wait there, ask for the pending regions where it holds most keys we lack."""
        free = ASKS_WAITING - self._outstanding(now)
        if free <= 0:
            return
        best = []
        for c in self.pending:
            cnt, lo_key, hi_key, xor = c
            lo, hi = self.index(lo_key), self.index(hi_key)
            if 0 <= lo < hi and cnt > hi - lo + 1:
                best.append((cnt - (hi - lo + 1), c))
        best.sort(key=lambda b: -b[0])
        for m, c in best:
            if free <= 0:
                break
            cnt, lo_key, hi_key, xor = c
            if self.peer.probing(lo_key, hi_key, now) or not self._may_ask(lo_key, hi_key, now):
                continue
            got = self._asks(self.index(lo_key), self.index(hi_key), m, now, (cnt, xor))
            free -= len(got)
            self.asks_out.extend(got)

    def _rests(self, now, new):
        """A region of its asked for in part (see SUB_MIN): once both halves of its help
        are in, the rest of the region is known too (its count and XOR less the part's);
        settled like any claim of its."""
        for part, whole in list(self._subs.items()):
            h = self.peer.halves(part[0], part[1], now)
            if h is None:
                if now - whole[4] >= ASK_AGAIN_MS:
                    del self._subs[part]
                continue
            del self._subs[part]
            cnt, lo_key, hi_key, xor = whole[:4]
            # the rest: part's upper end up to the region's; the region less its lower
            # end and the inside of the part
            x = bytearray(xor)
            xor_into(x, lo_key)
            n = cnt - 1
            for c, hx in h:
                xor_into(x, hx)
                n -= c
            x = bytes(x)
            lo = part[1]
            if n <= 0 or self.index(lo) < 0 or self.index(hi_key) < 0:
                continue
            if n == 1 and lo == hi_key:
                continue
            if not self._answer(lo, hi_key, x, n, now, new):
                self._keep((n, lo, hi_key, x))
                self._ask_now(lo, hi_key, n, now, x)

    def remainder(self, now):
        """The one key a deployed neighbour's whole set and ours still differ by, once
        everything else is known (peerset.PeerSet.remainder): a candidate, or a novelty
        for our key it lacks. Extended mode."""
        r = self.peer.remainder(now)
        if r is None:
            return
        d, k = r
        if d > 0:
            if k != ZERO_KEY and k not in self.meta:
                self.peer.candidate(k, None, now)
        elif k in self.meta:
            self.solved += 1
            self._announce([k])

    def _ask_now(self, lo_key, hi_key, cnt, now, xor=None):
        """Where the claimant holds more, ask for its help right away (the claim goes
        out with the node's replies): the deployed helper works through its pending
        claims every 5 s, and an ask that misses its next round waits a whole one."""
        lo, hi = self.index(lo_key), self.index(hi_key)
        if lo < 0 or hi <= lo:
            return
        m = cnt - (hi - lo + 1)
        if m > 0 and self._outstanding(now) < ASKS_WAITING and \
                not self.peer.probing(lo_key, hi_key, now) and \
                self._may_ask(lo_key, hi_key, now):
            self.asks_out.extend(self._asks(lo, hi, m, now, (cnt, xor)))

    def _outstanding(self, now):
        """Our asks for help the neighbour has not helped with yet (within ASK_AGAIN_MS).
        It helps two a round, smallest first: more would wait behind newer, smaller ones
        (and be asked again); the rest of our asks go out as these are helped."""
        out = [a for a in self._out
               if now - a[2] < ASK_AGAIN_MS and not self.peer.was_helped(a[0], a[1], now)]
        self._out = out
        return len(out)

    def _answer(self, lo_key, hi_key, xor, cnt, now, new):
        """Settle a claimed region exactly where one comparison can; True when settled.
        Appends keys learned to `new`."""
        lo, hi = self.index(lo_key), self.index(hi_key)
        if lo < 0 or hi < 0 or lo > hi:
            return True   # boundaries refused (set full of trusted keys): nothing to do
        mine = self.region(lo, hi)
        if mine.count == cnt and bytes(mine.xor) == xor:
            self._corroborate(lo, hi, now)
            return True
        d = mine.count - cnt
        if d > 0:
            got = self.solve(xor_bytes(bytes(mine.xor), xor), d)
            if got is not None and lo_key <= min(got) and max(got) <= hi_key:
                self.solved += len(got)
                self._announce(got)
                return True
        elif cnt == 3 and mine.count == 2:
            # Android's shortcut, the only safe one: the claimant's three keys are the two
            # boundaries we hold and one between. (With more keys, "one more key there" may
            # be two more and one fewer, and the XOR difference a key nobody holds: such a
            # key makes unequal sets look equal to every XOR comparison after it.)
            k = xor_bytes(bytes(mine.xor), xor)
            if lo_key < k < hi_key:
                new.extend(self.learn([k], WIRE, now))
                return True
        elif d == -1:
            # One key more there: if the claimant's keys there are ours plus one, the XOR
            # difference is that key. Maybe not (two more and one fewer): a candidate, never
            # learned or shown to anyone until an entry verifies under it (Node probes it).
            k = xor_bytes(bytes(mine.xor), xor)
            if lo_key < k < hi_key and k not in self.meta:
                self.peer.candidate(k, lo_key, now)
        return False


    def _may_ask(self, lo, hi, now, again=ASK_AGAIN_MS):
        """Deployed mode: always (its rounds pace it). Extended: not again within
        `again`, as a deployed helper answers once per round."""
        if self.mode == DEPLOYED:
            return True
        if self.peer.was_helped(lo, hi, now):
            return False
        t = self._asked.get((lo, hi))
        if t is not None and now - t < again:
            return False
        if len(self._asked) >= MAX_PENDING:
            self._asked = {}
        self._asked[(lo, hi)] = now
        self.peer.asked(lo, hi, now)
        return True

    def _announce(self, keys):
        q = self.novelties
        for k in keys:
            if k not in q and len(q) < self.capacity and self.vouched(k):
                if self.peer is not None and not self.peer.lacks(k):
                    continue    # named to it already
                q.append(k)

    # -- rounds -------------------------------------------------------------------------

    def full_claim(self, now=0):
        """The round's announcement: a claim over the whole set (a novelty when it holds
        one key, as the ESP32 does), or None when empty."""
        n = len(self.keys)
        if n == 0:
            return None
        lo, hi = 0, n - 1
        if self.mode == EXTENDED:
            r = self._snap(lo, hi)
            if r is None:
                return None
            lo, hi = r
            self.peer.asked(self.keys[lo], self.keys[hi], now)   # a deployed node helps it
        if lo == hi:
            return self.novelty(self.keys[lo])
        return self.claim(lo, hi)

    def busy(self):
        """True while novelties wait for a round."""
        return bool(self.novelties)

    def round(self, now=0):
        """Work through pending claims and queued novelties; return packets to send."""
        out = []
        ext = self.mode == EXTENDED
        if ext:
            self.expire(now)
            batch = NOVELTY_BATCH
        else:
            batch = 1
        while self.novelties and batch > 0:
            out.append(self.novelty(self.novelties.pop(0)))
            batch -= 1
        asks = EXT_ASKS if ext else ASK_PER_ROUND
        helping = ASKS_WAITING - self._outstanding(now) if ext else 0
        helps = EXT_HELPS if ext else HELP_PER_ROUND
        keep = []
        self.pending.sort(key=lambda c: c[0])
        diffs = self._diffs() if ext else None
        for c in self.pending:
            cnt, lo_key, hi_key, xor = c
            if ext:
                if self._answer(lo_key, hi_key, xor, cnt, now, self.added):
                    continue
                if self._inner_same(c, diffs):
                    continue
            lo, hi = self.index(lo_key), self.index(hi_key)
            if lo < 0 or hi < 0 or lo > hi:
                continue
            mine = self.region(lo, hi)
            if bytes(mine.xor) == xor and mine.count == cnt:
                continue  # the region agrees now
            if ext and mine.count == cnt:
                # Keys each way there. Asking for the whole region and helping with it
                # (the deployed answer) costs three claims and draws as many back; a claim
                # of one half draws one answer, and where that half holds keys of one
                # side only, the answer names them (it re-claims the half, xorsolve; or
                # splits it, one key more per quarter), and the rest follows from its
                # whole set (PeerSet.remainder). The other half goes next time.
                if asks > 0 and self._may_ask(lo_key, hi_key, now, HALF_AGAIN_MS):
                    asks -= 1
                    upper = self._upper.get((lo_key, hi_key), False)
                    p = self._half(lo, hi, now)
                    if p is not None:
                        out.append(p)
                        if self.wake is None:
                            self.wake = now + HALF_AGAIN_MS
                    if upper:
                        # both halves claimed: their answers are claims of its, pending
                        # on their own; the region asks nothing more
                        continue
                keep.append(c)
                continue
            if mine.count <= cnt:
                if ext and self.peer.probing(lo_key, hi_key, now):
                    keep.append(c)
                    continue
                if asks > 0 and (not ext or helping > 0) and self._may_ask(lo_key, hi_key, now):
                    asks -= 1
                    if ext:
                        got = self._asks(lo, hi, cnt - mine.count, now, (cnt, xor))
                        helping -= len(got)
                        out.extend(got)
                    else:
                        out.append(self.claim(lo, hi))
                if mine.count < cnt:
                    keep.append(c)
                    continue
            if helps <= 0:
                keep.append(c)
                continue
            helps -= 1
            lo += 1  # both boundary keys are known to the claimant
            hi -= 1
            if ext:
                self._help_ext(lo, hi, out)
            elif hi == lo:
                out.append(self.novelty(self.keys[lo]))
            elif hi == lo + 1 or hi == lo + 2:
                out.append(self.claim(lo, hi))
            elif hi > lo:
                sz = (hi + 1 - lo) // 2
                out.append(self.claim(lo, lo + sz - 1))
                out.append(self.claim(lo + sz, hi))
        self.pending = keep[:PENDING_KEEP]
        return out

    def _asks(self, lo, hi, m, now, claim=None):
        """Ask for help with our region lo..hi (indices) where the claimant holds m keys
        more: in about m/2 parts at once (up to SPLIT_ASKS), as a deployed helper splits
        each in halves and names what it holds there: halves holding one key more each
        are settled by their XOR (peerset.py), without another round of 5 s."""
        whole = (self.keys[lo], self.keys[hi])
        parts = self._parts.get(whole)
        if parts is not None and all(self.peer.was_helped(a, b, now) for a, b in parts):
            return []   # asked for in parts, each helped: their halves are asked for
        k = min(SPLIT_ASKS, (m + 1) // 2, (hi - lo) // 4)
        if lo == 0 and hi == len(self.keys) - 1 and m >= WHOLE_SPLIT_MIN and hi - lo >= 8:
            k = 2   # (see WHOLE_SPLIT_MIN)
        if k <= 1:
            if claim is not None and claim[1] is not None and m >= SUB_MIN and \
                    hi - lo >= SUB_KEYS and len(self._subs) < MAX_PENDING and \
                    parts is None:
                # in part (see SUB_MIN; _rests). Once asked for in part, the region is
                # asked for whole: a part it did not help with holds none of those keys
                s = lo + ((hi - lo) * 2 + 1) // 3
                r = self._snap(lo, s)
                if r is not None and r[0] == lo and r[1] > lo:
                    part = (self.keys[lo], self.keys[r[1]])
                    self._subs[part] = (claim[0], self.keys[lo], self.keys[hi], claim[1], now)
                    self._parts[(self.keys[lo], self.keys[hi])] = [part]
                    self.peer.asked(part[0], part[1], now)
                    self._out.append((part[0], part[1], now))
                    return [self.claim(lo, r[1])]
            self._out.append((whole[0], whole[1], now))
            return [self.claim(lo, hi)]
        out = []
        parts = []
        step = (hi - lo) / k
        a = lo
        for j in range(1, k + 1):
            b = hi if j == k else lo + int(step * j + 0.5)
            if b > a:
                parts.append((self.keys[a], self.keys[b]))
                out.append(self.claim(a, b))
                self.peer.asked(self.keys[a], self.keys[b], now)
                self._out.append((self.keys[a], self.keys[b], now))
            a = b
        if len(self._parts) >= MAX_PENDING:
            self._parts = {}
        self._parts[whole] = parts
        return out

    def _diffs(self):
        """[(lo key, hi key, count difference, XOR difference)] of the pending claims
        against our regions (extended)."""
        out = []
        for cnt, lo_key, hi_key, xor in self.pending:
            lo, hi = self.index(lo_key), self.index(hi_key)
            if 0 <= lo <= hi:
                mine = self.region(lo, hi)
                out.append((lo_key, hi_key, cnt - mine.count, xor_bytes(bytes(mine.xor), xor)))
        return out

    def _inner_same(self, c, diffs):
        """A smaller claimed region inside c's differs from ours exactly as c's does: the
        rest of c's region agrees, and c asks nothing the smaller one does not."""
        cnt, lo_key, hi_key, xor = c
        me = None
        for d in diffs:
            if d[0] == lo_key and d[1] == hi_key:
                me = d
                break
        if me is None:
            return False
        for d in diffs:
            if d is not me and lo_key <= d[0] and d[1] <= hi_key and \
                    (d[0], d[1]) != (lo_key, hi_key) and d[2] == me[2] and d[3] == me[3]:
                return True
        return False

    def _half(self, lo, hi, now):
        """A claim of one half of our region lo..hi (indices), the other half than last
        time for this region; None when too small to split."""
        if hi - lo < 3:
            return self.claim(lo, hi)
        key = (self.keys[lo], self.keys[hi])
        upper = self._upper.pop(key, False)
        if len(self._upper) >= MAX_PENDING:
            self._upper = {}
        self._upper[key] = not upper
        sz = (hi + 1 - lo) // 2
        r = self._snap(lo + sz, hi) if upper else self._snap(lo, lo + sz - 1)
        if r is None or r[0] == r[1]:
            return None
        self.peer.asked(self.keys[r[0]], self.keys[r[1]], now)
        return self.claim(r[0], r[1])

    def _help_ext(self, lo, hi, out):
        """Help as deployed nodes do (a small region's keys, else its two halves), but
        name only vouched keys and claim halves between vouched keys."""
        if 0 <= hi - lo <= 2:
            for k in self.keys[lo:hi + 1]:
                if self.vouched(k):
                    out.append(self.novelty(k))   # 40 B each rather than a claim
            return
        if hi < lo:
            return
        sz = (hi + 1 - lo) // 2
        for a, b in ((lo, lo + sz - 1), (lo + sz, hi)):
            r = self._snap(a, b)
            if r is not None:
                out.append(self.claim(r[0], r[1]) if r[0] < r[1]
                           else self.novelty(self.keys[r[0]]))
