"""The hash functions of the certificate tree and the bytes a record's signature covers.

Hashes are SHA-256 truncated to 20 bytes, the length of every tinySSB hash pointer (MID,
PREV, chunk pointers; ../shared/reference/tinyssb-wire.md section 2). A leaf ("hash0" of
message s) is the tinySSB message ID of entry s: SHA256(NAM || PKT)[0:20], which already
commits to the feed, the sequence number, the predecessor and the whole packet. Inner
nodes and bridges get a one-byte domain tag (as RFC 6962 does for its Merkle tree) so a
value of one kind can never be passed off as another.
"""
from hashlib import sha256

HASH_LEN = 20          # tinySSB hash pointer length
NODE_TAG = b"\x01"     # hash<k> = H(0x01 || left || right)
BRIDGE_TAG = b"\x02"   # bridge = H(0x02 || previous root || last root)
LOWER_TAG = b"\x03"    # digest of hash0 .. hash<k-1> inside the signed record
# Signed record: RECORD_TAG || FID(32) || SEQ(u32 BE) || lower(20) || top(20) [|| bridge(20)]
RECORD_TAG = b"tinyssb-cert-v1 record"
MAX_SEQ = 0xFFFFFFFF   # tinySSB sequence numbers are u32 (NAM encodes SEQ in 4 bytes)


def h(data):
    """SHA-256 truncated to HASH_LEN bytes."""
    return sha256(data).digest()[:HASH_LEN]


def node_hash(left, right):
    """Inner node over its two children (left covers the earlier messages)."""
    return sha256(NODE_TAG + left + right).digest()[:HASH_LEN]


def bridge_hash(prev_root, last_root):
    """Bridge between two neighbouring roots of a feed's Merkle forest."""
    return sha256(BRIDGE_TAG + prev_root + last_root).digest()[:HASH_LEN]


def lower_digest(lower):
    """Digest of hash0 .. hash<k-1> of a record (k may be 0: digest of nothing)."""
    return sha256(LOWER_TAG + b"".join(lower)).digest()[:HASH_LEN]


def record_message(fid, seq, lower, top, bridge):
    """The bytes the feed key signs for the record of entry `seq`.

    Args:
        fid: 32-byte feed id. seq: 1-based entry number. lower: lower_digest (20 bytes).
        top: the record's highest hash. bridge: 20 bytes, or None when seq is a power of two.
    Returns:
        bytes.
    """
    out = RECORD_TAG + bytes(fid) + seq.to_bytes(4, "big") + lower + top
    return out if bridge is None else out + bridge
