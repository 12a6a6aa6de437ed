"""Do two certificates of one feed agree? If not, a fork proof anyone can check.

Two verified certificates contradict each other when they prove different values for one
position (certificate.py "facts"): each value is bound to a signature of the feed key by
hashes alone, so the author signed two incompatible histories (or SHA-256 collided).

When they agree on every common position the answer depends on coverage. The earlier
certificate (smaller anchor a) pins the history 1..a by the roots of its forest; if all of
those positions are facts of the later certificate too, the later history has the same
first a entries: the two are consistent. Otherwise they are "unlinked": nothing shared
decides it, and the holder of the later certificate's history is asked for the link,
the certificate of entry a anchored at b (`link_request`), which shares the roots of a's
forest with the first and the anchor with the second.

Fork proof format, version 1:
  MAGIC "TSSBfork" | VERSION 1 | KIND u8 (0 node, 1 bridge, 2 record) | KEY u64 |
  LEN_A u16 | certificate A | LEN_B u16 | certificate B
"""
from tssb.certs import certificate as certmod
from tssb.certs.errors import CertError
from tssb.certs.keys import ED25519

MAGIC = b"TSSBfork"
VERSION = 1
KINDS = ("node", "bridge", "record")
_HEAD = len(MAGIC) + 1 + 1 + 8
MAX_PROOF_LEN = _HEAD + 2 * (2 + certmod.MAX_CERT_LEN)

CONSISTENT = "consistent"
CONTRADICTION = "contradiction"
UNLINKED = "unlinked"


class ForkProof:
    """Two certificates of one feed and the position where they differ."""
    __slots__ = ("a", "b", "key")

    def __init__(self, a, b, key):
        self.a = bytes(a)
        self.b = bytes(b)
        self.key = key

    def encode(self):
        kind, val = self.key
        return b"".join([MAGIC, bytes((VERSION, KINDS.index(kind))), val.to_bytes(8, "big"),
                         len(self.a).to_bytes(2, "big"), self.a,
                         len(self.b).to_bytes(2, "big"), self.b])

    @classmethod
    def decode(cls, buf):
        """Raises: CertError bad_magic, bad_version, bad_length, bad_kind."""
        buf = bytes(buf)
        if len(buf) < _HEAD + 4 or len(buf) > MAX_PROOF_LEN:
            raise CertError("bad_length", len(buf))
        if buf[:len(MAGIC)] != MAGIC:
            raise CertError("bad_magic")
        p = len(MAGIC)
        if buf[p] != VERSION:
            raise CertError("bad_version", buf[p])
        if buf[p + 1] >= len(KINDS):
            raise CertError("bad_kind", buf[p + 1])
        key = (KINDS[buf[p + 1]], int.from_bytes(buf[p + 2:p + 10], "big"))
        p = _HEAD
        la = int.from_bytes(buf[p:p + 2], "big")
        a = buf[p + 2:p + 2 + la]
        p += 2 + la
        if len(a) != la or p + 2 > len(buf):
            raise CertError("bad_length", "certificate A")
        lb = int.from_bytes(buf[p:p + 2], "big")
        b = buf[p + 2:p + 2 + lb]
        if len(b) != lb or p + 2 + lb != len(buf):
            raise CertError("bad_length", "certificate B")
        return cls(a, b, key)


class ForkReport:
    """A checked fork proof: fid, key, the two values and the two verified certificates."""

    def __init__(self, fid, key, va, vb, ca, cb):
        self.fid = fid
        self.key = key
        self.value_a = va
        self.value_b = vb
        self.cert_a = ca
        self.cert_b = cb


class Comparison:
    """Result of `compare`: status (CONSISTENT, CONTRADICTION, UNLINKED), proof
    (ForkProof when contradictory), link ((seq, anchor) to fetch when unlinked)."""

    def __init__(self, status, proof=None, link=None):
        self.status = status
        self.proof = proof
        self.link = link

    def __repr__(self):
        return "Comparison(%s)" % self.status


def compare(a, b):
    """Compare two verified certificates (certificate.Verified) of one feed.

    Returns:
        Comparison.
    Raises:
        CertError: different_feeds.
    """
    if a.fid != b.fid:
        raise CertError("different_feeds")
    for key in sorted(set(a.facts) & set(b.facts)):
        if a.facts[key] != b.facts[key]:
            return Comparison(CONTRADICTION, proof=ForkProof(a.raw, b.raw, key))
    early, late = (a, b) if a.anchor <= b.anchor else (b, a)
    if all(pos in late.facts for pos in early.root_positions()):
        return Comparison(CONSISTENT)
    return Comparison(UNLINKED, link=link_request(early, late))


def link_request(early, late):
    """(seq, anchor) of the certificate that links `early` to `late`: entry early.anchor
    in the history anchored at late.anchor."""
    return early.anchor, late.anchor


def check_all(verified):
    """Check a set of certificates of one feed.

    Returns:
        Comparison: the first CONTRADICTION found between any two; else CONSISTENT if
        every certificate is linked to one with a larger anchor (certificates with the
        largest anchor share their roots, so all then pin one history); else UNLINKED,
        naming the link for the first certificate left over.
    """
    items = sorted(verified, key=lambda v: v.anchor)
    results = {}
    for i in range(len(items)):
        for j in range(i + 1, len(items)):
            c = compare(items[i], items[j])
            if c.status == CONTRADICTION:
                return c
            results[(i, j)] = c.status
    if not items:
        return Comparison(CONSISTENT)
    top = items[-1].anchor
    for i, x in enumerate(items):
        if x.anchor == top:
            continue
        if not any(items[j].anchor > x.anchor and results[(i, j)] == CONSISTENT
                   for j in range(i + 1, len(items))):
            return Comparison(UNLINKED, link=link_request(x, items[-1]))
    return Comparison(CONSISTENT)


def verify_proof(data, scheme=ED25519):
    """Check a fork proof as a third party: both certificates verify under the same feed
    key and give its position different values.

    Args:
        data: encoded ForkProof (bytes) or ForkProof.
    Returns:
        ForkReport.
    Raises:
        CertError: decoding reasons, a certificate's reason, different_feeds, not_a_fork.
    """
    proof = data if isinstance(data, ForkProof) else ForkProof.decode(data)
    va = certmod.verify(proof.a, scheme)
    vb = certmod.verify(proof.b, scheme)
    if va.fid != vb.fid:
        raise CertError("different_feeds")
    x = va.facts.get(proof.key)
    y = vb.facts.get(proof.key)
    if x is None or y is None or x == y:
        raise CertError("not_a_fork", "the certificates do not differ at %s %d" % proof.key)
    return ForkReport(va.fid, proof.key, x, y, va, vb)
