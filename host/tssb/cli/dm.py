"""`tssb dm RECIPIENT... TEXT`: a private message the tinySSB Android app can open.

The post is the app's private TAV (tssb.chat.appmsg): the content list with its members'
refs (the others sorted, ourselves last), boxed to the same keys in the same order
(tssb.chat.box) and stored as a BIPF bytes object in a chain20 entry. A chat holds at most
7 members including us: the app opens only 7 slots. A group message to a member whose
feed this home holds nothing of is sent with a warning: the app's page loses a group
message with a member it does not know (tssb.chat.apphazard.unheard).
"""
import json
import sys

from tssb import ownfeed, posts
from tssb.chat import apphazard, appmsg, box, delivery
from tssb.cli import EXIT_FAILURE, CliError, _wait, open_home, post, resolve_feed


def register(subparsers):
    p = subparsers.add_parser(
        "dm", help="send a private message (the Android app's box) to up to 6 others",
        description="Write a private message to RECIPIENTs on the host's own feed: the "
                    "tinySSB Android app's private text-and-voice post, boxed so that only "
                    "the recipients and we can open it. The last argument is the text (- "
                    "reads stdin); recipients are feed ids (hex or @base64.ed25519), unique "
                    "prefixes of 8+ hex digits of stored feeds, names the authors gave "
                    "themselves (`tssb name`), peer names (`tssb peer`), or self (a note "
                    "to yourself). At most 7 members including us (the app opens 7 slots). "
                    "Recipients send a delivered receipt when the message reaches them and "
                    "a read receipt when they read it; --wait shows both.")
    p.add_argument("args", metavar="RECIPIENT... TEXT", nargs="+",
                   help="one or more recipients, then the text (- for stdin; '' with --voice "
                        "for a voice message alone)")
    p.add_argument("--voice", metavar="FILE",
                   help="attach a voice message (the app's codec2 bytes) from FILE")
    p.add_argument("--plan", metavar="PLAN", help="region plan for the airtime estimate")
    p.add_argument("--force", action="store_true",
                   help="send even above the airtime limit, or while this home's own feed "
                        "may be behind (after `tssb store restore` or `tssb id --import`, "
                        "until a sync with a peer)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    _wait.add_argument(p)
    p.set_defaults(func=run)


def recipients(ctx, words, names=None):
    """The members of a chat besides us, from RECIPIENT words. Raises: CliError."""
    names = posts.display_names(ctx.store) if names is None else names
    out = []
    for w in words:
        fid = resolve_feed(ctx, w, names)
        if fid not in out:
            out.append(fid)
    return out


def _text(text, voice):
    """The message text (None: a voice message alone). Raises: CliError."""
    if text == "-":
        data = post._read(getattr(sys.stdin, "buffer", sys.stdin), "stdin")
        data = data[:-1] if data.endswith(b"\n") else data
        try:
            text = data.decode("utf-8")
        except UnicodeError:
            raise CliError("stdin is not UTF-8 text")
    if not text.strip():
        if voice is not None:
            return None
        raise CliError("nothing to send: the text is empty")
    return text


def run(args):
    if len(args.args) < 2:
        raise CliError("give at least one RECIPIENT and then the TEXT (- reads stdin)")
    words = args.args[:-1]
    voice = post.voice_of(args)
    text = _text(args.args[-1], voice)
    since_ms = delivery.wall_ms()
    ctx = open_home(args)
    try:
        others = recipients(ctx, words)
        me = ctx.identity.public
        try:
            content, order = appmsg.private_tav(me, others, text, voice)
        except box.BoxError as e:
            raise CliError(str(e))
        packets, airtime, plan = post.estimate(content, post._plan_name(args, ctx))
        if packets > 1 and not args.json:
            print("estimate: " + post.describe(packets, airtime, plan), file=sys.stderr)
        if airtime > post.MAX_AIRTIME_MS and not args.force:
            raise CliError("refused: %d bytes need %.1f s of airtime per hop (limit %g s): "
                           "shorten it, or send with --force"
                           % (len(content), airtime / 1000, post.MAX_AIRTIME_MS / 1000),
                           EXIT_FAILURE)
        try:
            seq = ownfeed.post(ctx, content, args.force)
        except ownfeed.FeedBehind as e:
            raise CliError("refused: %s" % e, EXIT_FAILURE)
        except ValueError as e:
            raise CliError("cannot send: %s" % e, EXIT_FAILURE)
        members = [m for m in order if m != me]
        names = posts.display_names(ctx.store)
        unheard = apphazard.unheard(ctx.store, me, order)
        if unheard:
            print("warning: " + apphazard.unheard_warning(unheard, names), file=sys.stderr)
        if args.json:
            print(json.dumps({"fid": me.hex(), "seq": seq, "bytes": len(content),
                              "chunks": packets - 1,
                              "recipients": [m.hex() for m in members],
                              "unheard": [m.hex() for m in unheard]}), flush=True)
        else:
            print("sent seq %d to %s (%d bytes%s)" % (
                seq, ", ".join(posts.author(m, names) for m in members) or "yourself",
                len(content), ", side chain of %d chunks" % (packets - 1)
                if packets > 1 else ""), flush=True)
        if args.wait is not None:
            return _wait.run(ctx, seq, args.wait, members, args.json, since_ms)
    finally:
        ctx.close()
    return 0
