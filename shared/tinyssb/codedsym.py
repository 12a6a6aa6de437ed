"""Coded symbols of a set: rateless IBLT (Yang, Gilad, Alizadeh, SIGCOMM 2024), integer-only.

A set of fixed-length keys is encoded as an endless stream of coded symbols 0, 1, 2, ...
Each coded symbol holds the XOR of the keys mapped to it (KEYSUM), the XOR of their checksums
(CHKSUM) and their number (COUNT). A receiver subtracts the coded symbols of its own set and
peels: a symbol whose COUNT is +-1 and whose CHKSUM is the checksum of its KEYSUM holds one
key of the difference. See ../../docs/setu.md ("coded symbols") for the wire format.

Key mapping, exactly (so boards and hosts compute identical indices; no float enters a
result):
  h      = SHA-256(key)                        (32 bytes)
  chk(k) = h[4 : 4 + chk_len]                  (non-linear: a symbol of several keys fails)
  x      = u32le(h[0:4]) | 1                   (xorshift32 state, never 0)
  index 0 always; then repeatedly
    x    = xorshift32(x): x ^= x << 13; x ^= x >> 17; x ^= x << 5   (mod 2^32)
    s    = isqrt(x)                            (1 <= s <= 65535)
    last = last + ceil((2 last + 3) (65536 - s) / (2 s))
This is the paper's step last += ceil((last + 1.5) (1/sqrt(u) - 1)) with u = x / 2^32, so
index i receives a key with probability about 1 / (1 + i/2); the gap is always >= 1.

Symbol layout on the wire (`Codec.size` bytes): KEYSUM (key_len) || CHKSUM (chk_len) ||
COUNT (count_len bytes, little-endian two's complement mod 2^(8 count_len); absent when 0).
Without a COUNT the decoder tells the side of a decoded key by asking `is_local(key)`.

Classes:
  Codec(key_len, chk_len, count_len)   field widths; item(key), symbol (de)serialisation
  Encoder(codec, m)                    prefix of m symbols of a set; add/remove in O(log m),
                                       extend(m2) (keeps the keys), to_bytes/from_bytes
  Decoder(codec, local, ...)           remote symbols in index order, batch by batch; peels;
                                       remote_keys / local_keys / done; bounded by limits;
                                       add_diff / known / residual / resolve for two-party
                                       protocols; split_pairs for one-key-each-way symbols
"""
from hashlib import sha256

from . import hotloops

try:
    from math import isqrt as _isqrt
except ImportError:                 # MicroPython: float estimate, then made exact
    from math import sqrt as _sqrt

    def _isqrt(x):
        s = int(_sqrt(x))
        while s * s > x:
            s -= 1
        while (s + 1) * (s + 1) <= x:
            s += 1
        return s

M32 = 0xFFFFFFFF
MAX_INDEX = 1 << 24       # no prefix or stream is ever this long (hosts cap far lower)
_FORMAT = 1               # version byte of Encoder.to_bytes


class CodedSymbolError(ValueError):
    """Malformed symbols or a bound hit; `reason` is a stable tag."""

    def __init__(self, reason, detail=None):
        super().__init__(reason if detail is None else "%s: %s" % (reason, detail))
        self.reason = reason


def key_hash(key):
    return sha256(key).digest()


def next_index(last, x):
    """One mapping step: (next index, next PRNG state) after index `last` with state `x`."""
    x ^= (x << 13) & M32
    x ^= x >> 17
    x ^= (x << 5) & M32
    s = _isqrt(x)
    return last + ((2 * last + 3) * (65536 - s) + 2 * s - 1) // (2 * s), x


def seed_of(h):
    return (h[0] | (h[1] << 8) | (h[2] << 16) | (h[3] << 24)) | 1


def indices(key, m):
    """Indices below m that `key` maps to (always starts with 0)."""
    out = []
    last, x = 0, seed_of(key_hash(key))
    while last < m:
        out.append(last)
        last, x = next_index(last, x)
    return out


class Codec:
    """Field widths of one kind of coded symbol.

    Args:
        key_len: bytes per key (8 for host SETU, 32 for GOSET feed ids).
        chk_len: checksum bytes (1..28); 3 gives 2^-24 false purity per test.
        count_len: COUNT bytes (0..4); 0 leaves the side to the decoder's key lookup.
    """

    def __init__(self, key_len=8, chk_len=3, count_len=1):
        if not 1 <= key_len <= 64 or not 1 <= chk_len <= 28 or not 0 <= count_len <= 4:
            raise ValueError("codec field widths")
        self.key_len = key_len
        self.chk_len = chk_len
        self.count_len = count_len
        self.sum_len = key_len + chk_len          # KEYSUM || CHKSUM, XORed as one field
        self.size = self.sum_len + count_len
        self._cmod = 1 << (8 * count_len) if count_len else 0

    def item(self, key):
        """(key || chk, PRNG seed) of a key: what an encoder XORs in, and where."""
        if len(key) != self.key_len:
            raise CodedSymbolError("bad key", "length %d" % len(key))
        h = key_hash(key)
        return bytes(key) + h[4:4 + self.chk_len], seed_of(h)

    def is_pure_sum(self, s):
        """True when the checksum part of a KEYSUM||CHKSUM field is its key's checksum."""
        kl = self.key_len
        return bytes(s[kl:]) == key_hash(bytes(s[:kl]))[4:4 + self.chk_len]

    def encode_count(self, c):
        n = self.count_len
        c %= self._cmod if n else 1
        return bytes((c >> (8 * i)) & 0xFF for i in range(n))

    def decode_count(self, b):
        """Signed value of a wire COUNT (two's complement)."""
        c = 0
        for i in range(len(b) - 1, -1, -1):
            c = (c << 8) | b[i]
        if self.count_len and c >= self._cmod >> 1:
            c -= self._cmod
        return c


class Encoder:
    """The first m coded symbols of a set, kept up to date key by key.

    Sums live in one bytearray (m * sum_len), counts in a list of ints. The keys are kept
    (with their seeds) so that the prefix can be extended; a caller that never extends can
    pass keep_keys=False. Adding a key the set already holds is the caller's error.
    """

    def __init__(self, codec, m=0, keep_keys=True):
        if not 0 <= m <= MAX_INDEX:
            raise CodedSymbolError("prefix too long", str(m))
        self.codec = codec
        self.m = m
        self.sums = bytearray(m * codec.sum_len)
        self.counts = [0] * m
        self.n = 0
        self.keys = {} if keep_keys else None     # key -> seed
        # key -> [first index >= m it maps to, PRNG state there, checksum]: extend()
        # resumes each key's walk instead of hashing and walking it again from 0
        self._walk = {}

    def _apply(self, item, seed, sign, lo, hi):
        cd = self.codec
        sl = cd.sum_len
        sums, counts = self.sums, self.counts
        last, x = 0, seed
        while last < hi:
            if last >= lo:
                hotloops.xor_into_at(sums, last * sl, item)
                counts[last] += sign
            last, x = next_index(last, x)
        return last, x

    def add(self, key):
        item, seed = self.codec.item(key)
        last, x = self._apply(item, seed, 1, 0, self.m)
        self.n += 1
        if self.keys is not None:
            key = bytes(key)
            self.keys[key] = seed
            self._walk[key] = [last, x, item[self.codec.key_len:]]

    def remove(self, key):
        item, seed = self.codec.item(key)
        self._apply(item, seed, -1, 0, self.m)
        self.n -= 1
        if self.keys is not None:
            self.keys.pop(bytes(key), None)
            self._walk.pop(bytes(key), None)

    def extend(self, m2):
        """Grow the prefix to m2 symbols (needs the keys)."""
        if m2 <= self.m:
            return
        if self.keys is None:
            raise CodedSymbolError("cannot extend", "keys not kept")
        if m2 > MAX_INDEX:
            raise CodedSymbolError("prefix too long", str(m2))
        lo = self.m
        self.sums.extend(bytes((m2 - lo) * self.codec.sum_len))
        self.counts.extend([0] * (m2 - lo))
        self.m = m2
        cd = self.codec
        sl = cd.sum_len
        sums, counts, walks = self.sums, self.counts, self._walk
        for key, seed in self.keys.items():
            w = walks.get(key)
            if w is None:           # restored by from_bytes: walk from 0 once
                chk = key_hash(key)[4:4 + cd.chk_len]
                last, x = self._apply(key + chk, seed, 1, lo, m2)
                walks[key] = [last, x, chk]
                continue
            last, x = w[0], w[1]
            if last < m2:
                item = key + w[2]
                while last < m2:
                    hotloops.xor_into_at(sums, last * sl, item)
                    counts[last] += 1
                    last, x = next_index(last, x)
                w[0], w[1] = last, x

    def symbol(self, i):
        """(KEYSUM||CHKSUM bytes, count int) of symbol i (i < m)."""
        sl = self.codec.sum_len
        return bytes(self.sums[i * sl:(i + 1) * sl]), self.counts[i]

    def encode(self, start, stop):
        """Wire bytes of symbols [start, stop)."""
        if not 0 <= start <= stop <= self.m:
            raise CodedSymbolError("bad range", "%d..%d of %d" % (start, stop, self.m))
        cd = self.codec
        sl = cd.sum_len
        if not cd.count_len:
            return bytes(self.sums[start * sl:stop * sl])
        out = bytearray()
        for i in range(start, stop):
            out += self.sums[i * sl:(i + 1) * sl]
            out += cd.encode_count(self.counts[i])
        return bytes(out)

    def to_bytes(self):
        """Serialised prefix (format, widths, m, n, sums, counts as i32): for persistence."""
        cd = self.codec
        out = bytearray((_FORMAT, cd.key_len, cd.chk_len, cd.count_len))
        out += self.m.to_bytes(4, "little") + (self.n & M32).to_bytes(4, "little")
        out += self.sums
        for c in self.counts:
            out += (c & M32).to_bytes(4, "little")
        return bytes(out)

    @classmethod
    def from_bytes(cls, codec, data, keys=None):
        """Inverse of to_bytes; `keys` (iterable) restores extendability."""
        if len(data) < 12 or data[0] != _FORMAT:
            raise CodedSymbolError("bad state", "header")
        if (data[1], data[2], data[3]) != (codec.key_len, codec.chk_len, codec.count_len):
            raise CodedSymbolError("bad state", "codec differs")
        m = int.from_bytes(data[4:8], "little")
        n = int.from_bytes(data[8:12], "little")
        sl = codec.sum_len
        if m > MAX_INDEX or len(data) != 12 + m * (sl + 4):
            raise CodedSymbolError("bad state", "length")
        enc = cls(codec, 0, keys is not None)
        enc.m = m
        enc.n = n - (1 << 32) if n & 0x80000000 else n
        enc.sums = bytearray(data[12:12 + m * sl])
        p = 12 + m * sl
        counts = []
        for i in range(m):
            c = int.from_bytes(data[p + 4 * i:p + 4 * i + 4], "little")
            counts.append(c - (1 << 32) if c & 0x80000000 else c)
        enc.counts = counts
        if keys is not None:
            for k in keys:
                enc.keys[bytes(k)] = codec.item(k)[1]
        return enc


class Decoder:
    """Decodes the difference between a remote stream and the local set.

    Args:
        codec: the agreed Codec.
        local: the local prefix, anything with .m, .symbol(i) and, when it must grow,
            .extend(m2) (an Encoder, or a host's persistent prefix).
        max_symbols: most symbols accepted (a bound from the local configuration).
        max_keys: most difference keys decoded before giving up.
        is_local: callable(key) -> bool; needed when the codec has no COUNT, used as a
            cross-check otherwise.

    After `add(start, data)`: `remote_keys` (keys only the remote holds), `local_keys`
    (keys only we hold), `done` (every received symbol is zero after peeling), `received`.
    Raises CodedSymbolError with reasons "out of order", "bad symbols", "too many symbols",
    "too many keys".
    """

    def __init__(self, codec, local, max_symbols, max_keys, is_local=None):
        if not codec.count_len and is_local is None:
            raise ValueError("a codec without COUNT needs is_local")
        self.codec = codec
        self.local = local
        self.max_symbols = min(max_symbols, MAX_INDEX)
        self.max_keys = max_keys
        self.is_local = is_local
        self.sums = bytearray()       # difference KEYSUM||CHKSUM, remote minus local
        self.counts = []              # difference counts (exact when the wire count is)
        self.received = 0
        self.remote_keys = []
        self.local_keys = []
        self._found = set()
        self._pending = {}            # next index -> list of [item, seed, sign, last, x]
        self._nonzero = 0
        self._dirty = set()           # symbols split_pairs has not looked at since change
        self._at = {}                 # split_pairs: index -> local keys mapping there
        self._walks = {}              # split_pairs: local key -> [next index, PRNG state]
        self._items = {}              # split_pairs: local key -> key || checksum

    @property
    def done(self):
        return self.received > 0 and self._nonzero == 0

    def _zero(self, i):
        sl = self.codec.sum_len
        if self.counts[i] % (self.codec._cmod or 1):
            return False
        s = self.sums
        for j in range(i * sl, (i + 1) * sl):
            if s[j]:
                return False
        return True

    def add(self, start, data, count=None):
        """Take remote symbols start, start+1, ... (wire bytes, whole symbols). Returns the
        number of keys newly decoded."""
        return self._add(start, data, count, True)

    def add_diff(self, start, data):
        """Like add, for symbols that are already differences (remote minus local), e.g. a
        peer's residual after its own peeling: nothing local is subtracted."""
        return self._add(start, data, None, False)

    def known(self, key, sign):
        """A difference key resolved elsewhere (sign +1 remote-only, -1 local-only): peeled
        from every symbol received from now on, never reported again."""
        if len(self._found) >= self.max_keys:
            raise CodedSymbolError("too many keys", "more than %d" % self.max_keys)
        key = bytes(key)
        if key in self._found:
            return
        self._found.add(key)
        item, seed = self.codec.item(key)
        last, x = 0, seed
        while last < self.received:
            last, x = next_index(last, x)
        self._park([item, seed, sign, last, x])

    def resolve(self, key, sign):
        """A difference key found by other means (e.g. the caller searched its own set for a
        key that leaves a received symbol pure): peeled from every symbol received and to
        come, reported like a decoded key, and peeling goes on. Returns how many keys were
        decoded as a result, this one included (0 if it was known already)."""
        key = bytes(key)
        if key in self._found:
            return 0
        before = len(self.remote_keys) + len(self.local_keys)
        item, seed = self.codec.item(key)
        queue = []
        self._take(key, sign, item, seed, queue)
        self._peel(queue)
        return len(self.remote_keys) + len(self.local_keys) - before

    def residual(self, start, stop):
        """Wire bytes of received difference symbols [start, stop) after peeling."""
        if not 0 <= start <= stop <= self.received:
            raise CodedSymbolError("bad range", "%d..%d of %d" % (start, stop, self.received))
        cd = self.codec
        sl = cd.sum_len
        out = bytearray()
        for i in range(start, stop):
            out += self.sums[i * sl:(i + 1) * sl]
            out += cd.encode_count(self.counts[i])
        return bytes(out)

    def is_zero(self, i):
        """Whether received difference symbol i is zero after peeling."""
        return self._zero(i)

    def _add(self, start, data, count, subtract):
        cd = self.codec
        size, sl = cd.size, cd.sum_len
        if start != self.received:
            raise CodedSymbolError("out of order", "symbol %d, expected %d" % (start, self.received))
        if len(data) % size:
            raise CodedSymbolError("bad symbols", "length %d" % len(data))
        k = len(data) // size
        if count is not None and count != k:
            raise CodedSymbolError("bad symbols", "count")
        if self.received + k > self.max_symbols:
            raise CodedSymbolError("too many symbols", "more than %d" % self.max_symbols)
        if subtract and self.local.m < self.received + k:
            self.local.extend(self.received + k)
        before = len(self.remote_keys) + len(self.local_keys)
        queue = []
        cmod = cd._cmod
        for j in range(k):
            i = self.received
            off = j * size
            self.sums += data[off:off + sl]
            lc = 0
            if subtract:
                ls, lc = self.local.symbol(i)
                hotloops.xor_into_at(self.sums, i * sl, ls)
            if cmod:
                c = (cd.decode_count(data[off + sl:off + size]) - lc) % cmod
                self.counts.append(c - cmod if c >= cmod >> 1 else c)
            else:
                self.counts.append(0)
            self.received = i + 1
            self._dirty.add(i)
            if not self._zero(i):
                self._nonzero += 1
            # keys decoded earlier that map here
            for e in self._pending.pop(i, ()):
                self._peel_one(i, e[0], e[2])
                e[3], e[4] = next_index(e[3], e[4])
                self._park(e)
            if not self._zero(i):
                queue.append(i)
        self._peel(queue)
        return len(self.remote_keys) + len(self.local_keys) - before

    def _park(self, e):
        if e[3] < self.max_symbols:
            lst = self._pending.get(e[3])
            if lst is None:
                self._pending[e[3]] = [e]
            else:
                lst.append(e)

    def _peel_one(self, i, item, sign):
        """Remove a key (sign +1 remote, -1 local) from received symbol i."""
        self._dirty.add(i)
        was_zero = self._zero(i)
        hotloops.xor_into_at(self.sums, i * self.codec.sum_len, item)
        self.counts[i] -= sign
        now_zero = self._zero(i)
        if was_zero and not now_zero:
            self._nonzero += 1
        elif now_zero and not was_zero:
            self._nonzero -= 1

    def _pure(self, i):
        """(key, sign) if received symbol i holds exactly one key, else None."""
        cd = self.codec
        sl = cd.sum_len
        c = self.counts[i]
        if cd.count_len and c != 1 and c != -1:
            return None
        s = self.sums[i * sl:(i + 1) * sl]
        if not cd.is_pure_sum(s):
            return None
        key = bytes(s[:cd.key_len])
        if key in self._found:
            return None                        # a false purity; its twin is peeled already
        sign = c
        if self.is_local is not None:
            mine = self.is_local(key)
            if not cd.count_len:
                sign = -1 if mine else 1
            elif mine != (sign < 0):
                return None
        return key, sign

    def _peel(self, queue):
        cd = self.codec
        while queue:
            i = queue.pop()
            got = self._pure(i)
            if got is None:
                continue
            key, sign = got
            item, seed = cd.item(key)
            # the key must map to i: a cheap second test against false purity
            if i in self._hits(seed):
                self._take(key, sign, item, seed, queue)

    def _hits(self, seed):
        """Indices below `received` of the key with this seed."""
        last, x = 0, seed
        hits = []
        while last < self.received:
            hits.append(last)
            last, x = next_index(last, x)
        return hits

    def _take(self, key, sign, item, seed, queue):
        """Record a difference key, peel it from the received symbols (queueing those that
        may now be pure) and remember it for the symbols to come."""
        if len(self._found) >= self.max_keys:
            raise CodedSymbolError("too many keys", "more than %d" % self.max_keys)
        self._found.add(key)
        (self.remote_keys if sign > 0 else self.local_keys).append(key)
        last, x = 0, seed
        while last < self.received:
            self._peel_one(last, item, sign)
            if not self._zero(last):
                queue.append(last)
            last, x = next_index(last, x)
        self._park([item, seed, sign, last, x])

    def split_pairs(self, budget=None):
        """Decode received symbols 1.. that hold one remote and one local key (COUNT 0):
        each local key of the prefix that maps there is tried as the local half, and the
        pair is taken when the other half's checksum agrees and it maps there too. Needs
        the local prefix's keys (an Encoder with keep_keys). Symbol 0 is left to the
        caller (every local key maps there: a whole-set test it can do once). For small
        two-sided differences this saves about a third of the symbols (5 + 5 keys:
        16.5 -> 11 on average; 25 + 25: 74 -> 50). Only symbols received or changed since
        the last call are tried, with each local key's index walk and checksum kept;
        `budget` caps the local keys tried per call (one hash each), higher symbols first
        (fewer keys map there, so a pair is likelier); the rest wait for the next call.
        Returns the number of keys newly decoded."""
        keys = getattr(self.local, "keys", None)
        if not keys or not self.codec.count_len:
            return 0
        cd = self.codec
        kl, sl = cd.key_len, cd.sum_len
        n = self.received
        at = self._pairs_index(keys, n)
        before = len(self.remote_keys) + len(self.local_keys)
        items = self._items
        left = -1 if budget is None else budget
        while self._dirty and left != 0:
            dirty = sorted(self._dirty, reverse=True)
            self._dirty = set()
            queue = []
            for j in range(len(dirty)):
                i = dirty[j]
                if i == 0 or i >= n or self.counts[i] != 0 or self._zero(i):
                    continue
                cands = at.get(i, ())
                if 0 <= left < len(cands):
                    for k in dirty[j:]:
                        self._dirty.add(k)     # not tried yet: next call
                    left = 0
                    break
                left -= len(cands) if left > 0 else 0
                s = self.sums[i * sl:(i + 1) * sl]
                for lk in cands:
                    if lk in self._found:
                        continue
                    item = items.get(lk)
                    if item is None:
                        item = items[lk] = lk + key_hash(lk)[4:4 + cd.chk_len]
                    rest = bytearray(s)
                    hotloops.xor_into(rest, item)
                    rk = bytes(rest[:kl])
                    if rk in keys or rk in self._found or not cd.is_pure_sum(rest):
                        continue
                    if not self._maps_to(rk, i):
                        continue
                    self._take(lk, -1, item, keys[lk], queue)
                    ritem, rseed = cd.item(rk)
                    self._take(rk, 1, ritem, rseed, queue)
                    break
            self._peel(queue)
        return len(self.remote_keys) + len(self.local_keys) - before

    def _pairs_index(self, keys, n):
        """index -> local keys mapping there, below n; walks kept to extend it later."""
        at, walks = self._at, self._walks
        for key, seed in keys.items():
            w = walks.get(key)
            if w is None:
                w = walks[key] = [0, seed]
            last, x = w
            while last < n:
                lst = at.get(last)
                if lst is None:
                    at[last] = [key]
                else:
                    lst.append(key)
                last, x = next_index(last, x)
            w[0], w[1] = last, x
        return at

    def _maps_to(self, key, i):
        last, x = 0, self.codec.item(key)[1]
        while last < i:
            last, x = next_index(last, x)
        return last == i
