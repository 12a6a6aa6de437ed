"""`tssb name [NAME]`: the display name others see for this host's feed (the app's IAM)."""
import json

from tssb import ownfeed, posts
from tssb.chat import appmsg
from tssb.cli import EXIT_FAILURE, CliError, open_home

MAX_NAME = 64      # characters: the app shows a short alias; a long one costs airtime


def register(subparsers):
    p = subparsers.add_parser(
        "name", help="set (or show) the name others see for this host's feed",
        description="Post NAME as this host's display name: the tinySSB Android app's IAM "
                    "entry, which the app, `tssb read` and the web view show next to this "
                    "feed. Without NAME, show the current one.")
    p.add_argument("name", metavar="NAME", nargs="?", help="the name (up to %d characters)"
                   % MAX_NAME)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args):
    name = None if args.name is None else args.name.strip()
    if name is not None and not name:
        raise CliError("the name is empty")
    if name is not None and (len(name) > MAX_NAME or not name.isprintable()):
        raise CliError("a name is 1 to %d printable characters" % MAX_NAME)
    ctx = open_home(args)
    try:
        me = ctx.identity.public
        if name is None:
            have = posts.names(ctx.store, [me]).get(me) if ctx.store.has_feed(me) else None
            print(json.dumps({"fid": me.hex(), "name": have}) if args.json else
                  have if have else "no name set (tssb name NAME)")
            return 0
        try:
            seq = ownfeed.post(ctx, appmsg.iam(name))
        except ownfeed.FeedBehind as e:
            raise CliError("refused: %s" % e, EXIT_FAILURE)
        except ValueError as e:
            raise CliError("cannot post: %s" % e, EXIT_FAILURE)
        print(json.dumps({"fid": me.hex(), "name": name, "seq": seq}) if args.json else
              "%s is now called %r (seq %d)" % (me.hex()[:16], name, seq))
    finally:
        ctx.close()
    return 0
