"""The host's feed store: SQLite in WAL mode.

Implements the feed-store interface of `tinyssb.store` (feeds, entries, side-chain chunks)
so the core's Node runs on it unchanged, plus host extras: identities, peers (the session
allow-list), config values (e.g. the network key) and GOSET keys.

Schema changes are ordered migrations in MIGRATIONS; a later module adds its tables by
appending one (`register_migration`). The version reached is kept in `schema_version`,
and each migration runs in its own transaction, so a crash mid-upgrade leaves the
previous version intact.

Durability: WAL with synchronous=FULL, so a committed append survives a power cut; every
single-call write is its own transaction, and `transaction()` groups many (one fsync).

Privacy: the database holds the Ed25519 seed and the network key. `open_store` creates the
home 0700 and the database 0600 (SQLite gives its -wal and -shm files the database's
mode), and warns, once per open, when a user has loosened either since.
"""
import contextlib
import logging
import os
import sqlite3
import stat
import threading
import time
import urllib.parse

# Sizes from the tinySSB wire format (reference/tinyssb-wire.md): 32-byte feed ids,
# 120-byte log entries and chunks, 20-byte message ids.
FID_LEN = 32
PKT_LEN = 120
MID_LEN = 20
# Ed25519 keys and seeds, and the 32-byte SHS network key.
KEY_LEN = 32

DB_NAME = "tssb.db"
HOME_MODE = 0o700   # only the owner may list or enter the home
DB_MODE = 0o600     # only the owner may read the seed and the network key
# How long a write waits while another process of the same home writes: the longest
# transaction is a 1 MiB post (an entry and ~10,500 chunks signed and stored at once), a
# few seconds on a slow disk; sixty posts at once queue behind each other.
BUSY_TIMEOUT_S = 60.0

log = logging.getLogger("tssb.store")


# How a feed is kept out (tssb.blocks): BLOCK drops it for good, MUTE only hides it.
BLOCK = "block"
MUTE = "mute"


class StoreError(ValueError):
    """A call that would break the store's invariants (order, sizes, unknown feed)."""


# (version, SQL script). Append only: never edit a released step.
MIGRATIONS = [
    (1, """
        CREATE TABLE feeds (
            fid BLOB PRIMARY KEY,
            added_ts INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE entries (
            fid BLOB NOT NULL REFERENCES feeds(fid),
            seq INTEGER NOT NULL,
            pkt BLOB NOT NULL,
            mid BLOB NOT NULL,
            PRIMARY KEY (fid, seq)
        ) WITHOUT ROWID;
        CREATE TABLE chunks (
            fid BLOB NOT NULL,
            seq INTEGER NOT NULL,
            cnr INTEGER NOT NULL,
            chunk BLOB NOT NULL,
            PRIMARY KEY (fid, seq, cnr)
        ) WITHOUT ROWID;
        CREATE TABLE identities (
            name TEXT PRIMARY KEY,
            seed BLOB NOT NULL,
            public BLOB NOT NULL,
            created_ts INTEGER NOT NULL
        );
        CREATE TABLE peers (
            public BLOB PRIMARY KEY,
            name TEXT NOT NULL DEFAULT '',
            addr TEXT NOT NULL DEFAULT '',
            added_ts INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE config (
            key TEXT PRIMARY KEY,
            value BLOB
        );
        CREATE TABLE goset_keys (
            key BLOB PRIMARY KEY,
            added_ts INTEGER NOT NULL
        ) WITHOUT ROWID;
    """),
]


# 2: the rateless SETU profile's persistent state (setu/rateless_store.py): its coded-symbol
# prefix, the element keys it indexes (key = 5 bytes of the SETU element hash, as an integer;
# cnr -1 for an entry, else the chunk number) and how far it has read each feed and chain.
MIGRATIONS.append((2, """
        CREATE TABLE setu_rl_state (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            state BLOB NOT NULL
        );
        CREATE TABLE setu_rl_keys (
            key INTEGER NOT NULL,
            fid BLOB NOT NULL,
            seq INTEGER NOT NULL,
            cnr INTEGER NOT NULL
        );
        CREATE INDEX setu_rl_keys_key ON setu_rl_keys(key);
        CREATE TABLE setu_rl_cursor (
            fid BLOB PRIMARY KEY,
            seq INTEGER NOT NULL,
            mid BLOB NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE setu_rl_chains (
            fid BLOB NOT NULL,
            seq INTEGER NOT NULL,
            have INTEGER NOT NULL,
            PRIMARY KEY (fid, seq)
        ) WITHOUT ROWID;
    """))


# 3: chats with the Android app (tssb.chat): how far each feed's entries were looked at for
# boxes, and what each box held for us; feeds blocked or muted (tssb.blocks); and what a
# bridge saw become of our own posts (tssb.chat.delivery).
MIGRATIONS.append((3, """
        CREATE TABLE chat_cursor (
            fid BLOB PRIMARY KEY,
            seq INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE chat_boxes (
            fid BLOB NOT NULL,
            seq INTEGER NOT NULL,
            state TEXT NOT NULL,
            tag TEXT,
            chat TEXT,
            ref BLOB,
            ts INTEGER,
            due INTEGER NOT NULL,
            PRIMARY KEY (fid, seq)
        ) WITHOUT ROWID;
        CREATE INDEX chat_boxes_ref ON chat_boxes(ref);
        CREATE INDEX chat_boxes_chat ON chat_boxes(chat);
        CREATE TABLE blocked_feeds (
            fid BLOB PRIMARY KEY,
            how TEXT NOT NULL,
            added_ts INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE delivery_seen (
            fid BLOB NOT NULL,
            src TEXT NOT NULL,
            what TEXT NOT NULL,
            seq INTEGER NOT NULL,
            ts INTEGER NOT NULL,
            PRIMARY KEY (fid, src, what)
        ) WITHOUT ROWID;
    """))


# 4: fork evidence. Two validly signed entries of one feed at one seq, from any path that
# brings entries (SETU, clock sync), as a proof of the clock's format (clock/forks.py:
# both 176-byte feed events, smaller MID first). The clock module created this table on
# first use before; its definition is the same.
MIGRATIONS.append((4, """
        CREATE TABLE IF NOT EXISTS clock_forks (
            fid   BLOB NOT NULL,
            seq   INTEGER NOT NULL,
            proof BLOB NOT NULL,
            PRIMARY KEY (fid, seq)
        );
    """))


def register_migration(version, script):
    """Append a schema step (for modules that own further tables).

    Args:
        version: must be exactly one more than the last registered version.
        script: SQL statements run in one transaction.
    Raises:
        StoreError: when the version is out of order.
    """
    if version != MIGRATIONS[-1][0] + 1:
        raise StoreError("migration %d out of order (last is %d)" % (version, MIGRATIONS[-1][0]))
    MIGRATIONS.append((version, script))


def _check_len(name, value, n):
    if not isinstance(value, (bytes, bytearray, memoryview)) or len(value) != n:
        raise StoreError("%s must be %d bytes" % (name, n))
    return bytes(value)


class Store:
    """SQLite feed store. `Store(path)` opens or creates; `Store(":memory:")` for tests."""

    def __init__(self, path):
        self.path = path
        self._lock = threading.RLock()
        self._depth = 0
        self.readonly = False
        try:
            self._db = self._open(path)
        except sqlite3.OperationalError as e:
            if path == ":memory:" or not _readonly_error(e):
                raise
            # Read-only media or permissions: what is there can still be read (read,
            # feeds, backup, check); a write then fails with SQLite's read-only error.
            self._db = self._open_readonly(path, e)
            self.readonly = True

    def _open(self, path):
        # One connection, shared by the asyncio thread and helper threads; the lock
        # serialises use. isolation_level=None: we issue BEGIN/COMMIT ourselves.
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                             timeout=BUSY_TIMEOUT_S)
        self._db = db
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except BaseException:
            db.close()
            raise
        return db

    @staticmethod
    def _open_readonly(path, why):
        uri = "file:%s" % urllib.parse.quote(os.path.abspath(path))
        # mode=ro reads a WAL database when its -shm can be made or is there; on a
        # read-only file system it is not, and only `immutable` (no locking, no WAL: a
        # cleanly closed store has none) opens it.
        for query in ("?mode=ro", "?immutable=1"):
            try:
                db = sqlite3.connect(uri + query, uri=True, isolation_level=None,
                                     check_same_thread=False, timeout=BUSY_TIMEOUT_S)
            except sqlite3.OperationalError:
                continue
            try:
                db.execute("SELECT MAX(version) FROM schema_version").fetchall()
                return db
            except sqlite3.OperationalError:
                db.close()
            except BaseException:
                db.close()
                raise
        raise why

    # -- plumbing --------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self):
        """Group writes into one atomic transaction (nests; the outermost commits)."""
        with self._lock:
            if self._depth == 0:
                self._db.execute("BEGIN IMMEDIATE")
            self._depth += 1
            try:
                yield self
            except BaseException:
                self._depth -= 1
                if self._depth == 0:
                    self._db.execute("ROLLBACK")
                raise
            self._depth -= 1
            if self._depth == 0:
                self._db.execute("COMMIT")

    @property
    def db(self):
        """The sqlite3 connection, for modules that keep their own tables in this database
        (e.g. `tssb.clock`). It runs in autocommit mode (isolation_level=None): each
        statement commits unless inside `transaction()`."""
        return self._db

    def _q(self, sql, args=()):
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _one(self, sql, args=()):
        rows = self._q(sql, args)
        return rows[0] if rows else None

    def _migrate(self):
        with self._lock:
            self._db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = self._db.execute("SELECT MAX(version) FROM schema_version").fetchone()
            current = row[0] or 0
            for version, script in MIGRATIONS:
                if version <= current:
                    continue
                # executescript would COMMIT on its own; run statement by statement instead.
                with self.transaction():
                    for stmt in script.split(";"):
                        if stmt.strip():
                            self._db.execute(stmt)
                    self._db.execute("INSERT INTO schema_version VALUES (?)", (version,))

    def data_version(self):
        """A number that changes whenever another connection (another process on this
        home) committed a change since it was last read (SQLite's PRAGMA data_version)."""
        return self._one("PRAGMA data_version")[0]

    def schema_version(self):
        """Returns: the highest migration applied."""
        return self._one("SELECT MAX(version) FROM schema_version")[0] or 0

    def close(self):
        with self._lock:
            self._db.close()

    # -- feed-store interface (tinyssb.store) ----------------------------------------

    def feeds(self):
        return [r[0] for r in self._q("SELECT fid FROM feeds")]

    def add_feed(self, fid):
        """Idempotent; a blocked feed is never added back (whoever brings it)."""
        fid = _check_len("fid", fid, FID_LEN)
        with self.transaction():
            self._db.execute("INSERT OR IGNORE INTO feeds SELECT ?, ? WHERE NOT EXISTS "
                             "(SELECT 1 FROM blocked_feeds WHERE fid=? AND how=?)",
                             (fid, int(time.time()), fid, BLOCK))

    def has_feed(self, fid):
        return self._one("SELECT 1 FROM feeds WHERE fid=?", (bytes(fid),)) is not None

    def recent_feeds(self):
        """Feed IDs, most recently added first (the node's GOSET capacity policy)."""
        return [r[0] for r in self._q("SELECT fid FROM feeds ORDER BY added_ts DESC, fid")]

    def front(self, fid):
        """Returns: (max_seq, mid of max_seq), or (0, FID[0:20]) for an empty feed.

        Raises:
            KeyError: the feed is unknown (as MemStore).
        """
        fid = bytes(fid)
        if not self.has_feed(fid):
            if self.is_blocked(fid):
                return 0, fid[:MID_LEN]   # a blocked feed stays empty (see append)
            raise KeyError(fid)
        row = self._one("SELECT seq, mid FROM entries WHERE fid=? ORDER BY seq DESC LIMIT 1", (fid,))
        if row is None:
            return 0, fid[:MID_LEN]
        return row[0], row[1]

    def append(self, fid, seq, pkt, mid):
        """Append entry `seq` (must be max_seq + 1) to a known feed.

        An entry of a blocked feed is dropped without a word: every writer (LoRa, SETU,
        trDAG, clock sync) goes on as if stored, and nothing of that feed lands here.

        Raises:
            KeyError: unknown feed.  StoreError: out of order or wrong sizes.
        """
        fid = bytes(fid)
        pkt = _check_len("pkt", pkt, PKT_LEN)
        mid = _check_len("mid", mid, MID_LEN)
        with self.transaction():
            if not self.has_feed(fid) and self.is_blocked(fid):
                return
            top, _ = self.front(fid)
            if seq != top + 1:
                raise StoreError("append out of order: seq %r after %d" % (seq, top))
            self._db.execute("INSERT INTO entries VALUES (?, ?, ?, ?)", (fid, seq, pkt, mid))

    def entry(self, fid, seq):
        row = self._one("SELECT pkt FROM entries WHERE fid=? AND seq=?", (bytes(fid), seq))
        return None if row is None else row[0]

    def mid(self, fid, seq):
        """The message id of entry `seq`, or None if absent."""
        row = self._one("SELECT mid FROM entries WHERE fid=? AND seq=?", (bytes(fid), seq))
        return None if row is None else row[0]

    def put_chunk(self, fid, seq, cnr, chunk):
        """Store chunk `cnr` of entry `seq`'s side chain (must be the next one).

        Raises:
            StoreError: out of order or wrong size.
        """
        fid = bytes(fid)
        chunk = _check_len("chunk", chunk, PKT_LEN)
        with self.transaction():
            if cnr != self.chunk_count(fid, seq) or cnr == 0:
                if not self.has_feed(fid) and self.is_blocked(fid):
                    return    # as append: a blocked feed takes nothing
            if cnr != self.chunk_count(fid, seq):
                raise StoreError("chunk out of order: %r" % (cnr,))
            self._db.execute("INSERT INTO chunks VALUES (?, ?, ?, ?)", (fid, seq, cnr, chunk))

    def put_chain(self, fid, seq, chunks):
        """Store the whole side chain of entry `seq` at once (an entry we authored, whose
        chain we built): one statement, not a count per chunk.

        Raises:
            StoreError: the entry already has chunks, or a chunk of the wrong size.
        """
        fid = bytes(fid)
        rows = [(fid, seq, i, _check_len("chunk", c, PKT_LEN)) for i, c in enumerate(chunks)]
        with self.transaction():
            if self.chunk_count(fid, seq):
                raise StoreError("entry %d already has chunks" % seq)
            self._db.executemany("INSERT INTO chunks VALUES (?, ?, ?, ?)", rows)

    def chunk(self, fid, seq, cnr):
        row = self._one("SELECT chunk FROM chunks WHERE fid=? AND seq=? AND cnr=?",
                        (bytes(fid), seq, cnr))
        return None if row is None else row[0]

    def chunk_count(self, fid, seq):
        return self._one("SELECT COUNT(*) FROM chunks WHERE fid=? AND seq=?", (bytes(fid), seq))[0]

    # -- identities ------------------------------------------------------------------

    def identity(self, name="default"):
        """Returns: (seed, public) of the named identity, or None."""
        row = self._one("SELECT seed, public FROM identities WHERE name=?", (name,))
        return None if row is None else (row[0], row[1])

    def set_identity(self, seed, public, name="default"):
        seed = _check_len("seed", seed, KEY_LEN)
        public = _check_len("public", public, KEY_LEN)
        with self.transaction():
            self._db.execute("INSERT OR REPLACE INTO identities VALUES (?, ?, ?, ?)",
                             (name, seed, public, int(time.time())))

    # -- peers (the session allow-list) ----------------------------------------------

    def add_peer(self, public, name=None, addr=None):
        """Allow a peer, or update what is given of its name and address (None keeps the
        stored value; "" clears it). Returns: True if it was new.

        Raises:
            StoreError: `addr` is already another peer's address (tssb.addr.same_addr).
        """
        from tssb.addr import same_addr
        public = _check_len("peer key", public, KEY_LEN)
        with self.transaction():
            if addr:
                for other, other_addr in self._q("SELECT public, addr FROM peers WHERE "
                                                 "public != ? AND addr != ''", (public,)):
                    if same_addr(addr, other_addr):
                        raise StoreError("%s is already the address of peer %s"
                                         % (addr, bytes(other).hex()))
            new = self._one("SELECT 1 FROM peers WHERE public=?", (public,)) is None
            if new:
                self._db.execute("INSERT INTO peers VALUES (?, ?, ?, ?)",
                                 (public, name or "", addr or "", int(time.time())))
            else:
                self._db.execute("UPDATE peers SET name=COALESCE(?, name), "
                                 "addr=COALESCE(?, addr) WHERE public=?", (name, addr, public))
        return new

    def remove_peer(self, public):
        """Returns: True if the peer was known."""
        with self.transaction():
            cur = self._db.execute("DELETE FROM peers WHERE public=?", (bytes(public),))
            return cur.rowcount > 0

    def peers(self):
        """Returns: list of dicts {public, name, addr, added_ts}, ordered by name."""
        return [{"public": r[0], "name": r[1], "addr": r[2], "added_ts": r[3]}
                for r in self._q("SELECT public, name, addr, added_ts FROM peers ORDER BY name, public")]

    def is_peer(self, public):
        return self._one("SELECT 1 FROM peers WHERE public=?", (bytes(public),)) is not None

    def peer_by_addr(self, addr):
        """Returns: the public key of the peer recorded at `addr` ("host:port"), or None.
        Addresses match as tssb.addr.same_addr says (localhost is 127.0.0.1, ...)."""
        from tssb.addr import same_addr
        for public, stored in self._q("SELECT public, addr FROM peers WHERE addr != ''"):
            if same_addr(addr, stored):
                return public
        return None

    # -- config ----------------------------------------------------------------------

    def get_config(self, key, default=None):
        row = self._one("SELECT value FROM config WHERE key=?", (key,))
        return default if row is None else row[0]

    def set_config(self, key, value):
        with self.transaction():
            self._db.execute("INSERT OR REPLACE INTO config VALUES (?, ?)", (key, value))

    # -- blocked and muted feeds (tssb.blocks) ---------------------------------------

    def set_blocked(self, fid, how):
        """Block (BLOCK: its entries, chunks and index rows go, and no writer brings it
        back) or mute (MUTE: kept and relayed, not shown) a feed; a later call replaces an
        earlier one."""
        fid = _check_len("fid", fid, FID_LEN)
        if how not in (BLOCK, MUTE):
            raise StoreError("how must be %r or %r" % (BLOCK, MUTE))
        with self.transaction():
            self._db.execute("INSERT OR REPLACE INTO blocked_feeds VALUES (?, ?, ?)",
                             (fid, how, int(time.time())))
            if how == BLOCK:
                for table in ("chunks", "entries", "chat_cursor", "chat_boxes",
                              "delivery_seen", "setu_rl_keys", "setu_rl_cursor",
                              "setu_rl_chains", "feeds"):
                    self._db.execute("DELETE FROM %s WHERE fid=?" % table, (fid,))
                self._db.execute("DELETE FROM goset_keys WHERE key=?", (fid,))
                # the rateless index summed those entries in: rebuilt at its next refresh
                self._db.execute("DELETE FROM setu_rl_state")

    def unblock(self, fid):
        """Undo a block or mute. Returns: the kind undone, or None if neither was set."""
        with self.transaction():
            row = self._one("SELECT how FROM blocked_feeds WHERE fid=?", (bytes(fid),))
            self._db.execute("DELETE FROM blocked_feeds WHERE fid=?", (bytes(fid),))
        return None if row is None else row[0]

    def blocked(self, how=None):
        """Returns: [(fid, how, added_ts)] of blocked and muted feeds (or only `how`)."""
        if how is None:
            return self._q("SELECT fid, how, added_ts FROM blocked_feeds ORDER BY added_ts, fid")
        return self._q("SELECT fid, how, added_ts FROM blocked_feeds WHERE how=? "
                       "ORDER BY added_ts, fid", (how,))

    def is_blocked(self, fid, how=BLOCK):
        return self._one("SELECT 1 FROM blocked_feeds WHERE fid=? AND how=?",
                         (bytes(fid), how)) is not None

    # -- fork evidence (tssb.feedforks) ----------------------------------------------

    def add_fork(self, fid, seq, proof):
        """Keep the proof of a fork of feed `fid` at `seq` (the first one stays).

        Returns: True if no proof for (fid, seq) was kept before.
        """
        with self.transaction():
            cur = self._db.execute("INSERT OR IGNORE INTO clock_forks (fid, seq, proof) "
                                   "VALUES (?, ?, ?)", (bytes(fid), seq, bytes(proof)))
            return cur.rowcount > 0

    def forks(self, fid=None):
        """Returns: [(fid, seq, proof)] of the kept fork proofs, by feed and seq (none in
        a read-only store from before the table)."""
        sql = "SELECT fid, seq, proof FROM clock_forks"
        try:
            if fid is None:
                rows = self._q(sql + " ORDER BY fid, seq")
            else:
                rows = self._q(sql + " WHERE fid=? ORDER BY seq", (bytes(fid),))
        except sqlite3.OperationalError:
            if not self.readonly:
                raise
            return []
        return [(bytes(f), s, bytes(p)) for f, s, p in rows]

    # -- GOSET keys ------------------------------------------------------------------

    def add_goset_key(self, key):
        key = _check_len("goset key", key, FID_LEN)
        with self.transaction():
            self._db.execute("INSERT OR IGNORE INTO goset_keys VALUES (?, ?)", (key, int(time.time())))

    def goset_keys(self):
        return [r[0] for r in self._q("SELECT key FROM goset_keys ORDER BY key")]

    def remove_goset_key(self, key):
        with self.transaction():
            self._db.execute("DELETE FROM goset_keys WHERE key=?", (bytes(key),))


def _readonly_error(e):
    low = str(e).lower()
    return "readonly" in low or "read-only" in low or "unable to open" in low


def make_home(home):
    """Create the data directory, private (0700), if missing. Returns: True if made."""
    if os.path.isdir(home):
        return False
    os.makedirs(home, mode=HOME_MODE)
    os.chmod(home, HOME_MODE)     # makedirs' mode is filtered by the umask
    return True


def open_store(home):
    """Open (creating) the store of a data directory. Returns: Store.

    A new home is made 0700 and a new database 0600; an existing one whose mode lets
    others in gets a warning (logger "tssb.store") once the store is open, not a change:
    the user chose it.
    """
    new_home = make_home(home)
    path = os.path.join(home, DB_NAME)
    new_db = False
    try:   # create it private before SQLite opens it (O_EXCL: never touch an existing one)
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, DB_MODE))
        new_db = True
    except OSError:   # it exists (checked below), or cannot be made here: SQLite's own
        pass          # open then says why, as callers expect
    store = Store(path)
    if not new_home:
        check_private(home, HOME_MODE)
    if not new_db:
        check_private(path, DB_MODE)
    return store


def check_private(path, mode):
    """Warn when `path` grants group or others more than `mode` does.

    Returns: True when it is private enough (always on systems without POSIX modes).
    """
    if os.name != "posix":
        return True
    have = stat.S_IMODE(os.stat(path).st_mode)
    if have & ~mode & 0o077:
        log.warning("%s is open to other users (mode %04o; want %04o): chmod %o %s",
                    path, have, mode, mode, path)
        return False
    return True
