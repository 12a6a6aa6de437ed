"""Where the certified extension stream of a feed is kept: in memory or in SQLite.

Both backends store encoded records keyed by (fid, seq) and offer:
  front(fid) -> highest stored seq (0 if none)     get(fid, seq) -> Record or None
  put(fid, record)  record.seq must be front + 1    put_many(fid, records)
The SQLite table lives in the host store's database (`ctx.store.db`) next to the entries.
"""
import contextlib
import sqlite3

from tssb.certs.errors import CertError
from tssb.certs.records import Record

TABLE_SQL = """
CREATE TABLE IF NOT EXISTS cert_records (
    fid BLOB NOT NULL,
    seq INTEGER NOT NULL,
    rec BLOB NOT NULL,
    PRIMARY KEY (fid, seq)
) WITHOUT ROWID
"""


class MemRecords:
    """Records in a dict of lists (tests, benchmarks)."""

    def __init__(self):
        self._logs = {}

    def front(self, fid):
        return len(self._logs.get(bytes(fid), ()))

    def get(self, fid, seq):
        log = self._logs.get(bytes(fid))
        if log is None or not 1 <= seq <= len(log):
            return None
        return log[seq - 1]

    def put(self, fid, record):
        log = self._logs.setdefault(bytes(fid), [])
        if record.seq != len(log) + 1:
            raise CertError("out_of_order", "record %d after %d" % (record.seq, len(log)))
        log.append(record)

    def put_many(self, fid, records):
        for r in records:
            self.put(fid, r)


class SqliteRecords:
    """Records in table `cert_records` of an sqlite3 connection.

    Args:
        db: sqlite3.Connection (the host store's `db`).
        transaction: optional function returning a context manager that makes a write
            atomic (the host store's `transaction`); default: BEGIN/COMMIT on `db`.
    """

    def __init__(self, db, transaction=None):
        self.db = db
        self._transaction = transaction or self._own_transaction
        self.db.execute(TABLE_SQL)

    @classmethod
    def for_store(cls, store):
        """Records next to a host store (`tssb.store.Store` exposing `.db`)."""
        db = getattr(store, "db", None)
        if db is not None:
            return cls(db, getattr(store, "transaction", None))
        # Until the store exposes `.db` (contract 1): a second connection to its file,
        # which WAL mode allows; writes then use our own transactions.
        path = getattr(store, "path", None)
        if not path or path == ":memory:":
            raise CertError("no_database", "the store has neither .db nor a file path")
        return cls(sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                                   timeout=30))

    @contextlib.contextmanager
    def _own_transaction(self):
        if self.db.in_transaction:
            yield
            return
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def front(self, fid):
        row = self.db.execute("SELECT MAX(seq) FROM cert_records WHERE fid=?",
                              (bytes(fid),)).fetchone()
        return row[0] or 0

    def get(self, fid, seq):
        row = self.db.execute("SELECT rec FROM cert_records WHERE fid=? AND seq=?",
                              (bytes(fid), seq)).fetchone()
        if row is None:
            return None
        rec = Record.decode(row[0])  # a damaged row raises CertError, never garbage
        if rec.seq != seq:
            raise CertError("bad_record", "row %d holds seq %d" % (seq, rec.seq))
        return rec

    def put(self, fid, record):
        self.put_many(fid, [record])

    def put_many(self, fid, records):
        fid = bytes(fid)
        with self._transaction():
            top = self.front(fid)
            for r in records:
                if r.seq != top + 1:
                    raise CertError("out_of_order", "record %d after %d" % (r.seq, top))
                self.db.execute("INSERT INTO cert_records VALUES (?, ?, ?)",
                                (fid, r.seq, r.encode()))
                top = r.seq
