"""Strata estimators (draft section 4, 6.12, 7.3; GNUnet gnunet-service-setu_strata_estimator.c).

One estimator = 32 IBFs ("strata") of 79 buckets. A key whose (salted) value ends in t one-bits
goes into strata 0 .. t-1 (GNUnet's nested subsampling: stratum s holds about 1/2^(s+1) of the
set; keys ending in 0 are in no stratum). Estimator j salts keys with salt j*8 as GNUnet does.
Counters are 8-bit on the wire, so strata counts are kept modulo 256 and differences read as
signed 8-bit values (only the sparse strata, whose differences are small, decode anyway).

Serialization (per estimator, stratum 0 first, estimators in salt order): each stratum is an
IBF slice with 8-bit counters, padded to 20 bytes per bucket as GNUnet writes it; the whole
block is zlib-compressed for the SEC message (GNUNET_try_compression).
"""
import zlib

from . import constants as C
from .errors import SetuError
from .ibf import IBF
from .profiles import salt_key

STRATUM_BYTES = C.SE_IBF_SIZE * C.IBF_BUCKET_SIZE
ESTIMATOR_BYTES = C.SE_STRATA_COUNT * STRATUM_BYTES
_MOD = 1 << C.SE_COUNTER_BITS


def se_count_for(avg_element_size, set_size):
    """Number of estimators to send (draft 7.3 / GNUnet: thresholds 4221 * 16, 64, 256 bytes)."""
    b = avg_element_size * set_size
    if b < C.AVG_BYTE_SIZE_SE * 16:
        return 1
    if b < C.AVG_BYTE_SIZE_SE * 64:
        return 2
    if b < C.AVG_BYTE_SIZE_SE * 256:
        return 4
    return 8


def trailing_ones(v):
    """Number of trailing 1-bits of v."""
    return ((v ^ (v + 1)).bit_length() - 1)


class StrataEstimator:
    """`count` estimators of 32 strata each, updated one key at a time."""

    def __init__(self, profile, count):
        if count not in C.VALID_SE_COUNTS:
            raise ValueError("bad estimator count")
        self.profile = profile
        self.count = count
        self.strata = [[IBF(profile, C.SE_IBF_SIZE, _MOD) for _ in range(C.SE_STRATA_COUNT)]
                       for _ in range(count)]

    def _salts(self):
        return [j * self.profile.se_salt_step for j in range(self.count)]

    def insert(self, key):
        """Add an unsalted 64-bit element key."""
        for j, salt in enumerate(self._salts()):
            k = salt_key(key, salt)
            t = min(trailing_ones(k), C.SE_STRATA_COUNT)
            strata = self.strata[j]
            for s in range(t):
                strata[s].insert(k)

    def remove(self, key):
        for j, salt in enumerate(self._salts()):
            k = salt_key(key, salt)
            t = min(trailing_ones(k), C.SE_STRATA_COUNT)
            for s in range(t):
                self.strata[j][s].remove(k)

    def extend(self, count, keys):
        """Grow to `count` estimators, building the new ones from all `keys`."""
        if count <= self.count:
            return
        old = self.count
        self.count = count
        self.strata += [[IBF(self.profile, C.SE_IBF_SIZE, _MOD) for _ in range(C.SE_STRATA_COUNT)]
                        for _ in range(count - old)]
        salts = self._salts()
        for key in keys:
            for j in range(old, count):
                k = salt_key(key, salts[j])
                t = min(trailing_ones(k), C.SE_STRATA_COUNT)
                for s in range(t):
                    self.strata[j][s].insert(k)

    def prefix(self, count):
        """A view holding only the first `count` estimators (shares the IBFs)."""
        se = StrataEstimator.__new__(StrataEstimator)
        se.profile = self.profile
        se.count = count
        se.strata = self.strata[:count]
        return se

    def copy(self):
        se = StrataEstimator.__new__(StrataEstimator)
        se.profile = self.profile
        se.count = self.count
        se.strata = [[ibf.copy() for ibf in est] for est in self.strata]
        return se

    def encode(self):
        """Uncompressed SE-SLICES."""
        out = bytearray()
        for est in self.strata:
            for ibf in est:
                out += ibf.write_slice(0, C.SE_IBF_SIZE, C.SE_COUNTER_BITS, padded=True)
        return bytes(out)

    @classmethod
    def decode(cls, profile, count, blob):
        """Parse SE-SLICES for `count` estimators.

        Raises:
            SetuError("bad strata estimator") on a wrong length or count.
        """
        if count not in C.VALID_SE_COUNTS:
            raise SetuError("bad strata estimator", "estimator count %d" % count)
        if len(blob) != count * ESTIMATOR_BYTES:
            raise SetuError("bad strata estimator", "length %d" % len(blob))
        se = cls(profile, count)
        pos = 0
        for est in se.strata:
            for ibf in est:
                ibf.read_slice(0, C.SE_IBF_SIZE, C.SE_COUNTER_BITS, blob[pos:pos + STRATUM_BYTES])
                pos += STRATUM_BYTES
        return se

    def estimate(self, remote):
        """Estimate (local_only, remote_only) element counts against a remote estimator.

        Per estimator: decode local - remote from the top stratum down; the lowest stratum s
        that still decodes samples 1/2^(s+1) of the keys, so its counts scale by 2^(s+1).
        The estimators' results are averaged (draft 7.3: more estimators, more precision).

        Raises:
            SetuError("strata estimator does not decode") if even the top stratum fails
            (draft 8.2.7: MUST terminate).
        """
        if remote.count != self.count:
            raise SetuError("bad strata estimator", "estimator count mismatch")
        tot_pos = tot_neg = 0
        for j in range(self.count):
            last = None
            for s in range(C.SE_STRATA_COUNT - 1, -1, -1):
                d = self.strata[j][s].subtract(remote.strata[j][s])
                ok, pos, neg, _ = d.decode()
                if not ok:
                    break
                last = (s, len(pos), len(neg))
            if last is None:
                raise SetuError("strata estimator does not decode")
            s, p, n = last
            tot_pos += p << (s + 1)
            tot_neg += n << (s + 1)
        return tot_pos / self.count, tot_neg / self.count


def compress(blob):
    return zlib.compress(blob, 6)


def decompress(blob, count):
    """Inflate at most count * ESTIMATOR_BYTES (+1 to detect excess): bounded memory."""
    limit = count * ESTIMATOR_BYTES
    d = zlib.decompressobj()
    try:
        out = d.decompress(blob, limit + 1)
    except zlib.error as e:
        raise SetuError("bad strata estimator", "inflate: %s" % e)
    if len(out) > limit or d.unconsumed_tail or not d.eof:
        raise SetuError("bad strata estimator", "inflated size")
    return out
