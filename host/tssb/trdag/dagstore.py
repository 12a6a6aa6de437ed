"""The DAG index and admission of messages.

An index holds the processed messages of any number of DAGs, keyed by message ID, with
each DAG's members by depth and its current tips (messages no other message references).
`MemDagIndex` keeps it in memory (tests, benchmarks); `SqliteDagIndex` in table
`trdag_msg` of the host database.

`Dag` admits messages: the spec's rule is that a message is processed only when every
message it references is known, so one whose children are missing waits in a bounded
pending pool and is admitted (with its depth checked) when the last child arrives.
Admitted messages are also appended to the feed store (contract 1) when they continue
their feed; others live in the DAG index only (per-object sync does not need whole feeds).
"""
import sqlite3

from tinyssb import entry
from tssb import feedforks
from tssb.trdag import message
from tssb.trdag.errors import TrdagError

MAX_PENDING = 100000   # waiting messages per session: above any burst our benchmarks see
ID = message.ID_LEN


class MemDagIndex:
    """In-memory DAG index."""

    def __init__(self):
        self._msgs = {}       # mid -> DagMsg
        self._members = {}    # root -> {mid: depth} (root message excluded)
        self._tips = {}       # root -> set of mids
        self._feed = {}       # (fid, seq) -> mid

    def copy(self):
        """A shallow copy with independent indexes (messages are immutable)."""
        c = MemDagIndex()
        c._msgs = dict(self._msgs)
        c._members = {r: dict(m) for r, m in self._members.items()}
        c._tips = {r: set(t) for r, t in self._tips.items()}
        c._feed = dict(self._feed)
        return c

    def has(self, mid):
        return mid in self._msgs

    def get(self, mid):
        return self._msgs.get(mid)

    def put(self, msg):
        self._msgs[msg.mid] = msg
        self._feed[(msg.fid, msg.seq)] = msg.mid
        tips = self._tips.setdefault(msg.root, set())
        if not msg.is_root:
            self._members.setdefault(msg.root, {})[msg.mid] = msg.depth
        for c in msg.children:
            tips.discard(c)
        tips.add(msg.mid)

    def members(self, root):
        """Returns: list of (depth, mid) of the DAG's non-root messages."""
        return [(d, m) for m, d in self._members.get(root, {}).items()]

    def tips(self, root):
        return [(self._msgs[m].depth, m) for m in self._tips.get(root, ())]

    def by_feed(self, fid, seq):
        mid = self._feed.get((fid, seq))
        return None if mid is None else self._msgs[mid]

    def roots(self):
        return [m for m, msg in self._msgs.items() if msg.is_root]


SCHEMA = """
CREATE TABLE IF NOT EXISTS trdag_msg (
    mid BLOB PRIMARY KEY,
    root BLOB NOT NULL,
    depth INTEGER NOT NULL,
    tip INTEGER NOT NULL,
    fid BLOB NOT NULL,
    seq INTEGER NOT NULL,
    element BLOB NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS trdag_by_root ON trdag_msg (root, depth);
CREATE INDEX IF NOT EXISTS trdag_by_feed ON trdag_msg (fid, seq);
"""


class SqliteDagIndex:
    """DAG index in the host database. Messages are stored as their validated elements
    and re-parsed on read, so what is read back was checked twice."""

    def __init__(self, db):
        """Args: db: a sqlite3.Connection (the host database or its own file)."""
        self.db = db
        self.db.executescript(SCHEMA)

    @classmethod
    def open(cls, path):
        return cls(sqlite3.connect(path, isolation_level=None, check_same_thread=False))

    def has(self, mid):
        return self.db.execute("SELECT 1 FROM trdag_msg WHERE mid=?", (mid,)).fetchone() is not None

    def get(self, mid):
        row = self.db.execute("SELECT element FROM trdag_msg WHERE mid=?", (mid,)).fetchone()
        return None if row is None else message.parse_element(row[0])

    def put(self, msg):
        db = self.db
        outer = db.in_transaction     # a caller's transaction (e.g. a post) takes it along
        if not outer:
            db.execute("BEGIN IMMEDIATE")
        try:
            for c in msg.children:
                db.execute("UPDATE trdag_msg SET tip=0 WHERE mid=?", (c,))
            db.execute("INSERT OR IGNORE INTO trdag_msg VALUES (?,?,?,?,?,?,?)",
                       (msg.mid, msg.root, msg.depth, 1, msg.fid, msg.seq, msg.element()))
            if not outer:
                db.execute("COMMIT")
        except BaseException:
            if not outer:
                db.execute("ROLLBACK")
            raise

    def members(self, root):
        return [(d, bytes(m)) for d, m in self.db.execute(
            "SELECT depth, mid FROM trdag_msg WHERE root=? AND depth>0", (root,))]

    def tips(self, root):
        return [(d, bytes(m)) for d, m in self.db.execute(
            "SELECT depth, mid FROM trdag_msg WHERE root=? AND tip=1", (root,))]

    def by_feed(self, fid, seq):
        row = self.db.execute("SELECT element FROM trdag_msg WHERE fid=? AND seq=?",
                              (fid, seq)).fetchone()
        return None if row is None else message.parse_element(row[0])

    def roots(self):
        return [bytes(r[0]) for r in self.db.execute("SELECT mid FROM trdag_msg WHERE depth=0")]


class Dag:
    """Admission of messages into an index (one per session: the pending pool is its own).

    Args:
        index: MemDagIndex or SqliteDagIndex.
        feeds: optional feed store (contract 1) to mirror admitted entries into.
        max_pending: bound of the pending pool.
        budget: optional tssb.session.budget.Budget: each parked message is charged to
            "unverified" until admitted (its DAG checks cannot run before its children
            are known); `release()` returns what is still parked when the sync ends.
    """

    def __init__(self, index, feeds=None, max_pending=MAX_PENDING, budget=None):
        self.index = index
        self.feeds = feeds
        self.max_pending = max_pending
        self.budget = budget
        self.pending = {}     # mid -> DagMsg waiting for children
        self._waiting = {}    # missing child mid -> [waiting mids]

    def known(self, mid):
        return mid in self.pending or self.index.has(mid)

    def offer(self, msg):
        """Admit a validated element's message, or park it until its children are known.

        Returns: list of messages admitted by this call (msg and any it unblocked).
        Raises:
            TrdagError: duplicate_message, wrong_root, bad_depth, pending_full.
        """
        if self.known(msg.mid):
            raise TrdagError("duplicate_message", msg.mid.hex())
        if msg.is_root:
            self._admit(msg)
            return [msg] + self._release(msg.mid)
        missing = [c for c in msg.children if not self.index.has(c)]
        if missing:
            if len(self.pending) >= self.max_pending:
                raise TrdagError("pending_full", self.max_pending)
            if self.budget is not None:
                self.budget.take("unverified")   # BudgetExceeded ends the session
            self.pending[msg.mid] = msg
            for c in missing:
                self._waiting.setdefault(c, []).append(msg.mid)
            return []
        self._check(msg)
        self._admit(msg)
        return [msg] + self._release(msg.mid)

    def release(self):
        """The sync is over: drop the parked messages and return their charge."""
        if self.budget is not None:
            self.budget.give("unverified", len(self.pending))
        self.pending.clear()
        self._waiting.clear()

    def _check(self, msg):
        best = -1
        for c in msg.children:
            child = self.index.get(c)
            if child.root != msg.root:
                raise TrdagError("wrong_root", "child %s" % c.hex())
            best = max(best, child.depth)
        if msg.depth != best + 1:
            raise TrdagError("bad_depth", "%d != %d + 1" % (msg.depth, best))

    def _release(self, mid):
        done = []
        todo = [mid]
        while todo:                    # iterative: a long chain must not recurse
            for w in self._waiting.pop(todo.pop(), ()):
                msg = self.pending.get(w)
                if msg is None or any(not self.index.has(c) for c in msg.children):
                    continue
                del self.pending[w]
                if self.budget is not None:
                    self.budget.give("unverified")
                self._check(msg)
                self._admit(msg)
                done.append(msg)
                todo.append(w)
        return done

    def _admit(self, msg):
        self.index.put(msg)
        if self.feeds is not None:
            self._mirror(msg)

    def _mirror(self, msg):
        """Append msg (and later entries of its feed held in the index) to the feed store
        when it continues the feed there; otherwise the DAG index alone holds it."""
        st = self.feeds
        while msg is not None:
            if not st.has_feed(msg.fid):
                if msg.seq != 1 or msg.prev != entry.genesis_prev(msg.fid):
                    return
                st.add_feed(msg.fid)
            top, front = st.front(msg.fid)
            if msg.seq <= top and hasattr(st, "add_fork"):
                # another entry holds this seq here: the feed forked (kept as proof)
                feedforks.note(st, msg.fid, msg.seq, msg.prev, msg.pkt)
            if msg.seq != top + 1 or msg.prev != front:
                return
            st.append(msg.fid, msg.seq, msg.pkt, msg.mid)
            for i, c in enumerate(msg.chunks):
                st.put_chunk(msg.fid, msg.seq, i, c)
            msg = self.index.by_feed(msg.fid, msg.seq + 1)


def post(index, author, root, text, feeds=None):
    """Write a new DAG message referencing the current tips (a new root if root is None).

    Args:
        index: the DAG index; author: tinyssb.entry.Author of the writing feed.
        root: root ID or None; text: application text; feeds: optional feed store.
    Returns: the DagMsg (already admitted).
    Raises: TrdagError("unknown_root") when root is not in the index.
    """
    if root is None:
        msg = message.create(author, None, [], 0, text)
    else:
        r = index.get(root)
        if r is None or not r.is_root:
            raise TrdagError("unknown_root", root.hex())
        tips = sorted(index.tips(root), reverse=True)[:message.MAX_CHILDREN]
        depth = max(d for d, _ in tips) + 1
        msg = message.create(author, root, [m for _, m in tips], depth, text)
    Dag(index, feeds).offer(msg)
    return msg
