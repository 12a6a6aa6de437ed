"""`tssb logs`: the host's JSONL event log (host protocols and bridged boards)."""
import collections
import os
import sys
import time

from tssb.cli import EXIT_FAILURE, CliError, require_home
from tssb.context import EVENT_FILE
from tssb.safeparse import EVENT_LINE_MAX, InputError, Lines, event_record

FOLLOW_POLL_S = 0.5
READ_BYTES = 1 << 20        # read at a time (the live file rotates at a few MiB)


def register(subparsers):
    p = subparsers.add_parser(
        "logs", help="show the JSONL event log (--follow to keep reading)",
        description="Print the event log of this data directory (one JSON object per line, "
                    "the schema the Spark ingest reads): host sessions and the event lines "
                    "of bridged boards. --follow waits for new lines like tail -f. A line "
                    "that is not one event object (not JSON, not an object, nested too "
                    "deep, longer than %d bytes) is skipped, with a note on stderr."
                    % EVENT_LINE_MAX)
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new lines")
    p.add_argument("--event", metavar="NAME", action="append",
                   help="only these events (repeatable), e.g. --event rx --event tx")
    p.add_argument("-n", "--lines", type=int, default=20, metavar="N",
                   help="start with the last N lines (default 20; 0 = all)")
    p.add_argument("--duration", type=float, metavar="S", help="with --follow: stop after S s")
    p.set_defaults(func=run)


class LogReader:
    """The event lines of the live log file from where the last read stopped: the file
    read in bounded pieces, lines that are not event objects skipped and counted.

    Args:
        path: the live JSONL file; events: event names wanted (None: all).
    """

    def __init__(self, path, events=None):
        self.path = path
        self.events = events
        self.pos = 0
        self.ino = None
        self.split = Lines(EVENT_LINE_MAX)
        self.skipped = 0
        self.first_skip = None      # why the first skipped line was skipped

    def read(self):
        """Yield each wanted line (str) appended since the last read."""
        try:
            f = open(self.path, "rb")
        except OSError:
            return
        with f:
            st = os.fstat(f.fileno())
            if st.st_ino != self.ino or st.st_size < self.pos:   # rotated or cut: again
                self.ino, self.pos, self.split = st.st_ino, 0, Lines(EVENT_LINE_MAX)
            f.seek(self.pos)
            while True:
                data = f.read(READ_BYTES)
                if not data:
                    return
                self.pos += len(data)
                for line in self.split.feed(data):
                    rec = self._record(line)
                    if rec is not None and (not self.events or rec["event"] in self.events):
                        yield line.decode("utf-8")

    def _record(self, line):
        """The event object of a line, or None (the line skipped and counted)."""
        try:
            if line is not None:
                return event_record(line)
            why = "event line longer than %d bytes" % EVENT_LINE_MAX
        except InputError as e:
            why = str(e)
        self.skipped += 1
        if self.first_skip is None:
            self.first_skip = why
        return None

    def note(self):
        """One line saying what was skipped since the last note (None: nothing)."""
        if not self.skipped:
            return None
        text = "skipped %d line%s that %s not event objects (%s)" % (
            self.skipped, "" if self.skipped == 1 else "s",
            "is" if self.skipped == 1 else "are", self.first_skip)
        self.skipped, self.first_skip = 0, None
        return text


def _say(reader):
    note = reader.note()
    if note is not None:
        print("tssb logs: " + note, file=sys.stderr, flush=True)


def run(args):
    if args.lines < 0:
        raise CliError("--lines must be 0 or more")
    path = os.path.join(require_home(args), EVENT_FILE)
    if not os.path.exists(path) and not args.follow:
        raise CliError("no event log at %s yet" % path, EXIT_FAILURE)
    reader = LogReader(path, args.event)
    for line in collections.deque(reader.read(), maxlen=args.lines or None):
        print(line)
    _say(reader)
    if not args.follow:
        return 0
    end = None if args.duration is None else time.monotonic() + args.duration
    try:
        while end is None or time.monotonic() < end:
            for line in reader.read():
                print(line, flush=True)
            _say(reader)
            time.sleep(FOLLOW_POLL_S)
    except KeyboardInterrupt:
        pass
    return 0
