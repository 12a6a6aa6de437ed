"""Where the clock protocols find and keep events.

* FeedRepo: entities are tinySSB feeds. The linear log lives in the feed store
  (contract 1: `tinyssb.store.MemStore` or the host's SQLite `tssb.store.Store`); entries
  that fork off it (a second entry for a seq) cannot go into an append-only log, so they
  live in the table `clock_events` of the same database.
* ThreadRepo: entities are threads of signed events (events.py), all in `clock_events`.

Both use one sqlite3 connection (`ctx.store.db` on a host, ":memory:" in tests); the
tables are created here.
"""
from tssb.clock import events as E
from tssb.clock.dag import EventDAG
from tssb.clock.errors import ClockError

KIND_FEED = 0
KIND_SIGNED = 1

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
    author BLOB PRIMARY KEY,
    reason TEXT NOT NULL,
    eid    BLOB
);
CREATE TABLE IF NOT EXISTS clock_interest (
    key BLOB PRIMARY KEY        -- thread roots this host replicates
);
"""


def init_db(db):
    """Create the clock tables if missing."""
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

    def parse(self, raw):
        return E.parse_feed_event(raw)

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


class ThreadRepo(_Base):
    """Threads of signed events; the threads of interest are listed in clock_interest."""
    kind = KIND_SIGNED

    def keys(self):
        return [r[0] for r in self.db.execute("SELECT key FROM clock_interest ORDER BY key")]

    def has(self, key):
        return self.db.execute("SELECT 1 FROM clock_interest WHERE key = ?", (key,)).fetchone() is not None

    def follow(self, key):
        """Declare interest in a thread (by its root id)."""
        self.db.execute("INSERT OR IGNORE INTO clock_interest (key) VALUES (?)", (bytes(key),))
        self.db.commit()

    def parse(self, raw):
        return E.parse_signed_event(raw)

    def load(self, key):
        dag = EventDAG(key, self.n, self.k)
        self._fill(dag, self._extra(key))
        return dag

    def save(self, ev):
        self._insert(ev)

    def post(self, ev):
        """Store a locally produced event (and follow its thread)."""
        self.follow(ev.key)
        self._insert(ev)
