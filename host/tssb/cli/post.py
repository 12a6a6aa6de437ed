"""`tssb post TEXT|-|--file F`: append a public post to the host's own feed.

The post is the tinySSB Android app's public text-and-voice message (TAV, tssb.chat.appmsg),
so the app shows it in its public chat; `--raw` posts the bytes themselves instead (what
`tssb post` wrote before; readers still show those). Raw content the app throws on when
it arrives (tssb.chat.apphazard: text beginning with `! ) 1 9 A I Q Y a i q y` or TAB,
among others) is refused unless --force.

Long posts cost airtime on every hop of the mesh: one 120-byte entry plus one 120-byte
chunk per 100 bytes beyond the first 24-27, each sent as a 124-byte LoRa frame. The
command estimates that airtime under the board's region plan and refuses posts above
MAX_AIRTIME_MS unless --force.
"""
import json
import sys

from tssb import ownfeed
from tssb.chat import apphazard, appmsg, delivery
from tssb.cli import EXIT_FAILURE, CliError, _wait, open_home

# A quarter of the EU868 hourly duty budget (1 % of 3600 s = 36 s, ETSI EN 300 220): a
# post above this holds a board's radio for more than a quarter of its hour, per hop.
MAX_AIRTIME_MS = 9000
# Hard cap on what is read from a file or stdin even with --force: 1 MiB is 10,486 chunks,
# over 35 min of airtime per hop at SF7/125 kHz; the chain20 format itself allows 2^28.
# Hosts fetch side chains up to this length (tssb.ownfeed), so every post replicates.
MAX_READ = ownfeed.MAX_POST
# Posts this long say on stderr that they are being signed and stored.
PROGRESS_BYTES = 64 * 1024
FRAME_OVERHEAD = 4          # CRC32 after each packet on air (tinyssb.frames)
BOARD_PLAN_CONFIG = "board_plan"   # the plan the attached board reported last (tssb config)
ESTIMATE_PLAN = "EU868.a"   # the plan estimated with when no board has told us its own


def register(subparsers):
    p = subparsers.add_parser(
        "post", help="post TEXT (or - for stdin, or --file F) publicly on the host's own feed",
        description="Author a signed tinySSB entry on the host's own feed: a public chat "
                    "message in the Android app's format (TAV: text, optional voice, time), "
                    "which the app shows in its public chat; --raw posts the bytes as they "
                    "are instead. Content longer than fits in one 120-byte entry goes into a "
                    "side chain. `tssb bridge` "
                    "then replicates it to boards and peers. Posts that need a side chain "
                    "get an airtime estimate under the board's region plan (--plan, else "
                    "the one `tssb config` last read from the board, else %s); posts above "
                    "%g s of airtime per hop are refused unless --force."
                    % (ESTIMATE_PLAN, MAX_AIRTIME_MS / 1000))
    p.add_argument("text", metavar="TEXT", nargs="?",
                   help="the content (UTF-8); - reads it from stdin (one final newline dropped)")
    p.add_argument("--file", metavar="FILE", help="read the text from FILE (UTF-8; with --raw "
                                                  "any bytes)")
    p.add_argument("--voice", metavar="FILE",
                   help="attach a voice message (the app's codec2 bytes) from FILE; TEXT may "
                        "then be left out")
    p.add_argument("--raw", action="store_true",
                   help="post the bytes themselves, not an app message (the app does not "
                        "show these, and throws on some: those are refused unless --force)")
    p.add_argument("--plan", metavar="PLAN", help="region plan for the airtime estimate")
    p.add_argument("--force", action="store_true",
                   help="post even above the airtime limit (up to %d bytes), raw content "
                        "the Android app throws on, or while this home's own feed may be "
                        "behind (after `tssb store restore` or `tssb id --import`, until a "
                        "sync with a peer)" % MAX_READ)
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    _wait.add_argument(p)
    p.set_defaults(func=run)


def _read(f, what):
    data = f.read(MAX_READ + 1)
    if len(data) > MAX_READ:
        raise CliError("%s is longer than %d bytes: too long to post" % (what, MAX_READ))
    return data


def text_of(args):
    """The text of a post (TEXT, stdin or --file), or None with --voice alone.

    Raises: CliError (nothing given, not UTF-8)."""
    if args.voice is not None and not args.text and args.file is None:
        return None     # a voice message alone
    data = content_of(args)
    try:
        return data.decode("utf-8")
    except UnicodeError:
        raise CliError("%s is not UTF-8 text (post bytes with --raw)"
                       % (args.file or "the text"))


def voice_of(args):
    """The voice bytes of --voice FILE, or None. Raises: CliError."""
    if args.voice is None:
        return None
    try:
        with open(args.voice, "rb") as f:
            data = _read(f, args.voice)
    except OSError as e:
        raise CliError("cannot read %s: %s" % (args.voice, e.strerror or e), EXIT_FAILURE)
    if not data:
        raise CliError("%s is empty" % args.voice)
    return data


def app_content(args):
    """The entry content: a public TAV, or with --raw the bytes themselves (refused where
    the Android app throws on them, unless --force). Raises: CliError."""
    if args.raw:
        if args.voice is not None:
            raise CliError("--voice makes an app message; leave out --raw")
        content = content_of(args)
        why = apphazard.hazard(content)
        if why is not None and not args.force:
            raise CliError("refused: the Android app throws on this raw content and stops "
                           "receiving: it reads %s. Post it without --raw (the app's chat "
                           "message), or with --force" % why, EXIT_FAILURE)
        return content
    text, voice = text_of(args), voice_of(args)
    if text is not None and not text.strip() and voice is None:
        raise CliError("nothing to post: the text is empty")
    return appmsg.tav(text, voice)


def content_of(args):
    """The bytes to post, from TEXT, stdin (-) or --file. Raises: CliError."""
    if args.file is not None:
        if args.text is not None:
            raise CliError("give TEXT or --file, not both")
        try:
            with open(args.file, "rb") as f:
                return _read(f, args.file)
        except OSError as e:
            raise CliError("cannot read %s: %s" % (args.file, e.strerror or e), EXIT_FAILURE)
    if args.text is None:
        raise CliError("nothing to post: give TEXT, - (stdin) or --file FILE")
    if args.text == "-":
        data = _read(getattr(sys.stdin, "buffer", sys.stdin), "stdin")
        return data[:-1] if data.endswith(b"\n") else data   # as `echo TEXT |` means it
    return args.text.encode("utf-8")


def estimate(content, plan_name):
    """(packets, airtime ms per hop, plan dict) of posting `content` under a region plan."""
    from tinyssb import entry
    from tssbfw import regions
    from tssbfw.airtime import plan_airtime_ms
    plan = regions.plan(plan_name)
    try:
        chunks = len(entry.chain20(content)[1])
    except ValueError as e:
        raise CliError("cannot post: %s" % e)
    packets = 1 + chunks
    return packets, packets * plan_airtime_ms(plan, entry.PKT_LEN + FRAME_OVERHEAD), plan


def describe(packets, airtime_ms, plan):
    """One line: the airtime and what it means under the plan's duty cycle."""
    text = "%d packets, %.1f s of airtime per hop under %s" % (
        packets, airtime_ms / 1000, plan["name"])
    lim = plan["limits"]
    if lim.get("duty_permille"):
        budget = lim["window_ms"] * lim["duty_permille"] // 1000
        text += " (%.1f h of its %g %% duty cycle)" % (
            airtime_ms / budget * lim["window_ms"] / 3600000, lim["duty_permille"] / 10)
    return text


def _plan_name(args, ctx):
    from tssbfw import regions
    name = args.plan
    if name is None:
        stored = ctx.store.get_config(BOARD_PLAN_CONFIG)
        name = stored.decode() if isinstance(stored, bytes) else stored
    name = name or ESTIMATE_PLAN
    try:
        regions.plan(name)
    except ValueError as e:
        raise CliError(str(e))
    return name


def _board_note(chunks):
    from tinyssb.replica import MAX_CHAIN_CHUNKS as BOARD_MAX
    if chunks > BOARD_MAX:
        print("note: boards fetch side chains of up to %d chunks; this one (%d) replicates "
              "between hosts only" % (BOARD_MAX, chunks), file=sys.stderr)


def run(args):
    content = app_content(args)
    if not content:
        raise CliError("nothing to post: the content is empty")
    since_ms = delivery.wall_ms()
    ctx = open_home(args)
    try:
        packets, airtime, plan = estimate(content, _plan_name(args, ctx))
        if packets > 1:
            print("estimate: " + describe(packets, airtime, plan), file=sys.stderr)
        if airtime > MAX_AIRTIME_MS and not args.force:
            raise CliError("refused: %d bytes need %.1f s of airtime per hop (limit %g s): "
                           "shorten it, or post with --force"
                           % (len(content), airtime / 1000, MAX_AIRTIME_MS / 1000),
                           EXIT_FAILURE)
        try:
            ownfeed.check_front(ctx.store, args.force)
        except ownfeed.FeedBehind as e:
            raise CliError("refused: %s" % e, EXIT_FAILURE)
        _board_note(packets - 1)
        if len(content) >= PROGRESS_BYTES:
            print("signing and storing %d chunks ..." % (packets - 1), file=sys.stderr,
                  flush=True)
        try:
            seq, chunks = ownfeed.append(ctx.store, ctx.identity, content)
        except ValueError as e:
            raise CliError("cannot post: %s" % e, EXIT_FAILURE)
        ctx.events.emit("append", feed=ctx.identity.public, seq=seq, own=True)
        if args.json:
            print(json.dumps({"fid": ctx.identity.public.hex(), "seq": seq,
                              "bytes": len(content), "chunks": chunks, "plan": plan["name"],
                              "airtime_ms": airtime, "format": "raw" if args.raw else "TAV"}),
                  flush=True)
        else:
            print("posted seq %d on %s (%d bytes%s)" % (
                seq, ctx.identity.public.hex()[:16], len(content),
                ", side chain of %d chunks" % chunks if chunks else ""), flush=True)
        if args.wait is not None:
            return _wait.run(ctx, seq, args.wait, as_json=args.json, since_ms=since_ms)
    finally:
        ctx.close()
    return 0
