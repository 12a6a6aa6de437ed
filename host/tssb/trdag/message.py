"""DAG messages carried in tinySSB feeds, and the element that moves one between hosts.

Content of a DAG message (BIPF list, in a chain20 log entry of its author's feed):

    ["tdag", ROOT, [CHILD, ...], DEPTH, TEXT]

  ROOT    20-byte MID of the DAG's root message; None in the root message itself
  CHILD   20-byte MIDs of the tips the author knew (the transitive reduction); [] for root
  DEPTH   max(child depth) + 1; 0 for the root
  TEXT    UTF-8 application text

A message's ID is the MID of its log entry (20 bytes), so messages from many feeds join
one DAG. An element is the entry with the context that makes it checkable on its own:

    FID(32) || SEQ(4, big-endian) || PREV(20) || PKT(120) || CHUNK(120) * n

n is fixed by the entry's chain20 length field, so the element carries no count.
"""

from tinyssb import bipf, crypto, entry
from tinyssb.errors import WireError
from tssb.trdag.errors import TrdagError

TAG = "tdag"
ID_LEN = entry.HASH_LEN                  # MID length (tinySSB: 20)
MAX_CHILDREN = 32                        # tips referenced per message; more are dropped oldest-first
MAX_TEXT = 1024                          # bytes of application text per message
# Largest content: tag + root + 32 children + depth + text, with BIPF headers, rounded up.
MAX_CONTENT = 2048
MAX_CHUNKS = (MAX_CONTENT - entry.INLINE + entry.CHUNK_DATA - 1) // entry.CHUNK_DATA + 1
ELEMENT_HEAD = entry.FID_LEN + 4 + entry.HASH_LEN + entry.PKT_LEN   # 176
MAX_ELEMENT = ELEMENT_HEAD + MAX_CHUNKS * entry.PKT_LEN
MAX_DEPTH = 1 << 30                      # far above any DAG we can hold; keeps ints small


class DagMsg:
    """One DAG message with its log entry. `root` is the DAG's root ID (the message's own
    ID for the root message)."""
    __slots__ = ("mid", "root", "depth", "children", "text", "fid", "seq", "prev", "pkt", "chunks")

    def __init__(self, mid, root, depth, children, text, fid, seq, prev, pkt, chunks):
        self.mid = mid
        self.root = root
        self.depth = depth
        self.children = tuple(children)
        self.text = text
        self.fid = fid
        self.seq = seq
        self.prev = prev
        self.pkt = pkt
        self.chunks = tuple(chunks)

    @property
    def is_root(self):
        return self.depth == 0

    def element(self):
        """Returns: the element bytes (entry plus context) for transfer."""
        return b"".join((self.fid, self.seq.to_bytes(4, "big"), self.prev, self.pkt) + self.chunks)


def encode_content(root, children, depth, text):
    """BIPF content of a DAG message. Raises ValueError on out-of-range fields."""
    raw = text.encode("utf-8")
    if len(raw) > MAX_TEXT:
        raise ValueError("text longer than %d bytes" % MAX_TEXT)
    if len(children) > MAX_CHILDREN:
        raise ValueError("more than %d children" % MAX_CHILDREN)
    return bipf.encode([TAG, root, list(children), depth, text])


def decode_content(buf):
    """Parse and check the shape of DAG content.

    Returns:
        (root or None, children list, depth, text)
    Raises:
        TrdagError: bad_content (with the detail) for anything not a DAG message.
    """
    if len(buf) > MAX_CONTENT:
        raise TrdagError("bad_content", "too long")
    try:
        v = bipf.decode(buf)
    except WireError as e:
        raise TrdagError("bad_content", e.reason)
    if not isinstance(v, list) or len(v) != 5 or v[0] != TAG:
        raise TrdagError("bad_content", "not a tdag list")
    _, root, children, depth, text = v
    if not isinstance(children, list) or len(children) > MAX_CHILDREN:
        raise TrdagError("bad_content", "children")
    for c in children:
        if not isinstance(c, bytes) or len(c) != ID_LEN:
            raise TrdagError("bad_content", "child id")
    if len(set(children)) != len(children):
        raise TrdagError("bad_content", "duplicate child")
    if type(depth) is not int or not 0 <= depth <= MAX_DEPTH:
        raise TrdagError("bad_content", "depth")
    if not isinstance(text, str) or len(text.encode("utf-8")) > MAX_TEXT:
        raise TrdagError("bad_content", "text")
    if root is None:
        if children or depth != 0:
            raise TrdagError("bad_content", "root message with children or depth")
    elif not isinstance(root, bytes) or len(root) != ID_LEN or not children or depth < 1:
        raise TrdagError("bad_content", "non-root message fields")
    return root, children, depth, text


def signer(seed):
    """Returns: (fid, sign) for an Ed25519 seed; sign(msg) -> 64-byte signature."""
    seed = bytes(seed)
    return crypto.publickey(seed), lambda msg: crypto.sign(seed, msg)


def create(author, root, children, depth, text):
    """Append a DAG message to a feed through an `entry.Author`.

    Args:
        author: tinyssb.entry.Author of the writing feed (its seq/prev advance).
        root: root ID, or None to create a new DAG; children, depth, text: see module doc.
    Returns:
        DagMsg
    """
    content = encode_content(root, children, depth, text)
    prev = author.prev
    seq, pkt, mid, chunks = author.next(content)
    return DagMsg(mid, mid if root is None else root, depth, children, text,
                  author.fid, seq, prev, pkt, chunks)


def parse_element(buf):
    """Validate an element: entry position, signature, side chain, DAG content shape.

    DAG rules that need other messages (children known, depth) are checked on admission
    (dagstore). Returns: DagMsg. Raises: TrdagError("bad_message", detail).
    """
    n = len(buf)
    if n < ELEMENT_HEAD or n > MAX_ELEMENT or (n - ELEMENT_HEAD) % entry.PKT_LEN:
        raise TrdagError("bad_message", "element length %d" % n)
    buf = bytes(buf)
    fid = buf[0:32]
    seq = int.from_bytes(buf[32:36], "big")
    prev = buf[36:56]
    pkt = buf[56:176]
    chunks = [buf[i:i + entry.PKT_LEN] for i in range(ELEMENT_HEAD, n, entry.PKT_LEN)]
    if seq < 1:
        raise TrdagError("bad_message", "seq 0")
    try:
        mid = entry.check(pkt, fid, seq, prev, crypto.verify)
        if pkt[7] != entry.CHAIN20:
            raise TrdagError("bad_message", "not a chain20 entry")
        info = entry.chain_info(pkt)
    except WireError as e:
        raise TrdagError("bad_message", e.reason)
    if info.length > MAX_CONTENT or info.n_chunks != len(chunks):
        raise TrdagError("bad_message", "content length or chunk count")
    expect = info.hptr
    for c in chunks:                      # each chunk is named by its predecessor
        if entry.chunk_hash(c) != expect:
            raise TrdagError("bad_message", "side chain hash")
        expect = c[entry.CHUNK_DATA:]
    if expect != entry.ZERO_HASH:
        raise TrdagError("bad_message", "side chain not terminated")
    root, children, depth, text = decode_content(entry.content(pkt, chunks))
    return DagMsg(mid, mid if root is None else root, depth, children, text,
                  fid, seq, prev, pkt, chunks)
