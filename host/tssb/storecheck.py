"""Checking, repairing, backing up and restoring a host store (docs/store.md).

check(store) looks at three layers and returns a Report:
  sqlite    PRAGMA integrity_check (pages, indexes) and the schema version;
  feeds     each feed's entries 1..front: the entry at each position verifies for it
            (DMX, Ed25519 signature over its name, which contains the previous MID), so
            a break in the chain, a damaged or a foreign entry is found at the first bad seq;
  chunks    side-chain chunks with no chain20 entry above them or beyond its chunk count
            (orphans), and chunks whose hash does not match the pointer before them.
Incomplete side chains are normal on a mesh (chunks still to come) and only counted.

repair(store, report) deletes what check found bad: the entries from the first bad seq
of a feed on (with their chunks) and bad or orphan chunks. Nothing else is touched; all
of it can be fetched again from peers. The CLI takes a backup first.

backup(store, path) uses SQLite's online backup (a consistent copy while a bridge or a
server writes); restore(path, home) checks the copy before it replaces a home's store.
"""
import os
import sqlite3
import time

from tinyssb import crypto, entry
from tinyssb.errors import WireError

from tssb.store import DB_NAME, Store

FILE_MODE = 0o600          # a store holds the identity's secret seed
MAX_PROBLEMS_KEPT = 1000   # problems listed in a report; more are only counted


class Report:
    """What check() found. `problems`: [(kind, fid or None, seq or None, text)]."""

    def __init__(self):
        self.feeds = self.entries = self.chunks = 0
        self.incomplete = 0        # side chains still missing chunks (normal)
        self.problems = []
        self.more = 0              # problems beyond MAX_PROBLEMS_KEPT
        self.first_bad = {}        # fid -> first bad seq (repair truncates there)
        self.bad_chunks = set()    # (fid, seq, cnr) to delete
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
                "more_problems": self.more}


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
    ident = store.identity()
    if ident is None:
        r.add("identity", None, None, "no identity (restore one: `tssb id --import FILE`)")
    elif len(ident[0]) != 32 or crypto.publickey(bytes(ident[0])) != bytes(ident[1]):
        r.add("identity", None, None, "the stored seed does not give the stored public key")
    fids = sorted(bytes(f) for f in store.feeds())
    r.feeds = len(fids)
    for i, fid in enumerate(fids):
        _check_feed(store, fid, r)
        if progress is not None:
            progress(i + 1, len(fids))
    _check_orphans(store, r)
    return r


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


def repair(store, report):
    """Delete what `report` found bad (see the module doc), in one transaction.

    Returns: (entries deleted, chunks deleted).
    """
    entries = chunks = 0
    with store.transaction():
        db = store.db
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

    Raises: FileExistsError if path exists; OSError, sqlite3.Error.
    """
    if os.path.exists(path):
        raise FileExistsError(17, "File exists", path)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
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
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def restore(path, home):
    """Replace the store of `home` by the backup at `path`, after checking the backup.

    The previous store (if any) is kept as tssb.db.replaced-<unix time>.
    Returns: (Report of the backup, name of the kept old store or None).
    Raises: ValueError: the backup is not a usable tssb store; OSError, sqlite3.Error.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(2, "No such file", path)
    os.makedirs(home, mode=0o700, exist_ok=True)
    tmp = os.path.join(home, DB_NAME + ".restoring")
    for p in (tmp, tmp + "-wal", tmp + "-shm"):
        if os.path.exists(p):
            os.remove(p)
    try:
        src = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
        try:
            src.execute("SELECT version FROM schema_version").fetchall()
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
            os.close(fd)
            dest = sqlite3.connect(tmp)
            try:
                src.backup(dest)
            finally:
                dest.close()
        except sqlite3.DatabaseError as e:
            raise ValueError("%s is not a tssb store backup (%s)" % (path, e))
        finally:
            src.close()
        st = Store(tmp)
        try:
            report = check(st)
            if st.identity() is None:
                raise ValueError("%s holds no identity: not a tssb store backup" % path)
        finally:
            st.close()
        if not report.ok:
            raise ValueError("%s fails the check (%d problem(s)): not restored; inspect it "
                             "with `tssb store check --home DIR` on a copy"
                             % (path, len(report.problems) + report.more))
        db = os.path.join(home, DB_NAME)
        kept = None
        if os.path.exists(db):
            kept = "%s.replaced-%d" % (DB_NAME, int(time.time()))
            # the WAL travels with its database (SQLite finds it by name): nothing is lost
            for suffix in ("", "-wal"):
                if os.path.exists(db + suffix):
                    os.replace(db + suffix, os.path.join(home, kept + suffix))
        if os.path.exists(db + "-shm"):
            os.remove(db + "-shm")
        os.replace(tmp, db)
        return report, kept
    finally:
        for p in (tmp, tmp + "-wal", tmp + "-shm"):
            if os.path.exists(p):
                os.remove(p)
