"""Bloom clock: a counting Bloom filter over events, merged by element-wise max.

An event (an update message) is added by incrementing the k cells that the random oracle
function (ROF) picks from its hash. Clock a <= clock b cell by cell means "a possibly
happened before b"; a clock is never after or concurrent with a clock that causally
follows it (no false negatives), but `before` can be a false positive. Two published
estimates of that false-positive probability are provided (set-reconciliation.md §7).

The ROF draws k independent indices, so one event may hit one cell twice; then the sum of
all cells still grows by exactly k per event, which makes `events_between` exact along a
chain.
"""
import hashlib
import math

from tssb.clock.errors import ClockError
from tssb.clock.wire import Reader, varint

# Defaults. The spec refers to a "default parameters" section that it does not contain; we
# take k = 4 from the deployed Java implementation (salesforce/apollo BloomClock) and round
# its m = 107 up to 128 so an index is a whole number of bits (reference §7).
DEFAULT_N = 128
DEFAULT_K = 4
# Bounds on what a peer may make us allocate or loop over.
MAX_N = 4096
MAX_K = 32
MAX_CELL = (1 << 32) - 1   # cells are at most 32-bit in every serialised block format

BEFORE = "before"
AFTER = "after"
EQUAL = "equal"
CONCURRENT = "concurrent"

# Serialised block formats (first byte): dense cells of 4/8/16/32 bits after subtracting
# the smallest cell (the "base", which lets long-lived clocks keep small cells), or a
# sparse list of (index, value - base) pairs when few cells differ from the base.
FMT_DENSE4 = 0x04
FMT_DENSE8 = 0x08
FMT_DENSE16 = 0x10
FMT_DENSE32 = 0x20
FMT_SPARSE = 0x53
_DENSE_BITS = {FMT_DENSE4: 4, FMT_DENSE8: 8, FMT_DENSE16: 16, FMT_DENSE32: 32}


def check_params(n, k):
    """Validate clock parameters.

    Args:
        n: number of cells (N).
        k: indices per event.
    Raises:
        ClockError: "params" when out of range.
    """
    if not (1 <= n <= MAX_N) or not (1 <= k <= MAX_K):
        raise ClockError("params", (n, k))


def rof(data, n, k):
    """Random oracle function: k cell indices for an event.

    Args:
        data: bytes identifying the event (its hash or, for the elapsed-time counter, the
            incrementer's feed ID).
        n: number of cells.
        k: number of indices.
    Returns:
        list of k ints in [0, n).
    """
    out = []
    block = 0
    while len(out) < k:
        d = hashlib.sha256(b"bloomclock" + bytes([block]) + bytes(data)).digest()
        for i in range(0, 32, 4):
            if len(out) == k:
                break
            out.append(int.from_bytes(d[i:i + 4], "big") % n)
        block += 1
    return out


class BloomClock:
    """A Bloom clock of `n` cells with `k` indices per event.

    Args:
        n: number of cells.
        k: indices per event.
        cells: optional initial cell values (copied).
        track: keep the hashes added, so `remove` can undo them.
    Raises:
        ClockError: bad parameters or cells.
    """
    __slots__ = ("n", "k", "cells", "tracked")

    def __init__(self, n=DEFAULT_N, k=DEFAULT_K, cells=None, track=False):
        check_params(n, k)
        self.n = n
        self.k = k
        if cells is None:
            self.cells = [0] * n
        else:
            if len(cells) != n or any(c < 0 or c > MAX_CELL for c in cells):
                raise ClockError("cells")
            self.cells = list(cells)
        self.tracked = {} if track else None

    def copy(self):
        c = BloomClock(self.n, self.k, self.cells)
        if self.tracked is not None:
            c.tracked = dict(self.tracked)
        return c

    def _same(self, other):
        if self.n != other.n or self.k != other.k:
            raise ClockError("params_mismatch", ((self.n, self.k), (other.n, other.k)))

    def increment(self, data):
        """Add one event (an update message) identified by `data`. Returns self."""
        for i in rof(data, self.n, self.k):
            if self.cells[i] >= MAX_CELL:
                raise ClockError("overflow")
            self.cells[i] += 1
        if self.tracked is not None:
            self.tracked[bytes(data)] = self.tracked.get(bytes(data), 0) + 1
        return self

    def remove(self, data):
        """Remove an event added earlier (needs track=True). Returns self.

        Raises:
            ClockError: "not_tracked" when the event was not added to this clock.
        """
        if self.tracked is None or self.tracked.get(bytes(data), 0) == 0:
            raise ClockError("not_tracked")
        for i in rof(data, self.n, self.k):
            self.cells[i] -= 1
        self.tracked[bytes(data)] -= 1
        if not self.tracked[bytes(data)]:
            del self.tracked[bytes(data)]
        return self

    def merge(self, other):
        """Element-wise max of two clocks (a new clock; knowledge of both)."""
        self._same(other)
        c = BloomClock(self.n, self.k, [a if a >= b else b for a, b in zip(self.cells, other.cells)])
        if self.tracked is not None and other.tracked is not None:
            c.tracked = dict(other.tracked)
            for h, m in self.tracked.items():
                c.tracked[h] = max(m, c.tracked.get(h, 0))
        return c

    def add(self, other):
        """Element-wise sum (the spec's "sum of the stamps" for a set of disjoint entities)."""
        self._same(other)
        return BloomClock(self.n, self.k, [a + b for a, b in zip(self.cells, other.cells)])

    def __le__(self, other):
        self._same(other)
        return all(a <= b for a, b in zip(self.cells, other.cells))

    def __eq__(self, other):
        return isinstance(other, BloomClock) and self.n == other.n and self.k == other.k \
            and self.cells == other.cells

    def __hash__(self):
        return hash((self.n, self.k, tuple(self.cells)))

    def __repr__(self):
        return "BloomClock(n=%d, k=%d, sum=%d)" % (self.n, self.k, self.total())

    def total(self):
        """Sum of all cells (k times the number of events along a chain)."""
        return sum(self.cells)

    def value(self):
        """Largest cell: the elapsed-time counter's reading."""
        return max(self.cells)

    def spread(self):
        """Largest minus smallest cell (the counter's "range")."""
        return max(self.cells) - min(self.cells)

    def compare(self, other):
        """Causal relation of self to other.

        Returns:
            EQUAL, BEFORE (self <= other), AFTER (self >= other) or CONCURRENT.
        """
        self._same(other)
        le = ge = True
        for a, b in zip(self.cells, other.cells):
            if a < b:
                ge = False
            elif a > b:
                le = False
        if le and ge:
            return EQUAL
        if le:
            return BEFORE
        if ge:
            return AFTER
        return CONCURRENT

    def distance(self, other):
        """L1 distance sum(|a_i - b_i|): how far apart two versions are (larger distance,
        larger false-positive probability of a `before` answer)."""
        self._same(other)
        return sum(abs(a - b) for a, b in zip(self.cells, other.cells))

    def events_between(self, other):
        """Estimate the number of events in `other` that are not in `self`.

        Exact along a chain (self <= other): each event adds k to the cell sum. For
        concurrent clocks the cells where `other` is ahead give a lower bound.
        """
        self._same(other)
        ahead = sum(b - a for a, b in zip(self.cells, other.cells) if b > a)
        return ahead / self.k

    # -- false-positive probability of "self before other" ---------------------------------

    def fp_ramabaja(self, other, order="bloom"):
        """Ramabaja's estimate (1 - (1 - 1/m)^x)^y of P(self <= other by chance).

        Args:
            other: the clock self is compared against.
            order: "bloom" (default): x = sum(other), y = sum(self), the Bloom-filter
                reading (y cells hit by self must all be non-zero after x increments of
                other). "apollo": x = min(sums), y = max(sums) as the deployed Java code
                has it (reference §7); that ordering disagrees with measured rates by many
                orders of magnitude, so it is offered for comparison only.
        Returns:
            float in [0, 1].
        """
        self._same(other)
        sa, sb = self.total(), other.total()
        if order == "apollo":
            x, y = min(sa, sb), max(sa, sb)
        elif order == "bloom":
            x, y = sb, sa
        else:
            raise ValueError("order")
        return (1.0 - (1.0 - 1.0 / self.n) ** x) ** y

    def fp_kshemkalyani(self, other):
        """Kshemkalyani & Misra: P(other >= self by chance) with each cell of `other`
        modelled as Binomial(n_b, 1/m), n_b = sum(other): the product over cells of
        P(X >= self[i]) (reference §7)."""
        self._same(other)
        nb = other.total()
        p = 1.0 / self.n
        logp = 0.0
        cdf_cache = {}
        for need in self.cells:
            if need == 0:
                continue
            if need > nb:
                return 0.0
            tail = cdf_cache.get(need)
            if tail is None:
                tail = 1.0 - _binom_cdf(need - 1, nb, p)
                cdf_cache[need] = tail
            if tail <= 0.0:
                return 0.0
            logp += math.log(tail)
        return math.exp(logp)

    # -- serialisation ---------------------------------------------------------------------

    def encode(self, fmt=None):
        """Compact serialisation: format byte, N, base, then the cells.

        Args:
            fmt: a FMT_* code, or None to pick the shortest that fits.
        Returns:
            bytes.
        Raises:
            ClockError: "format" when the cells do not fit the requested format.
        """
        if fmt is None:
            best = None
            for f in (FMT_DENSE4, FMT_DENSE8, FMT_DENSE16, FMT_DENSE32, FMT_SPARSE):
                try:
                    b = self.encode(f)
                except ClockError:
                    continue
                if best is None or len(b) < len(best):
                    best = b
            return best
        base = min(self.cells)
        head = bytes([fmt]) + varint(self.n) + varint(base)
        rel = [c - base for c in self.cells]
        if fmt == FMT_SPARSE:
            nz = [(i, v) for i, v in enumerate(rel) if v]
            body = bytearray(varint(len(nz)))
            for i, v in nz:
                body += varint(i) + varint(v)
            return head + bytes(body)
        bits = _DENSE_BITS.get(fmt)
        if bits is None:
            raise ClockError("format", fmt)
        if max(rel) >= (1 << bits):
            raise ClockError("format", "cell too large for %d bits" % bits)
        if bits == 4:
            body = bytearray((self.n + 1) // 2)
            for i, v in enumerate(rel):
                body[i // 2] |= v << (4 if i % 2 == 0 else 0)
            return head + bytes(body)
        w = bits // 8
        return head + b"".join(v.to_bytes(w, "big") for v in rel)

    @classmethod
    def decode(cls, data, k, expect_n=None):
        """Parse a serialised clock (see `encode`).

        Args:
            data: bytes.
            k: the index count agreed for this clock (not serialised).
            expect_n: if given, N must equal it.
        Returns:
            BloomClock.
        Raises:
            ClockError: malformed or out-of-range input.
        """
        r = Reader(data)
        c = cls.read(r, k, expect_n)
        r.end()
        return c

    @classmethod
    def read(cls, r, k, expect_n=None):
        """Parse a clock from a Reader (for clocks embedded in larger messages)."""
        fmt = r.byte("clock format")
        n = r.uint("clock n", MAX_N)
        if n < 1 or (expect_n is not None and n != expect_n):
            raise ClockError("clock_n", n)
        base = r.uint("clock base", MAX_CELL)
        if fmt == FMT_SPARSE:
            cnt = r.uint("sparse count", n)
            rel = [0] * n
            last = -1
            for _ in range(cnt):
                i = r.uint("sparse index", n - 1)
                if i <= last:
                    raise ClockError("sparse_order", i)  # one canonical form per clock
                last = i
                rel[i] = r.uint("sparse value", MAX_CELL)
        elif fmt in _DENSE_BITS:
            bits = _DENSE_BITS[fmt]
            if bits == 4:
                raw = r.take((n + 1) // 2, "dense4 cells")
                rel = [(raw[i // 2] >> (4 if i % 2 == 0 else 0)) & 0xF for i in range(n)]
            else:
                w = bits // 8
                raw = r.take(n * w, "dense cells")
                rel = [int.from_bytes(raw[i * w:(i + 1) * w], "big") for i in range(n)]
        else:
            raise ClockError("format", fmt)
        cells = [base + v for v in rel]
        if any(c > MAX_CELL for c in cells):
            raise ClockError("range", "cell")
        return cls(n, k, cells)


def _binom_cdf(x, n, p):
    """P(Binomial(n, p) <= x), summed in log space so large n does not underflow."""
    if x < 0:
        return 0.0
    if x >= n:
        return 1.0
    lq = math.log1p(-p)
    lp = math.log(p)
    total = 0.0
    for l in range(x + 1):
        lt = math.lgamma(n + 1) - math.lgamma(l + 1) - math.lgamma(n - l + 1) + l * lp + (n - l) * lq
        total += math.exp(lt)
    return min(total, 1.0)
