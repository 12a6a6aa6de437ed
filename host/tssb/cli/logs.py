"""`tssb logs`: the host's JSONL event log (host protocols and bridged boards)."""
import json
import os
import time

from tssb.cli import EXIT_FAILURE, CliError, require_home
from tssb.context import EVENT_FILE

FOLLOW_POLL_S = 0.5


def register(subparsers):
    p = subparsers.add_parser(
        "logs", help="show the JSONL event log (--follow to keep reading)",
        description="Print the event log of this data directory (one JSON object per line, "
                    "the schema the Spark ingest reads): host sessions and the event lines "
                    "of bridged boards. --follow waits for new lines like tail -f.")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new lines")
    p.add_argument("--event", metavar="NAME", action="append",
                   help="only these events (repeatable), e.g. --event rx --event tx")
    p.add_argument("-n", "--lines", type=int, default=20, metavar="N",
                   help="start with the last N lines (default 20; 0 = all)")
    p.add_argument("--duration", type=float, metavar="S", help="with --follow: stop after S s")
    p.set_defaults(func=run)


def _wanted(line, events):
    if not events:
        return True
    try:
        return json.loads(line).get("event") in events
    except (ValueError, AttributeError):
        return False


def run(args):
    if args.lines < 0:
        raise CliError("--lines must be 0 or more")
    path = os.path.join(require_home(args), EVENT_FILE)
    if not os.path.exists(path) and not args.follow:
        raise CliError("no event log at %s yet" % path, EXIT_FAILURE)
    lines = []
    pos = 0
    if os.path.exists(path):
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            lines = [l.rstrip("\n") for l in f if _wanted(l, args.event)]
            pos = f.tell()
    for l in (lines[-args.lines:] if args.lines else lines):
        print(l)
    if not args.follow:
        return 0
    end = None if args.duration is None else time.monotonic() + args.duration
    partial = ""
    try:
        while end is None or time.monotonic() < end:
            if os.path.exists(path):
                if os.path.getsize(path) < pos:
                    pos = 0        # rotated or truncated: start again
                with open(path, "r", encoding="utf-8", errors="replace") as f:
                    f.seek(pos)
                    chunk = f.read()
                    pos = f.tell()
                partial += chunk
                *done, partial = partial.split("\n")
                for l in done:
                    if l and _wanted(l, args.event):
                        print(l, flush=True)
            time.sleep(FOLLOW_POLL_S)
    except KeyboardInterrupt:
        pass
    return 0
