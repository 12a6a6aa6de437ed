"""GOSET: the grow-only set of feed IDs that peers agree on before WANT/CHNK.

Peers refer to feeds by index in the sorted set (unsigned byte order), so WANT and CHNK
only work between peers with the identical set; their DMX is keyed by the set's state
(XOR of all keys), which gates them automatically.

Packets (DMX = SHA256("tinySSB-0.1 GOset 1")[0:7]):
    CLAIM    DMX || 'c' || LO(32) || HI(32) || XOR(32) || CNT(1)    105 bytes
    NOVELTY  DMX || 'n' || KEY(32)                                  40 bytes
The seed text says 103 for CLAIM; every deployed node uses 105 (docs/interop.md).

The algorithm is the deployed ESP32 one (tinyssb-wire.md section 4): receiving a claim
adds its boundary keys and queues it as pending; every round the node sends its full
claim, then works through pending claims smallest first, asking for help (re-claiming the
region) where it has fewer or equal keys and helping (splitting the region, or sending a
novelty once a region shrinks to one key) where it has more. Per-round budgets bound the
traffic. Adding Android's shortcut: a CNT=3 claim whose LO and HI are adjacent here names
the missing middle key (XOR ^ LO ^ HI).
"""
from tinyssb.aggregate import Aggregate
from tinyssb.dmx import GOSET_DMX
from tinyssb.errors import WireError

KEY_LEN = 32
CLAIM_LEN = 105
NOVELTY_LEN = 40
CLAIM = 0x63    # 'c'
NOVELTY = 0x6E  # 'n'
ZAP = 0x7A      # 'z': ESP32 debug reset, ignored (unmaintained upstream)

CAPACITY = 100        # deployed limit (LIB/goset.h, GOset.kt, goset.py); CNT is one byte: <= 255
MAX_PENDING = 10      # pending claims kept (ESP32 MAX_PENDING)
PENDING_KEEP = 5      # trimmed to this after each round (ESP32: MAX_PENDING - 5)
ASK_PER_ROUND = 1     # ESP32
HELP_PER_ROUND = 2    # ESP32 (Python 3)
NOVELTY_QUEUE = 10    # queued novelties beyond the one sent per round

ZERO_KEY = bytes(KEY_LEN)


class GOSetFull(WireError):
    def __init__(self):
        super().__init__("goset_full")


class GOSet:
    def __init__(self, capacity=CAPACITY):
        if not 1 <= capacity <= 255:
            raise ValueError("GOSET capacity must be 1..255 (CNT is one byte)")
        self.capacity = capacity
        self.keys = []
        self.state = bytes(KEY_LEN)
        self.largest_claim_span = 0
        self.pending = []       # (cnt, lo, hi, xor) tuples
        self.novelties = []     # keys to announce
        self.full_count = 0     # keys refused because the set is full

    # -- set operations --------------------------------------------------------------

    def __len__(self):
        return len(self.keys)

    def __contains__(self, key):
        return self.index(key) >= 0

    def index(self, key):
        """Index of key in the sorted set, or -1."""
        keys = self.keys
        lo, hi = 0, len(keys)
        while lo < hi:
            mid = (lo + hi) // 2
            if keys[mid] < key:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < len(keys) and keys[lo] == key else -1

    def add(self, key):
        """Add a key; return True if it is new.

        Raises:
            WireError: bad_key (not 32 bytes or all zero); GOSetFull at capacity.
        """
        key = bytes(key)
        if len(key) != KEY_LEN or key == ZERO_KEY:
            raise WireError("bad_key")
        if self.index(key) >= 0:
            return False
        if len(self.keys) >= self.capacity:
            self.full_count += 1
            raise GOSetFull()
        keys = self.keys
        i = 0
        while i < len(keys) and keys[i] < key:
            i += 1
        keys.insert(i, key)
        self.state = bytes(Aggregate.of(KEY_LEN, keys).xor)
        if len(keys) >= self.largest_claim_span and len(self.novelties) < NOVELTY_QUEUE:
            self.novelties.append(key)
        return True

    def in_sync(self):
        """ESP32 gate for WANT/CHNK: no claim seen covers more keys than we hold."""
        return len(self.keys) >= self.largest_claim_span

    # -- packets -----------------------------------------------------------------------

    def claim(self, lo, hi):
        """CLAIM packet for the local keys with indices lo..hi (inclusive)."""
        agg = Aggregate.of(KEY_LEN, self.keys[lo:hi + 1])
        return (GOSET_DMX + bytes((CLAIM,)) + self.keys[lo] + self.keys[hi] + bytes(agg.xor)
                + bytes((agg.count,)))

    def novelty(self, key):
        return GOSET_DMX + bytes((NOVELTY,)) + key

    def on_packet(self, pkt):
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
            return self._learn([pkt[8:40]])
        if typ == CLAIM:
            if len(pkt) != CLAIM_LEN:
                raise WireError("bad_goset_length")
            return self._on_claim(bytes(pkt[8:40]), bytes(pkt[40:72]), bytes(pkt[72:104]), pkt[104])
        if typ == ZAP:
            return []
        raise WireError("unknown_goset_type")

    def _learn(self, keys):
        new = []
        for k in keys:
            k = bytes(k)
            if k == ZERO_KEY:
                continue
            try:
                if self.add(k):
                    new.append(k)
            except GOSetFull:
                pass
        return new

    def _on_claim(self, lo, hi, xor, cnt):
        if lo == ZERO_KEY:
            return []  # ESP32 ignores such claims
        if cnt == 0 or hi < lo or (cnt == 1 and lo != hi) or (lo == hi and cnt != 1):
            raise WireError("bad_claim")
        if cnt > self.largest_claim_span:
            self.largest_claim_span = cnt
        if cnt == len(self.keys) and xor == self.state:
            return []  # in sync
        new = self._learn([lo, hi])
        ilo, ihi = self.index(lo), self.index(hi)
        if cnt == 3 and ilo >= 0 and ihi == ilo + 1:
            mid = bytearray(xor)
            for k in (lo, hi):
                for i in range(KEY_LEN):
                    mid[i] ^= k[i]
            mid = bytes(mid)
            if lo < mid < hi:
                return new + self._learn([mid])
        c = (cnt, lo, hi, xor)
        if c not in self.pending and len(self.pending) < MAX_PENDING:
            self.pending.append(c)
        return new

    # -- rounds -------------------------------------------------------------------------

    def full_claim(self):
        """The round's announcement: a claim over the whole set (a novelty when it holds
        one key, as the ESP32 does), or None when empty."""
        n = len(self.keys)
        if n == 0:
            return None
        if n == 1:
            return self.novelty(self.keys[0])
        return self.claim(0, n - 1)

    def round(self):
        """Work through pending claims and queued novelties; return packets to send."""
        out = []
        if self.novelties:
            out.append(self.novelty(self.novelties.pop(0)))
        asks = ASK_PER_ROUND
        helps = HELP_PER_ROUND
        keep = []
        self.pending.sort(key=lambda c: c[0])
        for c in self.pending:
            cnt, lo_key, hi_key, xor = c
            lo, hi = self.index(lo_key), self.index(hi_key)
            if lo < 0 or hi < 0 or lo > hi:
                continue
            mine = Aggregate.of(KEY_LEN, self.keys[lo:hi + 1])
            if bytes(mine.xor) == xor and mine.count == cnt:
                continue  # the region agrees now
            if mine.count <= cnt:
                if asks > 0:
                    asks -= 1
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
            if hi == lo:
                out.append(self.novelty(self.keys[lo]))
            elif hi == lo + 1 or hi == lo + 2:
                out.append(self.claim(lo, hi))
            elif hi > lo:
                sz = (hi + 1 - lo) // 2
                out.append(self.claim(lo, lo + sz - 1))
                out.append(self.claim(lo + sz, hi))
        self.pending = keep[:PENDING_KEEP]
        return out
