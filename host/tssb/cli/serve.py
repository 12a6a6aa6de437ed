"""`tssb serve`: accept secure sessions from peers and run the host services."""
import asyncio
import ctypes
import json
import logging
import platform

from tssb.cli import EXIT_FAILURE, CliError, open_home, run_async
from tssb.context import ssb_id
from tssb.session import DEFAULT_PORT, PeerPolicy, start_server
from tssb.session import policy as pol
from tssb.session.budget import Limits

log = logging.getLogger("tssb.session")


def register(subparsers):
    p = subparsers.add_parser(
        "serve", help="accept secure sessions (SETU, trDAG, clock, certs) from peers",
        description="Listen for secret-handshake sessions from allowed peers (`tssb peer add`) "
                    "sharing this deployment's network key (`tssb id`), and serve each stream "
                    "by its service name. Logs sessions and refused handshakes (with the "
                    "peer's address and why) on stderr with timestamps. Stops on Ctrl-C.")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; 0.0.0.0 for all interfaces)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help="TCP port (default %d)" % DEFAULT_PORT)
    p.add_argument("--open", action="store_true",
                   help="accept ANY peer that knows the network key (no allow-list)")
    p.add_argument("--max-sessions", type=int, default=pol.MAX_SESSIONS,
                   help="concurrent sessions (default %d)" % pol.MAX_SESSIONS)
    p.add_argument("--idle-timeout", type=float, default=pol.IDLE_TIMEOUT,
                   help="seconds without traffic before a session is closed (default %g)"
                        % pol.IDLE_TIMEOUT)
    p.add_argument("--max-unverified", type=int, default=Limits().session["unverified"],
                   metavar="N",
                   help="received elements a session may hold before they can be checked "
                        "against their feed (default %%(default)d, about 0.8 KiB each; "
                        "%d times that for all sessions); a peer sending more is cut off"
                        % Limits.TOTAL_FACTOR)
    p.add_argument("--stats-every", type=float, default=0, metavar="S",
                   help="every S seconds log one line 'stats {json}': sessions, streams, "
                        "budgets held and exceeded, the worst event-loop lag (ms) in the "
                        "last S seconds")
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    p.set_defaults(func=run, log_default="info")


# glibc raises its mmap threshold to the largest block freed so far (up to 32 MiB); after
# that, the IBFs and buffers a peer made us allocate stay on the heap when freed and the
# server keeps its peak size. A fixed threshold hands large blocks back to the system
# (bench_hostile: RSS growth under the maximum-IBF flood 36 -> 20 MiB).
M_MMAP_THRESHOLD = -3          # glibc malloc.h
MMAP_THRESHOLD = 128 * 1024    # glibc's own default, before it adapts


def _fixed_mmap_threshold():
    if platform.libc_ver()[0] != "glibc":
        return
    try:
        ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    except (OSError, AttributeError):
        pass


async def _report(server, every):
    while True:
        await asyncio.sleep(every)
        log.info("stats %s", json.dumps(server.stats(reset_lag=True), sort_keys=True))


async def _serve(ctx, args):
    policy = PeerPolicy.from_context(ctx, open_mode=args.open, max_sessions=args.max_sessions,
                                     idle_timeout=args.idle_timeout)
    try:
        server = await start_server(ctx, args.host, args.port, policy=policy, log=log.info,
                                    limits=Limits(unverified=args.max_unverified))
    except OSError as e:
        raise CliError("cannot listen on %s:%d: %s (is another server using the port?)"
                       % (args.host, args.port, e.strerror or e), EXIT_FAILURE)
    peers = len(ctx.store.peers())
    log.info("serving %s on %s:%d (%s)", ssb_id(ctx.identity.public), args.host, server.port,
             "OPEN to any peer with the network key" if args.open
             else "%d allowed peer(s)" % peers)
    if not args.open and not peers:
        log.warning("no allowed peers yet: every handshake will be refused "
                    "(`tssb peer add KEY`, or --open)")
    reporter = asyncio.ensure_future(_report(server, args.stats_every)) \
        if args.stats_every > 0 else None
    try:
        if args.duration is None:
            await asyncio.Event().wait()
        else:
            await asyncio.sleep(args.duration)
    finally:
        if reporter is not None:
            reporter.cancel()
        await server.close()


def run(args):
    if not 0 <= args.port < 65536:
        raise CliError("--port must be 0..65535")
    if args.duration is not None and not args.duration > 0:
        raise CliError("--duration must be positive")
    if args.max_sessions < 1 or not args.idle_timeout > 0:
        raise CliError("--max-sessions must be at least 1 and --idle-timeout positive")
    if args.max_unverified < 1 or args.stats_every < 0:
        raise CliError("--max-unverified must be at least 1 and --stats-every not negative")
    ctx = open_home(args)
    _fixed_mmap_threshold()
    try:
        run_async(_serve(ctx, args))
    except KeyboardInterrupt:
        pass             # Ctrl-C is how a server is stopped
    finally:
        ctx.close()
    log.info("stopped")
    return 0
