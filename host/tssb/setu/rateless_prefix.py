"""The host's prefix of rateless coded symbols: tinyssb.codedsym's Encoder, batched in numpy.

Host SETU uses the codec KEY 5 bytes || CHK 3 bytes, no COUNT (codedsym.Codec(5, 3, 0)), so a
coded symbol is exactly one little-endian uint64 and a whole prefix is one numpy array. Keys
are the first 5 bytes of the SETU element hash (SHA-512). The mapping is the shared module's,
vectorised over many keys at once; tests check that both give identical bytes.

Appends are queued and applied in batches (`flush`), which is what keeps the upkeep at a few
microseconds per element in CPython. Every key's (item, seed) is kept, so the prefix can be
extended and saved/restored without hashing anything again, and so is the set of its indices
below LOW_INDICES (one 64-bit mask): a search of a first flight (at most that many symbols)
finds its candidates from the masks, without walking every key's mapping again.

Extending the prefix walks every key's mapping from index 0 (~27 steps a key up to 2^20
symbols), and a peer can ask for that many symbols (a MORE). So from AHEAD_KEYS keys on,
the symbols are kept computed up to AHEAD_SYMBOLS, beyond the prefix length m the protocol
sees: extending within them costs nothing, each key appended walks ~4 steps more, and the
8 MiB they take are less than half of what the keys' own 20 bytes take at 10^6 keys. Below
AHEAD_KEYS, an extension to AHEAD_SYMBOLS walks at most ~3.5 x 10^6 steps. (Keeping each
key's walk state at the prefix end instead, 8 bytes a key, leaves the XORs into the new
symbols: about half of the cost.)
"""
import numpy as np

from tinyssb import codedsym

CODEC = codedsym.Codec(5, 3, 0)
KEY_LEN = CODEC.key_len
SYMBOL_SIZE = CODEC.size        # 8: one uint64
_STATE_MAGIC = b"tssbRLP3"      # m, n, computed length c, sums (c), items, seeds, low masks
_STATE_MAGIC_V2 = b"tssbRLP2"   # m, n, sums (m), items, seeds, low masks
_STATE_MAGIC_V1 = b"tssbRLP1"   # the same without the masks (computed when loaded)
LOW_INDICES = 64                # indices kept per key as a mask: the longest first flight
AHEAD_KEYS = 1 << 17            # keys from which symbols are kept computed ahead, up to
AHEAD_SYMBOLS = 1 << 20         # ... the most one rateless operation streams
_U13, _U17, _U5 = np.uint32(13), np.uint32(17), np.uint32(5)
WALK_BATCH = 1 << 15      # keys walked at once (temporaries: ~10 arrays of this many)


def element_key(ehash):
    """The rateless key of an element: the first 5 bytes of its 64-byte SETU hash."""
    return bytes(ehash[:KEY_LEN])


def key_int(key):
    return int.from_bytes(key, "little")


def item_and_seed(key):
    """(item as uint64-compatible int, seed) of a 5-byte key, as codedsym.Codec.item."""
    item, seed = CODEC.item(key)
    return int.from_bytes(item, "little"), seed


def _step(last, x):
    """One step of codedsym.next_index for many keys at once: (next indices, next states).
    x (uint32: the xorshift wraps by itself) is updated in place; in-place arithmetic
    keeps a step at a few ns per key."""
    x ^= x << _U13
    x ^= x >> _U17
    x ^= x << _U5
    # x < 2^32: the correctly rounded float64 root floors to isqrt(x) exactly (no integer
    # square falls between a root and its rounding below 2^52), as codedsym's isqrt
    s = np.sqrt(x, dtype=np.float64).astype(np.int64)
    t = 2 * last
    t += 3
    t *= 65536 - s
    s *= 2
    t += s
    t -= 1
    t //= s                     # ceil((2 last + 3) (65536 - s) / 2 s) with s the root
    t += last
    return t, x


def _apply(sums, items, seeds, lo, hi):
    """XOR every key (items[k], seeds[k]) into sums[i] for each of its indices lo <= i < hi.
    Keys are walked WALK_BATCH at a time: the temporaries stay a few MiB however many."""
    for b0 in range(0, len(items), WALK_BATCH):
        _apply_batch(sums, items[b0:b0 + WALK_BATCH], seeds[b0:b0 + WALK_BATCH], lo, hi)


def _apply_batch(sums, items, seeds, lo, hi):
    if not len(items):
        return
    last = np.zeros(len(items), dtype=np.int64)
    x = seeds.astype(np.uint32)
    it = items
    while len(last):
        if lo:
            sel = last >= lo
            if sel.any():
                np.bitwise_xor.at(sums, last[sel], it[sel])
        else:
            np.bitwise_xor.at(sums, last, it)
        last, x = _step(last, x)
        keep = last < hi
        if not keep.all():
            last, x, it = last[keep], x[keep], it[keep]


class Pairs:
    """The result of candidate_pairs: `ok` (bool per key: a candidate, among the keys
    walked), `pos` / `idx` (the pairs to test, sparsest first: index descending), `counts`
    (candidate pairs recorded per index, before any cap: the share of our keys that map
    there), `complete` (False when `over()` stopped the walk before every key was seen)."""

    def __init__(self, ok, pos, idx, counts, complete):
        self.ok, self.pos, self.idx, self.counts, self.complete = ok, pos, idx, counts, complete


def low_masks(seeds):
    """Per key, the bit set of its indices below LOW_INDICES (uint64), walked in batches."""
    out = np.zeros(len(seeds), dtype=np.uint64)
    for b0 in range(0, len(seeds), WALK_BATCH):
        x = seeds[b0:b0 + WALK_BATCH].astype(np.uint32)
        pos = np.arange(b0, b0 + len(x))
        last = np.zeros(len(x), dtype=np.int64)
        out[pos] = 1                                   # index 0: every key
        while len(pos):
            last, x = _step(last, x)
            keep = last < LOW_INDICES
            pos, last, x = pos[keep], last[keep], x[keep]
            out[pos] |= np.left_shift(np.uint64(1), last.astype(np.uint64))
    return out


def _popcount(x):
    """Set bits of each uint64 (numpy >= 2 has bitwise_count)."""
    count = getattr(np, "bitwise_count", None)
    if count is not None:
        return count(x).astype(np.int64)
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return ((x * np.uint64(0x0101010101010101)) >> np.uint64(56)).astype(np.int64)


def candidate_pairs(items, seeds, nonzero, lo=0, max_pairs=None, over=None, low=None):
    """The keys that may still be in a difference, and where to test them.

    A key still in the difference leaves every symbol it maps to nonzero, so the candidates
    are the keys all of whose indices below len(nonzero) fall on True entries of `nonzero`.
    Pairs are (candidate position, one of its indices >= lo), its highest index in any
    case, and index 0 when lo <= 0; they come sorted by index descending (ties in the order
    of the walk's step, then position).

    The walk takes WALK_BATCH keys at a time, so its memory is a few MiB whatever the
    symbols say; `max_pairs` keeps only the first pairs of that order (the sparsest, which a
    search tests first: the rest it would never reach) and `over()`, checked between
    batches, stops the walk (Pairs.complete is then False). With the keys' `low` masks
    (low_masks) and at most LOW_INDICES symbols, the same pairs come from the masks.
    """
    n, hi = len(items), len(nonzero)
    ok = np.zeros(n, dtype=bool)
    none = np.zeros(0, dtype=np.int64)
    counts = np.zeros(max(hi, 1), dtype=np.int64)
    if not hi or not nonzero[0] or not n:
        return Pairs(ok, none, none, counts, True)
    if low is not None and hi <= LOW_INDICES:
        return _pairs_from_masks(low, nonzero, lo, max_pairs, ok, counts)
    kept = (none, none, none)
    floor = 0               # pairs below are not recorded (rises once max_pairs are kept)
    complete = True
    for b0 in range(0, n, WALK_BATCH):
        if over is not None and over():
            complete = False
            break
        got = _walk_batch(items, seeds, nonzero, lo, floor, ok, b0, min(n, b0 + WALK_BATCH))
        counts += np.bincount(got[1], minlength=len(counts))
        kept = tuple(np.concatenate((a, b)) for a, b in zip(kept, got))
        if max_pairs is not None and len(kept[0]) > 2 * max_pairs:
            kept = _first_pairs(kept, max_pairs)
            floor = max(floor, int(kept[1][-1]))
    pos, idx, _ = _first_pairs(kept, max_pairs)
    return Pairs(ok, pos, idx, counts, complete)


def _pairs_from_masks(low, nonzero, lo, most, ok, counts):
    """candidate_pairs for len(nonzero) <= LOW_INDICES from the keys' index masks: the same
    candidates, pairs and order as the walk (a step is the number of a key's indices below
    the pair's), one index at a time from the highest, until `most` pairs are kept: a
    first flight whose symbols all stay nonzero costs a few passes over the masks."""
    hi = len(nonzero)
    zero = 0
    for i in np.nonzero(~np.asarray(nonzero, dtype=bool))[0]:
        zero |= 1 << int(i)
    tmp = np.bitwise_and(low, np.uint64(zero))
    np.equal(tmp, 0, out=ok)
    top = None
    kept, total = [], 0
    for i in range(hi - 1, -1, -1):
        if i >= max(lo, 1):                     # the walk's step that reached index i
            np.right_shift(low, np.uint64(i), out=tmp)
            np.bitwise_and(tmp, np.uint64(1), out=tmp)
            pos = np.nonzero(tmp.astype(bool) & ok)[0]
            step = _popcount(low[pos] & np.uint64((1 << i) - 1))
        elif lo > 0:                            # candidates tested at their top index only
            if top is None:
                cand = np.nonzero(ok)[0]
                within = np.uint64((1 << hi) - 1) if hi < 64 else np.uint64(2 ** 64 - 1)
                top = _top_bit(low[cand] & within)
            pos = cand[top == i]
            step = np.zeros(len(pos), dtype=np.int64)
        else:                                   # index 0: every candidate
            pos = np.nonzero(ok)[0]
            step = np.zeros(len(pos), dtype=np.int64)
        if not len(pos):
            continue
        counts[i] += len(pos)
        order = np.lexsort((pos, step))
        kept.append((pos[order], np.full(len(pos), i, dtype=np.int64)))
        total += len(pos)
        if most is not None and total >= most:
            break
    if not kept:
        none = np.zeros(0, dtype=np.int64)
        return Pairs(ok, none, none, counts, True)
    pos, idx = (np.concatenate(a)[:most] for a in zip(*kept))
    return Pairs(ok, pos, idx, counts, True)


def _top_bit(x):
    """Position of the highest set bit of each nonzero uint64 (frexp is exact below 2^53:
    the halves are taken apart)."""
    high = (x >> np.uint64(32)).astype(np.float64)
    low = (x & np.uint64(0xFFFFFFFF)).astype(np.float64)
    return np.where(high > 0, 31 + np.frexp(high)[1], np.frexp(low)[1] - 1).astype(np.int64)


def _first_pairs(pairs, most):
    """The pairs sorted by (index descending, step, position), at most `most` of them."""
    pos, idx, step = pairs
    order = np.lexsort((pos, step, -idx))
    if most is not None:
        order = order[:most]
    return pos[order], idx[order], step[order]


def _walk_batch(items, seeds, nonzero, lo, floor, ok, b0, b1):
    """Walk keys b0..b1: mark candidates in ok and return their pairs (pos, idx, step)
    with idx >= floor."""
    hi = len(nonzero)
    k = b1 - b0
    ok[b0:b1] = True
    top = np.zeros(k, dtype=np.int64)               # highest index below hi
    pos = np.arange(b0, b1)
    last = np.zeros(k, dtype=np.int64)
    x = seeds[b0:b1].astype(np.uint32)
    rec = []
    step = 0
    while len(pos):
        step += 1
        nxt, x = _step(last, x)
        keep = nxt < hi
        if not keep.all():
            top[pos[~keep] - b0] = last[~keep]     # leaving the range: its highest index
            pos, nxt, x = pos[keep], nxt[keep], x[keep]
        last = nxt
        bad = ~nonzero[last]
        if bad.any():
            ok[pos[bad]] = False
            good = ~bad
            pos, last, x = pos[good], last[good], x[good]
        sel = last >= max(lo, floor)
        if sel.any():
            rec.append((pos[sel], last[sel], np.full(int(sel.sum()), step, dtype=np.int64)))
    cand = np.nonzero(ok[b0:b1])[0]
    if lo > 0:                                       # tested at their top index only
        low = cand[top[cand] < lo]
        low = low[top[low] >= floor]
        rec.append((low + b0, top[low], np.zeros(len(low), dtype=np.int64)))
    elif floor <= 0:                                 # index 0 too
        rec.append((cand + b0, np.zeros(len(cand), dtype=np.int64),
                    np.zeros(len(cand), dtype=np.int64)))
    if not rec:
        none = np.zeros(0, dtype=np.int64)
        return none, none, none
    p, i, s = (np.concatenate(a) for a in zip(*rec))
    keep = ok[p]
    return p[keep], i[keep], s[keep]


def stuck_candidates(items, seeds, nonzero):
    """Positions of the keys all of whose indices below len(nonzero) fall on True entries of
    `nonzero` (a key still in the difference leaves every symbol it maps to nonzero)."""
    return np.nonzero(candidate_pairs(items, seeds, nonzero, len(nonzero)).ok)[0]


class RatelessPrefix:
    """The first m coded symbols of a growing set of 5-byte keys.

    Args:
        m: prefix length (symbols).
    Use `add_key` per element (queued), `flush()` before reading symbols; `symbol(i)` and
    `extend(m2)` make it the `local` of a codedsym.Decoder. `sums` holds the symbols
    computed: the first m, or AHEAD_SYMBOLS once there are AHEAD_KEYS keys.
    """

    def __init__(self, m):
        if not 1 <= m <= codedsym.MAX_INDEX:
            raise ValueError("prefix length %d" % m)
        self.m = m
        self.sums = np.zeros(m, dtype=np.uint64)
        self._items = np.zeros(0, dtype=np.uint64)   # applied keys
        self._seeds = np.zeros(0, dtype=np.uint32)
        self._low = np.zeros(0, dtype=np.uint64)     # their indices below LOW_INDICES
        self.upgraded = False                          # loaded from an older format
        self._q_items = []                             # queued keys
        self._q_seeds = []

    def __len__(self):
        return len(self._items) + len(self._q_items)

    def add_key(self, key):
        item, seed = item_and_seed(key)
        self._q_items.append(item)
        self._q_seeds.append(seed)

    def flush(self):
        """Apply queued keys. Returns how many."""
        k = len(self._q_items)
        if not k:
            return 0
        items = np.array(self._q_items, dtype=np.uint64)
        seeds = np.array(self._q_seeds, dtype=np.uint32)
        self._q_items, self._q_seeds = [], []
        _apply(self.sums, items, seeds, 0, len(self.sums))
        self._items = np.concatenate((self._items, items))
        self._seeds = np.concatenate((self._seeds, seeds))
        self._low = np.concatenate((self._low, low_masks(seeds)))
        self._ahead()
        return k

    def _ahead(self):
        """From AHEAD_KEYS keys on, keep the symbols computed up to AHEAD_SYMBOLS."""
        if len(self._items) >= AHEAD_KEYS:
            self._compute(AHEAD_SYMBOLS)

    def _compute(self, c):
        """Compute the applied keys' symbols up to c (O(n log c) vectorised)."""
        lo = len(self.sums)
        if c > lo:
            self.sums = np.concatenate((self.sums, np.zeros(c - lo, dtype=np.uint64)))
            _apply(self.sums, self._items, self._seeds, lo, c)

    def extend(self, m2):
        """Grow to m2 symbols (free up to the symbols computed ahead, else O(n log m2)
        vectorised). Queued keys stay queued (a decoder reading this prefix must not see
        elements received during its operation)."""
        if m2 <= self.m:
            return
        if m2 > codedsym.MAX_INDEX:
            raise ValueError("prefix length %d" % m2)
        self._compute(m2)
        self.m = m2

    def symbol(self, i):
        """(KEYSUM||CHKSUM bytes, 0): the Decoder's view of local symbol i."""
        return int(self.sums[i]).to_bytes(SYMBOL_SIZE, "little"), 0

    def keys_items(self):
        """(items, seeds) of the applied keys (numpy arrays; the key is item & (2^40 - 1))."""
        return self._items, self._seeds

    def low_masks(self):
        """Per applied key, its indices below LOW_INDICES as a bit set (uint64 array)."""
        return self._low

    def symbol_int(self, i):
        return int(self.sums[i])

    def encode(self, start, stop):
        """Wire bytes of symbols [start, stop)."""
        if not 0 <= start <= stop <= self.m:
            raise ValueError("symbol range %d..%d of %d" % (start, stop, self.m))
        return self.sums[start:stop].astype("<u8").tobytes()

    def copy(self):
        o = RatelessPrefix.__new__(RatelessPrefix)
        o.m = self.m
        o.sums = self.sums.copy()
        o._items, o._seeds, o._low = self._items.copy(), self._seeds.copy(), self._low.copy()
        o.upgraded = self.upgraded
        o._q_items, o._q_seeds = list(self._q_items), list(self._q_seeds)
        return o

    def to_bytes(self):
        """Serialised state (magic, m, n, computed length c, sums, items, seeds, low
        masks); queued keys are applied."""
        self.flush()
        n, c = len(self._items), len(self.sums)
        return b"".join((_STATE_MAGIC, self.m.to_bytes(4, "little"), n.to_bytes(4, "little"),
                         c.to_bytes(4, "little"), self.sums.astype("<u8").tobytes(),
                         self._items.astype("<u8").tobytes(),
                         self._seeds.astype("<u4").tobytes(), self._low.astype("<u8").tobytes()))

    @classmethod
    def from_bytes(cls, data):
        """Inverse of to_bytes, also of the older formats (without the masks, without
        symbols computed ahead): what they lack is computed and `upgraded` says so.
        Raises ValueError on a malformed state."""
        magic = bytes(data[:8])
        if len(data) < 16 or magic not in (_STATE_MAGIC, _STATE_MAGIC_V2, _STATE_MAGIC_V1):
            raise ValueError("not a rateless prefix state")
        m = int.from_bytes(data[8:12], "little")
        n = int.from_bytes(data[12:16], "little")
        c, p = m, 16
        if magic == _STATE_MAGIC:
            c, p = int.from_bytes(data[16:20], "little"), 20
        per_key = 12 if magic == _STATE_MAGIC_V1 else 20
        if not 1 <= m <= c <= codedsym.MAX_INDEX or len(data) != p + 8 * c + per_key * n:
            raise ValueError("rateless prefix state length")
        o = cls.__new__(cls)
        o.m = m
        o.sums = np.frombuffer(data, dtype="<u8", count=c, offset=p).astype(np.uint64)
        p += 8 * c
        o._items = np.frombuffer(data, dtype="<u8", count=n, offset=p).astype(np.uint64)
        p += 8 * n
        o._seeds = np.frombuffer(data, dtype="<u4", count=n, offset=p).astype(np.uint32)
        p += 4 * n
        o._low = low_masks(o._seeds) if magic == _STATE_MAGIC_V1 else \
            np.frombuffer(data, dtype="<u8", count=n, offset=p).astype(np.uint64)
        o._q_items, o._q_seeds = [], []
        o.upgraded = magic != _STATE_MAGIC
        o._ahead()
        return o
