"""The rateless profile's state, kept in the host's SQLite store and persisted with it.

`RatelessStoreSet(store)` is the set a rateless sync runs on, without loading or rehashing the
store: its coded-symbol prefix (rateless_prefix.RatelessPrefix, saved as one blob), an index
from 5-byte keys to (feed, seq, chunk) rows, and a cursor per feed and per incomplete side
chain (store migration 2). `refresh()` reads only what was appended since the last refresh
(entries in sequence order, chunks as their chains fill), adds their keys to the prefix in one
batch and commits keys, cursors and prefix in one transaction, so a crash leaves the last
consistent state and the next refresh catches up. Elements are rebuilt from the store when a
sync needs them. Received elements are written to the store in order (StoreSource's writer)
and indexed by the next refresh.

`StoreSets(store)` gives a SETU responder the set for the profile a peer proposes: this one for
`rateless`, the in-memory ElementSet (StoreSource) for tssb2 and GNUnet.
"""
import logging

from . import constants as C
from .profiles import element_hash
from .rateless import prefix_length
from .rateless_prefix import RatelessPrefix, element_key, key_int
from .tinyssb_elements import (ELEMENT_SIZE, ELEMENT_TYPE, StoreSource, chain_length,
                               check_element, make_chunk_element, make_element)

log = logging.getLogger("tssb.setu")


class RatelessStoreSet:
    """A store's elements as a rateless SETU set (the interface RatelessMachine uses).

    Args:
        store: tssb.store.Store (SQLite, migration 2 applied).
        budget: tssb.session.budget.Budget for received elements not yet in the store
            (default: a private one, see StoreSource).
    """

    etype = ELEMENT_TYPE
    check = staticmethod(check_element)

    def __init__(self, store, budget=None):
        self.store = store
        self.db = store.db
        self._writer = StoreSource(store, budget)   # unverified elements charged to budget
        self._recv = set()            # hashes received in this process, not yet indexed
        row = self.store._one("SELECT state FROM setu_rl_state WHERE id = 1")
        self.loaded = row is not None
        self.prefix = None
        if row is not None:
            try:
                self.prefix = RatelessPrefix.from_bytes(row[0])
            except ValueError as e:   # a damaged blob: rebuild from the store, losing nothing
                log.warning("rateless state unreadable (%s); rebuilding", e)
                self._reset()

    def _reset(self):
        with self.store.transaction():
            for t in ("setu_rl_state", "setu_rl_keys", "setu_rl_cursor", "setu_rl_chains"):
                self.db.execute("DELETE FROM " + t)
        self.prefix = None
        self.loaded = False

    # -- upkeep ------------------------------------------------------------------------

    def refresh(self):
        """Index entries and chunks appended since the last refresh. Returns how many."""
        st = self.store
        rows, keys = [], []
        with st.transaction():
            self._catch_up()
            cursors = {r[0]: (r[1], r[2]) for r in
                       st._q("SELECT fid, seq, mid FROM setu_rl_cursor")}
            chains = []
            for fid in st.feeds():
                seq, prev = cursors.get(fid, (0, fid[:20]))
                new = st._q("SELECT seq, pkt, mid FROM entries WHERE fid=? AND seq>? ORDER BY seq",
                            (fid, seq))
                for s, pkt, mid in new:
                    if s != seq + 1:
                        break                  # the store is linear; never index past a gap
                    k = element_key(element_hash(ELEMENT_TYPE, make_element(fid, s, prev, pkt)))
                    rows.append((key_int(k), fid, s, -1))
                    keys.append(k)
                    if chain_length(pkt):
                        chains.append((fid, s, 0))
                    seq, prev = s, mid
                if new:
                    self.db.execute("INSERT OR REPLACE INTO setu_rl_cursor VALUES (?, ?, ?)",
                                    (fid, seq, prev))
            self.db.executemany("INSERT INTO setu_rl_chains VALUES (?, ?, ?)", chains)
            for fid, seq, have in st._q("SELECT fid, seq, have FROM setu_rl_chains"):
                count = st.chunk_count(fid, seq)
                for cnr in range(have, count):
                    data = make_chunk_element(fid, seq, cnr, st.chunk(fid, seq, cnr))
                    k = element_key(element_hash(ELEMENT_TYPE, data))
                    rows.append((key_int(k), fid, seq, cnr))
                    keys.append(k)
                if count >= chain_length(st.entry(fid, seq)):
                    self.db.execute("DELETE FROM setu_rl_chains WHERE fid=? AND seq=?", (fid, seq))
                elif count > have:
                    self.db.execute("UPDATE setu_rl_chains SET have=? WHERE fid=? AND seq=?",
                                    (count, fid, seq))
            self.db.executemany("INSERT INTO setu_rl_keys VALUES (?, ?, ?, ?)", rows)
            if self.prefix is None:
                self.prefix = RatelessPrefix(prefix_length(len(keys)))
            for k in keys:
                self.prefix.add_key(k)
            self.prefix.flush()
            if self.prefix.m < prefix_length(len(self.prefix)):
                self.prefix.extend(prefix_length(len(self.prefix)))
            if keys or not self.loaded or self.prefix.upgraded:
                self.db.execute("INSERT OR REPLACE INTO setu_rl_state VALUES (1, ?)",
                                (self.prefix.to_bytes(),))
                self.loaded = True
                self.prefix.upgraded = False
        self._recv.clear()
        return len(keys)

    def _catch_up(self):
        """Reload the kept prefix if another RatelessStoreSet on this store (another session
        of `tssb serve`) refreshed it since we loaded, so we never save a stale one."""
        row = self.store._one("SELECT substr(state, 1, 16) FROM setu_rl_state WHERE id = 1")
        if row is None or self.prefix is None:
            return
        if int.from_bytes(row[0][12:16], "little") != len(self.prefix):
            self.prefix = RatelessPrefix.from_bytes(
                self.store._one("SELECT state FROM setu_rl_state WHERE id = 1")[0])

    # -- the set interface ---------------------------------------------------------------

    def __len__(self):
        return len(self.prefix) if self.prefix is not None else 0

    def avg_element_size(self):
        return ELEMENT_SIZE

    def rateless(self, m):
        if self.prefix is None:
            self.refresh()
        if self.prefix.m < m:
            self.prefix.extend(m)
        return self.prefix

    def _rows(self, key):
        return self.store._q("SELECT fid, seq, cnr FROM setu_rl_keys WHERE key=?", (key_int(key),))

    def has_rateless_key(self, key):
        return bool(self._rows(key))

    def rateless_elements(self, key):
        st = self.store
        out = []
        for fid, seq, cnr in self._rows(key):
            if cnr >= 0:
                out.append(make_chunk_element(fid, seq, cnr, st.chunk(fid, seq, cnr)))
                continue
            prev = fid[:20] if seq == 1 else \
                st._one("SELECT mid FROM entries WHERE fid=? AND seq=?", (fid, seq - 1))[0]
            out.append(make_element(fid, seq, prev, st.entry(fid, seq)))
        return out

    def rateless_keys(self):
        return [k.to_bytes(5, "little") for (k,) in self.store._q("SELECT key FROM setu_rl_keys")]

    def has(self, ehash):
        if ehash in self._recv:
            return True
        return any(element_hash(ELEMENT_TYPE, e) == ehash
                   for e in self.rateless_elements(element_key(ehash)))

    def outstanding(self):
        """Received elements not (yet) in the store: waiting for their predecessors, or
        dropped (a chunk whose hash did not match)."""
        return self._writer.unverified + self._writer.bad_chunks

    def add(self, data, ehash=None):
        """A received (checked) element: written to the store in order; indexed on refresh."""
        if ehash is None:
            ehash = element_hash(ELEMENT_TYPE, data)
        if len(data) > C.MAX_ELEMENT_SIZE or ehash in self._recv:
            return None
        self._recv.add(ehash)
        self._writer._on_add(bytes(data), ehash)
        return ehash


class StoreSets:
    """The set a SETU operation needs, built only for the profile in use.

    `for_profile(pid)` returns a RatelessStoreSet (refreshed) for the rateless profile and the
    ElementSet of a refreshed StoreSource otherwise (`refreshed`: how many elements that
    refresh indexed); `finish()` indexes what a rateless sync received; `release()` returns
    the budget charge of what never reached the store.
    """

    def __init__(self, store, budget=None):
        self.store = store
        self.budget = budget
        self.used = None
        self.refreshed = 0
        self._source = None       # the StoreSource writing what this operation receives

    def __len__(self):
        return self.store._one("SELECT COUNT(*) FROM entries")[0]

    def for_profile(self, pid):
        if pid == C.PROFILE_RATELESS:
            self.used = RatelessStoreSet(self.store, self.budget)
            self._source = self.used._writer
            self.refreshed = self.used.refresh()
            return self.used
        self._source = StoreSource(self.store, self.budget)
        self.refreshed = self._source.refresh()
        return self._source.eset

    def finish(self):
        if self.used is not None:
            self.used.refresh()

    def release(self):
        """The sync is over: give back the unverified charge and let go of the set."""
        if self._source is not None:
            self._source.release()
        self.used = self._source = None
