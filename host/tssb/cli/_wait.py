"""`--wait DURATION` of `tssb post` and `tssb dm`: each delivery stage as it is seen.

Stages and what counts as seeing one: tssb.chat.delivery. A line per stage on stdout
(`--json`: one JSON object per stage, then a summary object), the stages still missing
when the time is up; exit status 0 when every stage the post can reach was seen, 1 when
the time ran out first (the post itself is stored either way).
"""
import json
import re
import sys
import time

from tssb import posts
from tssb.chat import delivery
from tssb.chat.inbox import Inbox
from tssb.cli import EXIT_FAILURE, EXIT_OK, CliError

POLL_S = 0.5
MAX_WAIT_S = 7 * 24 * 3600
_UNITS = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600}


def duration(text):
    """Seconds of a DURATION: 90, 90s, 2m, 1.5h. Raises: CliError."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(s|m|min|h)?\s*", text or "")
    if not m:
        raise CliError("--wait takes a duration such as 90s, 5m or 1h, not %r" % text)
    s = float(m.group(1)) * _UNITS[m.group(2) or ""]
    if not 0 < s <= MAX_WAIT_S:
        raise CliError("--wait must be more than 0 and at most 7 days")
    return s


def add_argument(p):
    p.add_argument("--wait", metavar="DURATION", type=duration,
                   help="then report each delivery stage as it is seen, for up to DURATION "
                        "(90s, 5m, 1h): stored here, on the board, asked for and fetched by "
                        "a neighbour (seen by a running `tssb bridge` or `tssb web "
                        "--serial`), and for a private post each recipient's delivered "
                        "and read receipts. Exit status 1 if time runs out first")


def _who(detail, names):
    if isinstance(detail, (bytes, bytearray)):
        return posts.author(detail, names)
    return str(detail)


def run(ctx, seq, seconds, recipients=(), as_json=False, since_ms=None, out=None):
    """Watch our post `seq` for `seconds`; print stages as they come. Returns exit status."""
    out = out or sys.stdout
    names = posts.display_names(ctx.store) if recipients and not as_json else {}
    inbox = Inbox(ctx.store, ctx.identity) if recipients else None
    w = delivery.Watch(ctx.store, inbox, ctx.identity.public, seq, since_ms, recipients)
    start = time.monotonic()
    end = start + seconds
    while True:     # Ctrl-C ends it (exit 130); the post stays
        for stage, detail, ms in w.poll():
            at = round(time.monotonic() - start, 1)
            if as_json:
                rec = {"stage": stage, "seq": seq, "after_s": at, "ts": ms}
                if isinstance(detail, (bytes, bytearray)):
                    rec["recipient"] = bytes(detail).hex()
                elif isinstance(detail, str):
                    rec["source"] = detail
                print(json.dumps(rec), file=out, flush=True)
            else:
                what = delivery.MEANING[stage]
                if stage in (delivery.DELIVERED, delivery.READ):
                    what += " " + _who(detail, names)
                elif stage != delivery.STORED:
                    what += " (%s)" % detail
                print("%6.1f s  %s" % (at, what), file=out, flush=True)
        if w.done() or time.monotonic() >= end:
            break
        time.sleep(min(POLL_S, max(0.0, end - time.monotonic())))
    missing = w.missing()
    if as_json:
        print(json.dumps({"seq": seq, "done": not missing, "missing": [
            {"stage": st, "recipient": r.hex()} if r is not None else {"stage": st}
            for st, r in missing]}), file=out, flush=True)
    elif missing:
        print("not seen within %s: %s" % (_span(seconds), ", ".join(
            delivery.MEANING[st] + ("" if r is None else " " + _who(r, names))
            for st, r in missing)), file=out, flush=True)
    return EXIT_OK if not missing else EXIT_FAILURE


def _span(seconds):
    return "%g s" % seconds if seconds < 120 else "%g min" % (seconds / 60)
