"""(count, XOR) aggregates over fixed-width keys.

An aggregate summarises a set of keys by how many there are and the XOR of all of them.
Union of disjoint sets and subtraction of a subset are then O(1): counts add or subtract
and the XORs combine. GOSET claims carry one (over 32-byte feed IDs); trDAG trees carry
one per node (over hashed message IDs) and infer a sibling's aggregate from its parent.
"""
from tinyssb.hotloops import xor_into


class Aggregate:
    __slots__ = ("count", "xor")

    def __init__(self, width, count=0, xor=None):
        self.count = count
        self.xor = bytearray(width) if xor is None else bytearray(xor)
        if len(self.xor) != width:
            raise ValueError("aggregate xor width")

    @classmethod
    def of(cls, width, keys):
        a = cls(width)
        for k in keys:
            a.add(k)
        return a

    def add(self, key):
        xor_into(self.xor, key)
        self.count += 1

    def remove(self, key):
        xor_into(self.xor, key)
        self.count -= 1

    def union(self, other):
        """Aggregate of the union of two disjoint sets."""
        a = Aggregate(len(self.xor), self.count + other.count, self.xor)
        xor_into(a.xor, other.xor)
        return a

    def minus(self, other):
        """Aggregate of self's set without other's set (other must be a subset)."""
        a = Aggregate(len(self.xor), self.count - other.count, self.xor)
        xor_into(a.xor, other.xor)
        return a

    def is_empty(self):
        return self.count == 0 and not any(self.xor)

    def single(self):
        """The one key when count == 1 (the XOR is then the key itself), else None."""
        return bytes(self.xor) if self.count == 1 else None

    def __eq__(self, other):
        return isinstance(other, Aggregate) and self.count == other.count and self.xor == other.xor

    def __ne__(self, other):
        return not self.__eq__(other)

    def __repr__(self):
        return "Aggregate(%d, %s)" % (self.count, bytes(self.xor[:4]).hex())
