"""120-byte tinySSB log entries and their side chains.

    NAM  = "tinyssb-v0" || FID(32) || SEQ(4, big-endian) || PREV(20)        66 bytes
    PKT  = DMX(7) || TYPE(1) || PAYLOAD(48) || SIG(64)                      120 bytes
    DMX  = SHA256(NAM)[0:7]
    SIG  = Ed25519 by FID over NAM || PKT[0:56]
    MID  = SHA256(NAM || PKT)[0:20]
    PREV of seq 1 = FID[0:20] (deployed code; the seed text says zeros), else MID of seq-1

Payload types: 0 plain48 (48 raw bytes, zero padded, no length) and 1 chain20:

    PAYLOAD = VARINT(L) || content[0:28-|V|] || zero pad to 28 || HPTR(20)
    chunk_k = rest[100(k-1):100k] || SHA256(chunk_{k+1})[0:20]  (last: 20 zero bytes)

HPTR names chunk 1 (zeros when there are none); chunks are built back to front. Every
deployed receiver counts chunks as ceil((L - (28-|V|)) / 100): the "28-byte rule".
"""
from hashlib import sha256

from tinyssb import bipf
from tinyssb.dmx import DMX_LEN, nam
from tinyssb.errors import WireError

PKT_LEN = 120
FID_LEN = 32
HASH_LEN = 20
SIG_LEN = 64
PAYLOAD_LEN = 48
CHUNK_DATA = 100           # content bytes per chunk
INLINE = 28                # chain20 bytes before the hash pointer, varint included
MAX_VARINT = 4             # Android reads at most 4 length bytes (ESP32 5): lengths < 2^28

PLAIN48 = 0
CHAIN20 = 1

ZERO_HASH = bytes(HASH_LEN)


def genesis_prev(fid):
    return bytes(fid[:HASH_LEN])


def mid_of(name, pkt):
    return sha256(name + pkt).digest()[:HASH_LEN]


def chunk_hash(chunk):
    return sha256(chunk).digest()[:HASH_LEN]


def build(fid, seq, prev, typ, payload, sign):
    """Build and sign one log entry.

    Args:
        fid: 32-byte feed ID (Ed25519 public key); seq: 1-based; prev: 20-byte PREV.
        typ: payload type byte; payload: exactly 48 bytes; sign: function(msg) -> 64 bytes.
    Returns:
        (pkt, mid)
    """
    if len(fid) != FID_LEN or len(prev) != HASH_LEN or len(payload) != PAYLOAD_LEN:
        raise ValueError("entry field length")
    if not 1 <= seq <= 0xFFFFFFFF or not 0 <= typ <= 255:
        raise ValueError("entry seq or type out of range")
    name = nam(fid, seq, prev)
    head = sha256(name).digest()[:DMX_LEN] + bytes((typ,)) + bytes(payload)
    sig = sign(name + head)
    if len(sig) != SIG_LEN:
        raise ValueError("signature length")
    pkt = head + sig
    return pkt, mid_of(name, pkt)


def check(pkt, fid, seq, prev, verify):
    """Validate a received entry for position (fid, seq, prev); return its MID.

    Raises:
        WireError: bad_length, bad_dmx, bad_signature.
    """
    if len(pkt) != PKT_LEN:
        raise WireError("bad_length", len(pkt))
    name = nam(fid, seq, prev)
    if sha256(name).digest()[:DMX_LEN] != pkt[:DMX_LEN]:
        raise WireError("bad_dmx")
    if not verify(fid, name + pkt[:56], pkt[56:]):
        raise WireError("bad_signature")
    return mid_of(name, pkt)


def plain48(content):
    if len(content) > PAYLOAD_LEN:
        raise ValueError("plain48 content longer than 48 bytes")
    return bytes(content) + bytes(PAYLOAD_LEN - len(content))


def chain20(content):
    """Split content into a chain20 payload and its side chain (list of 120-byte chunks)."""
    content = bytes(content)
    v = bipf.varint_encode(len(content))
    if len(v) > MAX_VARINT:
        raise ValueError("content too long for chain20")
    head = INLINE - len(v)
    rest = content[head:]
    chunks = []
    ptr = ZERO_HASH
    if rest:
        if len(rest) % CHUNK_DATA:
            rest += bytes(CHUNK_DATA - len(rest) % CHUNK_DATA)
        for i in range(len(rest) - CHUNK_DATA, -1, -CHUNK_DATA):  # back to front
            c = rest[i:i + CHUNK_DATA] + ptr
            chunks.append(c)
            ptr = chunk_hash(c)
        chunks.reverse()
    inline = content[:head]
    payload = v + inline + bytes(head - len(inline)) + ptr
    return payload, chunks


class ChainInfo:
    """What a chain20 entry announces: content length, chunk count, first pointer."""
    __slots__ = ("length", "n_chunks", "hptr", "inline")

    def __init__(self, length, n_chunks, hptr, inline):
        self.length = length
        self.n_chunks = n_chunks
        self.hptr = hptr
        self.inline = inline


def chain_info(pkt):
    """Parse the chain20 payload of an entry (type byte must be CHAIN20).

    Raises:
        WireError: bad_chain_length (varint longer than 4 bytes).
    """
    payload = pkt[8:56]
    try:
        length, pos = bipf.varint_decode(payload, 0, MAX_VARINT)
    except WireError:
        raise WireError("bad_chain_length")
    head = INLINE - pos
    if length <= head:
        return ChainInfo(length, 0, ZERO_HASH, bytes(payload[pos:pos + length]))
    n = (length - head + CHUNK_DATA - 1) // CHUNK_DATA
    return ChainInfo(length, n, bytes(payload[28:48]), bytes(payload[pos:INLINE]))


def content(pkt, chunks=()):
    """Content of an entry: plain48 payload, or chain20 content from the chunks held so far
    (complete when len(chunks) == chain_info(pkt).n_chunks)."""
    if pkt[7] != CHAIN20:
        return bytes(pkt[8:56])
    info = chain_info(pkt)
    out = bytearray(info.inline)
    for c in chunks:
        out.extend(c[:CHUNK_DATA])
    return bytes(out[:info.length])


class Author:
    """Writes a feed: keeps (seq, prev) and signs new entries.

    `sign` is function(msg) -> signature with the feed's secret key.
    """

    def __init__(self, fid, sign, seq=0, prev=None):
        self.fid = bytes(fid)
        self.sign = sign
        self.seq = seq
        self.prev = genesis_prev(fid) if prev is None else prev

    def next(self, content, typ=CHAIN20):
        """Return (seq, pkt, mid, chunks) for the next entry holding `content`."""
        if typ == CHAIN20:
            payload, chunks = chain20(content)
        else:
            payload, chunks = plain48(content), []
        pkt, mid = build(self.fid, self.seq + 1, self.prev, typ, payload, self.sign)
        self.seq += 1
        self.prev = mid
        return self.seq, pkt, mid, chunks
