"""Feed certificates: a proof that entry `seq` is in the signed history of a feed.

A certificate for entry SEQ is relative to an anchor entry ANCHOR >= SEQ whose record the
verifier checks. With n = ANCHOR leaves, the forest has roots R_1 .. R_r (flattree.full_roots)
and SEQ's leaf lies under one of them, Q. The certificate carries:

  the entry itself (PKT, and PREV so the verifier can form its NAM and MID = hash0),
  the siblings on the path from the leaf up to Q (bottom up),
  the values of the other roots (left to right),
  for each root R_m, m = r .. 2, the record of the entry ending R_m: its lower digest and
  signature (the record's top is R_m and its bridge is H(R_{m-1} || R_m), both computed);
  when r = 1 instead the record of the single root (no bridge).

Forms (the spec's two, plus any anchor in between):
  bridging  ANCHOR = SEQ: computable as soon as the entry exists; walks the bridges
  compact   ANCHOR = the next power of two >= SEQ: one tree, one record; available once
            the feed has grown that far
  anchored  any SEQ <= ANCHOR <= front: e.g. the holder's latest entry; used to link two
            certificates for a consistency check (forks.py)

Binary format, version 1 (all integers big-endian; counts follow from SEQ and ANCHOR):
  MAGIC "TSSBcert" | VERSION 1 | FID 32 | SEQ u32 | ANCHOR u32 | PREV 20 | PKT 120 |
  siblings 20 x depth(Q) | roots 20 x (r - 1) | records (lower 20 | sig 64) x max(r - 1, 1)

Verification turns a certificate into "facts", the values it proves for named positions:
  ("node", flat index) -> 20-byte hash      every path node, sibling and root
  ("bridge", seq)      -> 20-byte hash      the bridges walked
  ("record", seq)      -> 20-byte digest    of the signed bytes of each record used
Every fact is bound by a signature of the feed key through hashes only, so two valid
certificates that give one position different values prove a fork (forks.py).
"""
from tssb.certs import flattree
from tssb.certs.errors import CertError
from tssb.certs.hashing import (HASH_LEN, MAX_SEQ, bridge_hash, h, node_hash,
                                record_message)
from tssb.certs.keys import ED25519
from tssb.certs.records import SIG_LEN

MAGIC = b"TSSBcert"
VERSION = 1
FID_LEN = 32
PKT_LEN = 120
HEADER_LEN = len(MAGIC) + 1 + FID_LEN + 4 + 4 + HASH_LEN + PKT_LEN  # 189
REC_LEN = HASH_LEN + SIG_LEN  # a record passed through: lower digest + signature
# tinySSB entries are at most 2^32 - 1, so depth(Q) <= 31 and r <= 32.
MAX_CERT_LEN = HEADER_LEN + 31 * HASH_LEN + 31 * HASH_LEN + 31 * REC_LEN

_PFX = b"tinyssb-v0"  # the tinySSB NAM prefix (reference/tinyssb-wire.md section 3.2)
_DMX_LEN = 7

BRIDGING = "bridging"
COMPACT = "compact"
ANCHORED = "anchored"


def next_pow2(n):
    """Smallest power of two >= n (n >= 1)."""
    return 1 << (n - 1).bit_length()


def form_of(seq, anchor):
    """Name of the form a (seq, anchor) certificate has."""
    if anchor == seq:
        return BRIDGING if anchor & (anchor - 1) else COMPACT
    return COMPACT if anchor == next_pow2(seq) else ANCHORED


def layout(seq, anchor):
    """(path length, number of roots r, number of records) of a (seq, anchor) certificate.

    Raises:
        CertError: bad_range unless 1 <= seq <= anchor <= MAX_SEQ.
    """
    if not 1 <= seq <= anchor <= MAX_SEQ:
        raise CertError("bad_range", "seq %r anchor %r" % (seq, anchor))
    q = flattree.root_containing(anchor, seq - 1)
    r = bin(anchor).count("1")
    return flattree.depth(q), r, max(r - 1, 1)


def cert_len(seq, anchor):
    """Encoded length of a (seq, anchor) certificate."""
    d, r, m = layout(seq, anchor)
    return HEADER_LEN + HASH_LEN * d + HASH_LEN * (r - 1) + REC_LEN * m


def _end_seq(i):
    """1-based number of the last entry under node i (flattree.leaf_span(i)[1] + 1)."""
    d = ((i ^ (i + 1)).bit_length()) - 1
    return ((i >> (d + 1)) + 1) << d


def _nam(fid, seq, prev):
    return _PFX + fid + seq.to_bytes(4, "big") + prev


class Certificate:
    """A parsed (not yet verified) certificate; see the module doc for the fields."""
    __slots__ = ("fid", "seq", "anchor", "prev", "pkt", "siblings", "roots", "records")

    def __init__(self, fid, seq, anchor, prev, pkt, siblings, roots, records):
        self.fid = fid
        self.seq = seq
        self.anchor = anchor
        self.prev = prev
        self.pkt = pkt
        self.siblings = siblings  # list of 20-byte hashes, bottom up
        self.roots = roots        # list of 20-byte hashes, left to right, Q left out
        self.records = records    # list of (lower, sig), for roots r .. 2 (or the one root)

    @property
    def form(self):
        return form_of(self.seq, self.anchor)

    def encode(self):
        parts = [MAGIC, bytes((VERSION,)), self.fid, self.seq.to_bytes(4, "big"),
                 self.anchor.to_bytes(4, "big"), self.prev, self.pkt]
        parts.extend(self.siblings)
        parts.extend(self.roots)
        for lower, sig in self.records:
            parts.append(lower)
            parts.append(sig)
        return b"".join(parts)

    @classmethod
    def decode(cls, buf):
        """Parse a certificate; every length is checked against SEQ and ANCHOR.

        Raises:
            CertError: bad_magic, bad_version, bad_range, bad_length.
        """
        buf = bytes(buf)
        if len(buf) < HEADER_LEN or len(buf) > MAX_CERT_LEN:
            raise CertError("bad_length", len(buf))
        if buf[:len(MAGIC)] != MAGIC:
            raise CertError("bad_magic")
        p = len(MAGIC)
        if buf[p] != VERSION:
            raise CertError("bad_version", buf[p])
        p += 1
        fid = buf[p:p + FID_LEN]
        p += FID_LEN
        seq = int.from_bytes(buf[p:p + 4], "big")
        anchor = int.from_bytes(buf[p + 4:p + 8], "big")
        p += 8
        d, r, m = layout(seq, anchor)
        want = HEADER_LEN + HASH_LEN * d + HASH_LEN * (r - 1) + REC_LEN * m
        if len(buf) != want:
            raise CertError("bad_length", "%d, expected %d" % (len(buf), want))
        prev = buf[p:p + HASH_LEN]
        p += HASH_LEN
        pkt = buf[p:p + PKT_LEN]
        p += PKT_LEN

        def take(n):
            nonlocal p
            out = [buf[p + HASH_LEN * j:p + HASH_LEN * (j + 1)] for j in range(n)]
            p += HASH_LEN * n
            return out
        siblings = take(d)
        roots = take(r - 1)
        records = []
        for _ in range(m):
            records.append((buf[p:p + HASH_LEN], buf[p + HASH_LEN:p + REC_LEN]))
            p += REC_LEN
        return cls(fid, seq, anchor, prev, pkt, siblings, roots, records)


class Verified:
    """What a valid certificate proves.

    Fields: cert (Certificate), raw (its bytes), fid, seq, anchor, form, mid (the entry's
    MID), facts (dict position -> value, see the module doc).
    """
    __slots__ = ("cert", "raw", "fid", "seq", "anchor", "form", "mid", "facts")

    def __init__(self, cert, raw, mid, facts):
        self.cert = cert
        self.raw = raw
        self.fid = cert.fid
        self.seq = cert.seq
        self.anchor = cert.anchor
        self.form = cert.form
        self.mid = mid
        self.facts = facts

    @property
    def pkt(self):
        return self.cert.pkt

    def root_positions(self):
        """Positions of the roots of the anchor's forest: what pins the history 1..anchor."""
        return [("node", i) for i in flattree.full_roots(self.anchor)]


def build(fid, seq, anchor, pkt, prev, node, record):
    """Assemble the certificate for entry `seq` relative to entry `anchor`.

    Args:
        fid: 32-byte feed id. pkt: the 120-byte entry `seq`; prev: its PREV (20 bytes).
        node: function(flat index) -> 20-byte hash, for nodes of the first `anchor` leaves.
        record: function(seq) -> Record (records.Record) of that entry.
    Returns:
        Certificate.
    Raises:
        CertError: bad_range.
    """
    d, _, _ = layout(seq, anchor)
    roots = flattree.full_roots(anchor)
    q = flattree.root_containing(anchor, seq - 1)
    siblings = []
    o = seq - 1
    for k in range(d):
        siblings.append(node(((o ^ 1) << (k + 1)) | ((1 << k) - 1)))  # flattree.sibling
        o >>= 1
    root_vals = [node(x) for x in roots if x != q]
    recs = []
    ends = [_end_seq(x) for x in roots]
    for e in (ends[:0:-1] if len(roots) > 1 else ends):
        rec = record(e)
        recs.append((rec.lower(), rec.sig))
    return Certificate(bytes(fid), seq, anchor, bytes(prev), bytes(pkt), siblings, root_vals,
                       recs)


def verify(data, scheme=ED25519, fid=None):
    """Verify a certificate.

    Args:
        data: encoded certificate (bytes) or a Certificate.
        scheme: signature scheme (keys.py); Ed25519 for real feeds.
        fid: if given, the feed the certificate must be about.
    Returns:
        Verified.
    Raises:
        CertError: a decoding reason, wrong_feed, bad_entry (DMX or entry signature),
            bad_signature (a record's signature fails: some hash, the order or the
            message was changed).
    """
    # Always re-parse from bytes: a Certificate built in code could carry lists of the
    # wrong length, and zip() below would then silently skip a signature.
    raw = data.encode() if isinstance(data, Certificate) else bytes(data)
    cert = Certificate.decode(raw)
    if fid is not None and bytes(fid) != cert.fid:
        raise CertError("wrong_feed")
    nam = _nam(cert.fid, cert.seq, cert.prev)
    if h(nam)[:_DMX_LEN] != cert.pkt[:_DMX_LEN]:
        raise CertError("bad_entry", "DMX does not match feed, seq and prev")
    if not scheme.verify(cert.fid, nam + cert.pkt[:56], cert.pkt[56:]):
        raise CertError("bad_entry", "entry signature")
    mid = h(nam + cert.pkt)

    facts = {}
    roots = flattree.full_roots(cert.anchor)
    q = flattree.root_containing(cert.anchor, cert.seq - 1)
    # Walk up from the leaf with (depth, offset) arithmetic (flattree.index inlined: this
    # loop is the verifier's hot path).
    d, o = 0, cert.seq - 1
    val = mid
    facts[("node", 2 * o)] = val
    for sib in cert.siblings:
        facts[("node", ((o ^ 1) << (d + 1)) | ((1 << d) - 1))] = sib
        val = node_hash(sib, val) if o & 1 else node_hash(val, sib)
        d += 1
        o >>= 1
        facts[("node", (o << (d + 1)) | ((1 << d) - 1))] = val
    given = iter(cert.roots)
    vals = [val if x == q else next(given) for x in roots]
    for x, v in zip(roots, vals):
        facts[("node", x)] = v

    idx = list(range(len(roots) - 1, 0, -1)) if len(roots) > 1 else [0]
    for m, (lower, sig) in zip(idx, cert.records):
        seq = _end_seq(roots[m])
        bridge = bridge_hash(vals[m - 1], vals[m]) if m > 0 else None
        msg = record_message(cert.fid, seq, lower, vals[m], bridge)
        if not scheme.verify(cert.fid, msg, sig):
            raise CertError("bad_signature", "record %d" % seq)
        if bridge is not None:
            facts[("bridge", seq)] = bridge
        facts[("record", seq)] = h(msg)
    return Verified(cert, raw, mid, facts)
