"""Standard Bloom filter over entity keys (feed IDs, thread roots) for the first message of
common-feed and thread sync. A fresh random salt per session keeps filters of one host
from being linked across sessions and keeps false positives from repeating."""
import hashlib
import math

from tssb.clock.errors import ClockError
from tssb.clock.wire import Reader, varint

SALT_LEN = 16
# 1 Mbit = 128 KiB: room for ~100k keys at 1 % false positives; more is refused.
MAX_BITS = 1 << 20
MAX_HASHES = 16
DEFAULT_FPR = 0.01


class KeyFilter:
    """Bloom filter of `m` bits and `h` hash functions.

    Args:
        m: bits (1..MAX_BITS).
        h: hash functions (1..MAX_HASHES).
        salt: SALT_LEN bytes.
        bits: optional initial bit array.
    Raises:
        ClockError: "filter" on bad parameters.
    """

    def __init__(self, m, h, salt, bits=None):
        if not (1 <= m <= MAX_BITS) or not (1 <= h <= MAX_HASHES) or len(salt) != SALT_LEN:
            raise ClockError("filter", (m, h))
        self.m = m
        self.h = h
        self.salt = bytes(salt)
        self.bits = bytearray((m + 7) // 8) if bits is None else bytearray(bits)
        if len(self.bits) != (m + 7) // 8:
            raise ClockError("filter", "bits")

    @classmethod
    def sized(cls, n, salt, fpr=DEFAULT_FPR):
        """Filter for n keys at the target false-positive rate (m = -n ln p / ln2^2,
        h = m/n ln2)."""
        n = max(n, 1)
        m = min(MAX_BITS, max(8, int(math.ceil(-n * math.log(fpr) / (math.log(2) ** 2)))))
        h = min(MAX_HASHES, max(1, int(round(m / n * math.log(2)))))
        return cls(m, h, salt)

    def _idx(self, key):
        d = hashlib.sha256(self.salt + bytes(key)).digest()
        a = int.from_bytes(d[:8], "big")
        b = int.from_bytes(d[8:16], "big") | 1
        return [(a + i * b) % self.m for i in range(self.h)]  # double hashing

    def add(self, key):
        for i in self._idx(key):
            self.bits[i >> 3] |= 1 << (i & 7)

    def __contains__(self, key):
        return all(self.bits[i >> 3] & (1 << (i & 7)) for i in self._idx(key))

    def encode(self):
        return varint(self.m) + bytes([self.h]) + self.salt + bytes(self.bits)

    @classmethod
    def read(cls, r):
        m = r.uint("filter m", MAX_BITS)
        h = r.byte("filter h")
        salt = r.take(SALT_LEN, "filter salt")
        if m < 1:
            raise ClockError("filter", m)
        bits = r.take((m + 7) // 8, "filter bits")
        return cls(m, h, salt, bits)

    @classmethod
    def decode(cls, data):
        r = Reader(data)
        f = cls.read(r)
        r.end()
        return f
