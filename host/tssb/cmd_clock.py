"""`tssb clock status` and `tssb clock sync --peer HOST:PORT` (Bloom-clock sync)."""
import asyncio
import os

from tssb.clock.service import store_db

from tssb.cli import CliError


def _ctx(args):
    try:
        from tssb.context import Context
    except ImportError:
        raise CliError("host context (tssb.context) is not available in this build")
    home = args.home or os.environ.get("TSSB_HOME") or os.path.expanduser("~/.tssb")
    return Context.open(home)


def cmd_status(args):
    from tssb.clock.repo import FeedRepo
    from tssb.clock.sync import SyncMachine
    ctx = _ctx(args)
    repo = FeedRepo(ctx.store, store_db(ctx.store), args.n, args.k)
    m = SyncMachine(repo, "feeds", n=args.n, k=args.k)
    m._set_scope(repo.keys())
    print("feeds: %d  digest: %s" % (len(m.dags), m.digest().hex()))
    for key in sorted(m.dags):
        d = m.dags[key]
        print("  %s  events=%d tips=%d stamp_sum=%d digest=%s" % (
            key.hex()[:16], len(d), len(d.tips()), d.stamp().total(), d.digest().hex()[:16]))
    for fid, seq, _ in repo.forks():
        print("  fork: feed %s seq %d (proof stored)" % (fid.hex()[:16], seq))
    return 0


def cmd_sync(args):
    from tssb.clock.driver import run_sync
    from tssb.clock.service import repo_for
    from tssb.clock.sync import SyncMachine
    host, _, port = args.peer.rpartition(":")
    if not host or not port.isdigit():
        raise CliError("--peer must be HOST:PORT")
    key = None
    if args.feed:
        try:
            key = bytes.fromhex(args.feed)
        except ValueError:
            raise CliError("--feed must be a hex feed ID")
    mode = "entity" if key else args.mode
    ctx = _ctx(args)
    try:
        from tssb import session
    except ImportError:
        raise CliError("secure sessions (tssb.session) are not available in this build")

    async def main():
        s = await session.connect(host, int(port), ctx)
        try:
            ch = await s.open_stream("clock")
            m = SyncMachine(repo_for(ctx, mode, args.n, args.k), mode, key=key, n=args.n, k=args.k)
            print("clock sync (%s) with %s ..." % (mode, args.peer))
            return await run_sync(ch, m, events=ctx.events)
        finally:
            await s.close()
    summary = asyncio.run(main())
    print("ok=%s rounds=%d sent=%dB recv=%dB events sent=%d recv=%d%s" % (
        summary["ok"], summary["rounds"], summary["bytes_sent"], summary["bytes_recv"],
        summary["elements_sent"], summary["elements_recv"],
        "" if summary["ok"] else " reason=" + str(summary["reason"])))
    return 0 if summary["ok"] else 1


def _common(p):
    from tssb.clock.bloom import DEFAULT_K, DEFAULT_N
    p.add_argument("--home", help="data directory (default $TSSB_HOME or ~/.tssb)")
    p.add_argument("--n", type=int, default=DEFAULT_N, help="Bloom clock cells N (default %(default)s)")
    p.add_argument("--k", type=int, default=DEFAULT_K, help="indices per event k (default %(default)s)")


def register(subparsers):
    p = subparsers.add_parser("clock", help="Bloom-clock status and sync of feeds",
                              description="Bloom clocks over the local feeds: show stamps, "
                                          "version digests and forks; sync with a peer host.")
    sub = p.add_subparsers(dest="clock_cmd", metavar="ACTION")
    st = sub.add_parser("status", help="stamps, version digests and known forks of local feeds")
    _common(st)
    st.set_defaults(func=cmd_status)
    sy = sub.add_parser("sync", help="bring a peer and us to the same feeds (clock protocol)",
                        description="Common-feed sync (default) or thread sync over a secure "
                                    "session; --feed syncs one feed (fork resolution protocol).")
    sy.add_argument("--peer", required=True, metavar="HOST:PORT", help="peer running `tssb serve`")
    sy.add_argument("--mode", choices=["feeds", "threads"], default="feeds",
                    help="what to sync (default %(default)s)")
    sy.add_argument("--feed", metavar="FID_HEX", help="sync only this feed")
    _common(sy)
    sy.set_defaults(func=cmd_sync)
    p.set_defaults(func=lambda a: p.print_help() or 2)
