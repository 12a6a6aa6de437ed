"""Certificate records: the hashes published and signed with each entry of a certified feed.

For entry `seq` (leaf s = seq - 1 of the feed's Merkle forest) the record holds, as the
spec's "Implementation in SSB" lists them:

  hash0             the leaf: the entry's MID
  hash<k>           H(hash<k-1> of entry seq - 2^(k-1) || hash<k-1> of this entry), for
                    every k >= 1 with seq a multiple of 2^k (the complete subtrees ending here)
  bridge            unless seq is a power of two: H(previous root || this entry's top hash),
                    where the previous root is the root of the forest of seq leaves just
                    left of the one this entry completes
  sig               the feed key's signature over hashing.record_message(...)

The signature covers hash0 .. hash<k-1> through one digest (hashing.lower_digest) so that
a certificate can carry a record it only passes through in 84 bytes (digest + signature)
instead of all its hashes: that keeps certificates O(log n) instead of O(log^2 n).

Record stream format (one record, stored and sent as is):
  SEQ u32 BE | K+1 hashes of 20 bytes | bridge 20 bytes (iff SEQ is not a power of two) | sig 64
K is fixed by SEQ (trailing zeros of SEQ), so the length is fixed by SEQ too.
"""
from tssb.certs import flattree
from tssb.certs.errors import CertError
from tssb.certs.hashing import (HASH_LEN, MAX_SEQ, bridge_hash, lower_digest, node_hash,
                                record_message)

SIG_LEN = 64


def has_bridge(seq):
    """True if entry `seq` carries a bridge (seq is not a power of two)."""
    return seq & (seq - 1) != 0


def hash_count(seq):
    """Number of hashes hash0 .. hash<k> of entry `seq`."""
    return flattree.top_depth(seq - 1) + 1


def record_len(seq):
    """Encoded length of the record of entry `seq`."""
    return 4 + HASH_LEN * hash_count(seq) + (HASH_LEN if has_bridge(seq) else 0) + SIG_LEN


def compute_hashes(seq, mid, node):
    """The hashes of entry `seq` from its MID and earlier nodes.

    Args:
        seq: 1-based entry number. mid: the entry's 20-byte MID (hash0).
        node: function(flat index) -> 20-byte hash of an earlier node.
    Returns:
        (hashes, bridge): list hash0 .. hash<k>; bridge bytes or None.
    """
    leaf = seq - 1
    hashes = [bytes(mid)]
    for d in range(1, flattree.top_depth(leaf) + 1):
        left = node(flattree.ending_at(d - 1, leaf - (1 << (d - 1))))
        hashes.append(node_hash(left, hashes[-1]))
    bridge = None
    if has_bridge(seq):
        roots = flattree.full_roots(seq)
        bridge = bridge_hash(node(roots[-2]), hashes[-1])
    return hashes, bridge


class Record:
    """One signed record. Fields: seq, hashes (list), bridge (bytes or None), sig."""
    __slots__ = ("seq", "hashes", "bridge", "sig")

    def __init__(self, seq, hashes, bridge, sig):
        self.seq = seq
        self.hashes = hashes
        self.bridge = bridge
        self.sig = sig

    @property
    def top(self):
        return self.hashes[-1]

    def lower(self):
        """Digest of hash0 .. hash<k-1>, as signed."""
        return lower_digest(self.hashes[:-1])

    def message(self, fid):
        """The bytes the signature covers."""
        return record_message(fid, self.seq, self.lower(), self.top, self.bridge)

    def encode(self):
        out = self.seq.to_bytes(4, "big") + b"".join(self.hashes)
        if self.bridge is not None:
            out += self.bridge
        return out + self.sig

    @classmethod
    def decode(cls, buf):
        """Parse one record.

        Raises:
            CertError: bad_record (length, seq range, hash count).
        """
        buf = bytes(buf)
        if len(buf) < 4:
            raise CertError("bad_record", "short")
        seq = int.from_bytes(buf[:4], "big")
        if not 1 <= seq <= MAX_SEQ:
            raise CertError("bad_record", "seq %d" % seq)
        if len(buf) != record_len(seq):
            raise CertError("bad_record", "length %d for seq %d" % (len(buf), seq))
        n = hash_count(seq)
        hashes = [buf[4 + HASH_LEN * j:4 + HASH_LEN * (j + 1)] for j in range(n)]
        pos = 4 + HASH_LEN * n
        bridge = None
        if has_bridge(seq):
            bridge = buf[pos:pos + HASH_LEN]
            pos += HASH_LEN
        return cls(seq, hashes, bridge, buf[pos:])

    def __eq__(self, other):
        return isinstance(other, Record) and self.encode() == other.encode()

    def __repr__(self):
        return "Record(seq=%d, k=%d, bridge=%s)" % (self.seq, len(self.hashes) - 1,
                                                    self.bridge is not None)
