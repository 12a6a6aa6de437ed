"""`tssb sync --peer HOST:PORT`: reconcile this host's store with another host over SETU."""
import asyncio
import sys

from tssb.cli import CliError
from tssb.context import add_home_option
from tssb.session.budget import Limits, Pool


def register(subparsers):
    p = subparsers.add_parser(
        "sync", help="reconcile the local store with another host (SETU set union)",
        description="Open a secure session to a peer running `tssb serve` and reconcile both "
                    "stores with SETU (draft-summermatter-set-union-01). Both hosts end with "
                    "the union of their log entries; every received entry is signature-checked.")
    p.add_argument("--peer", required=True, metavar="HOST:PORT", help="the peer's `tssb serve` address")
    add_home_option(p)
    p.add_argument("--profile", choices=("tssb2", "gnunet"), default="tssb2",
                   help="tssb2 (default; fixes GNUnet's IBF flaws) or gnunet (GNUnet-identical IBFs)")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds to wait for any one message (default 60)")
    p.add_argument("--max-unverified", type=int, default=None, metavar="N",
                   help="received elements held before they can be checked against their "
                        "feed (default %d; about 0.8 KiB each); a peer sending more is cut off"
                        % Limits().session["unverified"])
    p.set_defaults(func=run)


def _parse_peer(s):
    host, sep, port = s.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise CliError("--peer must be HOST:PORT, got %r" % s)
    return host.strip("[]"), int(port)


def run(args):
    host, port = _parse_peer(args.peer)
    try:
        from tssb import session
        from tssb.context import Context
    except ImportError as e:
        raise CliError("secure sessions are not available in this build (%s)" % e)
    from tssb.setu import constants as C
    from tssb.setu.driver import reconcile
    from tssb.setu.errors import SetuError
    from tssb.setu.machine import Config
    from tssb.setu.service import summary_fields
    from tssb.setu.tinyssb_elements import StoreSource
    from tssb.channel import ChannelClosed

    try:
        limits = Limits() if args.max_unverified is None else Limits(
            unverified=args.max_unverified)
    except ValueError as e:
        raise CliError("--max-unverified: %s" % e)
    budget = Pool(limits).budget()
    ctx = Context.open(args.home)
    src = StoreSource(ctx.store, budget)
    n = src.refresh()
    print("local set: %d elements (entries and chunks); connecting to %s:%d" % (n, host, port), file=sys.stderr)
    cfg = Config(profile_id=C.PROFILE_GNUNET if args.profile == "gnunet" else C.PROFILE_TSSB2)

    def progress(st):
        print("  %s: sent %d, received %d elements" % (st["state"], st["elements_sent"],
                                                      st["elements_recv"]), file=sys.stderr)

    async def go():
        sess = await session.connect(host, port, ctx, budget=budget)
        try:
            ch = await sess.open_stream("setu")
            ctx.events.emit("sync_start", proto="setu", peer=args.peer)
            return await reconcile(ch, src.eset, True, cfg, progress, args.timeout)
        finally:
            await sess.close()

    try:
        res = asyncio.run(go())
    except SetuError as e:
        ctx.events.emit("sync_done", **summary_fields(args.peer, dict(ok=False, reason=e.reason)))
        raise CliError("sync failed: %s" % e)
    except OSError as e:
        raise CliError("cannot reach %s:%d: %s" % (host, port, e))
    except ValueError as e:  # no peer known at that address
        raise CliError("%s (tssb peer add KEY --addr %s:%d)" % (e, host, port))
    except (session.ProtocolError, session.StreamRefused, ChannelClosed) as e:
        ctx.events.emit("sync_done", **summary_fields(args.peer, dict(ok=False, reason=str(e))))
        raise CliError("session with %s:%d failed: %s" % (host, port, e))
    ctx.events.emit("sync_done", **summary_fields(args.peer, res))
    print("mode %s (profile %s), %d IBF round(s), %d decode failure(s)"
          % (res["mode"], res["profile"], res["rounds"], res["decode_failures"]))
    print("bytes: %d sent, %d received; elements: %d sent, %d received"
          % (res["bytes_sent"], res["bytes_recv"], res["elements_sent"], res["elements_recv"]))
    return 0
