"""`tssb serve`: accept secure sessions from peers and run the host services."""
import asyncio
import logging

from tssb.cli import EXIT_FAILURE, CliError, open_home, run_async
from tssb.context import ssb_id
from tssb.session import DEFAULT_PORT, PeerPolicy, start_server
from tssb.session import policy as pol

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
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    p.set_defaults(func=run, log_default="info")


async def _serve(ctx, args):
    policy = PeerPolicy.from_context(ctx, open_mode=args.open, max_sessions=args.max_sessions,
                                     idle_timeout=args.idle_timeout)
    try:
        server = await start_server(ctx, args.host, args.port, policy=policy, log=log.info)
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
    try:
        if args.duration is None:
            await asyncio.Event().wait()
        else:
            await asyncio.sleep(args.duration)
    finally:
        await server.close()


def run(args):
    if not 0 <= args.port < 65536:
        raise CliError("--port must be 0..65535")
    if args.duration is not None and not args.duration > 0:
        raise CliError("--duration must be positive")
    if args.max_sessions < 1 or not args.idle_timeout > 0:
        raise CliError("--max-sessions must be at least 1 and --idle-timeout positive")
    ctx = open_home(args)
    try:
        run_async(_serve(ctx, args))
    except KeyboardInterrupt:
        pass             # Ctrl-C is how a server is stopped
    finally:
        ctx.close()
    log.info("stopped")
    return 0
