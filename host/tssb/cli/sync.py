"""`tssb sync --peer HOST:PORT`: reconcile this host's store with another host over SETU."""
import asyncio
import sys

from tssb.cli import CliError
from tssb.context import add_home_option


def register(subparsers):
    p = subparsers.add_parser(
        "sync", help="reconcile the local store with another host (SETU set union)",
        description="Open a secure session to a peer running `tssb serve` and reconcile both "
                    "stores with SETU (draft-summermatter-set-union-01). Both hosts end with "
                    "the union of their log entries; every received entry is signature-checked.")
    p.add_argument("--peer", required=True, metavar="HOST:PORT", help="the peer's `tssb serve` address")
    add_home_option(p)
    p.add_argument("--profile", choices=("rateless", "tssb2", "gnunet"), default="rateless",
                   help="rateless (default: coded symbols, 1-2 round trips, state kept in the "
                        "store), tssb2 (estimator + IBFs, GNUnet's flaws fixed) or gnunet "
                        "(GNUnet-identical IBFs)")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds to wait for any one message (default 60)")
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
    from tssb.setu.rateless_store import RatelessStoreSet
    from tssb.setu.tinyssb_elements import StoreSource
    from tssb.channel import ChannelClosed

    ctx = Context.open(args.home)
    pid = {"gnunet": C.PROFILE_GNUNET, "tssb2": C.PROFILE_TSSB2,
           "rateless": C.PROFILE_RATELESS}[args.profile]
    if pid == C.PROFILE_RATELESS:   # persistent state: only what was appended is hashed
        eset = RatelessStoreSet(ctx.store)
        new = eset.refresh()
        n = len(eset)
        print("local set: %d elements (%d new since the kept state); connecting to %s:%d"
              % (n, new, host, port), file=sys.stderr)
    else:
        src = StoreSource(ctx.store)
        n = src.refresh()
        eset = src.eset
        print("local set: %d elements (entries and chunks); connecting to %s:%d" % (n, host, port),
              file=sys.stderr)
    cfg = Config(profile_id=pid)

    def progress(st):
        print("  %s: sent %d, received %d elements" % (st["state"], st["elements_sent"],
                                                      st["elements_recv"]), file=sys.stderr)

    async def go():
        sess = await session.connect(host, port, ctx)
        try:
            ch = await sess.open_stream("setu")
            ctx.events.emit("sync_start", proto="setu", peer=args.peer)
            return await reconcile(ch, eset, True, cfg, progress, args.timeout)
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
    if pid == C.PROFILE_RATELESS:
        eset.refresh()              # index what arrived, so the next sync starts at once
        print("profile rateless, %d symbols sent, %d received, %d round trip(s)%s%s"
              % (res["symbols_sent"], res["symbols_recv"], res["round_trips"],
                 ", prefix extended to %d" % res["prefix"] if res["prefix_extended"] else "",
                 ", fell back to a full key exchange" if res["fallback"] else ""))
    else:
        print("mode %s (profile %s), %d IBF round(s), %d decode failure(s)"
              % (res["mode"], res["profile"], res["rounds"], res["decode_failures"]))
    print("bytes: %d sent, %d received; elements: %d sent, %d received"
          % (res["bytes_sent"], res["bytes_recv"], res["elements_sent"], res["elements_recv"]))
    return 0
