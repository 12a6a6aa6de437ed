"""The host's prefix of rateless coded symbols: tinyssb.codedsym's Encoder, batched in numpy.

Host SETU uses the codec KEY 5 bytes || CHK 3 bytes, no COUNT (codedsym.Codec(5, 3, 0)), so a
coded symbol is exactly one little-endian uint64 and a whole prefix is one numpy array. Keys
are the first 5 bytes of the SETU element hash (SHA-512). The mapping is the shared module's,
vectorised over many keys at once; tests check that both give identical bytes.

Appends are queued and applied in batches (`flush`), which is what keeps the upkeep at a few
microseconds per element in CPython. Every key's (item, seed) is kept, so the prefix can be
extended and saved/restored without hashing anything again.
"""
import numpy as np

from tinyssb import codedsym

CODEC = codedsym.Codec(5, 3, 0)
KEY_LEN = CODEC.key_len
SYMBOL_SIZE = CODEC.size        # 8: one uint64
_STATE_MAGIC = b"tssbRLP1"
_M32 = np.uint64(0xFFFFFFFF)


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
    """One step of codedsym.next_index for many keys at once: (next indices, next states)."""
    x ^= (x << np.uint64(13)) & _M32
    x ^= x >> np.uint64(17)
    x ^= (x << np.uint64(5)) & _M32
    # x < 2^32: the correctly rounded float64 root floors to isqrt(x) exactly (no integer
    # square falls between a root and its rounding below 2^52), as codedsym's isqrt
    s = np.sqrt(x.astype(np.float64)).astype(np.int64)
    return last + ((2 * last + 3) * (65536 - s) + 2 * s - 1) // (2 * s), x


def _apply(sums, items, seeds, lo, hi):
    """XOR every key (items[k], seeds[k]) into sums[i] for each of its indices lo <= i < hi."""
    if not len(items):
        return
    last = np.zeros(len(items), dtype=np.int64)
    x = seeds.astype(np.uint64)
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


def candidate_pairs(items, seeds, nonzero, lo=0):
    """The keys that may still be in a difference, and where to test them.

    A key still in the difference leaves every symbol it maps to nonzero, so the candidates
    are the keys all of whose indices below len(nonzero) fall on True entries of `nonzero`.
    Returns (ok, pos, idx): ok[k] is True for a candidate; (pos[j], idx[j]) are the pairs
    (candidate position, one of its indices >= lo, and its highest index in any case),
    from one vectorised walk over all keys.
    """
    hi = len(nonzero)
    ok = np.zeros(len(items), dtype=bool)
    none = np.zeros(0, dtype=np.int64)
    if not hi or not nonzero[0] or not len(items):
        return ok, none, none
    ok[:] = True
    top = np.zeros(len(items), dtype=np.int64)      # highest index below hi
    pos = np.arange(len(items))
    last = np.zeros(len(items), dtype=np.int64)
    x = seeds.astype(np.uint64)
    rec_p, rec_i = [], []
    while len(pos):
        nxt, x = _step(last, x)
        keep = nxt < hi
        if not keep.all():
            top[pos[~keep]] = last[~keep]          # leaving the range: its highest index
            pos, nxt, x = pos[keep], nxt[keep], x[keep]
        last = nxt
        bad = ~nonzero[last]
        if bad.any():
            ok[pos[bad]] = False
            good = ~bad
            pos, last, x = pos[good], last[good], x[good]
        sel = last >= lo
        if sel.any():
            rec_p.append(pos[sel])
            rec_i.append(last[sel])
    low = np.nonzero(ok & (top < lo))[0]             # tested at their top index only
    if lo <= 0:
        low = none
    p = np.concatenate(rec_p + [low]) if rec_p else low
    i = np.concatenate(rec_i + [top[low]]) if rec_i else top[low]
    if lo <= 0:                                      # index 0 too
        c = np.nonzero(ok)[0]
        p, i = np.concatenate((p, c)), np.concatenate((i, np.zeros(len(c), dtype=np.int64)))
    keep = ok[p]
    return ok, p[keep], i[keep]


def stuck_candidates(items, seeds, nonzero):
    """Positions of the keys all of whose indices below len(nonzero) fall on True entries of
    `nonzero` (a key still in the difference leaves every symbol it maps to nonzero)."""
    return np.nonzero(candidate_pairs(items, seeds, nonzero, len(nonzero))[0])[0]


class RatelessPrefix:
    """The first m coded symbols of a growing set of 5-byte keys.

    Args:
        m: prefix length (symbols).
    Use `add_key` per element (queued), `flush()` before reading symbols; `symbol(i)` and
    `extend(m2)` make it the `local` of a codedsym.Decoder.
    """

    def __init__(self, m):
        if not 1 <= m <= codedsym.MAX_INDEX:
            raise ValueError("prefix length %d" % m)
        self.m = m
        self.sums = np.zeros(m, dtype=np.uint64)
        self._items = np.zeros(0, dtype=np.uint64)   # applied keys
        self._seeds = np.zeros(0, dtype=np.uint32)
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
        _apply(self.sums, items, seeds, 0, self.m)
        self._items = np.concatenate((self._items, items))
        self._seeds = np.concatenate((self._seeds, seeds))
        return k

    def extend(self, m2):
        """Grow to m2 symbols (O(n log m2) vectorised). Queued keys stay queued (a decoder
        reading this prefix must not see elements received during its operation)."""
        if m2 <= self.m:
            return
        if m2 > codedsym.MAX_INDEX:
            raise ValueError("prefix length %d" % m2)
        lo = self.m
        self.sums = np.concatenate((self.sums, np.zeros(m2 - lo, dtype=np.uint64)))
        self.m = m2
        _apply(self.sums, self._items, self._seeds, lo, m2)

    def symbol(self, i):
        """(KEYSUM||CHKSUM bytes, 0): the Decoder's view of local symbol i."""
        return int(self.sums[i]).to_bytes(SYMBOL_SIZE, "little"), 0

    def keys_items(self):
        """(items, seeds) of the applied keys (numpy arrays; the key is item & (2^40 - 1))."""
        return self._items, self._seeds

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
        o._items, o._seeds = self._items.copy(), self._seeds.copy()
        o._q_items, o._q_seeds = list(self._q_items), list(self._q_seeds)
        return o

    def to_bytes(self):
        """Serialised state (magic, m, n, sums, items, seeds); queued keys are applied."""
        self.flush()
        n = len(self._items)
        return b"".join((_STATE_MAGIC, self.m.to_bytes(4, "little"), n.to_bytes(4, "little"),
                         self.sums.astype("<u8").tobytes(), self._items.astype("<u8").tobytes(),
                         self._seeds.astype("<u4").tobytes()))

    @classmethod
    def from_bytes(cls, data):
        """Inverse of to_bytes. Raises ValueError on a malformed state."""
        if len(data) < 16 or data[:8] != _STATE_MAGIC:
            raise ValueError("not a rateless prefix state")
        m = int.from_bytes(data[8:12], "little")
        n = int.from_bytes(data[12:16], "little")
        if not 1 <= m <= codedsym.MAX_INDEX or len(data) != 16 + 8 * m + 12 * n:
            raise ValueError("rateless prefix state length")
        o = cls.__new__(cls)
        o.m = m
        p = 16
        o.sums = np.frombuffer(data, dtype="<u8", count=m, offset=p).astype(np.uint64)
        p += 8 * m
        o._items = np.frombuffer(data, dtype="<u8", count=n, offset=p).astype(np.uint64)
        p += 8 * n
        o._seeds = np.frombuffer(data, dtype="<u4", count=n, offset=p).astype(np.uint32)
        o._q_items, o._q_seeds = [], []
        return o
