"""Following the host's JSONL event log (`<home>/logs/events.jsonl.live`) like `tail -f`.

Other processes on the same home write there: `tssb sync` / `tssb serve` their
sync_start / sync_done lines, a `tssb bridge` in another process its board's rx / tx /
drop lines. The follower starts with the last BACKLOG_BYTES (recent syncs and the last
hour's airtime), then reads what is appended. A file replaced (rotation) or cut shorter
is read again from its start. Lines are untrusted text: anything that is not one event
object (tssb.safeparse.event_record: at most MAX_LINE bytes, nested a few levels at most)
is skipped and counted, and so is a line whose handling fails in any way: no line stops
the follower.
"""
import logging
import os

from tssb.safeparse import EVENT_LINE_MAX as MAX_LINE, InputError, Lines, event_record

log = logging.getLogger("tssb.web")

BACKLOG_BYTES = 256 * 1024   # read at start: ~1500 lines
READ_MAX = 256 * 1024        # read per poll at most (a burst is caught up over polls)
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
        self.split = Lines(MAX_LINE)
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
            self.split = Lines(MAX_LINE, cut=self.pos > 0)   # the first line may be cut
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
        for line in self.split.feed(data):
            n += 1
            self._handle(line)
        return n

    def _handle(self, line):
        self.lines += 1
        try:
            rec = event_record(line) if line is not None else None   # None: over-long
        except InputError:        # not one event object, nested
            rec = None
        if rec is None:
            self.bad += 1
            return
        try:
            self.on_event(rec)
        except Exception as e:    # noqa: BLE001 (a line of the right shape with fields
            # of the wrong type, or worse: the follower must outlive any line)
            self.bad += 1
            log.debug("event line skipped: %s: %s", type(e).__name__, e)
