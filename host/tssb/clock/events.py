"""The events the clock protocols synchronise, and their self-validating wire forms.

Two kinds, both carrying their own proof so a receiver checks every event on arrival:

* Feed events: a tinySSB log entry with the context that makes it checkable,
  FID(32) || SEQ(4, big endian) || PREV(20) || PKT(120) = 176 bytes. The event id is the
  entry's MID; its one back reference is PREV (for seq 1 PREV = FID[0:20], which is not an
  event, so seq 1 is the root). Formats from tinyssb-wire.md §3.2.
* Signed events: for thread-like entities (threads, the elapsed-time counter), whose events
  come from many feeds and may reference several predecessors:
  AUTHOR(32) || ROOT(20) || varint(#prevs) || PREV*20 || varint(ts_ms) || varint(len) ||
  BODY || SIG(64), SIG by AUTHOR over everything before it. Event id =
  SHA256(all bytes)[0:20]. The root event of a thread has ROOT = 20 zero bytes and no
  prevs; the thread is named by the root's id. (On a tinySSB node such an event is the
  content of a log entry in the author's feed; this package keeps them in its own table.)

A feed event whose entry is chain20 may travel with the first chunks of its side chain
(`Event.chunks`): each 120-byte chunk is checked against the hash that names it (the
entry's pointer for chunk 0, the previous chunk's last 20 bytes after that), so a receiver
stores only the chain its author signed. Chunks are not part of the event id or digest.
"""
import hashlib

from tinyssb import entry as tentry
from tinyssb.errors import WireError
from tssb.clock import crypto
from tssb.clock.errors import ClockError
from tssb.clock.wire import Reader, varint

FID_LEN = 32
HASH_LEN = 20
PKT_LEN = 120
SIG_LEN = 64
FEED_EVENT_LEN = FID_LEN + 4 + HASH_LEN + PKT_LEN
ZERO_ROOT = bytes(HASH_LEN)
# Bounds for signed events: references carried by one event (a join of more branches than
# this is split by the producer), and body size (a tinySSB side chain of 4 KiB is already
# 41 chunks on LoRa).
MAX_PREVS = 64
MAX_BODY = 4096
# Side-chain chunks carried by one feed event: 100 chunks (12 000 B, ~10 KB of content).
# Deployed readers fetch chains up to ~100 KB; the rest of a longer chain is left to the
# replica's WANT/CHNK or SETU (docs/clock.md).
MAX_EVENT_CHUNKS = 100
CHUNK_LEN = tentry.PKT_LEN


class Event:
    """One event of an entity.

    Attributes:
        eid: 20-byte id (MID for feed entries).
        prevs: tuple of back references (event ids).
        raw: the full wire form (the join strategy's tie-breaker, and what is sent).
        key: the entity the event belongs to (FID, or thread root id).
        seq: feed sequence number (feed events) or None.
        author: 32-byte public key of the signer.
        ts: timestamp in ms (signed events) or None.
        body: application bytes (signed events) or the entry's payload.
        chunks: validated side-chain chunks that arrived with a feed event (a prefix of
            its chain), () otherwise.
    """
    __slots__ = ("eid", "prevs", "raw", "key", "seq", "author", "ts", "body", "is_root",
                 "chunks")

    def __init__(self, eid, prevs, raw, key, seq=None, author=None, ts=None, body=b"",
                 is_root=False, chunks=()):
        self.eid = eid
        self.prevs = prevs
        self.raw = raw
        self.key = key
        self.seq = seq
        self.author = author
        self.ts = ts
        self.body = body
        self.is_root = is_root
        self.chunks = chunks

    def __repr__(self):
        return "Event(%s)" % self.eid.hex()[:12]


# -- feed entries ----------------------------------------------------------------------

def entry_mid(fid, seq, prev, pkt):
    """MID = SHA256(NAM || PKT)[0:20]."""
    return tentry.mid_of(tentry.nam(fid, seq, prev), pkt)


def make_entry(seed, seq, prev, payload, typ=0):
    """Build and sign a 120-byte plain48 log entry (used by tests, benchmarks and the
    fork tools; the node's own appends go through the core).

    Args:
        seed: 32-byte Ed25519 seed of the feed.
        seq: sequence number (>= 1).
        prev: 20-byte MID of seq - 1, or FID[0:20] for seq 1.
        payload: up to 48 bytes (zero padded).
        typ: packet type byte.
    Returns:
        (pkt, mid)
    """
    fid = crypto.publickey(seed)
    return tentry.build(fid, seq, prev, typ, tentry.plain48(payload),
                        lambda m: crypto.sign(seed, m))


def make_chain_entry(seed, seq, prev, content):
    """Build and sign a chain20 log entry (tests and benchmarks).

    Returns:
        (pkt, mid, chunks): chunks is the side chain, 120 bytes each.
    """
    fid = crypto.publickey(seed)
    payload, chunks = tentry.chain20(content)
    pkt, mid = tentry.build(fid, seq, prev, tentry.CHAIN20, payload,
                            lambda m: crypto.sign(seed, m))
    return pkt, mid, chunks


def chain_chunks(pkt):
    """Chunks the side chain of an entry has: 0 for plain entries and malformed chains."""
    if pkt[7] != tentry.CHAIN20:
        return 0
    try:
        return tentry.chain_info(pkt).n_chunks
    except WireError:
        return 0


def check_chain(pkt, chunks):
    """Check chunks received with an entry: a prefix of its side chain, hash by hash.

    Raises:
        ClockError: "chunk_type" (the entry has no side chain), "chunk_count" (more chunks
            than its chain has), "chunk_len", "chunk_hash" (detail: the chunk's index).
    """
    if not chunks:
        return
    if pkt[7] != tentry.CHAIN20:
        raise ClockError("chunk_type")
    try:
        info = tentry.chain_info(pkt)
    except WireError:
        raise ClockError("chunk_type")
    if len(chunks) > info.n_chunks:
        raise ClockError("chunk_count", (len(chunks), info.n_chunks))
    expect = info.hptr                 # the entry's pointer names chunk 0
    for i, c in enumerate(chunks):
        if len(c) != CHUNK_LEN:
            raise ClockError("chunk_len", i)
        if tentry.chunk_hash(c) != expect:
            raise ClockError("chunk_hash", i)
        expect = bytes(c[CHUNK_LEN - HASH_LEN:])


def feed_event_bytes(fid, seq, prev, pkt):
    return bytes(fid) + seq.to_bytes(4, "big") + bytes(prev) + bytes(pkt)


def parse_feed_event(raw, chunks=()):
    """Validate a feed event (176 bytes) and the chunks that came with it (check_chain);
    return its Event.

    Raises:
        ClockError: "feed_event_len", "seq", "dmx", "signature", or a check_chain reason.
    """
    if len(raw) != FEED_EVENT_LEN:
        raise ClockError("feed_event_len", len(raw))
    raw = bytes(raw)
    fid = raw[:32]
    seq = int.from_bytes(raw[32:36], "big")
    prev = raw[36:56]
    pkt = raw[56:]
    if not 1 <= seq <= 0xFFFFFFFF:
        raise ClockError("seq", seq)
    try:
        mid = tentry.check(pkt, fid, seq, prev, crypto.verify)
    except WireError as e:
        raise ClockError("dmx" if e.reason == "bad_dmx" else "signature")
    is_root = seq == 1 and prev == fid[:HASH_LEN]
    chunks = tuple(bytes(c) for c in chunks)
    check_chain(pkt, chunks)
    return Event(mid, (prev,), raw, fid, seq=seq, author=fid, body=pkt[8:56], is_root=is_root,
                 chunks=chunks)


# -- signed events ---------------------------------------------------------------------

def make_signed_event(seed, root, prevs, ts_ms, body):
    """Build a signed event.

    Args:
        seed: author's 32-byte seed.
        root: thread root id (20 bytes), or ZERO_ROOT for a new thread's root event.
        prevs: back references (event ids), at most MAX_PREVS.
        ts_ms: the author's timestamp in milliseconds.
        body: application bytes, at most MAX_BODY.
    Returns:
        Event (parsed back, so it is exactly what a receiver sees).
    """
    if len(prevs) > MAX_PREVS or len(body) > MAX_BODY:
        raise ClockError("too_large")
    author = crypto.publickey(seed)
    b = bytearray(author + bytes(root) + varint(len(prevs)))
    for p in prevs:
        if len(p) != HASH_LEN:
            raise ClockError("prev_len")
        b += p
    b += varint(ts_ms) + varint(len(body)) + body
    b += crypto.sign(seed, bytes(b))
    return parse_signed_event(bytes(b))


def parse_signed_event(raw):
    """Validate a signed event and return its Event (key = thread root id).

    Raises:
        ClockError: malformed, "signature", or "root" (root event with back references).
    """
    raw = bytes(raw)
    if len(raw) > 32 + 20 + 10 + MAX_PREVS * 20 + 10 + 10 + MAX_BODY + SIG_LEN:
        raise ClockError("too_large", len(raw))
    r = Reader(raw)
    author = r.take(32, "author")
    root = r.take(HASH_LEN, "root")
    n = r.uint("prev count", MAX_PREVS)
    prevs = tuple(r.take(HASH_LEN, "prev") for _ in range(n))
    if len(set(prevs)) != n:
        raise ClockError("dup_prev")
    ts = r.uint("ts", (1 << 63) - 1)
    body = r.blob("body", MAX_BODY)
    signed_len = r.pos
    sig = r.take(SIG_LEN, "sig")
    r.end()
    if not crypto.verify(author, raw[:signed_len], sig):
        raise ClockError("signature")
    eid = hashlib.sha256(raw).digest()[:HASH_LEN]
    is_root = root == ZERO_ROOT
    if is_root and prevs:
        raise ClockError("root")
    return Event(eid, prevs, raw, eid if is_root else root, author=author, ts=ts, body=body,
                 is_root=is_root)
