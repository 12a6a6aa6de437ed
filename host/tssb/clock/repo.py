"""Where the clock protocols find and keep events.

* FeedRepo: entities are tinySSB feeds. The linear log lives in the feed store
  (contract 1: `tinyssb.store.MemStore` or the host's SQLite `tssb.store.Store`); entries
  that fork off it (a second entry for a seq) cannot go into an append-only log, so they
  live in the table `clock_events` of the same database. Side-chain chunks of log entries
  travel with their entry (`chunks`, `save_chunks`); the store keys chunks by (FID, seq),
  so a fork entry's chunks are neither kept nor sent.
* ThreadRepo: entities are threads of signed events (events.py), all in `clock_events`.
  Counter threads are verified on the way in (`admit`), offenders are blocked in
  `clock_blocked`, and messages under Rule 2's temporary block wait in `clock_held`,
  outside the synced thread DAG.

Both use one sqlite3 connection (`ctx.store.db` on a host, ":memory:" in tests); the
tables are created here.
"""
import time

from tssb.clock import counter as C
from tssb.clock import events as E
from tssb.clock import forks
from tssb.clock.dag import EventDAG
from tssb.clock.errors import ClockError, CounterError

KIND_FEED = 0
KIND_SIGNED = 1
# Joins kept per feed from distinct resolvers (ours always fits): anyone holding a real
# fork proof can sign joins under fresh keys, so the table must not grow without bound.
MAX_JOINS_PER_FEED = 32

SCHEMA = """
CREATE TABLE IF NOT EXISTS clock_events (
    eid  BLOB PRIMARY KEY,      -- 20-byte event id (MID for feed entries)
    key  BLOB NOT NULL,         -- entity: FID or thread root id
    kind INTEGER NOT NULL,      -- 0 feed entry off the linear log, 1 signed event
    raw  BLOB NOT NULL          -- wire form, re-validated on load
);
CREATE INDEX IF NOT EXISTS clock_events_key ON clock_events(key);
CREATE TABLE IF NOT EXISTS clock_forks (
    fid   BLOB NOT NULL,
    seq   INTEGER NOT NULL,
    proof BLOB NOT NULL,        -- forks.encode_proof()
    PRIMARY KEY (fid, seq)
);
CREATE TABLE IF NOT EXISTS clock_blocked (
    root   BLOB NOT NULL,       -- the counter (thread root id) whose rules were broken
    author BLOB NOT NULL,
    reason TEXT NOT NULL,       -- CounterError reason (counter.RULES)
    eid    BLOB,                -- the offending event (not stored)
    ts     INTEGER NOT NULL,    -- when we decided, ms
    PRIMARY KEY (root, author)  -- the first decision stays
);
CREATE TABLE IF NOT EXISTS clock_held (
    eid  BLOB PRIMARY KEY,      -- counter message under Rule 2's temporary block
    key  BLOB NOT NULL,         -- counter root id
    raw  BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS clock_interest (
    key BLOB PRIMARY KEY        -- thread roots this host replicates
);
CREATE TABLE IF NOT EXISTS clock_joins (
    fid      BLOB NOT NULL,
    resolver BLOB NOT NULL,     -- signer of the join (us, the feed owner or another peer)
    jid      BLOB NOT NULL,     -- forks.join_id(raw)
    ts       INTEGER NOT NULL,
    agreed   INTEGER NOT NULL,  -- 1: matched our copy of the feed when stored
    raw      BLOB NOT NULL,     -- forks.make_join() form, re-validated on use
    PRIMARY KEY (fid, resolver) -- one join per resolver and feed: the newest
);
"""


def init_db(db):
    """Create the clock tables if missing."""
    cols = [r[1] for r in db.execute("PRAGMA table_info(clock_blocked)")]
    if cols and "root" not in cols:
        # First layout (author only), which nothing ever wrote to: replace it.
        if db.execute("SELECT 1 FROM clock_blocked LIMIT 1").fetchone():
            raise ClockError("schema", "clock_blocked has rows in the old layout")
        db.execute("DROP TABLE clock_blocked")
    db.executescript(SCHEMA)
    db.commit()


class _Base:
    kind = None

    def __init__(self, db, n, k):
        self.db = db
        self.n = n
        self.k = k
        init_db(db)

    def _extra(self, key):
        rows = self.db.execute("SELECT raw FROM clock_events WHERE key = ? AND kind = ?",
                               (key, self.kind)).fetchall()
        return [r[0] for r in rows]

    def chunks(self, ev):
        """Side-chain chunks to send with an event (none: only feed entries have them)."""
        return []

    def save_chunks(self, ev):
        """Store the chunks that came with an event; returns how many were new."""
        return 0

    def _insert(self, ev):
        self.db.execute("INSERT OR IGNORE INTO clock_events (eid, key, kind, raw) VALUES (?,?,?,?)",
                        (ev.eid, ev.key, self.kind, ev.raw))
        self.db.commit()

    def _fill(self, dag, raws):
        """Insert stored events in dependency order (they were validated on arrival)."""
        evs = [self.parse(r) for r in raws]
        progress = True
        while evs and progress:
            progress = False
            rest = []
            for ev in evs:
                if ev.key == dag.key and dag.can_add(ev):
                    dag.add(ev)
                    progress = True
                else:
                    rest.append(ev)
            evs = rest


class FeedRepo(_Base):
    """Feeds of a tinySSB store plus their fork entries."""
    kind = KIND_FEED

    def __init__(self, store, db, n, k):
        _Base.__init__(self, db, n, k)
        self.store = store

    def keys(self):
        return [bytes(f) for f in self.store.feeds()]

    def has(self, key):
        return self.store.has_feed(key)

    def parse(self, raw, chunks=()):
        return E.parse_feed_event(raw, chunks)

    def _in_log(self, ev):
        return self.store.entry(ev.key, ev.seq) == ev.raw[56:]

    def chunks(self, ev):
        """The chunks we hold of a log entry's side chain, at most E.MAX_EVENT_CHUNKS
        (an event not in the log, e.g. still pending, keeps those it came with)."""
        n = min(E.chain_chunks(ev.raw[56:]), E.MAX_EVENT_CHUNKS)
        if n == 0:
            return []
        if not self._in_log(ev):
            return list(ev.chunks[:n])
        n = min(n, self.store.chunk_count(ev.key, ev.seq))
        return [self.store.chunk(ev.key, ev.seq, cnr) for cnr in range(n)]

    def save_chunks(self, ev):
        """Append the received chunks (validated on parse) that the store lacks to a log
        entry's side chain. Both are prefixes of the same hash chain, so the new ones
        continue the stored ones. Returns how many were stored."""
        if not ev.chunks or not self._in_log(ev):
            return 0
        have = self.store.chunk_count(ev.key, ev.seq)
        for cnr in range(have, len(ev.chunks)):
            self.store.put_chunk(ev.key, ev.seq, cnr, ev.chunks[cnr])
        return max(0, len(ev.chunks) - have)

    def load(self, fid):
        """EventDAG of a feed: the store's log (trusted, not re-verified) + fork entries."""
        dag = EventDAG(fid, self.n, self.k)
        prev = fid[:E.HASH_LEN]
        seq = 1
        while True:
            pkt = self.store.entry(fid, seq)
            if pkt is None:
                break
            mid = E.entry_mid(fid, seq, prev, pkt)
            raw = E.feed_event_bytes(fid, seq, prev, pkt)
            dag.add(E.Event(mid, (prev,), raw, fid, seq=seq, author=fid,
                            body=bytes(pkt[8:56]), is_root=seq == 1))
            prev = mid
            seq += 1
        self._fill(dag, self._extra(fid))
        return dag

    def save(self, ev):
        """Persist an accepted feed event: append to the log when it extends it, else keep
        it as a fork entry."""
        fid = ev.key
        if not self.store.has_feed(fid):
            raise ClockError("not_replicated")
        max_seq, front = self.store.front(fid)
        if ev.seq == max_seq + 1 and ev.prevs[0] == front:
            self.store.append(fid, ev.seq, ev.raw[56:], ev.eid)
        else:
            self._insert(ev)

    def record_fork(self, fid, seq, proof):
        self.db.execute("INSERT OR IGNORE INTO clock_forks (fid, seq, proof) VALUES (?,?,?)",
                        (fid, seq, proof))
        self.db.commit()

    def forks(self):
        return self.db.execute("SELECT fid, seq, proof FROM clock_forks ORDER BY fid, seq").fetchall()

    def store_join(self, join, agreed, own=False):
        """Keep a verified join (forks.Join): one per (feed, resolver), the newest by ts.

        Args:
            agreed: the join matched our copy of the feed (forks.check_join) on arrival.
            own: our own join; never refused for lack of room.
        Returns:
            "stored", "replaced", "old" (we hold a newer or equal one of this resolver) or
            "full" (MAX_JOINS_PER_FEED other resolvers already; refused).
        """
        row = self.db.execute("SELECT ts FROM clock_joins WHERE fid = ? AND resolver = ?",
                              (join.fid, join.resolver)).fetchone()
        if row is not None and row[0] >= join.ts:
            return "old"
        if row is None and not own:
            n = self.db.execute("SELECT COUNT(*) FROM clock_joins WHERE fid = ?",
                                (join.fid,)).fetchone()[0]
            if n >= MAX_JOINS_PER_FEED:
                return "full"
        self.db.execute("INSERT OR REPLACE INTO clock_joins (fid, resolver, jid, ts, agreed, raw) "
                        "VALUES (?,?,?,?,?,?)", (join.fid, join.resolver, forks.join_id(join.raw),
                                                 join.ts, int(bool(agreed)), join.raw))
        self.db.commit()
        return "stored" if row is None else "replaced"

    def joins(self, fid=None):
        """Stored joins as (fid, resolver, jid, ts, agreed, raw), newest first per feed."""
        sql = "SELECT fid, resolver, jid, ts, agreed, raw FROM clock_joins"
        if fid is None:
            return self.db.execute(sql + " ORDER BY fid, ts DESC, resolver").fetchall()
        return self.db.execute(sql + " WHERE fid = ? ORDER BY ts DESC, resolver",
                               (fid,)).fetchall()

    def join_of(self, fid, resolver):
        """The raw join of one resolver for a feed, or None."""
        row = self.db.execute("SELECT raw FROM clock_joins WHERE fid = ? AND resolver = ?",
                              (fid, resolver)).fetchone()
        return row[0] if row else None


class ThreadRepo(_Base):
    """Threads of signed events; the threads of interest are listed in clock_interest.

    Counter threads (root = a counter Initiate, counter.py) are verified: `admit`, the
    thread sync's hook, runs each received event through a CounterState built from the
    store before it is stored; offenders are blocked in clock_blocked (loaded with every
    CounterState); messages under Rule 2's temporary block are kept in clock_held, out of
    the thread DAG that is synced and digested, and move in (or back out) whenever the
    state changes. Other threads are stored as they come.

    Args:
        db, n, k: as for FeedRepo.
        now: callable returning the clock in ms (the "future" rule); default wall clock.
    """
    kind = KIND_SIGNED

    def __init__(self, db, n, k, now=None):
        _Base.__init__(self, db, n, k)
        self.now = now or (lambda: int(time.time() * 1000))
        self._counters = {}     # root -> _Counter, or None for a plain thread

    def keys(self):
        return [r[0] for r in self.db.execute("SELECT key FROM clock_interest ORDER BY key")]

    def has(self, key):
        return self.db.execute("SELECT 1 FROM clock_interest WHERE key = ?", (key,)).fetchone() is not None

    def follow(self, key):
        """Declare interest in a thread (by its root id)."""
        self.db.execute("INSERT OR IGNORE INTO clock_interest (key) VALUES (?)", (bytes(key),))
        self.db.commit()

    def parse(self, raw, chunks=()):
        if chunks:
            raise ClockError("chunks")   # signed events have no side chain
        return E.parse_signed_event(raw)

    def load(self, key):
        """EventDAG of a thread (for a counter: its verified messages minus the held ones;
        re-read from the store)."""
        dag = EventDAG(key, self.n, self.k)
        c = self._counter(key, fresh=True)
        if c:
            self._fill(dag, [c.state.msgs[e].raw for e in c.dag_ids])
        else:
            self._fill(dag, self._extra(key))
        return dag

    def admit(self, ev, final=False):
        """Thread-sync hook, called before a received event enters its thread DAG.

        Args:
            ev: a validated signed event.
            final: every event the peer holds has arrived (an increment whose author's
                join is still missing is then rejected).
        Returns:
            "add" (store it in the DAG), "held" (kept in clock_held under Rule 2's
            temporary block: known, not propagated) or "wait" (references, the thread
            root or the author's join not here yet).
        Raises:
            ClockError: "rejected:<reason>": it breaks a counter rule (counter.RULES) or is
                malformed; for a CounterError the author is now blocked in clock_blocked.
        """
        c = self._counter(ev.key)
        if c is None:
            return "add"
        if c is False:
            return "add" if ev.is_root else "wait"
        if ev.eid in c.held:
            return "held"
        st = c.state
        try:
            st.ingest(ev, self.now(), final)
        except CounterError as e:
            if e.reason != "blocked":
                self._block(ev.key, ev, e.reason)
            raise ClockError("rejected:" + e.reason, e.detail)
        except ClockError as e:
            if e.reason in ("unknown_ref", "unknown_participant"):
                return "wait"
            raise ClockError("rejected:" + e.reason, e.detail)
        if ev.eid not in c.dag_ids and (st.holds(ev) or any(p in c.held for p in ev.prevs)):
            self._move(c, ev, True)
            return "held"
        return "add"

    def save(self, ev):
        """Persist an event admitted into the DAG.

        Returns:
            True when the counter's temporary holds moved other events into or out of the
            thread DAG (the caller must reload it), else False.
        """
        c = self._counter(ev.key)
        if c and ev.eid not in c.state.msgs and self.admit(ev, final=True) != "add":
            return False
        self._insert(ev)
        if not c:
            return False
        c.dag_ids.add(ev.eid)
        return self._rebalance(c)

    def post(self, ev):
        """Store a locally produced event (and follow its thread). A counter message is
        verified first; a refusal blocks nobody (it is ours) and stores nothing.

        Returns:
            "stored", or "held" (kept back by Rule 2's temporary block until released).
        Raises:
            CounterError: the counter's rules refuse it (reason in counter.RULES).
            ClockError: "unknown_ref" and malformed messages.
        """
        self.follow(ev.key)
        c = self._counter(ev.key)
        if c:
            c.state.check(ev, self.now())
            if self.admit(ev, final=True) == "held":
                return "held"
            self.save(ev)
        else:
            self._insert(ev)
        return "stored"

    # -- counters ---------------------------------------------------------------------

    def counter(self, key):
        """CounterState of counter `key` from the store (blocks loaded), or None when the
        thread is not a counter or its root is unknown."""
        c = self._counter(key, fresh=True)
        return c.state if c else None

    def held(self, key):
        """Held messages of a counter (events), oldest first."""
        c = self._counter(key)
        return sorted(c.held.values(), key=lambda ev: (ev.ts, ev.eid)) if c else []

    def rejected(self, key):
        """(event, CounterError) of stored messages that failed verification when the
        counter was last rebuilt (left out of the DAG; their authors are blocked)."""
        c = self._counter(key)
        return list(c.rejected) if c else []

    def blocked(self, key):
        """Authors blocked for a counter: rows (author, reason, eid, ts), oldest first."""
        return self.db.execute("SELECT author, reason, eid, ts FROM clock_blocked WHERE root = ? "
                               "ORDER BY ts, author", (key,)).fetchall()

    def _block(self, key, ev, reason):
        self.db.execute("INSERT OR IGNORE INTO clock_blocked (root, author, reason, eid, ts) "
                        "VALUES (?,?,?,?,?)", (key, ev.author, reason, ev.eid, self.now()))
        self.db.commit()

    def _counter(self, key, fresh=False):
        """The verified view of counter `key`: a _Counter, None for a plain thread, False
        while the thread root is not stored."""
        if not fresh and key in self._counters:
            return self._counters[key]
        row = self.db.execute("SELECT raw FROM clock_events WHERE eid = ? AND kind = ?",
                              (key, self.kind)).fetchone()
        if row is None:
            return False
        try:
            st = C.CounterState(self.parse(row[0]))
        except ClockError:
            self._counters[key] = None
            return None
        c = _Counter(st)
        stored = [(raw, False) for raw in self._extra(key)] + [
            (r[0], True) for r in self.db.execute("SELECT raw FROM clock_held WHERE key = ?", (key,))]
        evs, where = [], {}
        for raw, in_held in stored:
            try:
                ev = self.parse(raw)
            except ClockError:
                continue
            if ev.eid != key:
                evs.append(ev)
                where[ev.eid] = in_held
        # Replay: events were verified on arrival, but joins are not back references, so
        # a first pass lets increments wait for their author's join (final=False).
        todo = sorted(evs, key=lambda ev: (ev.ts, ev.eid))
        for final in (False, True):
            progress = True
            while todo and progress:
                progress, rest = False, []
                for ev in todo:
                    try:
                        st.ingest(ev, None, final)
                        progress = True
                    except CounterError as e:
                        c.rejected.append((ev, e))
                        self._block(key, ev, e.reason)
                    except ClockError:
                        rest.append(ev)
                todo = rest
        for author, reason in self.db.execute(
                "SELECT author, reason FROM clock_blocked WHERE root = ?", (key,)):
            st.blocked.setdefault(author, reason)
        c.dag_ids = {key} | {e for e in st.msgs if e in where and not where[e]}
        c.held = {e: st.msgs[e] for e in st.msgs if where.get(e)}
        self._counters[key] = c
        self._rebalance(c)
        return c

    def _move(self, c, ev, to_held):
        if to_held:
            self.db.execute("DELETE FROM clock_events WHERE eid = ?", (ev.eid,))
            self.db.execute("INSERT OR IGNORE INTO clock_held (eid, key, raw) VALUES (?,?,?)",
                            (ev.eid, ev.key, ev.raw))
            c.dag_ids.discard(ev.eid)
            c.held[ev.eid] = ev
        else:
            self.db.execute("DELETE FROM clock_held WHERE eid = ?", (ev.eid,))
            self.db.execute("INSERT OR IGNORE INTO clock_events (eid, key, kind, raw) VALUES (?,?,?,?)",
                            (ev.eid, ev.key, self.kind, ev.raw))
            c.held.pop(ev.eid, None)
            c.dag_ids.add(ev.eid)
        self.db.commit()

    def _rebalance(self, c):
        """Apply the temporary block to the stored split: release held messages it no
        longer covers (unless their author was blocked meanwhile), hold back DAG messages
        it now covers that nothing in the DAG refers to. The verdicts depend only on the
        counter state, which counts held messages too, so the loop ends.

        Returns:
            True when something moved.
        """
        st = c.state
        moved = changed = False
        while True:
            changed = False
            for eid in sorted(c.held):
                ev = c.held[eid]
                if ev.author not in st.blocked and not st.holds(ev) \
                        and all(p in c.dag_ids for p in ev.prevs):
                    self._move(c, ev, False)
                    changed = True
            referenced = {p for e in c.dag_ids for p in st.msgs[e].prevs}
            for eid in sorted(c.dag_ids - referenced):
                ev = st.msgs[eid]
                if st.holds(ev):
                    self._move(c, ev, True)
                    changed = True
            if not changed:
                return moved
            moved = True


class _Counter:
    """Cached view of one counter thread: its state (every accepted message, held or
    not), which message ids are in the DAG, which are held, and replay rejections."""

    def __init__(self, state):
        self.state = state
        self.dag_ids = set()
        self.held = {}
        self.rejected = []
