"""Checking, repairing, backing up and restoring a host store (docs/store.md).

check(store) looks at these layers and returns a Report:
  sqlite    PRAGMA integrity_check (pages, indexes) and the schema version;
  schema    every table, index, view and trigger is one of tssb's own (own_objects):
            anything else (a trigger that writes into `peers` on every append, say) is
            foreign, and `repair` drops it;
  types     every value in tssb's tables has the type its column is written with (a
            backup with text in blob columns must be refused, not crash a reader);
  feeds     each feed's entries 1..front: the entry at each position verifies for it
            (DMX, Ed25519 signature over its name, which contains the previous MID), so
            a break in the chain, a damaged or a foreign entry is found at the first bad seq;
  chunks    side-chain chunks with no chain20 entry above them or beyond its chunk count
            (orphans), and chunks whose hash does not match the pointer before them.
Incomplete side chains are normal on a mesh (chunks still to come) and only counted.
Forks (proofs of two signed entries of one feed at one seq, tssb.feedforks) are listed:
they are evidence against a feed's key, not damage to the store.

repair(store, report) deletes what check found bad: the entries from the first bad seq
of a feed on (with their chunks), bad or orphan chunks, foreign schema objects. Nothing
else is touched; all of it can be fetched again from peers. The CLI takes a backup first.

backup(store, path) uses SQLite's online backup (a consistent copy while a bridge or a
server writes); restore(path, home) copies a backup, drops foreign schema objects from
the copy, checks it, and only then replaces a home's store, holding the home alone
(tssb.homelock) so that no running command keeps writing into the replaced one.
"""
import importlib
import os
import re
import shutil
import sqlite3
import time
import urllib.parse

from tinyssb import crypto, entry
from tinyssb.errors import WireError

from tssb import homelock, ownfeed
from tssb.store import DB_NAME, MIGRATIONS, Store, make_home

FILE_MODE = 0o600          # a store holds the identity's secret seed
MAX_PROBLEMS_KEPT = 1000   # problems listed in a report; more are only counted
# Modules that create their tables on first use (CREATE ... IF NOT EXISTS) beside the
# store's migrations: (module, name of its SQL script). A module adding tables this way
# must be listed, or `store check` calls its tables foreign.
LAZY_SCHEMAS = (("tssb.clock.repo", "SCHEMA"), ("tssb.trdag.dagstore", "SCHEMA"),
                ("tssb.certs.recordstore", "TABLE_SQL"))
# Columns whose values may have any type: config values are text or bytes by key.
ANY_TYPE = {("config", "value")}
# Config values read as fixed-size keys.
CONFIG_KEYS = {"network_key": 32}
# Tables SQLite itself makes (AUTOINCREMENT, ANALYZE).
SQLITE_TABLES = ("sqlite_sequence", "sqlite_stat1", "sqlite_stat2", "sqlite_stat3",
                 "sqlite_stat4")


class Report:
    """What check() found. `problems`: [(kind, fid or None, seq or None, text)]."""

    def __init__(self):
        self.feeds = self.entries = self.chunks = 0
        self.incomplete = 0        # side chains still missing chunks (normal)
        self.problems = []
        self.more = 0              # problems beyond MAX_PROBLEMS_KEPT
        self.first_bad = {}        # fid -> first bad seq (repair truncates there)
        self.bad_chunks = set()    # (fid, seq, cnr) to delete
        self.foreign = []          # (type, name, table) of schema objects not tssb's own
        self.forks = []            # (fid, seq) of kept fork proofs
        self.schema = 0

    @property
    def ok(self):
        return not self.problems and not self.more

    def add(self, kind, fid, seq, text):
        if len(self.problems) < MAX_PROBLEMS_KEPT:
            self.problems.append((kind, fid, seq, text))
        else:
            self.more += 1

    def as_dict(self):
        return {"ok": self.ok, "schema": self.schema, "feeds": self.feeds,
                "entries": self.entries, "chunks": self.chunks,
                "incomplete_side_chains": self.incomplete,
                "problems": [{"kind": k, "feed": f.hex() if f else None, "seq": s,
                              "text": t} for k, f, s, t in self.problems],
                "more_problems": self.more,
                "forks": [{"feed": f.hex(), "seq": q} for f, q in self.forks]}


def _verify(pub, msg, sig):
    return crypto.verify(pub, msg, sig)


def check(store, progress=None):
    """Check a Store (see the module doc). Returns: Report. Never raises on content;
    sqlite3 errors of a store too damaged to read propagate."""
    r = Report()
    db = store.db
    rows = db.execute("PRAGMA integrity_check").fetchall()
    if [tuple(x) for x in rows] != [("ok",)]:
        for (text,) in rows:
            r.add("sqlite", None, None, text)
    r.schema = store.schema_version()
    if r.schema > MIGRATIONS[-1][0]:
        r.add("schema", None, None, "schema version %d is newer than this tssb knows (%d): "
              "use the tssb that wrote it" % (r.schema, MIGRATIONS[-1][0]))
    r.foreign, changed = schema_problems(db)
    for kind, name, table in r.foreign:
        r.add("schema", None, None, "%s %r%s is not part of a tssb store%s" % (
            kind, name, " on %s" % table if table != name else "",
            " (it runs on writes to %s)" % table if kind == "trigger" else ""))
    for name in changed:
        r.add("schema", None, None, "table %s is defined otherwise than tssb defines it"
              % name)
    bad_types = type_problems(db)
    for text in bad_types:
        r.add("types", None, None, text)
    if bad_types or changed:
        return r          # what the layers below read cannot be trusted to have its shape
    ident = store.identity()
    if ident is None:
        r.add("identity", None, None, "no identity: restore a backup that has it, or `tssb "
              "id` makes a new one (posting then to a new feed)")
    elif len(ident[0]) != 32 or crypto.publickey(bytes(ident[0])) != bytes(ident[1]):
        r.add("identity", None, None, "the stored seed does not give the stored public key")
    fids = sorted(bytes(f) for f in store.feeds())
    r.feeds = len(fids)
    for i, fid in enumerate(fids):
        _check_feed(store, fid, r)
        if progress is not None:
            progress(i + 1, len(fids))
    _check_orphans(store, r)
    if _has_table(db, "clock_forks"):
        r.forks = [(f, q) for f, q, _ in store.forks()]
    return r


def _norm_sql(sql):
    """SQL text without comments, IF NOT EXISTS, case and whitespace differences."""
    sql = re.sub(r"--[^\n]*", " ", sql)
    sql = re.sub(r"/\*.*?\*/", " ", sql, flags=re.S)
    sql = re.sub(r"\bif\s+not\s+exists\b", " ", sql, flags=re.I)
    sql = re.sub(r"\s+", " ", sql).strip().lower()
    return re.sub(r"\s*([(),])\s*", r"\1", sql)


_OWN = None   # (own_objects(), names of the tables only LAZY_SCHEMAS make)


def _own():
    global _OWN
    if _OWN is None:
        st = Store(":memory:")
        try:
            migrated = {n for (n,) in st.db.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")}
            for module, attr in LAZY_SCHEMAS:
                st.db.executescript(getattr(importlib.import_module(module), attr))
            objects = {(t, n): _norm_sql(sql) for t, n, sql in st.db.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL")}
        finally:
            st.close()
        _OWN = (objects, {n for t, n in objects if t == "table"} - migrated)
    return _OWN


def own_objects():
    """{(type, name): normalised SQL} of every table, index, view and trigger a tssb
    store may hold: the migrations' and the LAZY_SCHEMAS'."""
    return _own()[0]


def _has_table(db, name):
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                      (name,)).fetchone() is not None


def schema_problems(db):
    """Returns: ([(type, name, table)] of objects not tssb's own, [names of tssb's tables
    defined otherwise]). SQLite's internal objects are left alone."""
    own = own_objects()
    foreign, changed = [], []
    for kind, name, table, sql in db.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"):
        if sql is None or (kind == "table" and name in SQLITE_TABLES):
            continue    # automatic indexes; SQLite's own tables
        want = own.get((kind, name))
        if want is None:
            foreign.append((kind, name, table))
        elif want != _norm_sql(sql):
            if kind == "table":
                changed.append(name)
            else:
                foreign.append((kind, name, table))   # an index or trigger under our name
    return foreign, changed


def type_problems(db):
    """One line per column of tssb's tables holding values of another type than the
    column is written with (or a config key of the wrong size)."""
    out = []
    for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' AND "
                               "name NOT LIKE 'sqlite_%' ORDER BY name").fetchall():
        if ("table", table) not in own_objects():
            continue
        for _, col, decl, notnull, _, _ in db.execute('PRAGMA table_info("%s")' % table):
            want = {"BLOB": "blob", "INTEGER": "integer", "TEXT": "text"}.get(decl.upper())
            if want is None or (table, col) in ANY_TYPE:
                continue
            n = db.execute('SELECT COUNT(*) FROM "%s" WHERE typeof("%s") NOT IN (?, ?)'
                           % (table, col), (want, want if notnull else "null")).fetchone()[0]
            if n:
                out.append("%s.%s: %d value(s) that are not %s" % (table, col, n, decl))
    if _has_table(db, "config"):
        for key, size in CONFIG_KEYS.items():
            row = db.execute("SELECT typeof(value), length(value) FROM config WHERE key=?",
                             (key,)).fetchone()
            if row is not None and (row[0] != "blob" or row[1] != size):
                out.append("config %s: a %s of %s bytes, not %d bytes" % (
                    key, row[0], row[1], size))
    return out


def _check_feed(store, fid, r):
    if len(fid) != entry.FID_LEN:
        r.add("feed", fid, None, "feed id of %d bytes" % len(fid))
        r.first_bad[fid] = 1
        return
    prev = entry.genesis_prev(fid)
    expected = 1
    for seq, pkt, mid in store.db.execute(
            "SELECT seq, pkt, mid FROM entries WHERE fid=? ORDER BY seq", (fid,)):
        r.entries += 1
        if fid in r.first_bad:
            continue
        if seq != expected:
            r.add("chain", fid, expected, "entry %d is missing (next stored: %d)" % (expected, seq))
            r.first_bad[fid] = expected
            continue
        try:
            got = entry.check(bytes(pkt), fid, seq, prev, _verify)
        except WireError as e:
            r.add("entry", fid, seq, "entry %d does not verify here (%s): the chain is broken "
                  "from it on" % (seq, e.reason))
            r.first_bad[fid] = seq
            continue
        if got != bytes(mid):
            r.add("entry", fid, seq, "entry %d: stored MID does not match the entry" % seq)
            r.first_bad[fid] = seq
            continue
        _check_chunks(store, fid, seq, bytes(pkt), r)
        prev = got
        expected += 1


def _check_chunks(store, fid, seq, pkt, r):
    rows = store.db.execute("SELECT cnr, chunk FROM chunks WHERE fid=? AND seq=? ORDER BY cnr",
                            (fid, seq)).fetchall()
    if pkt[7] != entry.CHAIN20:
        n_chunks, ptr = 0, None
    else:
        try:
            info = entry.chain_info(pkt)
            n_chunks, ptr = info.n_chunks, info.hptr
        except WireError:
            n_chunks, ptr = 0, None
    broken = False
    for i, (cnr, chunk) in enumerate(rows):
        r.chunks += 1
        chunk = bytes(chunk)
        if cnr >= n_chunks:
            r.add("orphan", fid, seq, "chunk %d of entry %d: the entry has %d chunks"
                  % (cnr, seq, n_chunks))
            r.bad_chunks.add((fid, seq, cnr))
        elif broken:
            continue             # after a bad chunk nothing can be checked (repair drops it)
        elif cnr != i or ptr is None or len(chunk) != entry.PKT_LEN or \
                entry.chunk_hash(chunk) != ptr:
            r.add("chunk", fid, seq, "chunk %d of entry %d does not match its hash pointer "
                  "(the side chain is broken from it on)" % (cnr, seq))
            r.bad_chunks.add((fid, seq, cnr))
            broken = True
        else:
            ptr = chunk[entry.CHUNK_DATA:]
    if 0 < n_chunks and len(rows) < n_chunks:
        r.incomplete += 1


def _check_orphans(store, r):
    for fid, seq, cnr in store.db.execute(
            "SELECT c.fid, c.seq, c.cnr FROM chunks c LEFT JOIN entries e "
            "ON e.fid = c.fid AND e.seq = c.seq WHERE e.fid IS NULL"):
        r.chunks += 1
        fid = bytes(fid)
        r.add("orphan", fid, seq, "chunk %d of entry %d, which is not stored" % (cnr, seq))
        r.bad_chunks.add((fid, seq, cnr))


def drop_foreign(db, foreign):
    """Drop the schema objects `foreign` ([(type, name, table)], from schema_problems):
    triggers and views first, so nothing of theirs runs while tables go."""
    order = {"trigger": 0, "view": 1, "index": 2, "table": 3}
    for kind, name, _ in sorted(foreign, key=lambda f: order.get(f[0], 4)):
        if kind in order:
            db.execute('DROP %s IF EXISTS "%s"' % (kind.upper(), name.replace('"', '""')))


def repair(store, report):
    """Delete what `report` found bad (see the module doc), in one transaction.

    Returns: (entries deleted, chunks deleted).
    """
    entries = chunks = 0
    with store.transaction():
        db = store.db
        drop_foreign(db, report.foreign)
        for fid, seq in report.first_bad.items():
            entries += db.execute("DELETE FROM entries WHERE fid=? AND seq>=?",
                                  (fid, seq)).rowcount
            chunks += db.execute("DELETE FROM chunks WHERE fid=? AND seq>=?",
                                 (fid, seq)).rowcount
        for fid, seq, cnr in sorted(report.bad_chunks):
            if fid in report.first_bad and seq >= report.first_bad[fid]:
                continue
            # a bad chunk breaks the hash chain of the ones after it: drop those too
            chunks += db.execute("DELETE FROM chunks WHERE fid=? AND seq=? AND cnr>=?",
                                 (fid, seq, cnr)).rowcount
    return entries, chunks


def backup(store, path):
    """Write a consistent copy of the store to `path` (a new file, mode 0600).

    The copy is written beside `path` under a temporary name and renamed at the end, so
    `path` is either complete or absent; errors name `path`.
    Raises: FileExistsError if path exists; OSError, sqlite3.Error.
    """
    if os.path.exists(path):
        raise FileExistsError(17, "File exists", path)
    tmp = path + ".tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    except OSError as e:
        raise type(e)(e.errno, e.strerror, path) from None
    os.close(fd)
    try:
        dest = sqlite3.connect(tmp)
        try:
            with store._lock:
                store.db.backup(dest)
            dest.execute("PRAGMA journal_mode=DELETE")   # one self-contained file
        finally:
            dest.close()
        os.replace(tmp, path)
    except OSError as e:
        raise type(e)(e.errno, e.strerror, path) from None
    except sqlite3.Error as e:
        raise sqlite3.OperationalError("cannot write the backup %s: %s" % (path, e)) from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


class NotABackup(ValueError):
    """The file is not a usable tssb store backup (the text says why)."""


def restore(path, home):
    """Replace the store of `home` by the backup at `path`, after checking the backup.

    The copy keeps only tssb's own schema objects (foreign ones are dropped from it, and
    listed); its values must have their columns' types and `check` must pass. The home is
    held alone meanwhile (tssb.homelock). The previous store (if any) is kept as
    tssb.db.replaced-<UTC time>, and the restored one is marked: its own feed may be
    behind (tssb.ownfeed) until a sync.
    Returns: (Report of the backup, name of the kept old store or None, the foreign
        objects dropped [(type, name, table)]).
    Raises: NotABackup; tssb.homelock.HomeBusy; OSError, sqlite3.Error.
    """
    if os.path.isdir(path):
        raise IsADirectoryError(21, "a directory, not a backup file", path)
    if not os.path.isfile(path):
        raise FileNotFoundError(2, "No such file", path)
    made = make_home(home)
    try:
        with homelock.alone(home):
            return _restore(path, home)
    except BaseException:
        if made:     # a home made for this restore: nothing of it stays
            shutil.rmtree(home, ignore_errors=True)
        raise


def _restore(path, home):
    tmp = os.path.join(home, DB_NAME + ".restoring")
    _remove_db(tmp)
    try:
        _copy(path, tmp)
        dropped = _own_objects_only(path, tmp)
        st = Store(tmp)
        try:
            report = check(st)
            if report.ok and st.identity() is None:
                raise NotABackup("%s holds no identity: not a tssb store backup" % path)
            if report.ok:
                ownfeed.mark_unconfirmed(st, "restored from %s" % os.path.basename(path))
        finally:
            st.close()
        if not report.ok:
            raise NotABackup("%s fails the check (%d problem(s), first: %s): not restored; "
                             "see them with `tssb store check --home DIR` on a copy of it "
                             "in DIR/tssb.db" % (path, len(report.problems) + report.more,
                                                 report.problems[0][3]))
        db = os.path.join(home, DB_NAME)
        kept = None
        if os.path.exists(db):
            kept = "%s.replaced-%s" % (DB_NAME, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
            # the WAL travels with its database (SQLite finds it by name): nothing is lost
            for suffix in ("", "-wal"):
                if os.path.exists(db + suffix):
                    os.replace(db + suffix, os.path.join(home, kept + suffix))
        if os.path.exists(db + "-shm"):
            os.remove(db + "-shm")
        os.replace(tmp, db)
        return report, kept, dropped
    finally:
        _remove_db(tmp)


def _remove_db(path):
    for p in (path, path + "-wal", path + "-shm", path + "-journal"):
        if os.path.exists(p):
            os.remove(p)


def _copy(path, tmp):
    """SQLite's page copy of the backup (nothing in it runs) into a new private file."""
    try:
        src = sqlite3.connect("file:%s?mode=ro" % urllib.parse.quote(os.path.abspath(path)),
                              uri=True)
    except sqlite3.Error as e:
        raise NotABackup("%s cannot be opened as a store backup (%s)" % (path, e))
    try:
        try:
            src.execute("SELECT version FROM schema_version").fetchall()
        except sqlite3.DatabaseError as e:
            raise NotABackup("%s is not a tssb store backup (%s)" % (path, e))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        os.close(fd)
        dest = sqlite3.connect(tmp)
        try:
            src.backup(dest)
        finally:
            dest.close()
    finally:
        src.close()


def _own_objects_only(path, tmp):
    """Drop what is not tssb's own from the copy before anything opens it as a store
    (opening runs migrations, which write: a foreign trigger would run then). Returns:
    the objects dropped. Raises: NotABackup for a tssb table defined otherwise."""
    db = sqlite3.connect(tmp, isolation_level=None)
    try:
        db.execute("PRAGMA trusted_schema=OFF")
        try:
            foreign, changed = schema_problems(db)
        except sqlite3.DatabaseError as e:
            raise NotABackup("%s is not a tssb store backup (%s)" % (path, e))
        for name in changed:
            # an empty table of an older layout that its module makes on first use
            # (clock_blocked's first one) goes; one holding data, or a migration's, stops
            if name in _own()[1] and db.execute('SELECT 1 FROM "%s" LIMIT 1'
                                                % name).fetchone() is None:
                foreign.append(("table", name, name))
            else:
                raise NotABackup("%s is not a tssb store backup: its table %s is defined "
                                 "otherwise than tssb defines it" % (path, name))
        try:
            db.execute("BEGIN")
            drop_foreign(db, foreign)
            db.execute("COMMIT")
        except sqlite3.DatabaseError as e:
            raise NotABackup("%s is not a tssb store backup: its %s %r cannot be removed "
                             "(%s)" % (path, foreign[0][0], foreign[0][1], e))
        bad = type_problems(db)
        if bad:
            raise NotABackup("%s is not a tssb store backup: %s" % (path, bad[0]))
        return foreign
    finally:
        db.close()
