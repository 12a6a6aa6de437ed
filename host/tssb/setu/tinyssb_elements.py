"""Store adapter: tinySSB log entries as self-validating SETU elements.

An element is FID (32) || SEQ (4, big-endian) || PREV (20) || PKT (120) = 176 bytes: the entry
plus the context that makes it checkable (reference/tinyssb-wire.md 3.2):
  NAM = "tinyssb-v0" || FID || SEQ || PREV;  PKT[0:7] == SHA256(NAM)[0:7];
  PKT[56:120] = Ed25519 signature by FID over NAM || PKT[0:56];  MID = SHA256(NAM || PKT)[0:20].
`check_element` is the application check run on every received element. `StoreSource` keeps an
ElementSet in step with a store (only entries added since the last refresh are hashed) and
appends received entries to the store in sequence order, holding early ones until their
predecessors arrive.
"""
import hashlib

from .setstate import ElementSet

ELEMENT_TYPE = 0x7453           # "tS": our application element type for tinySSB entries
ELEMENT_SIZE = 32 + 4 + 20 + 120
_PFX = b"tinyssb-v0"
MAX_PENDING = 100000            # received-but-not-yet-appendable entries kept in memory


def _nam(fid, seq, prev):
    return _PFX + fid + seq.to_bytes(4, "big") + prev


def mid_of(fid, seq, prev, pkt):
    """Message ID of an entry (first 20 bytes of SHA-256 over NAM || PKT)."""
    return hashlib.sha256(_nam(fid, seq, prev) + pkt).digest()[:20]


def make_element(fid, seq, prev, pkt):
    return fid + seq.to_bytes(4, "big") + prev + pkt


def split_element(data):
    """(fid, seq, prev, pkt) of an element; raises ValueError on a wrong size."""
    if len(data) != ELEMENT_SIZE:
        raise ValueError("element size")
    return data[:32], int.from_bytes(data[32:36], "big"), data[36:56], data[56:]


def check_element(data):
    """Application check: DMX and Ed25519 signature of the entry under its context."""
    try:
        from nacl.exceptions import BadSignatureError
        from nacl.signing import VerifyKey
        fid, seq, prev, pkt = split_element(data)
    except ValueError:
        return False
    if seq < 1 or (seq == 1 and prev != fid[:20]):
        return False
    nam = _nam(fid, seq, prev)
    if hashlib.sha256(nam).digest()[:7] != pkt[:7]:
        return False
    try:
        VerifyKey(fid).verify(nam + pkt[:56], pkt[56:])
    except (BadSignatureError, ValueError, TypeError):
        return False
    return True


class StoreSource:
    """Keeps an ElementSet equal to a store's entries and writes received ones back.

    Args:
        store: a feed store (shared/tinyssb/store.py interface).
    """

    def __init__(self, store):
        self.store = store
        self.eset = ElementSet(ELEMENT_TYPE, check_element)
        self._cursor = {}     # fid -> (last seq added, its MID)
        self._pending = {}    # (fid, seq) -> element
        self._loading = False
        self.eset.on_add.append(self._on_add)

    def refresh(self):
        """Add store entries that arrived since the last refresh; returns how many."""
        n = 0
        self._loading = True
        try:
            for fid in self.store.feeds():
                seq, prev = self._cursor.get(fid, (0, fid[:20]))
                top, _ = self.store.front(fid)
                while seq < top:
                    pkt = self.store.entry(fid, seq + 1)
                    self.eset.add(make_element(fid, seq + 1, prev, pkt))
                    seq += 1
                    prev = mid_of(fid, seq, prev, pkt)
                    n += 1
                self._cursor[fid] = (seq, prev)
        finally:
            self._loading = False
        return n

    def _on_add(self, data, ehash):
        if self._loading:
            return
        fid, seq, prev, pkt = split_element(data)
        if len(self._pending) >= MAX_PENDING:
            return  # still in the set; the next sync offers it again
        self._pending[(fid, seq)] = data
        self._flush(fid)

    def _flush(self, fid):
        st = self.store
        st.add_feed(fid)
        top, mid = st.front(fid)
        while (fid, top + 1) in self._pending:
            _, seq, prev, pkt = split_element(self._pending.pop((fid, top + 1)))
            if prev != mid:
                break  # a fork: not ours to resolve here; keep the store linear
            mid = mid_of(fid, seq, prev, pkt)
            st.append(fid, seq, pkt, mid)
            top = seq
        self._cursor[fid] = (top, mid)
