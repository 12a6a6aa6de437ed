"""Store adapter: tinySSB log entries and side-chain chunks as self-validating SETU elements.

An entry element is FID (32) || SEQ (4, big-endian) || PREV (20) || PKT (120) = 176 bytes:
the entry plus the context that makes it checkable (reference/tinyssb-wire.md 3.2):
  NAM = "tinyssb-v0" || FID || SEQ || PREV;  PKT[0:7] == SHA256(NAM)[0:7];
  PKT[56:120] = Ed25519 signature by FID over NAM || PKT[0:56];  MID = SHA256(NAM || PKT)[0:20].
A chunk element is FID (32) || SEQ (4) || CNR (4) || CHUNK (120) = 160 bytes: chunk CNR of
entry SEQ's side chain. A chunk is checkable only against its entry (the hash pointer
PKT[36:56] names chunk 0) and its predecessor (whose last 20 bytes name it), so chunks are
checked for shape on arrival and by hash when they are written, in order, after their entry.
`check_element` is the application check run on every received element. `StoreSource` keeps an
ElementSet in step with a store (only entries and chunks added since the last refresh are
hashed) and appends received entries and chunks to the store in order, holding early ones
until their predecessors arrive; a chunk whose hash does not match is discarded.

Every received element stays unverified (held in memory, charged to the budget's
"unverified") until it is in the store: an entry once its predecessor chain reaches the
store, a chunk once its hash matches its entry's chain. Those that never get there
(orphans, forks, forged chunks) stay charged until `release()` at the end of the sync,
so a peer cannot hold more than its budget however many elements it declared.
"""
import contextlib

from tinyssb import crypto
from tinyssb import entry as tentry
from tinyssb.errors import WireError

from tssb import feedforks, ownfeed
from tssb.session.budget import Pool

from .setstate import ElementSet

ELEMENT_TYPE = 0x7453           # "tS": our application element type for tinySSB entries
ELEMENT_SIZE = 32 + 4 + 20 + 120
CHUNK_ELEMENT_SIZE = 32 + 4 + 4 + 120
# Longer side chains are not fetched: as the host node, every post a host accepts
# (1 MiB, 10,486 chunks: tssb.ownfeed)
MAX_CHUNKS = ownfeed.MAX_CHAIN_CHUNKS


def mid_of(fid, seq, prev, pkt):
    """Message ID of an entry (first 20 bytes of SHA-256 over NAM || PKT)."""
    return tentry.mid_of(tentry.nam(fid, seq, prev), pkt)


def make_element(fid, seq, prev, pkt):
    return fid + seq.to_bytes(4, "big") + prev + pkt


def split_element(data):
    """(fid, seq, prev, pkt) of an element; raises ValueError on a wrong size."""
    if len(data) != ELEMENT_SIZE:
        raise ValueError("element size")
    return data[:32], int.from_bytes(data[32:36], "big"), data[36:56], data[56:]


def make_chunk_element(fid, seq, cnr, chunk):
    return fid + seq.to_bytes(4, "big") + cnr.to_bytes(4, "big") + chunk


def split_chunk_element(data):
    """(fid, seq, cnr, chunk) of a chunk element; raises ValueError on a wrong size."""
    if len(data) != CHUNK_ELEMENT_SIZE:
        raise ValueError("chunk element size")
    return (data[:32], int.from_bytes(data[32:36], "big"), int.from_bytes(data[36:40], "big"),
            data[40:])


def check_element(data):
    """Application check: DMX and Ed25519 signature of an entry under its context; for a
    chunk, its shape (the hash is checked against its entry when it is written)."""
    if len(data) == CHUNK_ELEMENT_SIZE:
        _, seq, cnr, _ = split_chunk_element(data)
        return seq >= 1 and cnr < MAX_CHUNKS
    try:
        fid, seq, prev, pkt = split_element(data)
    except ValueError:
        return False
    if not 1 <= seq <= 0xFFFFFFFF or (seq == 1 and prev != fid[:20]):
        return False
    try:
        tentry.check(pkt, fid, seq, prev, crypto.verify)
    except WireError:
        return False
    return True


class StoreSource:
    """Keeps an ElementSet equal to a store's entries and writes received ones back.

    Args:
        store: a feed store (shared/tinyssb/store.py interface).
        budget: tssb.session.budget.Budget charged for unverified elements (default: one
            of a private Pool with the default limits).
    """

    def __init__(self, store, budget=None):
        self.store = store
        self.budget = budget if budget is not None else Pool().budget()
        self.eset = ElementSet(ELEMENT_TYPE, check_element)
        self._cursor = {}     # fid -> (last seq added, its MID)
        self._pending = {}    # (fid, seq) -> entry element
        self._pchunks = {}    # (fid, seq, cnr) -> chunk
        self._chains = {}     # (fid, seq) -> chunks already in the set, for incomplete chains
        self.unverified = 0   # received elements not (yet) in the store
        self.bad_chunks = 0
        self.forks = 0        # forks found (tssb.feedforks)
        self._forked = set()  # (fid, seq) where a second entry arrived: its chunks are done
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
                    if chain_length(pkt):
                        self._chains[(fid, seq)] = 0
                self._cursor[fid] = (seq, prev)
            n += self._refresh_chunks()
        finally:
            self._loading = False
        return n

    def _refresh_chunks(self):
        # side chains may complete long after their entry (chunks trickle in over LoRa)
        n = 0
        for key in list(self._chains):
            fid, seq = key
            have = self._chains[key]
            count = self.store.chunk_count(fid, seq)
            while have < count:
                self.eset.add(make_chunk_element(fid, seq, have, self.store.chunk(fid, seq, have)))
                have += 1
                n += 1
            if have >= chain_length(self.store.entry(fid, seq)):
                del self._chains[key]
            else:
                self._chains[key] = have
        return n

    def release(self):
        """The sync is over: drop the elements that never reached the store (the next sync
        offers them again) and return their charge. Also unhooks us from the set, so it is
        freed as soon as the sync lets go of it (no cycle left for the garbage collector)."""
        self.budget.give("unverified", self.unverified)
        self.unverified = 0
        self._pending.clear()
        self._pchunks.clear()
        if self._on_add in self.eset.on_add:
            self.eset.on_add.remove(self._on_add)

    def _stored(self):
        self.unverified -= 1
        self.budget.give("unverified")

    def _on_add(self, data, ehash):
        if self._loading:
            return
        self.budget.take("unverified")   # BudgetExceeded ends the sync (and the session)
        self.unverified += 1
        # what this element lets us write goes in one transaction: one fsync, however
        # long the chain it completes (an fsync each held the event loop for ~0.2 s)
        begin = getattr(self.store, "transaction", contextlib.nullcontext)
        with begin():
            if len(data) == CHUNK_ELEMENT_SIZE:
                fid, seq, cnr, chunk = split_chunk_element(data)
                if (fid, seq) in self._forked:
                    self._stored()      # of the other entry at a forked seq: never stored
                    return
                self._pchunks[(fid, seq, cnr)] = chunk
                self._flush_chunks(fid, seq)
                return
            fid, seq, prev, pkt = split_element(data)
            if hasattr(self.store, "add_fork") and self.store.has_feed(fid) and \
                    seq <= self.store.front(fid)[0]:
                # a second signed entry for a seq we hold: the feed forked; the pair is
                # kept as proof (it can never join the linear log), and the entry's chunks
                # are done with as they come: nothing is outstanding that never can be stored
                if feedforks.note(self.store, fid, seq, prev, pkt):
                    self.forks += 1
                if bytes(self.store.entry(fid, seq)) != bytes(pkt):
                    self._forked.add((fid, seq))
                    for k in [k for k in self._pchunks if k[:2] == (fid, seq)]:
                        del self._pchunks[k]
                        self._stored()
                self._stored()
                return
            self._pending[(fid, seq)] = data
            self._flush(fid)

    def _flush_chunks(self, fid, seq):
        """Write the chunks of (fid, seq) that now follow on from the store, checking each
        one's hash against the pointer that names it."""
        st = self.store
        pkt = st.entry(fid, seq) if st.has_feed(fid) else None
        if pkt is None:
            return  # its entry has not arrived yet
        n = chain_length(pkt)
        have = st.chunk_count(fid, seq)
        expect = bytes(pkt[36:56]) if have == 0 else bytes(st.chunk(fid, seq, have - 1)[100:])
        while have < n and (fid, seq, have) in self._pchunks:
            chunk = self._pchunks.pop((fid, seq, have))
            if tentry.chunk_hash(chunk) != expect:
                self.bad_chunks += 1
                break
            st.put_chunk(fid, seq, have, chunk)
            self._stored()
            have += 1
            expect = bytes(chunk[100:])

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
            self._stored()
            top = seq
            if chain_length(pkt):
                self._chains[(fid, seq)] = 0  # later chunks (e.g. via LoRa) join on refresh
            self._flush_chunks(fid, seq)
        self._cursor[fid] = (top, mid)


def chain_length(pkt):
    """Chunks the side chain of an entry has (0 for plain entries, broken or too long ones)."""
    if pkt[7] != tentry.CHAIN20:
        return 0
    try:
        n = tentry.chain_info(pkt).n_chunks
    except ValueError:
        return 0
    return n if n <= MAX_CHUNKS else 0
