"""What a post of ours is seen to reach, stage by stage, and only what was seen.

    stored     it is in this home's store
    board      the bridged board holds it: the board logged storing it, or its own WANT
               asks for a later entry of our feed
    announced  a neighbour asks for it: a WANT heard (not the board's) for exactly this
               entry, after it was written. Our feed is in the set that neighbour shares
               with the board, so its next request takes the entry
    fetched    a neighbour holds it: a WANT heard (not the board's) for a later entry
    delivered  a recipient's DLV for it is in our store (one stage per recipient)
    read       a recipient's ACK for it is in our store (one per recipient)

What a host can observe today, and where: a process that runs the bridge (`tssb bridge`,
`tssb web --serial`) has a `Recorder` on its host node. It sees every packet the board
hears (RX) and sends (its TX mirror) and the board's event lines, and keeps in the store
(`delivery_seen`, migration 3), per source ("board", "air" for the board's radio, or a
port's name), the newest entry of our feed that source is known to hold, and when that was
last heard. Receipts come from the chat index (tssb.chat.inbox). `Watch` (for `tssb post
--wait`, `tssb dm --wait` and the web view's ticks) reads only the store, so it works in
any process on the home. A WANT names what its sender holds by asking for the next entry
(tinyssb-wire.md 3.5): feeds are linear, so "asks for n+1" proves "holds 1..n".

The Recorder is the one place that turns packets into these observations; when the node
reports typed events it reads those instead.
"""
import time

from tinyssb.vectors import MAX_SEQ

from tssb.chat import appmsg
from tssb.chat.inbox import SCAN_PER_ROUND
from tssb.safeparse import InputError, event_record

STORED = "stored"
BOARD = "board"
ANNOUNCED = "announced"
FETCHED = "fetched"
DELIVERED = "delivered"
READ = "read"
STAGES = (STORED, BOARD, ANNOUNCED, FETCHED, DELIVERED, READ)
MEANING = {
    STORED: "stored here",
    BOARD: "on the board",
    ANNOUNCED: "asked for by a neighbour",
    FETCHED: "fetched by a neighbour",
    DELIVERED: "delivered to",
    READ: "read by",
}

HOLDS = "holds"          # delivery_seen.what: the newest seq the source holds
SRC_BOARD = "board"      # the bridged board itself (its TX mirror, its event lines)
REFRESH_MS = 5000        # an unchanged observation is written again at most this often
SRC_MAX = 64             # characters of a source name kept


def wall_ms():
    return int(time.time() * 1000)


class Recorder:
    """Records, for our own feed, what each source is seen to hold.

    Args:
        store: tssb.store.Store.  own: our feed id.  clock: function() -> Unix ms.
    Wire it with `attach(hostnode)` and feed the board's event lines to `board_line`.
    """

    def __init__(self, store, own, clock=wall_ms):
        self.store = store
        self.own = bytes(own)
        self.own_hex = self.own.hex()
        self.clock = clock
        self.node = None
        self.index = None
        self._last = {}     # src -> (seq, ms written)

    def attach(self, hostnode):
        from tssb.web.traffic import Index
        self.node = hostnode.node
        self.index = Index(self.store)
        hostnode.listeners.append(self.packet)

    def packet(self, port_name, direction, pkt, info):
        """HostNode listener: a WANT naming our feed tells what its sender holds."""
        from tssb.web.traffic import classify
        if len(pkt) < 8:
            return
        try:
            row = classify(pkt, self.node, self.index)
        except Exception:     # noqa: BLE001 (an observer must never stop the node)
            return
        if row.get("kind") != "want":
            return
        front = (row.get("fronts") or {}).get(self.own_hex)
        if front is not None:
            src = (info or {}).get("src") or port_name
            self.saw(str(src)[:SRC_MAX], front)

    def board_line(self, line):
        """A board event line (JSON text or dict): its `append` of our feed. Anything
        else, whatever its shape, is ignored."""
        try:
            rec = event_record(line) if isinstance(line, (str, bytes)) else line
        except InputError:
            return
        if isinstance(rec, dict) and rec.get("event") == "append" and \
                rec.get("feed") == self.own_hex and type(rec.get("seq")) is int and \
                1 <= rec["seq"] <= MAX_SEQ:
            self.saw(SRC_BOARD, rec["seq"])

    def tee(self, sink):
        """An event-line sink that records board lines, then hands them to `sink`."""
        def f(line):
            self.board_line(line)
            if sink is not None:
                sink(line)
        return f

    def saw(self, src, seq):
        """`src` holds our feed up to `seq` (now)."""
        now = self.clock()
        last = self._last.get(src)
        if last is not None and seq <= last[0] and now - last[1] < REFRESH_MS:
            return
        with self.store.transaction():
            self.store.db.execute(
                "INSERT INTO delivery_seen VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(fid, src, what) DO UPDATE SET "
                "seq=MAX(seq, excluded.seq), ts=excluded.ts",
                (self.own, src, HOLDS, seq, now))
        self._last[src] = (max(seq, last[0]) if last else seq, now)


def holders(store, own):
    """{src: (seq held, last heard ms)} for our feed."""
    return {r[0]: (r[1], r[2]) for r in store.db.execute(
        "SELECT src, seq, ts FROM delivery_seen WHERE fid=? AND what=?",
        (bytes(own), HOLDS)).fetchall()}


def stages(store, inbox, own, seq, since_ms=None, recipients=()):
    """The stages post `seq` of our feed is seen to have reached.

    Args:
        inbox: tssb.chat.inbox.Inbox (refreshed by the caller) for receipts, or None.
        since_ms: when the post was written (a WANT for it must come after), or None
            (then only holding it counts).
        recipients: feed ids whose receipts are expected.
    Returns: {stage: detail} where detail is the source (board/announced/fetched), the
        list of recipients (delivered/read) or True (stored).
    """
    out = {}
    own = bytes(own)
    if store.entry(own, seq) is None:
        return out
    out[STORED] = True
    seen = holders(store, own)
    b = seen.get(SRC_BOARD)
    if b is not None and b[0] >= seq:
        out[BOARD] = SRC_BOARD
    for src, (held, ts) in sorted(seen.items()):
        if src == SRC_BOARD:
            continue
        if held >= seq:
            out.setdefault(FETCHED, src)
            out.setdefault(ANNOUNCED, src)
        elif held == seq - 1 and since_ms is not None and ts >= since_ms:
            out.setdefault(ANNOUNCED, src)
    if inbox is not None and recipients:
        mid = store.mid(own, seq)
        got = inbox.receipts(mid, own) if mid is not None else {}
        want = [bytes(r) for r in recipients]
        for stage, tag in ((DELIVERED, appmsg.DLV), (READ, appmsg.ACK)):
            who = [r for r in got.get(tag, ()) if r in want]
            if who:
                out[stage] = who
    return out


class Watch:
    """Reports each stage of one post once, as it is first seen (`--wait`).

    Args: store, inbox (or None), own, seq, since_ms, recipients: as for stages().
    """

    def __init__(self, store, inbox, own, seq, since_ms=None, recipients=(), clock=wall_ms):
        self.store = store
        self.inbox = inbox
        self.own = bytes(own)
        self.seq = seq
        self.since_ms = since_ms
        self.recipients = [bytes(r) for r in recipients]
        self.clock = clock
        self.seen = {}     # stage -> detail reported (per recipient for receipts)

    def expected(self):
        """The stages this post can reach: receipts only for a private post."""
        return list(STAGES if self.recipients else STAGES[:4])

    def poll(self):
        """Returns: the newly observed stages, [(stage, who or source, ms)], in order."""
        if self.inbox is not None and self.recipients:
            self.inbox.refresh(SCAN_PER_ROUND)
        now = self.clock()
        got = stages(self.store, self.inbox, self.own, self.seq, self.since_ms,
                     self.recipients)
        out = []
        for st in STAGES:
            if st not in got:
                continue
            if st in (DELIVERED, READ):
                done = self.seen.setdefault(st, [])
                for r in got[st]:
                    if r not in done:
                        done.append(r)
                        out.append((st, r, now))
            elif st not in self.seen:
                self.seen[st] = got[st]
                out.append((st, got[st], now))
        return out

    def missing(self):
        """Stages not seen yet: [(stage, recipient or None)]."""
        out = []
        for st in self.expected():
            if st in (DELIVERED, READ):
                done = self.seen.get(st, [])
                out.extend((st, r) for r in self.recipients if r not in done)
            elif st not in self.seen:
                out.append((st, None))
        return out

    def done(self):
        return not self.missing()
