"""Private posts addressed to us: found once, remembered, grouped into chats; receipts.

`Inbox.refresh()` reads each feed's entries once (a cursor per feed, store migration 3):
every box is tried with our key and remembered in `chat_boxes` with what it held (a TAV
and its chat, a receipt and the message it names, or nothing: not for us, or damaged),
never its text, which is opened again when shown. An entry whose side chain is still
incomplete and whose first byte says "BIPF bytes" (a box, perhaps) is remembered as
PARTIAL and looked at again on each refresh until it is whole; the cursor moves on, so
one chain that never completes holds up nothing after it.

A chat is the app's: the set of its members (the refs of a private TAV and its author),
written as their sorted feed ids in hex joined by commas. The public chat ("ALL" in the
app) is every public TAV and text post.

Receipts (../shared/reference/tinyssb-private-messages.md): ["DLV", ref] when a private
post addressed to us is stored, ["ACK", ref] when the user has read it, each boxed to
[us, the post's author]. We never send one for our own posts (the app does, to itself),
and we do send them for group posts (so do the app and its DLV; each is a receipt only
the author can open). Both are switched by host config (`tssb receipts`). Posts found in
the first scan of a home (its history before this) get no DLV.
"""
from tssb import posts
from tssb.chat import appmsg, box

OWNER_CONFIG = "chat_owner"          # the identity whose first scan is complete
DELIVERED_CONFIG = "receipts_delivered"
READ_CONFIG = "receipts_read"
RECEIPT_CONFIGS = {appmsg.DLV: DELIVERED_CONFIG, appmsg.ACK: READ_CONFIG}
RECEIPTS_PER_ROUND = 16   # receipts written per settle(): each is an entry and 2 chunks on
                          # air (a burst of arrivals is answered over a few rounds)
SCAN_PER_ROUND = 2000     # entries read per refresh() at most (a first scan of a big home
                          # is spread over calls: each call stays short)
PUBLIC = "public"
PARTIAL = "partial"       # chat_boxes.state of a box whose side chain is still arriving


def chat_key(members):
    """The key of a member set (feed ids): sorted hex, comma-separated."""
    return ",".join(sorted(bytes(m).hex() for m in set(bytes(m) for m in members)))


def chat_members(key):
    """The feed ids of a chat key."""
    return [bytes.fromhex(h) for h in key.split(",")] if key and key != PUBLIC else []


def enabled(store, tag):
    """Whether we send receipts of this kind (DLV, ACK): on unless switched off."""
    v = store.get_config(RECEIPT_CONFIGS[tag])
    return v not in (b"off", "off")


def set_enabled(store, tag, on):
    store.set_config(RECEIPT_CONFIGS[tag], "on" if on else "off")


class Inbox:
    """Args:
        store: tssb.store.Store.  identity: ours (.public, .secret_key).
    """

    def __init__(self, store, identity):
        self.store = store
        self.me = bytes(identity.public)
        self.keys = box.Keys(identity.secret_key)
        self.db = store.db
        owner = store.get_config(OWNER_CONFIG)
        if owner is not None and bytes(owner) != self.me:
            # another identity's index (identity imported): read everything again
            with store.transaction():
                self.db.execute("DELETE FROM chat_boxes")
                self.db.execute("DELETE FROM chat_cursor")
                store.set_config(OWNER_CONFIG, None)
        self.first = False

    def _q(self, sql, args=()):
        return self.db.execute(sql, args).fetchall()

    def _one(self, sql, args=()):
        return self.db.execute(sql, args).fetchone()

    # -- finding boxes -----------------------------------------------------------------

    def refresh(self, budget=None):
        """Read the entries appended since the last call (at most `budget` of them: long-
        running loops pass SCAN_PER_ROUND). Returns: the Posts newly opened (private TAVs
        and receipts addressed to us)."""
        budget = float("inf") if budget is None else budget
        new = []
        st = self.store
        # until some process completed the home's first scan, what is found is history:
        # no DLV for it (read from the store: another process may have completed it)
        self.first = st.get_config(OWNER_CONFIG) is None
        self._whole(new)
        cursors = dict(self._q("SELECT fid, seq FROM chat_cursor"))
        for fid in st.feeds():
            fid = bytes(fid)
            if budget <= 0:
                break
            cur = cursors.get(fid, 0)
            top = st.front(fid)[0]
            if top <= cur:
                continue
            seq = cur
            rows = []
            while seq < top and budget > 0:
                budget -= 1
                seq += 1
                row = self._look(fid, seq, new)
                if row is not None:
                    rows.append(row)
            with st.transaction():
                self.db.executemany("INSERT OR REPLACE INTO chat_boxes VALUES "
                                    "(?, ?, ?, ?, ?, ?, ?, ?)", rows)
                if seq > cur:
                    self.db.execute("INSERT OR REPLACE INTO chat_cursor VALUES (?, ?)",
                                    (fid, seq))
        if self.first and budget > 0:      # caught up with the whole store
            self.store.set_config(OWNER_CONFIG, self.me)
            self.first = False
        return new

    def _look(self, fid, seq, new):
        """The index row of entry seq (a box, or one still arriving), or None for a public
        entry. Posts opened for us are appended to `new`."""
        got = posts.entry_content(self.store, fid, seq)
        if got is None:
            return None
        content, complete, _ = got
        if not content or content[0] & 7 != 1:     # not a BIPF bytes object: public
            return None
        if not complete:
            return (fid, seq, PARTIAL, None, None, None, None, 0 if self.first else 1)
        p = posts.decode(fid, seq, content, keys=self.keys)
        if p.private is None:
            return None
        p.mid = self.store.mid(fid, seq)
        if p.private == posts.OPEN and p.kind in (posts.TEXT, posts.RECEIPT):
            new.append(p)
        return self._row(p)

    def _whole(self, new):
        """Look again at the boxes whose side chain was incomplete."""
        for fid, seq, due in self._q("SELECT fid, seq, due FROM chat_boxes WHERE state=?",
                                     (PARTIAL,)):
            fid = bytes(fid)
            first, self.first = self.first, not due
            try:
                row = self._look(fid, seq, new)
            finally:
                self.first = first
            if row is not None and row[2] == PARTIAL:
                continue
            with self.store.transaction():
                if row is None:
                    self.db.execute("DELETE FROM chat_boxes WHERE fid=? AND seq=?", (fid, seq))
                else:
                    self.db.execute("INSERT OR REPLACE INTO chat_boxes VALUES "
                                    "(?, ?, ?, ?, ?, ?, ?, ?)", row)

    def _row(self, p):
        chat = None
        if p.private == posts.OPEN and p.kind == posts.TEXT and p.members is not None:
            chat = chat_key(p.members + [self.me])
        ts = p.ts if isinstance(p.ts, int) and 0 <= p.ts < 1 << 62 else None
        return (p.fid, p.seq, p.private, p.tag, chat, p.ref, ts, 0 if self.first else 1)

    # -- what the index holds ------------------------------------------------------------

    def chats(self):
        """Private chats: [(key, posts, newest ts)] newest first."""
        return self._q(
            "SELECT chat, COUNT(*), MAX(ts) FROM chat_boxes WHERE chat IS NOT NULL "
            "GROUP BY chat ORDER BY MAX(ts) DESC, chat")

    def chat_entries(self, key):
        """[(fid, seq)] of a chat's posts in the author's time order."""
        return self._q("SELECT fid, seq FROM chat_boxes WHERE chat=? "
                             "ORDER BY ts, fid, seq", (key,))

    def chat_of(self, fid, seq):
        row = self._one("SELECT chat FROM chat_boxes WHERE fid=? AND seq=?",
                              (bytes(fid), seq))
        return None if row is None else row[0]

    def counts(self, fid=None):
        """{state: n} of the boxes seen (in one feed, or all)."""
        if fid is None:
            rows = self._q("SELECT state, COUNT(*) FROM chat_boxes GROUP BY state")
        else:
            rows = self._q("SELECT state, COUNT(*) FROM chat_boxes WHERE fid=? "
                                 "GROUP BY state", (bytes(fid),))
        return dict(rows)

    def receipts(self, mid, author):
        """Receipts others sent for `author`'s message `mid`: {"DLV": [fid...],
        "ACK": [fid...]} (the author's own, which the app sends itself, left out)."""
        out = {appmsg.DLV: [], appmsg.ACK: []}
        for fid, tag in self._q(
                "SELECT fid, tag FROM chat_boxes WHERE ref=? AND state=? ORDER BY fid",
                (bytes(mid), posts.OPEN)):
            fid = bytes(fid)
            if tag in out and fid != bytes(author) and fid not in out[tag]:
                out[tag].append(fid)
        return out

    def _sent(self, tag, mid):
        return self._one("SELECT 1 FROM chat_boxes WHERE fid=? AND tag=? AND ref=?",
                               (self.me, tag, bytes(mid))) is not None

    # -- receipts we send ------------------------------------------------------------------

    def due(self, limit=RECEIPTS_PER_ROUND):
        """[(author, seq, mid)] of others' private posts owed a DLV (found after the
        first scan of the home)."""
        out = []
        for fid, seq in self._q(
                "SELECT fid, seq FROM chat_boxes WHERE chat IS NOT NULL AND due=1 AND fid!=? "
                "ORDER BY fid, seq LIMIT ?", (self.me, limit)):
            mid = self.store.mid(fid, seq)
            if mid is not None:
                out.append((bytes(fid), seq, bytes(mid)))
        return out

    def _done(self, fid, seq):
        with self.store.transaction():
            self.db.execute("UPDATE chat_boxes SET due=0 WHERE fid=? AND seq=?", (fid, seq))

    def send_receipt(self, tag, author, mid, write):
        """Write one receipt boxed to [us, author] with write(content) -> seq; it is
        indexed at once (never sent twice). Returns its seq, or None when switched off
        or already sent.

        The check, the write and the index row are one transaction: a `tssb read` and a
        running bridge that both owe the same receipt write it once between them."""
        with self.store.transaction():
            if not enabled(self.store, tag) or author == self.me or self._sent(tag, mid):
                return None
            sealed = box.seal(appmsg.receipt(tag, mid), [self.me, author])
            seq = write(appmsg.boxed(sealed))
            self.db.execute("INSERT OR REPLACE INTO chat_boxes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            (self.me, seq, posts.OPEN, tag, None, bytes(mid), None, 0))
        return seq

    def settle(self, write):
        """DLV for the private posts owed one. Returns: seqs written."""
        if not enabled(self.store, appmsg.DLV):
            with self.store.transaction():     # switched off: these get none, ever
                self.db.execute("UPDATE chat_boxes SET due=0 WHERE due=1")
            return []
        out = []
        for author, seq, mid in self.due():
            got = self.send_receipt(appmsg.DLV, author, mid, write)
            self._done(author, seq)
            if got is not None:
                out.append(got)
        return out

    def mark_read(self, shown, write):
        """ACK the private posts of others the user was just shown (Posts). Returns seqs."""
        out = []
        for p in shown:
            if p.private != posts.OPEN or p.kind != posts.TEXT or p.fid == self.me or \
                    p.mid is None:
                continue
            seq = self.send_receipt(appmsg.ACK, p.fid, p.mid, write)
            if seq is not None:
                out.append(seq)
        return out
