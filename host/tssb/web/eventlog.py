"""Following the host's JSONL event log (`<home>/logs/events.jsonl.live`) like `tail -f`.

Other processes on the same home write there: `tssb sync` / `tssb serve` their
sync_start / sync_done lines, a `tssb bridge` in another process its board's rx / tx /
drop lines. The follower starts with the last BACKLOG_BYTES (recent syncs and the last
hour's airtime), then reads what is appended. A file replaced (rotation) or cut shorter
is read again from its start. Lines are untrusted text: anything that is not one JSON
object of at most MAX_LINE bytes (nested at most MAX_DEPTH deep) is skipped and counted,
and so is a line whose handling fails in any way: no line stops the follower.
"""
import logging
import os

from tssb.safeparse import InputError, json_loads

log = logging.getLogger("tssb.web")

BACKLOG_BYTES = 256 * 1024   # read at start: ~1500 lines
READ_MAX = 256 * 1024        # read per poll at most (a burst is caught up over polls)
MAX_LINE = 16 * 1024         # longer lines are skipped (schema lines are < 1 KiB)
MAX_DEPTH = 8                # event objects are flat; a few levels for future fields
POLL_S = 0.25


class Follower:
    """Args:
        path: the JSONL file (may not exist yet).
        on_event: function(dict) for each event object.
    """

    def __init__(self, path, on_event):
        self.path = path
        self.on_event = on_event
        self.pos = None      # None: not opened yet
        self.ino = None
        self.partial = b""
        self.skipping = False   # inside an overlong line: drop up to its newline
        self.bad = 0
        self.lines = 0

    def poll(self):
        """Read what was appended since the last call (at most READ_MAX bytes)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return 0
        if self.pos is None or st.st_ino != self.ino or st.st_size < self.pos:
            first = self.pos is None
            self.ino = st.st_ino
            self.pos = max(0, st.st_size - BACKLOG_BYTES) if first else 0
            self.partial = b""
            self.skipping = self.pos > 0     # the first line read may be cut
        if st.st_size == self.pos:
            return 0
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read(READ_MAX)
        except OSError:
            return 0
        self.pos += len(data)
        n = 0
        for line in self._lines(data):
            n += 1
            self._handle(line)
        return n

    def _lines(self, data):
        parts = (self.partial + data).split(b"\n")
        self.partial = parts.pop()
        for p in parts:
            if self.skipping:
                self.skipping = False
                continue
            if p.strip():
                yield p
        if len(self.partial) > MAX_LINE:
            self.partial = b""
            self.skipping = True
            self.bad += 1

    def _handle(self, line):
        self.lines += 1
        if len(line) > MAX_LINE:
            self.bad += 1
            return
        try:
            rec = json_loads(line, MAX_LINE, MAX_DEPTH, "event line")
        except InputError:
            self.bad += 1
            return
        if not isinstance(rec, dict) or not isinstance(rec.get("event"), str):
            self.bad += 1
            return
        try:
            self.on_event(rec)
        except Exception as e:    # noqa: BLE001 (a line of the right shape with fields
            # of the wrong type, or worse: the follower must outlive any line)
            self.bad += 1
            log.debug("event line skipped: %s: %s", type(e).__name__, e)
