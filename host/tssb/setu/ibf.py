"""Invertible Bloom filter (draft section 3) and its wire slices (draft 6.2, 7.2).

Buckets are three parallel typed arrays: signed 64-bit counts, IDSUMs (64-bit XOR) and
HASHSUMs (32-bit XOR): 20 bytes a bucket (Python lists of ints took about 95); the session
budget counts buckets ("ibf_buckets"). The profile (profiles.py) supplies the check hash,
the bucket mapping and the decode order. A slice on the wire is the n IDSUMs (8 bytes
each, little-endian as GNUnet sends them in host order), the n HASHSUMs (4 bytes each, LE),
then the counters bit-packed MSB first with `bits` bits each (draft 7.2). GNUnet pads the
counter region to 8n bytes ("padded" form, 20 bytes per bucket); we send the packed form
and accept both.
"""
import heapq
import operator
import sys
from array import array
from collections import deque

from . import constants as C
from .errors import SetuError

_LE = sys.byteorder == "little"
_U32 = "I" if array("I").itemsize == 4 else "L"
# Buckets per bulk step: one C-level map over 2**20 buckets of 64-bit values holds the GIL
# for ~120 ms (measured), stalling the event loop while a worker thread decodes; a step of
# 2**13 takes under 1 ms, and the worker lets the loop's thread in between steps.
_STEP = 1 << 13


def counter_bits(counts):
    """Bits per counter: bit length of the largest count, at least 1 (GNUnet 64 - clzll(max);
    the draft's CEILING(LOG2(max)) under-counts powers of two, e.g. 8)."""
    m = low = 0
    for lo in range(0, len(counts), _STEP):   # in steps: see _STEP
        part = counts[lo:lo + _STEP]
        m, low = max(m, max(part)), min(low, min(part))
    if low < 0:
        raise ValueError("cannot pack negative counters")
    return max(1, m.bit_length())


def pack_counters(counts, bits):
    """Concatenate counters MSB-first with `bits` bits each, zero-padded to whole bytes.

    Args:
        counts: non-negative ints below 2**bits.
        bits: 1..64.
    Returns:
        bytes of length ceil(len(counts) * bits / 8).
    """
    if not 1 <= bits <= 64:
        raise ValueError("bits out of range")
    out = bytearray()
    mask = (1 << bits) - 1
    # Eight counters fill exactly `bits` bytes, so pack in groups of eight.
    n = len(counts)
    for g in range(0, n, 8):
        grp = counts[g:g + 8]
        acc = 0
        for c in grp:
            acc = (acc << bits) | (c & mask)
        if len(grp) < 8:
            used = len(grp) * bits
            nbytes = (used + 7) // 8
            out += (acc << (nbytes * 8 - used)).to_bytes(nbytes, "big")
        else:
            out += acc.to_bytes(bits, "big")
    return bytes(out)


def unpack_counters(buf, n, bits):
    """Inverse of pack_counters; `buf` must hold at least ceil(n*bits/8) bytes."""
    if not 1 <= bits <= 64:
        raise ValueError("bits out of range")
    need = (n * bits + 7) // 8
    if len(buf) < need:
        raise ValueError("counter region too short")
    mask = (1 << bits) - 1
    out = []
    for g in range(0, n, 8):
        cnt = min(8, n - g)
        start = (g * bits) // 8  # = g//8 * bits, byte aligned
        if cnt == 8:
            acc = int.from_bytes(buf[start:start + bits], "big")
            for j in range(7, -1, -1):
                out.append((acc >> (j * bits)) & mask)
        else:
            used = cnt * bits
            nbytes = (used + 7) // 8
            acc = int.from_bytes(buf[start:start + nbytes], "big") >> (nbytes * 8 - used)
            for j in range(cnt - 1, -1, -1):
                out.append((acc >> (j * bits)) & mask)
    return out


def _u64s(values):
    a = array("Q", values)
    if not _LE:
        a.byteswap()
    return a.tobytes()


def _u32s(values):
    a = array(_U32, values)
    if not _LE:
        a.byteswap()
    return a.tobytes()


def _from_u64s(buf):
    a = array("Q")
    a.frombytes(buf)
    if not _LE:
        a.byteswap()
    return a


def _from_u32s(buf):
    a = array(_U32)
    a.frombytes(buf)
    if not _LE:
        a.byteswap()
    return a


def slice_payload_size(n, bits, padded=False):
    """Bytes of an n-bucket slice body."""
    if padded:
        return n * C.IBF_BUCKET_SIZE
    return n * (C.KEY_SIZE + C.KEYHASH_SIZE) + (n * bits + 7) // 8


def max_buckets_per_message(bits, header, padded=False):
    """Largest n whose slice message fits in MAX_MESSAGE_SIZE (GNUnet's 3276 overflows by one)."""
    room = C.MAX_MESSAGE_SIZE - header
    if padded:
        return room // C.IBF_BUCKET_SIZE
    n = (room * 8) // (8 * (C.KEY_SIZE + C.KEYHASH_SIZE) + bits)
    while slice_payload_size(n, bits) > room:
        n -= 1
    return n


class IBF:
    """An invertible Bloom filter of `size` buckets under a profile."""

    __slots__ = ("profile", "size", "count", "ids", "hashes", "counter_mod")

    def __init__(self, profile, size, counter_mod=0):
        """Args: profile class; size (buckets); counter_mod: if non-zero, counts are kept
        modulo this power of two and read as signed (used for 8-bit strata counters)."""
        self.profile = profile
        self.size = size
        self.count = array("q", bytes(8 * size))
        self.ids = array("Q", bytes(8 * size))
        self.hashes = array(_U32, bytes(4 * size))
        self.counter_mod = counter_mod

    def copy(self):
        o = IBF(self.profile, 0, self.counter_mod)
        o.size = self.size
        o.count = array("q", self.count)
        o.ids = array("Q", self.ids)
        o.hashes = array(_U32, self.hashes)
        return o

    def _apply(self, key, delta, idx=None):
        h = self.profile.check_hash(key)
        cnt, ids, hs = self.count, self.ids, self.hashes
        for i in (idx if idx is not None else self.profile.indices(key, self.size)):
            cnt[i] += delta
            ids[i] ^= key
            hs[i] ^= h

    def insert(self, key):
        """Add a (salted) 64-bit key to its k buckets."""
        self._apply(key, 1)

    def remove(self, key):
        """Remove a key (counts may go negative)."""
        self._apply(key, -1)

    def subtract(self, other):
        """New IBF self - other (same size and profile): XOR sums, subtract counts."""
        r = self.copy()
        r._combine(other, operator.sub)
        return r

    def subtract_from(self, other):
        """In place: self becomes other - self (no third table while decoding)."""
        self._combine(other, None)

    def _combine(self, other, count_op):
        if other.size != self.size or other.profile is not self.profile:
            raise ValueError("IBF shape mismatch")
        cnt, ids, hs = self.count, self.ids, self.hashes
        xor = operator.xor
        for lo in range(0, self.size, _STEP):
            hi = lo + _STEP
            if count_op is None:   # other - self
                cnt[lo:hi] = array("q", map(operator.sub, other.count[lo:hi], cnt[lo:hi]))
            else:
                cnt[lo:hi] = array("q", map(count_op, cnt[lo:hi], other.count[lo:hi]))
            ids[lo:hi] = array("Q", map(xor, ids[lo:hi], other.ids[lo:hi]))
            hs[lo:hi] = array(_U32, map(xor, hs[lo:hi], other.hashes[lo:hi]))

    def _signed(self, c):
        if self.counter_mod:
            c %= self.counter_mod
            if c >= self.counter_mod // 2:
                c -= self.counter_mod
        return c

    def is_empty(self):
        for lo in range(0, self.size, _STEP):   # in steps: see _STEP
            hi = lo + _STEP
            if any(self.ids[lo:hi]) or any(self.hashes[lo:hi]):
                return False
        return not any(self._signed(c) for c in self.count)

    def decode(self, limit=None):
        """Peel the IBF in place.

        A bucket is taken as pure when its count is +-1, its HASHSUM equals the check hash of
        its IDSUM and the IDSUM maps back to it (draft 3.5.3). GNUnet's profile takes the
        lowest such bucket each time (what its rescan from bucket 0 yields; a heap gives the
        same order without the O(L) rescan); tssb2 uses a FIFO queue. Decoding stops with
        failure on a repeated key (draft 8.2.4) or after `limit` keys (default: size).

        Returns:
            (ok, positive_keys, negative_keys, reason): ok is True when the IBF ends empty.
        """
        prof = self.profile
        size = self.size
        limit = size if limit is None else limit
        cnt, ids, hs = self.count, self.ids, self.hashes
        signed = self._signed
        check, indices = prof.check_hash, prof.indices
        pos, neg = [], []
        seen = set()
        fifo = prof.fifo_decode
        cand = [i for i in range(size) if signed(cnt[i]) in (1, -1)]
        if fifo:
            q = deque(cand)
            pop, push = q.popleft, q.append
        else:
            q = cand  # already sorted: a valid heap
            pop = lambda: heapq.heappop(q)  # noqa: E731
            push = lambda i: heapq.heappush(q, i)  # noqa: E731
        while q:
            i = pop()
            c = signed(cnt[i])
            if c != 1 and c != -1:
                continue
            key = ids[i]
            if hs[i] != check(key):
                continue
            idx = indices(key, size)
            if i not in idx:
                continue
            if key in seen:
                return False, pos, neg, "repeated key"
            if len(seen) >= limit:
                return False, pos, neg, "decode limit"
            seen.add(key)
            (pos if c == 1 else neg).append(key)
            h = check(key)
            for j in idx:
                cnt[j] -= c
                ids[j] ^= key
                hs[j] ^= h
                if signed(cnt[j]) in (1, -1):
                    push(j)
        if self.is_empty():
            return True, pos, neg, None
        return False, pos, neg, "no pure bucket"

    def fold(self, size):
        """IBF of `size` buckets from this larger one (tssb2 only: both 3*2^j)."""
        if not self.profile.foldable or self.size % size or size % 3:
            raise ValueError("cannot fold")
        m_big, m = self.size // 3, size // 3
        r = IBF(self.profile, size, self.counter_mod)
        for part in range(3):
            b0 = part * m_big
            cnt = self.count[b0:b0 + m]
            ids = self.ids[b0:b0 + m]
            hs = self.hashes[b0:b0 + m]
            for off in range(b0 + m, b0 + m_big, m):
                cnt = array("q", map(operator.add, cnt, self.count[off:off + m]))
                ids = array("Q", map(operator.xor, ids, self.ids[off:off + m]))
                hs = array(_U32, map(operator.xor, hs, self.hashes[off:off + m]))
            r.count[part * m:(part + 1) * m] = cnt
            r.ids[part * m:(part + 1) * m] = ids
            r.hashes[part * m:(part + 1) * m] = hs
        return r

    # -- wire ------------------------------------------------------------------------------

    def write_slice(self, offset, n, bits, padded=False):
        """Serialize buckets [offset, offset+n) with `bits`-bit counters (draft 6.2.2)."""
        end = offset + n
        cm = (1 << bits) - 1
        counts = [c & cm for c in self.count[offset:end]]
        body = _u64s(self.ids[offset:end]) + _u32s(self.hashes[offset:end])
        packed = pack_counters(counts, bits)
        if padded:
            packed += bytes(8 * n - len(packed))
        return body + packed

    def read_slice(self, offset, n, bits, payload):
        """Fill buckets [offset, offset+n) from a slice body (packed or GNUnet-padded).

        Raises:
            SetuError("bad ibf slice") when the body length fits neither form.
        """
        if offset + n > self.size:
            raise SetuError("bad ibf slice", "beyond IBF size")
        if len(payload) not in (slice_payload_size(n, bits), slice_payload_size(n, bits, True)):
            raise SetuError("bad ibf slice", "length %d for %d buckets" % (len(payload), n))
        k8 = 8 * n
        self.ids[offset:offset + n] = _from_u64s(payload[:k8])
        self.hashes[offset:offset + n] = _from_u32s(payload[k8:k8 + 4 * n])
        self.count[offset:offset + n] = array("q", unpack_counters(payload[k8 + 4 * n:], n, bits))


def slice_bucket_count(length, bits, remaining, last):
    """Number of buckets in a slice body of `length` bytes.

    Packed bodies are 12n + ceil(n*bits/8) bytes, GNUnet's padded ones 20n; when both readings
    exist the one that completes the IBF (last slice) or the packed one wins.

    Returns:
        n >= 1, or None when no reading fits.
    """
    cands = []
    n = (length * 8) // (8 * (C.KEY_SIZE + C.KEYHASH_SIZE) + bits)
    for m in (n - 1, n, n + 1):
        if m >= 1 and slice_payload_size(m, bits) == length:
            cands.append(m)
    if length % C.IBF_BUCKET_SIZE == 0 and length:
        cands.append(length // C.IBF_BUCKET_SIZE)
    cands = [m for m in cands if m <= remaining]
    if not cands:
        return None
    if last:
        for m in cands:
            if m == remaining:
                return m
        return None
    return cands[0]
