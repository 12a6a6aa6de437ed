"""Which of our keys XOR to a given value: linear algebra over GF(2).

A GOSET claim or a coded symbol 0 tells the (count, XOR) of a neighbour's set. When that
set is a subset of ours, the keys it lacks are the subset S of our keys with
XOR(S) = our XOR ^ its XOR. Feed IDs are 256-bit vectors; n < 256 random ones are
linearly independent except with probability about 2^(n - 256) (2^-156 for the deployed
100), so S is the only solution and Gaussian elimination finds it in O(n) XORs per query
once the basis is built (O(n^2), once per change of the set). A neighbour that holds a key
we lack makes the target leave our span (again except with probability 2^(n - 256)):
`solve` then returns None, which is how a caller tells a one-sided difference from a
two-sided one.

Keys an attacker derives from ours (k3 = k1 ^ k2) make the set dependent; the basis then
drops them and a solution is not unique. Callers check the count (and, for coded symbols,
the checksums) of what `solve` returns, so a wrong answer costs a few wasted novelties.

Runs on MicroPython (ints of any size; no int.bit_length there, hence _top).
"""


def _top(v):
    """Index of the highest set bit of v > 0."""
    return len(bin(v)) - 3


def as_int(key):
    return int.from_bytes(bytes(key), "big")


class XorBasis:
    """Reduced basis of a list of keys; `solve(target)` names the keys that XOR to it.

    Args:
        keys: list of equal-length byte strings (the set; order is the caller's). The
        basis keeps its own list: `add` appends a key in O(rank), so a set that only grows
        never rebuilds.
    """

    def __init__(self, keys=()):
        self.keys = []
        self.rows = {}      # pivot -> (vector, mask of key positions combined into it,
                            #           the pivot bit as an int)
        self.pivots = []    # pivot bits, highest first
        self.rank = 0
        for k in keys:
            self.add(k)

    def add(self, key):
        """Take one more key; returns False when it depends on those before it."""
        i = len(self.keys)
        self.keys.append(bytes(key))
        v, m = self._reduce(as_int(key), 1 << i)
        if not v:
            return False
        p = _top(v)
        self.rows[p] = (v, m, 1 << p)
        piv = self.pivots
        j = 0
        while j < len(piv) and piv[j] > p:
            j += 1
        piv.insert(j, p)
        self.rank += 1
        return True

    def _reduce(self, v, m):
        # Rows have distinct pivots (their top bits); clearing them from the top down
        # leaves v zero exactly when it lies in the span.
        rows = self.rows
        for p in self.pivots:
            r = rows[p]
            if v & r[2]:
                v ^= r[0]
                m ^= r[1]
        return v, m

    def independent(self):
        return self.rank == len(self.keys)

    def solve(self, target):
        """The keys whose XOR is `target` (bytes), as a list, or None when no subset of the
        keys gives it. With dependent keys the answer is one of several."""
        v, m = self._reduce(as_int(target), 0)
        if v:
            return None
        out = []
        i = 0
        while m:
            if m & 1:
                out.append(self.keys[i])
            m >>= 1
            i += 1
        return out
