"""SETU profile `rateless` (id 2): set union by rateless coded symbols, in 1-2 round trips.

The initiator opens with an RL_REQUEST (type MSG_RL_REQUEST) instead of the GNUnet
OPERATION_REQUEST: version, a 4-byte tag of the application id, its element count, then the
flags and sections of its first RL message: 72 bytes less than the OPERATION_REQUEST and a
separate RL message (the 64-byte application id alone is 64), spent on the first flight's
symbols and probes. After it, both
ends exchange only RL messages (type MSG_RL). A GNUnet peer never sees either. Coded symbols
are tinyssb.codedsym's with KEY 5 || CHK 3 bytes and no COUNT (rateless_prefix.CODEC): 8 bytes.

Flights (I initiator, R responder; see docs/setu.md "Profile rateless"):
  F1 I->R  RL_REQUEST{SYMBOLS 0..k1, PROBES}
  R subtracts its own symbols and peels (and, if that stalls with a small difference, searches
  its own keys: own_key_search).
   decoded:  F2 R->I  RL{DONE, ELEMENTS (R-only), WANTS (I-only keys)}
             F3 I->R  RL{ELEMENTS (wanted)}                     (only when R wanted any)
             F4 R->I  RL{DONE|STORED} (version 2: R stored them; else a STORED section)
   not yet:  F2 R->I  RL{ELEMENTS, WANTS (what R decoded so far), RESIDUAL 0..k1,
                         SYMBOLS k1..m of R's own set}  with m from R's estimate of the
                         difference (PROBES), or KEYS (all of R's keys) when that is cheaper;
                         no SYMBOLS (m = k1) when a small difference left a residual of
                         few distinct values (FIRST_REST_VALUES): I searches its own keys
             I peels; if that stalls, I searches its own keys (own_key_search), which
             decodes from ~0.9-1.1 symbols per difference instead of 1.35-1.7
             F3 I->R  RL{DONE, ELEMENTS (I-only), WANTS (R-only keys)}, or RL{MORE m2} when
                      I could not decode yet (one more exchange, counted in the stats)
             F4 R->I  RL{ELEMENTS (wanted)}                     (when I wanted any and,
                      version 2, STORED or FLAG_STORED when I sent elements: then always)
An RL message body is FLAGS (1 byte: bit 0 END = last message of the flight, bit 1 DONE =
the sender decoded everything, bit 2 STORED = it stored every element we sent) followed by
sections TAG (1) || LEN (varint) || PAYLOAD. The initiator is done only once the responder
confirmed what it stored of its elements (version 2; docs/setu.md).

Every bound comes from local configuration and local set sizes (Config.rl_*), never from
what the peer declares beyond the byzantine upper bound; every abort is SetuError(reason).
What the peer makes us hold (a flight until its END) is charged to the session's budget,
and what a search costs is bounded in CPU time, pairs and tests, however the symbols were
chosen (own_key_search).
"""
import math
import time
from hashlib import sha256

import numpy as np
from tinyssb import bipf, codedsym
from tinyssb.errors import WireError

from . import constants as C
from . import messages as M
from .errors import SetuError
from .profiles import element_hash
from .rateless_prefix import (AHEAD_SYMBOLS, CODEC, KEY_LEN, LOW_INDICES, SYMBOL_SIZE,
                              candidate_pairs, element_key)

# Sections of an RL message.
SEC_SYMBOLS = 1       # varint start || symbols
SEC_PROBES = 2        # 2 bits per probe index (probe_indices), 4 per byte, LSB first
SEC_RESIDUAL = 3      # varint start || varint count || varint nval || count refs of
                      # bit_length(nval) bits (0: zero, j: value j; none when nval = count)
                      # || the nval values
SEC_WANTS = 4         # 5-byte keys
SEC_ELEMENTS = 5      # varint element size || elements of that size
SEC_MORE = 6          # varint: send symbols up to this index
SEC_KEYS = 7          # all of the sender's keys (full-exchange fallback)
SEC_STORED = 8        # varint: how many of the elements it got from us in this operation
                      # the sender could not store (yet); see FLAG_STORED

FLAG_END = 1
FLAG_DONE = 2
FLAG_STORED = 4       # version 2: the sender stored every element it got from us

RL_VERSION = 2            # RL_REQUEST version: 1, this module's first flight (probe
                          # schedule); 2, the same, and the responder confirms what it
                          # stored of the initiator's elements (SEC_STORED)
RL_VERSIONS = (1, 2)      # versions a responder accepts
APP_TAG_LEN = 4           # bytes of the application id an RL_REQUEST carries

FIRST_SYMBOLS = 21        # k1: the first flight decodes d = 10 at R in ~99 % of runs at
                          # n = 10^4 (with R's own-key search; 17: ~97 %), the rest mostly from
                          # the residual (FIRST_REST_VALUES); bytes from the d = 1 bar (F1 <=
                          # 248: an element only I holds costs F1 + 52)
FIRST_SYMBOLS_MAX = LOW_INDICES   # most first-flight symbols a responder accepts (64):
                          # three times k1, and what the prefix's per-key index masks cover,
                          # so a search of a first flight never walks every key's mapping
PROBE_GROWTH = (1014, 1000)   # probe indices grow by 1.4 % from k1 (~55 bytes of 1-bit probes
                          # estimate d with a spread of ~0.20-0.22 in log; 2 %, ~41 bytes: 0.24)
PROBE_DENSE_END = 8192    # ... to here (d up to ~4000), then
PROBE_GROWTH_FAR = (2, 1) # doubling to the prefix end (d = 1 stays <= 300 B up to n = 10^6)
PROBE_BITS = 1            # bits per probe: 1 bit carries the most information per bit (0.41
                          # nats per bit and e-fold of index density; 2 bits 0.37, 8 bits 0.20)
PROBE_FALSE_EQUAL = 1 / (1 << PROBE_BITS)   # a differing symbol's probe matches by chance
STREAM_FACTOR = 1.8       # symbols streamed per estimated difference from STREAM_RISE[1] on,
STREAM_FACTOR_SMALL = 1.55  # ... up to STREAM_RISE[0], in between interpolated in log d.
STREAM_RISE = (100, 1000) # A stream of m symbols (first flight included) passes the issue's
                          # bars in a window (bench_setu.py --stream-per-diff): it decodes in
                          # 2 round trips (own-key search included) from ~1.05-1.1 d at
                          # d = 100, ~1.0 d at 300 and ~0.95 d at 1000, and stays within
                          # 2.0 x 32 d bytes up to ~3.69 d - 36 (each difference costs its
                          # element and half a want, 34.5 bytes; first flight and residual
                          # ~420). With the offset k1 + STREAM_EXTRA the window's log-centre
                          # is ~1.55 per estimated difference at d = 100 and ~1.8 at 1000; the
                          # estimate spreads ~0.20-0.22 in log d (bench_setu.py --estimates),
                          # its upper tail heavier than that at d = 100 (docs/setu.md)
STREAM_EXTRA = 8
DEFAULT_PREFIX = 16384    # symbols kept per set at least (probes reach 8 x d = 2000); extended on demand
PREFIX_PER_ELEMENTS = 8   # ... and one per 8 elements (probes must reach beyond 2 d)
MAX_RL_SYMBOLS = AHEAD_SYMBOLS   # most symbols one operation streams or accepts (2^20; a
                          # large set keeps them computed: a MORE up to them is free)
MAX_MORE_ROUNDS = 4       # undershoot recoveries before giving up (NEVER_DECODES)
NEVER_DECODES = "symbols never decode"   # the reason `tssb sync` answers with tssb2
SEARCH_MAX_TESTS = 1 << 22    # checksum tests per operation's own-key searches (~0.6 us each
                              # in CPython; at n = 10^6 a search near its limit, ~0.93
                              # symbols per difference, needed up to 2.9 x 10^6)
SEARCH_MAX_SECONDS = 2.0      # ... and seconds, of CPU time and of wall time (checked every
                              # SEARCH_TEST_BATCH tests and every batch of the walk; the driver
                              # runs RL messages in the session's worker thread)
SEARCH_MAX_PAIRS = 1 << 20    # candidate pairs one search keeps (the sparsest: ~40 bytes each
                              # while it runs; at 10^6 keys a difference of 1000 has ~2 x 10^6)
FIRST_SEARCH_SECONDS = 0.3    # CPU seconds of the responder's search of a first flight: the
                              # peer picks those symbols (any that stay nonzero make every key
                              # a candidate); from the index masks the candidates of 10^6 keys
                              # take ~20 ms, ~6 x 10^4 tests the rest
FIRST_SEARCH_PAIRS = 1 << 17  # ... and its pairs: the false-key budget stops a search of the
                              # first symbols after ~6 x 10^4 tests at 10^6 keys (fewer below)
SEARCH_TEST_BATCH = 2048      # tests between two looks at the clock
SEARCH_CHUNKS = 16            # a pass tests at most 1/16 of the budget, the symbols that
SEARCH_MIN_CHUNK = 4096       # changed first (each resolve peels on), then untested ones
SEARCH_MAX_PASSES = 96        # passes in all
SEARCH_MAX_FALSE = 2.0 ** -12   # ... and expected false keys per search (~2.4 x 10^-4; a
                              # test at index i passes by chance with 2^-24 x the share of keys
                              # that map to i and to nonzero symbols only, own_key_search; low
                              # indices, where the first flight's search tests, weigh most)
_FALSE_PER_TEST = 2.0 ** -(8 * CODEC.chk_len)
SEARCH_SHARE_FLOOR = 16       # a test counts at least 1/16 of its raw chance (own_key_search)
SEARCH_MIN_SYMBOLS = 0.75     # symbols per remaining key below which a search cannot succeed
                              # (measured: none decoded below ~0.8)
STREAM_ESTIMATE_POINTS = 512  # exact comparisons the initiator's estimate of d uses
FIRST_SEARCH_MAX = 2          # R searches after the first flight while the probes say d <= 2 k1
                              # (their estimate spreads 0.5-2x; beyond, a search cannot succeed)
FIRST_REST_VALUES = 8         # R streams nothing, sends only the residual, when the first
                              # flight stalled with a small estimate and its residual holds at
                              # most this many distinct nonzero values (a few keys left, mostly
                              # I's: I searches its own; d = 30 leaves 15-21 of 21)
SEARCH_MAX_LOAD = 3           # test a key only at symbols holding about this many keys or fewer
MAX_FLIGHT_SECTIONS = 4096    # sections buffered until a flight's END (honest: ~1 per message)
MAX_FLIGHT_BYTES = 64 << 20   # bytes buffered until END (elements are taken as they arrive):
                              # 8 MiB of symbols at MAX_RL_SYMBOLS, or a key list; each byte
                              # is also charged to the session's "received_bytes"
MAX_FIRST_FLIGHT = C.MAX_MESSAGE_SIZE   # a first flight fits its RL_REQUEST (<= 64 symbols)
SECTION_COST = 64             # bytes charged per buffered section besides its payload
_MSG_ROOM = C.MAX_MESSAGE_SIZE - C.HEADER_SIZE - 1 - 8   # payload room per message


# -- wire --------------------------------------------------------------------------------

_varint = bipf.varint_encode


def _read_varint(b, p):
    try:
        return bipf.varint_decode(b, p)
    except WireError:
        raise SetuError("bad message", "varint")


def _section(tag, payload):
    return bytes((tag,)) + _varint(len(payload)) + payload


class Flight:
    """Collects sections and packs them into RL messages of at most 64 KiB."""

    def __init__(self):
        self.sections = []

    def add(self, tag, payload):
        self.sections.append(_section(tag, payload))

    def symbols(self, start, data):
        per = (_MSG_ROOM - 8) // SYMBOL_SIZE * SYMBOL_SIZE
        for off in range(0, len(data), per):
            self.add(SEC_SYMBOLS, _varint(start + off // SYMBOL_SIZE) + data[off:off + per])

    def keys(self, tag, keys):
        self.key_bytes(tag, b"".join(keys))

    def key_bytes(self, tag, data):
        """Keys given as their bytes back to back (a key list of 10^6 is 5 MB, no objects)."""
        per = (_MSG_ROOM - 8) // KEY_LEN * KEY_LEN
        if not data and tag == SEC_KEYS:
            self.add(tag, b"")            # "I hold nothing" is an answer too
        for i in range(0, len(data), per):
            self.add(tag, data[i:i + per])

    def elements(self, elements):
        by_size = {}
        for e in elements:
            by_size.setdefault(len(e), []).append(e)
        for size in sorted(by_size):
            els = by_size[size]
            per = max(1, (_MSG_ROOM - 8) // size)
            for i in range(0, len(els), per):
                self.add(SEC_ELEMENTS, _varint(size) + b"".join(els[i:i + per]))

    def messages(self, flags):
        out, cur = [], []
        size = 0
        for s in self.sections:
            if cur and size + len(s) > _MSG_ROOM:
                out.append(cur)
                cur, size = [], 0
            cur.append(s)
            size += len(s)
        out.append(cur)
        msgs = []
        for i, secs in enumerate(out):
            f = flags if i == len(out) - 1 else flags & ~(FLAG_END | FLAG_DONE | FLAG_STORED)
            msgs.append(M._frame(C.MSG_RL, bytes((f,)) + b"".join(secs)))
        return msgs


def parse(buf):
    """(flags, [(tag, payload)]) of an RL message; raises SetuError("bad message")."""
    buf = bytes(buf)
    if len(buf) < C.HEADER_SIZE + 1 or len(buf) > C.MAX_MESSAGE_SIZE:
        raise SetuError("bad message", "rl length")
    size = int.from_bytes(buf[:2], "big")
    if size != len(buf) or int.from_bytes(buf[2:4], "big") != C.MSG_RL:
        raise SetuError("bad message", "rl header")
    flags = buf[4]
    if flags & ~(FLAG_END | FLAG_DONE | FLAG_STORED) or flags & FLAG_STORED and not flags & FLAG_END:
        raise SetuError("bad message", "rl flags")
    p = 5
    secs = []
    while p < len(buf):
        tag = buf[p]
        n, p = _read_varint(buf, p + 1)
        if p + n > len(buf) or not SEC_SYMBOLS <= tag <= SEC_STORED:
            raise SetuError("bad message", "rl section")
        secs.append((tag, buf[p:p + n]))
        p += n
    return flags, secs


def app_tag(app_id):
    """The RL_REQUEST's application tag: the first APP_TAG_LEN bytes of the 64-byte id (a
    hash already: GNUnet application ids are HashCodes, ours is SHA-512 of a name)."""
    return bytes(app_id[:APP_TAG_LEN])


def request(tag, element_count, first):
    """RL_REQUEST = MSG SIZE || MSG TYPE || VERSION (1) || APP TAG (4) || ELEMENT COUNT
    (varint) || the FLAGS and sections of `first` (an encoded RL message)."""
    return M._frame(C.MSG_RL_REQUEST, bytes((RL_VERSION,)) + tag + _varint(element_count)
                    + bytes(first[C.HEADER_SIZE:]))


def parse_request(buf):
    """(version, application tag, element count, the first RL message re-framed) of an
    RL_REQUEST; raises SetuError("bad message"). The RL part is checked by parse()."""
    buf = bytes(buf)
    if len(buf) < C.HEADER_SIZE + 1 + APP_TAG_LEN + 2 or len(buf) > C.MAX_MESSAGE_SIZE:
        raise SetuError("bad message", "rl request length")
    if int.from_bytes(buf[:2], "big") != len(buf) \
            or int.from_bytes(buf[2:4], "big") != C.MSG_RL_REQUEST:
        raise SetuError("bad message", "rl request header")
    p = C.HEADER_SIZE
    version, tag = buf[p], buf[p + 1:p + 1 + APP_TAG_LEN]
    count, p = _read_varint(buf, p + 1 + APP_TAG_LEN)
    if p >= len(buf):
        raise SetuError("bad message", "rl request without flags")
    return version, tag, count, M._frame(C.MSG_RL, buf[p:])


def _split_keys(payload):
    if not payload or len(payload) % KEY_LEN:
        raise SetuError("bad message", "key list length")
    return [payload[i:i + KEY_LEN] for i in range(0, len(payload), KEY_LEN)]


def _keys_from_bytes(data):
    """5-byte little-endian keys, back to back, as a uint64 array."""
    a = np.zeros((len(data) // KEY_LEN, 8), dtype=np.uint8)
    a[:, :KEY_LEN] = np.frombuffer(data, dtype=np.uint8).reshape(-1, KEY_LEN)
    return a.view("<u8").ravel().astype(np.uint64)


def _key_bytes(arr):
    """A uint64 key array back to 5-byte keys, back to back."""
    return arr.astype("<u8").view(np.uint8).reshape(-1, 8)[:, :KEY_LEN].tobytes()


def _key_list(arr):
    b = _key_bytes(arr)
    return [b[i:i + KEY_LEN] for i in range(0, len(b), KEY_LEN)]


def _unique(arr):
    """Sorted distinct values (np.unique's hashing is slower for large arrays)."""
    a = np.sort(arr)
    return a[np.concatenate(([True], a[1:] != a[:-1]))] if len(a) else a


def _split_elements(payload):
    size, p = _read_varint(payload, 0)
    body = payload[p:]
    if not 1 <= size <= C.MAX_ELEMENT_SIZE or not body or len(body) % size:
        raise SetuError("bad message", "element section")
    return [body[i:i + size] for i in range(0, len(body), size)]


def prefix_length(n):
    """Symbols kept for a set of n elements: DEFAULT_PREFIX, or n / 8 rounded up to 2^j."""
    m = DEFAULT_PREFIX
    while m * PREFIX_PER_ELEMENTS < n and m < MAX_RL_SYMBOLS:
        m *= 2
    return m


def probe_indices(k1, m):
    """Probe indices below m: k1, then growing by PROBE_GROWTH up to PROBE_DENSE_END (where
    differences are common and the estimate sizes a stream) and by PROBE_GROWTH_FAR beyond."""
    out = []
    g = k1
    while g < m:
        out.append(g)
        num, den = PROBE_GROWTH if g < PROBE_DENSE_END else PROBE_GROWTH_FAR
        g = max(g + 1, g * num // den)
    return out


def probe_value(sym_int):
    return sym_int >> (64 - PROBE_BITS)      # top bits of the last CHKSUM byte


def pack_probes(values):
    out = bytearray((len(values) * PROBE_BITS + 7) // 8)
    for j, v in enumerate(values):
        bit = j * PROBE_BITS
        out[bit // 8] |= v << (bit % 8)
    return bytes(out)


def unpack_probes(data, count):
    mask = (1 << PROBE_BITS) - 1
    return [(data[(j * PROBE_BITS) // 8] >> ((j * PROBE_BITS) % 8)) & mask for j in range(count)]


def pack_residual(start, syms):
    """RESIDUAL payload for difference symbols start, start+1, ... (8-byte values): each
    distinct nonzero value once, and per symbol a reference of bit_length(values) bits (0 for
    a zero symbol). A stalled small difference leaves few distinct values (two keys that map
    to the same first symbols leave one); when every symbol holds its own value (a large
    difference) the references are implied and left out."""
    vals, refs, where = [], [], {}
    for v in syms:
        if not any(v):
            refs.append(0)
            continue
        j = where.get(v)
        if j is None:
            vals.append(v)
            j = where[v] = len(vals)
        refs.append(j)
    w = _ref_bits(len(vals), len(refs))
    acc = 0
    for n, r in enumerate(refs if w else ()):
        acc |= r << (n * w)
    packed = acc.to_bytes((len(refs) * w + 7) // 8, "little")
    return _varint(start) + _varint(len(refs)) + _varint(len(vals)) + bytes(packed) + b"".join(vals)


def _ref_bits(nval, count):
    """Bits per reference: none when every symbol holds its own value (they come in order of
    first appearance, so the references are 1, 2, ... count), as after a large difference."""
    return 0 if nval == count else nval.bit_length()


def unpack_residual(p, max_count):
    """(start, symbols as bytes) of a RESIDUAL payload; count bounded by `max_count`."""
    start, q = _read_varint(p, 0)
    count, q = _read_varint(p, q)
    nval, q = _read_varint(p, q)
    if count > max_count:
        raise SetuError("bad symbols", "residual of %d symbols" % count)
    if nval > count:
        raise SetuError("bad message", "residual values")
    w = _ref_bits(nval, count)
    nb = (count * w + 7) // 8
    if len(p) - q != nb + nval * SYMBOL_SIZE:
        raise SetuError("bad message", "residual length")
    refs = int.from_bytes(p[q:q + nb], "little")
    vals = p[q + nb:]
    out = bytearray(count * SYMBOL_SIZE)
    mask = (1 << w) - 1
    for i in range(count):
        j = (refs >> (i * w)) & mask if w else (i + 1 if nval == count else 0)
        if j > nval:
            raise SetuError("bad message", "residual reference")
        if j:
            out[i * SYMBOL_SIZE:(i + 1) * SYMBOL_SIZE] = vals[(j - 1) * SYMBOL_SIZE:j * SYMBOL_SIZE]
    return start, bytes(out)


def estimate_difference(observations, lo, hi):
    """Maximum-likelihood size of the difference from symbol comparisons.

    Args:
        observations: (index, matched, false_match) triples: symbol `index` of both sets
            compared equal or not; a symbol with d differing keys in play is unchanged with
            probability q = (1 - p)^d, p = 1 / (1 + i/2) (the mapping density), and a
            changed one still compares equal with probability false_match.
        lo, hi: the range to search.
    Returns:
        the estimate (int, lo <= d <= hi).
    """
    if hi <= lo or not observations:
        return lo
    ds = np.unique(np.geomspace(max(lo, 1), hi, 400).astype(np.int64))
    idx = np.array([o[0] for o in observations], dtype=np.float64)
    matched = np.array([bool(o[1]) for o in observations])
    fe = np.array([o[2] for o in observations], dtype=np.float64)
    p = np.minimum(2.0 / (idx + 2.0), 1.0 - 1e-12)      # index 0 holds every key
    lq = np.log1p(-p)                                    # log(1 - p) per observation
    q = np.exp(np.outer(ds, lq))                         # [d, observation]
    pm = q + (1.0 - q) * fe
    ll = np.where(matched, np.log(np.maximum(pm, 1e-300)),
                  np.log(np.maximum(1.0 - pm, 1e-300))).sum(axis=1)
    return int(max(lo, min(hi, ds[int(np.argmax(ll))])))


def stream_factor(d_est):
    """Symbols per estimated difference: STREAM_FACTOR_SMALL up to STREAM_RISE[0],
    STREAM_FACTOR from STREAM_RISE[1], in between linear in log d."""
    lo, hi = STREAM_RISE
    if d_est <= lo:
        return STREAM_FACTOR_SMALL
    if d_est >= hi:
        return STREAM_FACTOR
    t = math.log(d_est / lo) / math.log(hi / lo)
    return STREAM_FACTOR_SMALL + t * (STREAM_FACTOR - STREAM_FACTOR_SMALL)


def stream_length(k1, d_est):
    """Symbols R streams in all (the first flight's k1 included) for an estimated difference."""
    return k1 + int(stream_factor(d_est) * d_est) + STREAM_EXTRA


def _residual_sums(dec):
    """The decoder's difference symbols as uint64 (a copy: the decoder's buffer grows)."""
    return np.frombuffer(bytes(dec.sums), dtype="<u8")


class Allowance:
    """How long a search may run: `cpu_s` seconds of the calling thread's CPU time and
    `wall_s` seconds of wall time (None: no bound). `over()` is checked inside the work
    (between batches of keys and of tests); once it says True, `hit` stays True."""

    def __init__(self, cpu_s=None, wall_s=None):
        self._cpu_end = None if cpu_s is None else time.thread_time() + cpu_s
        self._wall_end = None if wall_s is None else time.monotonic() + wall_s
        self.hit = False

    def over(self):
        if not self.hit:
            self.hit = (self._cpu_end is not None and time.thread_time() > self._cpu_end) \
                or (self._wall_end is not None and time.monotonic() > self._wall_end)
        return self.hit


def own_key_search(dec, prefix, max_tests, d_est, limit=None, max_false=None, max_pairs=None):
    """Free a stalled decoder with our own keys (peeling with side information).

    A key only we hold that is still in the difference leaves every symbol it maps to
    nonzero, and where it shares a symbol with exactly one other key, taking it out leaves
    that key pure. So: take the candidate keys (all their indices nonzero: one vectorised
    walk over our keys), and test each at its indices where a symbol holds about
    SEARCH_MAX_LOAD keys or fewer (index >= 2 r / load for the r keys still unfound of d_est;
    the bound moves down as keys are found; a candidate's highest index always), sparsest
    first: the rest must be one key, ours or the peer's, whose checksum matches and that maps
    there (one SHA-256 per test).
    Each hit is resolved (codedsym.Decoder.resolve), which peels on; passes of at most
    max_tests / SEARCH_CHUNKS tests take the symbols that changed first (the peeling wave),
    then pairs not tested yet, until none is left or `max_tests` checksum tests are spent.
    `limit` (an Allowance) is checked between batches of the walk and of SEARCH_TEST_BATCH
    tests; `max_pairs` keeps only the sparsest pairs (the walk's memory and the tests stay
    bounded whatever the symbols say).
    This brings the stream a decode needs from about 1.4-1.7 symbols per difference down
    to about 0.9-1.1 (measured; docs/setu.md).

    Returns:
        (keys resolved, tests made).
    """
    items, seeds = prefix.keys_items()
    if max_false is None:
        max_false = SEARCH_MAX_FALSE
    if dec.done or not len(items) or max_tests <= 0:
        return 0, 0
    over = limit.over if limit is not None else None

    def lo_for(found):
        return max(0, int(2 * (d_est - found) / SEARCH_MAX_LOAD) - 2)

    lo0 = lo_for(d_est // 2)
    pairs = candidate_pairs(items, seeds, _residual_sums(dec) != 0, lo0, max_pairs, over,
                            prefix.low_masks())
    pos, idx = pairs.pos, pairs.idx
    if not len(pos) or not pairs.complete:
        return 0, 0
    always = idx < lo0                                # a candidate's top index: always tested
    # A test at index i resolves a false key when the rest passes the checksum (2^-24), maps
    # to i and to nonzero symbols only. Our own keys are random to the mapping: the share of
    # them that are candidates with index i estimates the last two (raw: ~2 / (i + 2)); at
    # least 1 / SEARCH_SHARE_FLOOR of the raw chance (a small sample, or pairs below lo0
    # that are not all recorded), never more.
    raw = 2.0 / (idx + 2.0)
    seen = pairs.counts[idx] / len(items)
    weight = np.minimum(raw, np.maximum(seen, raw / SEARCH_SHARE_FLOOR)) * _FALSE_PER_TEST
    tested = np.zeros(len(pos), dtype=np.uint64)     # symbol value at the last test
    gone = np.zeros(len(items), dtype=bool)          # keys resolved
    mask = (1 << (8 * KEY_LEN)) - 1
    found = tests = 0
    risk = 0.0
    chunk = max(SEARCH_MIN_CHUNK, max_tests // SEARCH_CHUNKS)
    for _ in range(SEARCH_MAX_PASSES):
        cur = _residual_sums(dec)[idx]
        known = len(dec.remote_keys) + len(dec.local_keys)
        live = (cur != 0) & ((idx >= lo_for(known)) | always) & ~gone[pos]
        # symbols a resolve changed first (the peeling wave), then untested pairs
        todo = np.concatenate((np.nonzero(live & (tested != 0) & (cur != tested))[0],
                               np.nonzero(live & (tested == 0))[0]))
        todo = todo[:min(chunk, max_tests - tests)]
        # keep the expected false keys (weight, above) in budget
        cum = risk + np.cumsum(weight[todo])
        todo = todo[:int(np.searchsorted(cum, max_false, side="right"))]
        if not len(todo):
            break
        for b in range(0, len(todo), SEARCH_TEST_BATCH):
            if over is not None and over():
                return found, tests
            part = todo[b:b + SEARCH_TEST_BATCH]
            risk = float(cum[b + len(part) - 1])
            tests += len(part)
            tested[part] = cur[part]
            got = _test_pairs(dec, items, pos, idx, cur, part, gone, mask)
            found += got
            if dec.done:
                return found, tests
        if tests >= max_tests:
            break
    return found, tests


def _test_pairs(dec, items, pos, idx, cur, todo, gone, mask):
    """One batch of own-key tests (see own_key_search). Returns the keys resolved."""
    found = 0
    rb = (cur[todo] ^ items[pos[todo]]).astype("<u8").tobytes()
    pure = [sha256(rb[o:o + KEY_LEN]).digest()[4:4 + CODEC.chk_len] == rb[o + KEY_LEN:o + 8]
            for o in range(0, len(rb), 8)]
    for t in np.nonzero(pure)[0]:
        k = todo[t]
        i = int(idx[k])
        if int.from_bytes(dec.sums[i * SYMBOL_SIZE:(i + 1) * SYMBOL_SIZE], "little") \
                != int(cur[k]):
            continue                  # changed since: tested again next pass
        ys = codedsym.indices(rb[8 * t:8 * t + KEY_LEN], dec.received)
        if i not in ys or any(dec.is_zero(j) for j in ys):
            continue                  # a false purity: the rest does not map here, or
                                      # not to nonzero symbols only, as a key of the
                                      # difference does
        found += dec.resolve((int(items[pos[k]]) & mask).to_bytes(KEY_LEN, "little"), -1)
        gone[pos[k]] = True
        if dec.done:
            break
    return found


def search_when_stalled(dec, prefix, max_tests, d_est, limit=None, max_pairs=None):
    """Run own_key_search if the residual is within its reach: the received symbols are at
    least SEARCH_MIN_SYMBOLS per key of the difference (d_est, estimated); tests start where
    a symbol of the fresh difference holds about SEARCH_MAX_LOAD keys (index ~ 2 d / load).
    Returns (keys resolved, tests made)."""
    if dec.done or dec.received < SEARCH_MIN_SYMBOLS * d_est:
        return 0, 0
    return own_key_search(dec, prefix, max_tests, d_est, limit, max_pairs=max_pairs)


# -- the profile's state machine ---------------------------------------------------------

I_WAIT_F2 = "rl_wait_reply"
I_WAIT_ELEMENTS = "rl_wait_elements"
I_WAIT_MORE = "rl_wait_more"
R_WAIT_F1 = "rl_wait_symbols"
R_WAIT_F3 = "rl_wait_final"
R_WAIT_ELEMENTS = "rl_wait_elements"
I_WAIT_STORED = "rl_wait_stored"
FINISHED = "finished"

# state -> handler of a whole flight (its END received). I_WAIT_ELEMENTS and R_WAIT_ELEMENTS
# share a name: one side's final flight (the wanted elements, then the confirmation).
TRANSITIONS = {
    I_WAIT_F2: "_i_on_f2",
    I_WAIT_MORE: "_i_on_more_symbols",
    I_WAIT_ELEMENTS: "_on_final_elements",
    I_WAIT_STORED: "_on_final_elements",
    R_WAIT_F1: "_r_on_f1",
    R_WAIT_F3: "_r_on_f3",
}


class RatelessMachine:
    """One rateless operation for one side; Reconciler delegates to it after the profile is
    agreed. `receive(buf)` returns messages to send; SetuError aborts.

    Args:
        eset: the local set: an ElementSet, or anything with its rateless interface
            (len, etype, check, has, add, rateless, rateless_elements, has_rateless_key;
            optionally outstanding: received elements not stored), e.g.
            rateless_store.RatelessStoreSet.
        initiator: True for I.
        cfg: machine.Config (rl_first_symbols, rl_prefix, rl_max_symbols, upper_bound).
        stats: the Reconciler's stats dict, updated in place.
        remote_size: R: the element count from the RL_REQUEST (already bounded).
        budget: the session's tssb.session.budget.Budget (flights, strikes) or None.
        version: the RL_REQUEST version (R: the initiator's; 2 confirms what R stored).
    """

    def __init__(self, eset, initiator, cfg, stats, remote_size=None, budget=None,
                 version=RL_VERSION):
        self.eset = eset
        self.budget = budget        # the session's Budget (None: no accounting)
        self.version = version      # 2: the responder confirms what it stored
        self.initiator = initiator
        self.cfg = cfg
        self.stats = stats
        self.remote_size = remote_size
        self.state = None
        self.n0 = len(eset)
        self.prefix = eset.rateless(cfg.rl_prefix or prefix_length(len(eset)))
        self.k1 = min(cfg.rl_first_symbols, self.prefix.m)
        self.dec = None
        self._flight = []           # sections (but elements) of the flight being received
        self._flight_bytes = 0      # ... their bytes, charged to received_bytes
        self._flight_keys = []      # keys of the elements the flight brought (taken at once)
        self._elements_in = 0       # elements the peer sent in this operation
        self._elements_out = 0      # ... and we sent
        self._wanted_by_me = set()  # keys I asked for and have not received
        self._sent_symbols = 0
        self._more_rounds = 0
        self._stream_end = 0
        self._given = set()         # keys whose elements we sent
        self._early_wants = []      # I: keys R wanted before it had decoded everything
        self._recv_keys = set()     # keys of elements received in this operation
        self._raw = []              # (start, equal to ours per symbol) of symbols received
        self._search_s = 0.0        # CPU seconds our searches took in this operation
        stats.update(mode="rateless", profile="rateless", symbols_sent=0, symbols_recv=0,
                     assisted=0, search_tests=0, search_limited=False,
                     peer_outstanding=None,
                     prefix=self.prefix.m, prefix_extended=False, fallback=None, rounds=0,
                     flights=0, round_trips=0, more_rounds=0, estimate=None)

    # -- helpers ---------------------------------------------------------------------

    def _limits(self):
        """(max symbols, max keys) accepted from the peer: from our size and the bound."""
        rs = self.cfg.upper_bound if self.remote_size is None else \
            min(self.remote_size, self.cfg.upper_bound)      # I never learns R's size
        total = self.n0 + rs
        return (min(self.cfg.rl_max_symbols, 3 * total + 64), total + 16)

    def _own_keys(self):
        """Our keys when the operation began, sorted, once each (uint64 array)."""
        items, _ = self.prefix.keys_items()
        return _unique(items & np.uint64((1 << (8 * KEY_LEN)) - 1))

    def _is_local(self, key):
        # the set as it was when the operation began: received elements do not count
        return key not in self._recv_keys and self.eset.has_rateless_key(key)

    def _decoder(self):
        ms, mk = self._limits()
        return codedsym.Decoder(CODEC, self.prefix, ms, mk, self._is_local)

    def _feed(self, fn, *args):
        try:
            return fn(*args)
        except codedsym.CodedSymbolError as e:
            if e.reason in ("too many symbols", "too many keys"):
                raise SetuError(NEVER_DECODES, str(e))
            raise SetuError("bad symbols", str(e))

    def _search(self, d_est, first=False):
        """Own-key search on a stalled decoder, within the configured budget: for the
        responder's search of a first flight (`first`) rl_first_search_s of CPU time and
        rl_first_search_pairs, else what is left of rl_search_s and rl_search_tests. Each
        recent limit hit by the peer's key halves its CPU time (Budget.search_share)."""
        if self.dec.done:
            return
        cfg, st = self.cfg, self.stats
        share = self.budget.search_share() if self.budget is not None else 1.0
        left = max(0.0, cfg.rl_search_s - self._search_s)
        cpu = min(left, cfg.rl_first_search_s if first else left) * share
        limit = Allowance(cpu, left)
        t0 = time.thread_time()
        found, tests = search_when_stalled(
            self.dec, self.prefix, cfg.rl_search_tests - st["search_tests"], d_est, limit,
            cfg.rl_first_search_pairs if first else cfg.rl_search_pairs)
        self._search_s += time.thread_time() - t0
        st["assisted"] += found
        st["search_tests"] += tests
        if limit.hit:
            st["search_limited"] = True
            if self.budget is not None:
                self.budget.strike("search")    # the key's next operations get less

    def _ensure_prefix(self, m):
        if m > self.prefix.m:
            self.prefix.extend(m)
            self.stats["prefix_extended"] = True
            self.stats["prefix"] = self.prefix.m

    def _elements_for(self, keys):
        out = []
        for k in keys:
            out += self.eset.rateless_elements(k)
        return out

    def _check_wants(self, keys):
        """Wanted keys must be ours, each once, and no more than a decode can yield."""
        mk = self._limits()[1]
        for k in keys:
            if k in self._given:
                raise SetuError("duplicate want")
            if not self._is_local(k):
                raise SetuError("unknown key wanted")
            self._given.add(k)
            if len(self._given) > min(mk, 2 * self._sent_symbols + 16):
                raise SetuError("too many wants")

    def _take_elements(self, elements, allowed):
        """Check and add received elements; `allowed` (set of keys) or None for "any new".
        Returns the elements' keys, in order."""
        keys = []
        for data in elements:
            if self.eset.check is not None and not self.eset.check(data):
                raise SetuError("element rejected by application check")
            h = element_hash(self.eset.etype, data)
            k = element_key(h)
            keys.append(k)
            if allowed is not None and k not in allowed:
                raise SetuError("unrequested element")
            if self.eset.has(h):
                if allowed is None:
                    raise SetuError("unrequested element", "already held")
                continue        # a 5-byte key shared with an element we hold: harmless
            self._recv_keys.add(k)
            self.eset.add(data, h)
            self.stats["elements_recv"] += 1
        if allowed is not None:
            allowed.difference_update(keys)
        return keys

    def _send_elements(self, flight, keys):
        els = self._elements_for(keys)
        flight.elements(els)
        self.stats["elements_sent"] += len(els)
        self._elements_out += len(els)

    def _stored(self, flight):
        """Version 2, after the initiator's final flight: the flags saying we stored all
        its elements (FLAG_STORED), or a STORED section with how many we could not store
        (yet: they wait for entries we lack, or were dropped). Returns the extra flags."""
        if self.version < 2 or not self._elements_in:
            return 0
        outstanding = getattr(self.eset, "outstanding", lambda: 0)()
        if not outstanding:
            return FLAG_STORED
        flight.add(SEC_STORED, _varint(outstanding))
        return 0

    @property
    def confirming(self):
        return self.initiator and self.version >= 2 and self._elements_out > 0 \
            and self.state in (I_WAIT_ELEMENTS, I_WAIT_STORED)

    def _final_state(self, wants):
        """I, after its final flight: wait for the wanted elements, and (version 2) for
        the responder's confirmation of what it stored of ours."""
        if self._elements_out and self.version >= 2:
            return I_WAIT_ELEMENTS if wants else I_WAIT_STORED
        return I_WAIT_ELEMENTS if wants else FINISHED

    def _flight_done(self):
        # flights alternate strictly, so the flights seen so far give the round trips
        st = self.stats
        st["flights"] += 1
        st["round_trips"] = (st["flights"] + 1) // 2

    def _out(self, flight, flags):
        self.stats["rounds"] += 1
        self._flight_done()
        return flight.messages(flags)

    def _symbols(self, flight, start, stop):
        self._ensure_prefix(stop)
        flight.symbols(start, self.prefix.encode(start, stop))
        self._sent_symbols += stop - start
        self.stats["symbols_sent"] += stop - start

    # -- input -----------------------------------------------------------------------

    def receive(self, buf):
        if len(buf) >= C.HEADER_SIZE and int.from_bytes(buf[2:4], "big") == C.MSG_RL_REQUEST:
            raise SetuError("unexpected message", "RL_REQUEST in state %s" % self.state)
        flags, secs = parse(buf)
        name = TRANSITIONS.get(self.state)
        if name is None:
            raise SetuError("unexpected message", "RL in state %s" % self.state)
        for tag, payload in secs:
            if tag == SEC_ELEMENTS:
                self._elements_now(payload)
            else:
                self._hold(tag, payload)
        if not flags & FLAG_END:
            if flags & FLAG_DONE:
                raise SetuError("bad message", "DONE without END")
            return []
        secs = self._flight
        self.drop_flight()
        self._flight_done()
        return getattr(self, name)(flags, secs)

    def close(self):
        """Let go of the set, its prefix and the decoder (see Reconciler.close)."""
        self.drop_flight()
        self.eset = self.prefix = self.dec = None
        self._raw, self._recv_keys, self._given = [], set(), set()

    def _hold(self, tag, payload):
        """Buffer a section until the flight's END: within the flight bound of our state
        and charged to the session's budget (received_bytes)."""
        cost = len(payload) + SECTION_COST
        most = MAX_FIRST_FLIGHT if self.state == R_WAIT_F1 else MAX_FLIGHT_BYTES
        if len(self._flight) >= MAX_FLIGHT_SECTIONS or self._flight_bytes + cost > most:
            raise SetuError("flood", "flight of %d sections, %d bytes"
                            % (len(self._flight) + 1, self._flight_bytes + cost))
        if self.budget is not None:
            self.budget.take("received_bytes", cost)      # BudgetExceeded: cut off
        self._flight.append((tag, payload))
        self._flight_bytes += cost

    def drop_flight(self):
        """Forget the flight being received (its END, or the operation ended) and give
        its bytes back to the budget."""
        if self.budget is not None and self._flight_bytes:
            self.budget.give("received_bytes", self._flight_bytes)
        self._flight, self._flight_bytes = [], 0

    def _elements_now(self, payload):
        """An ELEMENTS section, taken as it arrives (each element is checked and charged as
        unverified by the set): wanted ones in the final states, else new ones within the
        unsolicited bound."""
        elements = _split_elements(payload)
        if self.state in (I_WAIT_ELEMENTS, R_WAIT_ELEMENTS):
            allowed = self._wanted_by_me
        elif self.state in (I_WAIT_F2, R_WAIT_F3):
            allowed = None
            self._bound_unsolicited(len(self._flight_keys) + len(elements))
        else:
            raise SetuError("unexpected section", "elements in state %s" % self.state)
        self._elements_in += len(elements)
        self._flight_keys += self._take_elements(elements, allowed)

    @staticmethod
    def _only(secs, allowed):
        for tag, _ in secs:
            if tag not in allowed:
                raise SetuError("unexpected section", "tag %d" % tag)

    # -- initiator -------------------------------------------------------------------

    def start(self, app_id):
        """F1: the RL_REQUEST with the first symbols and the probes."""
        f = Flight()
        self._symbols(f, 0, self.k1)
        probes = probe_indices(self.k1, min(self.prefix.m, PREFIX_PER_ELEMENTS * self.n0 + 64))
        f.add(SEC_PROBES, _varint(len(probes)) + pack_probes(
            [probe_value(self.prefix.symbol_int(g)) for g in probes]))
        self.state = I_WAIT_F2
        msgs = self._out(f, FLAG_END)
        msgs[0] = request(app_tag(app_id), self.n0, msgs[0])
        return msgs

    def _i_on_f2(self, flags, secs):
        self._only(secs, (SEC_SYMBOLS, SEC_RESIDUAL, SEC_WANTS, SEC_KEYS))
        wants, residual, symbols, keys = self._sections(secs)
        got, self._flight_keys = self._flight_keys, []
        if flags & FLAG_DONE:
            if residual or symbols or keys:
                raise SetuError("unexpected section", "symbols after DONE")
            self._check_wants(wants)
            f = Flight()
            self._send_elements(f, wants)
            self.state = self._final_state(False)
            return self._out(f, FLAG_END | FLAG_DONE) if wants else []
        if keys is not None:
            return self._i_full_keys(keys, wants, got)
        # R's partial results, then its residual and its own symbols
        self._check_wants(wants)
        self._early_wants = wants
        dec = self.dec = self._decoder()
        if residual is None:
            raise SetuError("missing section", "residual")
        start, data = residual
        if start != 0:
            raise SetuError("bad symbols", "residual starts at %d" % start)
        self._feed(dec.add_diff, 0, data)
        for k in wants:
            self._feed(dec.known, k, -1)
        for k in got:
            self._feed(dec.known, k, 1)
        self._add_symbols(symbols)
        return self._i_after_decode()

    def _bound_unsolicited(self, count):
        # elements sent unasked come from a decode of the symbols we sent (or, after a KEYS
        # fallback, from the peer's own set, whose size it committed to)
        most = 2 * self._sent_symbols + 16
        if self.stats["fallback"] == "keys":
            most = min(self.remote_size if self.remote_size is not None else 0,
                       self.cfg.upper_bound)
        if count > most:
            raise SetuError("too many elements")

    def _add_symbols(self, symbols):
        for start, data in symbols:
            if start != self.dec.received:
                raise SetuError("bad symbols", "gap at %d" % start)
            stop = start + len(data) // SYMBOL_SIZE
            self._ensure_prefix(stop)
            # which symbols differ before peeling: the exact observations of the estimator
            self._raw.append((start, np.frombuffer(data, dtype="<u8")
                              == self.prefix.sums[start:stop]))
            self._feed(self.dec.add, start, data)
            self.stats["symbols_recv"] += len(data) // SYMBOL_SIZE

    def _i_after_decode(self):
        dec = self.dec
        if not dec.done:
            self._search(self._stream_estimate())
        if not dec.done:
            self._more_rounds += 1
            self.stats["more_rounds"] = self._more_rounds
            if self._more_rounds > self.cfg.rl_max_more:
                raise SetuError(NEVER_DECODES, "after %d symbols" % dec.received)
            m2 = min(2 * dec.received, self._limits()[0])
            if m2 <= dec.received:
                raise SetuError(NEVER_DECODES, "after %d symbols" % dec.received)
            f = Flight()
            f.add(SEC_MORE, _varint(m2))
            self._stream_end = m2
            self.state = I_WAIT_MORE
            return self._out(f, FLAG_END)
        f = Flight()
        self._send_elements(f, dec.local_keys + self._early_wants)
        wants = list(dec.remote_keys)
        f.keys(SEC_WANTS, wants)
        self._wanted_by_me = set(wants)
        self.state = self._final_state(wants)
        return self._out(f, FLAG_END | FLAG_DONE)

    def _stream_estimate(self):
        """The difference's size from which received symbols were equal to ours (exact, so
        far tighter than the probes'), for sizing the own-key search."""
        if not self._raw:
            return 0
        idx = np.concatenate([np.arange(a, a + len(v)) for a, v in self._raw])
        same = np.concatenate([v for _, v in self._raw])
        step = max(1, len(idx) // STREAM_ESTIMATE_POINTS)
        found = len(self.dec.remote_keys) + len(self.dec.local_keys)
        hi = max(found + 1, 8 * self.dec.received)
        return estimate_difference([(int(i), bool(e), 0.0) for i, e in
                                    zip(idx[::step], same[::step])], found + 1, hi)

    def _i_on_more_symbols(self, flags, secs):
        self._only(secs, (SEC_SYMBOLS,))
        _, _, symbols, _ = self._sections(secs)
        if not symbols or symbols[-1][0] + len(symbols[-1][1]) // SYMBOL_SIZE != self._stream_end:
            raise SetuError("bad symbols", "MORE not answered in full")
        self._add_symbols(symbols)
        return self._i_after_decode()

    def _i_full_keys(self, keys, wants, elements):
        """R listed all its keys: the difference is plain set arithmetic (on the keys as
        integers: a list of 10^6 keys stays 8 MB, not 10^6 objects)."""
        if wants or elements:
            raise SetuError("unexpected section", "with KEYS")
        rs = self.remote_size if self.remote_size is not None else self.cfg.upper_bound
        if len(keys) > min(self.cfg.upper_bound, rs):
            raise SetuError("byzantine bound", "%d keys" % len(keys))
        theirs = _unique(keys)
        if len(theirs) != len(keys):
            raise SetuError("bad message", "duplicate keys")
        self.stats["fallback"] = "keys"
        mine = self._own_keys()
        f = Flight()
        self._send_elements(f, _key_list(np.setdiff1d(mine, theirs)))
        wants = _key_list(np.setdiff1d(theirs, mine))
        f.keys(SEC_WANTS, wants)
        self._wanted_by_me = set(wants)
        self.state = self._final_state(wants)
        return self._out(f, FLAG_END | FLAG_DONE)

    def _on_final_elements(self, flags, secs):
        self._only(secs, (SEC_STORED,))
        if self._wanted_by_me:
            raise SetuError("wanted elements missing", "%d keys" % len(self._wanted_by_me))
        stored = [p for t, p in secs if t == SEC_STORED]
        if self.initiator and self.version >= 2 and self._elements_out:
            if flags & FLAG_STORED and not stored:
                outstanding = 0
            elif len(stored) == 1 and not flags & FLAG_STORED:
                outstanding, q = _read_varint(stored[0], 0)
                if q != len(stored[0]) or not 0 < outstanding <= self._elements_out:
                    raise SetuError("bad message", "stored section")
            else:
                raise SetuError("missing section", "what the peer stored")
            self.stats["peer_outstanding"] = outstanding
        elif stored or flags & FLAG_STORED:
            raise SetuError("unexpected section", "stored")
        self._flight_keys = []
        f = Flight()
        extra = 0 if self.initiator else self._stored(f)
        self.state = FINISHED
        return self._out(f, FLAG_END | FLAG_DONE | extra) if f.sections or extra else []

    # -- responder -------------------------------------------------------------------

    def expect_first_flight(self):
        self.state = R_WAIT_F1

    def _r_on_f1(self, flags, secs):
        self._only(secs, (SEC_SYMBOLS, SEC_PROBES))
        _, _, symbols, _ = self._sections(secs)
        probes = [p for t, p in secs if t == SEC_PROBES]
        if len(probes) > 1 or not symbols:
            raise SetuError("missing section", "symbols")
        k1 = symbols[-1][0] + len(symbols[-1][1]) // SYMBOL_SIZE
        if k1 > self.cfg.rl_first_symbols_max:
            raise SetuError("too many symbols", "first flight of %d" % k1)
        nprobe, q = _read_varint(probes[0], 0) if probes else (0, 0)
        idx = probe_indices(k1, self.cfg.rl_max_symbols)
        if nprobe > len(idx):
            raise SetuError("too many probes")
        if probes and len(probes[0]) - q != (nprobe * PROBE_BITS + 7) // 8:
            raise SetuError("bad message", "probe section length")
        pvals = unpack_probes(probes[0][q:], nprobe) if probes else []
        dec = self.dec = self._decoder()
        self._add_symbols(symbols)
        # which of the first symbols differed before peeling (exact comparisons)
        exact = [(i, bool(e), 0.0) for a, v in self._raw for i, e in enumerate(v, a)]
        idx = idx[:nprobe]
        obs = exact + [(g, pvals[j] == probe_value(self.prefix.symbol_int(g)), PROBE_FALSE_EQUAL)
                       for j, g in enumerate(idx) if g < self.prefix.m]
        rs = min(self.remote_size, self.cfg.upper_bound)

        def estimate():
            # the sizes bound the difference from below: d >= |n_I - n_R| (exact when it is
            # one-sided), and the keys decoded so far
            found = len(dec.remote_keys) + len(dec.local_keys)
            lo = max(found + 1, abs(self.n0 - rs))
            return found, estimate_difference(obs, lo, max(lo, self.n0 + rs))

        if not dec.done:        # a small remainder: our own keys may free it
            d_est = estimate()[1]
            if d_est <= FIRST_SEARCH_MAX * k1:
                self._search(0, first=True)     # few symbols: test every index
        f = Flight()
        if dec.done:
            self._send_elements(f, dec.local_keys)
            self._want(f, dec.remote_keys)
            self.state = R_WAIT_ELEMENTS if dec.remote_keys else FINISHED
            return self._out(f, FLAG_END | FLAG_DONE)
        # the rest of the difference, estimated from the probes that fall in our prefix
        found, d_est = estimate()
        self.stats["estimate"] = d_est
        m = stream_length(k1, d_est)
        residual = [dec.residual(i, i + 1) for i in range(k1)]
        if d_est <= FIRST_SEARCH_MAX * k1 \
                and len(set(v for v in residual if any(v))) <= FIRST_REST_VALUES:
            # a few keys left (two of I's that map to the same first symbols leave one
            # value in every nonzero symbol: no peeling and no search of ours separates
            # them): the residual alone, and I, who holds them, searches its own keys
            m = k1
        ms, _ = self._limits()
        if m * SYMBOL_SIZE >= self.n0 * KEY_LEN or m > ms:
            # listing our keys is cheaper (or the stream would pass our bounds)
            self.stats["fallback"] = "keys"
            keys = self._own_keys()
            f.key_bytes(SEC_KEYS, _key_bytes(keys))
            self.state = R_WAIT_F3
            self._sent_symbols = max(self._sent_symbols, len(keys))
            return self._out(f, FLAG_END)
        self._send_elements(f, dec.local_keys)
        self._want(f, dec.remote_keys)
        f.add(SEC_RESIDUAL, pack_residual(0, residual))
        self._sent_symbols += k1     # the residual is our first k1 symbols (as differences):
                                     # I's elements may come from its decode
        self._symbols(f, k1, m)
        self._stream_end = m
        self.state = R_WAIT_F3
        return self._out(f, FLAG_END)

    def _want(self, f, keys):
        f.keys(SEC_WANTS, list(keys))
        self._wanted_by_me |= set(keys)

    def _r_on_f3(self, flags, secs):
        self._only(secs, (SEC_WANTS, SEC_MORE))
        more = [p for t, p in secs if t == SEC_MORE]
        got, self._flight_keys = set(self._flight_keys), []
        if more:
            if len(secs) != 1 or got or self.stats["fallback"] == "keys":
                raise SetuError("unexpected section", "MORE with others or after KEYS")
            m2, _ = _read_varint(more[0], 0)
            self._more_rounds += 1
            if self._more_rounds > self.cfg.rl_max_more or not self._stream_end < m2 <= self._limits()[0]:
                raise SetuError("too many symbols", "MORE up to %d" % m2)
            f = Flight()
            self._symbols(f, self._stream_end, m2)
            self._stream_end = m2
            return self._out(f, FLAG_END)
        if not flags & FLAG_DONE:
            raise SetuError("bad message", "final flight without DONE")
        wants, _, _, _ = self._sections(secs)
        self._check_wants(wants)
        # I's elements (taken as they came): those we wanted in F2 plus the ones only I
        # could find
        if self._wanted_by_me - got:
            raise SetuError("wanted elements missing", "%d keys" % len(self._wanted_by_me - got))
        f = Flight()
        self._send_elements(f, wants)
        extra = self._stored(f)
        self.state = FINISHED
        return self._out(f, FLAG_END | FLAG_DONE | extra) if f.sections or extra else []

    # -- parsing ---------------------------------------------------------------------

    def _sections(self, secs):
        """(wants, residual, symbols, keys) of a flight's buffered sections; keys as an
        array of integers (_keys_array) or None."""
        wants, symbols, keys = [], [], []
        residual = None
        for tag, p in secs:
            if tag == SEC_WANTS:
                wants += _split_keys(p)
            elif tag == SEC_SYMBOLS:
                start, q = _read_varint(p, 0)
                data = p[q:]
                if not data or len(data) % SYMBOL_SIZE:
                    raise SetuError("bad message", "symbol section")
                symbols.append((start, data))
            elif tag == SEC_RESIDUAL:
                if residual is not None:
                    raise SetuError("bad message", "two residuals")
                residual = self._parse_residual(p)
            elif tag == SEC_KEYS:
                if p and len(p) % KEY_LEN:
                    raise SetuError("bad message", "key list length")
                keys.append(p)
        if any(t == SEC_KEYS for t, _ in secs):
            keys = _keys_from_bytes(b"".join(keys))
        else:
            keys = None
        return wants, residual, symbols, keys

    def _parse_residual(self, p):
        return unpack_residual(p, min(self.cfg.rl_first_symbols_max, self._sent_symbols))
