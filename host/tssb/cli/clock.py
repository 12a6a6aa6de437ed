"""`tssb clock status` and `tssb clock sync --peer HOST:PORT` (Bloom-clock sync)."""
import asyncio
import json
import sys
import time

from tssb.clock.service import store_db

from tssb.addr import format_addr
from tssb import synclog
from tssb.cli import EXIT_FAILURE, CliError, open_home, peer_address, run_async, \
    session_failure

DEFAULT_TIMEOUT = 120.0   # seconds for one whole sync (connect, handshake, all rounds)


def _ctx(args):
    return open_home(args)


def _short(b, n=16):
    return bytes(b).hex()[:n]


def _when(ts_ms):
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts_ms / 1000))
    except (OverflowError, OSError, ValueError):
        return "ts=%d" % ts_ms


def _check_params(args):
    from tssb.clock.bloom import check_params
    from tssb.clock.errors import ClockError
    try:
        check_params(args.n, args.k)
    except ClockError:
        raise CliError("--n and --k out of range (got %d, %d)" % (args.n, args.k))


def cmd_status(args):
    from tssb.clock import events as E
    from tssb.clock import forks
    from tssb.clock.errors import ClockError
    from tssb.clock.repo import FeedRepo
    from tssb.clock.sync import SyncMachine
    _check_params(args)
    ctx = _ctx(args)
    try:
        repo = FeedRepo(ctx.store, store_db(ctx.store), args.n, args.k)
        m = SyncMachine(repo, "feeds", n=args.n, k=args.k)
        m._set_scope(repo.keys())
        print("feeds: %d  digest: %s" % (len(m.dags), m.digest().hex()))
        for key in sorted(m.dags):
            d = m.dags[key]
            print("  %s  events=%d tips=%d stamp_sum=%d digest=%s%s" % (
                _short(key), len(d), len(d.tips()), d.stamp().total(), _short(d.digest()),
                "  FORKED" if len(d.tips()) > 1 else ""))
        rows = repo.forks()
        print("forks: %d proof(s)" % len(rows))
        for fid, seq, proof in rows:
            a, b = proof[:E.FEED_EVENT_LEN], proof[E.FEED_EVENT_LEN:]
            print("  feed %s seq %d: two signed entries, MIDs %s / %s" % (
                _short(fid), seq, _short(E.parse_feed_event(a).eid, 12),
                _short(E.parse_feed_event(b).eid, 12)))
        rows = repo.joins()
        print("joins: %d" % len(rows))
        for fid, resolver, _, ts, agreed, raw in rows:
            who = "us" if resolver == ctx.identity.public else \
                "feed owner" if resolver == fid else "peer"
            try:
                j = forks.parse_join(raw)
            except ClockError as e:
                print("  feed %s resolver %s (%s): invalid join (%s)" % (
                    _short(fid), _short(resolver), who, e.reason))
                continue
            dag = m.dags.get(fid)
            agrees = "feed not replicated" if dag is None else \
                "yes" if forks.check_join(j, dag) else "no"
            print("  feed %s resolver %s (%s) %s: %d tips [%s], %d proof(s), "
                  "agrees-with-us: %s%s" % (
                      _short(fid), _short(resolver), who, _when(ts), len(j.tips),
                      ", ".join(_short(t, 12) for t in j.tips), len(j.proofs), agrees,
                      "" if agreed else " (disagreed when received)"))
    finally:
        ctx.close()
    return 0


async def sync_with(ctx, host, port, peer, mode, key, n, k, timeout=DEFAULT_TIMEOUT):
    """One clock sync as the initiator over a secure session.

    Args:
        ctx: tssb.context.Context; its identity signs our joins of forked feeds.
        host, port, peer: the server's address and 32-byte public key.
        mode, key: "feeds" / "threads", or "entity" with the feed ID in key.
        n, k: Bloom clock parameters.
        timeout: seconds for the whole sync.
    Returns:
        the driver's summary dict.
    Raises:
        OSError, asyncio.TimeoutError, tssb.session.ProtocolError / StreamRefused,
        tssb.channel.ChannelClosed: no session or stream.
    """
    from tssb import session
    from tssb.clock.driver import run_sync
    from tssb.clock.service import repo_for
    from tssb.clock.sync import SyncMachine

    async def go():
        s = await session.connect(host, port, ctx, peer=peer)
        try:
            ch = await s.open_stream("clock")
            m = SyncMachine(repo_for(ctx, mode, n, k), mode, key=key, n=n, k=k,
                            signer=ctx.identity.seed)
            return await run_sync(ch, m, events=ctx.events, peer=s.peer)
        finally:
            await s.close()
    return await asyncio.wait_for(go(), timeout)


def cmd_sync(args):
    host, port = peer_address(args.peer)
    key = None
    if args.feed:
        from tssb.context import parse_public_key
        try:
            key = parse_public_key(args.feed)   # a feed ID is its author's public key
        except ValueError as e:
            raise CliError("--feed: %s" % e)
    mode = "entity" if key else args.mode
    if key and args.mode != "feeds":
        raise CliError("--feed syncs one feed; it cannot be combined with --mode %s" % args.mode)
    if not args.timeout > 0:
        raise CliError("--timeout must be positive")
    _check_params(args)
    try:
        from tssb import session
        from tssb.channel import ChannelClosed
    except ImportError:
        raise CliError("secure sessions (tssb.session) are not available in this build")
    ctx = _ctx(args)
    try:
        peer = ctx.store.peer_by_addr(format_addr(host, port))
        if peer is None:
            raise CliError("%s: no peer known at this address: add it with `tssb peer add KEY "
                           "--addr %s` (KEY: what `tssb id` shows there)"
                           % (args.peer, args.peer), EXIT_FAILURE)

        print("clock sync (%s) with %s ..." % (mode, args.peer), file=sys.stderr)
        try:
            summary = run_async(sync_with(ctx, host, port, peer, mode, key, args.n, args.k,
                                            args.timeout))
        except KeyboardInterrupt:
            synclog.done(ctx.events, "clock", peer, False, "interrupted", mode)
            raise
        except asyncio.TimeoutError:
            synclog.done(ctx.events, "clock", peer, False, "timeout", mode)
            raise CliError("clock sync with %s failed: no result within %g s (raise "
                           "--timeout)" % (args.peer, args.timeout), EXIT_FAILURE)
        except (OSError, ValueError, ChannelClosed, session.ProtocolError,
                session.StreamRefused) as e:
            synclog.done(ctx.events, "clock", peer, False, e, mode)
            raise session_failure(e, args.peer)
    finally:
        ctx.close()
    if args.json:
        print(json.dumps(dict(summary, peer=args.peer, mode=mode)))
        return 0 if summary["ok"] else 1
    print("ok=%s rounds=%d sent=%dB recv=%dB events sent=%d recv=%d%s" % (
        summary["ok"], summary["rounds"], summary["bytes_sent"], summary["bytes_recv"],
        summary["elements_sent"], summary["elements_recv"],
        "" if summary["ok"] else " reason=" + str(summary["reason"])))
    if summary["forks_found"] or summary["joins_made"] or summary["joins_sent"] or \
            summary["joins_recv"]:
        print("forks: %d new fork proof(s); joins: %d made, %d sent, %d received "
              "(see `tssb clock status`)" % (summary["forks_found"], summary["joins_made"],
                                             summary["joins_sent"], summary["joins_recv"]))
    return 0 if summary["ok"] else 1


def _common(p):
    from tssb.clock.bloom import DEFAULT_K, DEFAULT_N
    p.add_argument("--n", type=int, default=DEFAULT_N,
                   help="Bloom clock cells N (default %(default)s; both peers must agree)")
    p.add_argument("--k", type=int, default=DEFAULT_K,
                   help="indices per event k (default %(default)s; both peers must agree)")


def register(subparsers):
    p = subparsers.add_parser("clock", help="Bloom-clock status and sync of feeds",
                              description="Bloom clocks over the local feeds: show stamps, "
                                          "version digests, forks and joins; sync with a "
                                          "peer host.")
    sub = p.add_subparsers(dest="clock_cmd", metavar="ACTION")
    st = sub.add_parser("status",
                        help="stamps, version digests, fork proofs and joins of local feeds",
                        description="Per feed: events, tips, stamp and digest (FORKED when it has "
                                    "several tips); then the stored fork proofs and the joins "
                                    "(resolver, branch tips, whether the join matches our copy).")
    _common(st)
    st.set_defaults(func=cmd_status)
    sy = sub.add_parser(
        "sync", help="bring a peer and us to the same feeds (clock protocol)",
        description="Open a secure session to a peer running `tssb serve` (its key must be in "
                    "our peers list with this address, ours in its list, same network key) and "
                    "sync with Bloom clocks: the feeds both replicate (default), the threads both "
                    "follow (--mode threads), or one feed (--feed). When a common feed is forked, "
                    "both sides keep every branch, store a fork proof, sign a join of the feed "
                    "and exchange joins, so later peers (and the owner) learn of the fork. "
                    "Exit status 0 when both ends agree, 1 when the sync failed.")
    sy.add_argument("--peer", required=True, metavar="HOST:PORT", help="peer running `tssb serve`")
    sy.add_argument("--mode", choices=["feeds", "threads"], default="feeds",
                    help="what to sync (default %(default)s)")
    sy.add_argument("--feed", metavar="FID_HEX",
                    help="sync only this feed (fork resolution protocol)")
    sy.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                    help="seconds for the whole sync (default %(default)g)")
    sy.add_argument("--json", action="store_true", help="print the result as one JSON object")
    _common(sy)
    sy.set_defaults(func=cmd_sync)
    p.set_defaults(func=lambda a: p.print_help() or 2)
