"""`tssb block FEED` and `tssb mute FEED`, listed with --list, undone with --remove.

Block: the author's feed is never replicated or shown again. Its entries, chunks and
index rows leave the store, and the store takes nothing of it back, whoever brings it
(LoRa, SETU, trDAG, clock sync all write through `tssb.store.Store`); a host node never
takes its key into the GOSET again (`tinyssb.node.Node.ban`: at start and, in a running
bridge, within a round of tssb.chat.service). A deployed neighbour that holds the feed
then no longer shares our whole set, so what it keys by that set stops matching ours
(docs/interop.md, "Chats"). The trDAG and Bloom-clock indexes (`tssb dag`, `tssb clock`)
keep their own copies of thread messages; a block does not reach into those.

Mute: the feed is kept and relayed as before, only left out of chats (tssb.chat.views).
Both survive restarts (store migration 3). `tssb mute` is this module's second command
(tssb.cli.mute).
"""
import json
import time

from tssb import posts
from tssb.cli import EXIT_FAILURE, CliError, open_home, resolve_feed
from tssb.store import BLOCK, MUTE

PAST = {BLOCK: "blocked", MUTE: "muted"}
WHAT = {
    BLOCK: ("block", "never replicate or show an author's feed again (removes its entries)",
            "Block FEED: its entries leave this store, the store never takes any back "
            "(LoRa, sync), and a running bridge drops it from the GOSET within seconds. "
            "Deployed neighbours that hold the feed stop sharing our whole set with us. "
            "Undo with --remove (its entries come back only when replicated again)."),
    MUTE: ("mute", "stop showing an author's posts (kept and relayed)",
           "Mute FEED: its posts are left out of chats (`tssb read`, the web view) but "
           "still stored and relayed to others. Undo with --remove."),
}


def make_register(how):
    name, short, long = WHAT[how]

    def register(subparsers):
        p = subparsers.add_parser(name, help=short, description=long)
        p.add_argument("feed", metavar="FEED", nargs="?",
                       help="a feed id (hex or @base64.ed25519), a unique prefix of 8+ hex "
                            "digits of a stored feed, or an author's name")
        p.add_argument("--list", action="store_true", help="list the feeds %s" % PAST[how])
        p.add_argument("--remove", action="store_true", help="undo for FEED")
        p.add_argument("--json", action="store_true", help="print JSON")
        p.set_defaults(func=lambda args: run(args, how))
    return register


register = make_register(BLOCK)


def run(args, how):
    name = WHAT[how][0]
    if args.list == (args.feed is not None):
        raise CliError("give FEED, or --list" if not args.list else "--list takes no FEED")
    ctx = open_home(args)
    try:
        names = posts.display_names(ctx.store)
        if args.list:
            return _list(ctx, how, names, args.json)
        fid = resolve_feed(ctx, args.feed, names)
        if args.remove:
            if ctx.store.unblock(fid) != how:
                raise CliError("%s is not %s" % (posts.author(fid, names), PAST[how]),
                               EXIT_FAILURE)
            _say(args, {"fid": fid.hex(), "removed": name},
                 "%s is no longer %s" % (posts.author(fid, names), PAST[how]))
            return 0
        if fid == ctx.identity.public:
            raise CliError("that is this host's own feed")
        n = ctx.store.front(fid)[0] if how == BLOCK and ctx.store.has_feed(fid) else 0
        ctx.store.set_blocked(fid, how)
        text = "%s %s" % (PAST[how], posts.author(fid, names))
        if how == BLOCK:
            text += " (%d entr%s removed)" % (n, "y" if n == 1 else "ies")
        _say(args, {"fid": fid.hex(), name: True, "removed_entries": n}, text)
    finally:
        ctx.close()
    return 0


def _say(args, obj, text):
    print(json.dumps(obj) if args.json else text)


def _list(ctx, how, names, as_json):
    rows = ctx.store.blocked(how)
    for fid, _, ts in rows:
        fid = bytes(fid)
        if as_json:
            print(json.dumps({"fid": fid.hex(), "name": names.get(fid), "since": ts}))
        else:
            print("%s  %s  since %s" % (fid.hex(), names.get(fid) or "-",
                                        time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))))
    if not rows and not as_json:
        print("no %s feeds" % PAST[how])
    return 0
