"""`tssb read FEED [--follow]`: what a feed says, decoded (tssb.posts)."""
import json
import sys
import time

from tssb import feedforks, posts
from tssb.cli import CliError, open_home, resolve_feed

FOLLOW_POLL_S = 0.5   # how often --follow looks for new entries (a bridge writes them)


def register(subparsers):
    p = subparsers.add_parser(
        "read", help="print the posts of a feed, decoded (--follow for new ones)",
        description="Print the posts of FEED: our text posts, side chains reassembled, and "
                    "the tinySSB Android app's and Python chat client's messages (TAV text "
                    "and voice, IAM names, delivery/read receipts; other app messages by "
                    "tag; private messages said to be private). Authors are shown by the "
                    "name they gave themselves (IAM) where known. --follow waits for new "
                    "entries like tail -f (Ctrl-C stops).")
    p.add_argument("feed", metavar="FEED",
                   help="'self', a feed id (hex or @base64.ed25519), a unique prefix of 8+ "
                        "hex digits, or an author's name")
    p.add_argument("-n", "--last", type=int, default=20, metavar="N",
                   help="start with the last N posts (default 20; 0 = all)")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new posts")
    p.add_argument("--duration", type=float, metavar="S", help="with --follow: stop after S s")
    p.add_argument("--json", action="store_true", help="one JSON object per post")
    p.set_defaults(func=run)


def _when(ts):
    if ts is None:
        return ""
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) + " "
    except (OverflowError, OSError, ValueError):
        return ""


def _printable(text):
    # the text comes from the mesh: no terminal control sequences
    return "".join(c if c.isprintable() or c in "\n\t" else "\ufffd" for c in text)


def show(p, names, as_json):
    if as_json:
        d = p.as_dict()
        d["author"] = names.get(bytes(p.fid))
        print(json.dumps(d), flush=True)
        return
    head = "#%d %s%s" % (p.seq, _when(p.ts), posts.author(p.fid, names))
    if p.kind == posts.TEXT:
        body = _printable(p.text.rstrip("\n"))
        if p.tips:
            body = "(reply) " + body
    elif p.kind == posts.NAME:
        body = "is called %r" % _printable(p.text)
    else:
        body = "[%s]" % _printable(p.text)
    print("%s: %s" % (head, body), flush=True)


def run(args):
    if args.last < 0:
        raise CliError("--last must be 0 or more")
    if args.duration is not None and not (args.follow and args.duration > 0):
        raise CliError("--duration goes with --follow and must be positive")
    ctx = open_home(args)
    try:
        # hosts in the peers table go by the name given there (a host's feed id is its
        # key), unless they named themselves (IAM)
        names = {bytes(p["public"]): p["name"] for p in ctx.store.peers() if p["name"]}
        names.update(posts.names(ctx.store))
        fid = resolve_feed(ctx, args.feed, names)
        if not ctx.store.has_feed(fid):
            raise CliError("feed %s is not in this store (see `tssb feeds`)" % fid.hex(), 1)
        for seq in feedforks.of_feed(ctx.store, fid):
            print("tssb: warning: " + feedforks.describe(ctx, fid, seq, names),
                  file=sys.stderr)
        top = ctx.store.front(fid)[0]
        start = 1 if not args.last else max(1, top - args.last + 1)
        nxt = start
        for p in posts.feed_posts(ctx.store, fid, start, top):
            if args.follow and p.kind == posts.PARTIAL:
                break            # shown once its side chain is complete
            show(p, names, args.json)
            nxt = p.seq + 1
        if not args.follow:
            if top == 0 and not args.json:
                print("no posts yet in %s" % fid.hex())
            return 0
        end = None if args.duration is None else time.monotonic() + args.duration
        try:
            while end is None or time.monotonic() < end:
                time.sleep(FOLLOW_POLL_S)
                for p in posts.feed_posts(ctx.store, fid, nxt):
                    if p.kind == posts.PARTIAL:
                        break
                    if p.kind == posts.NAME and p.text.strip():
                        names[bytes(p.fid)] = p.text.strip()   # as posts.names reads it
                    show(p, names, args.json)
                    nxt = p.seq + 1
        except KeyboardInterrupt:
            pass         # the way to stop following
    finally:
        ctx.close()
    return 0
