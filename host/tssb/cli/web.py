"""`tssb web`: the live view in a browser, alone on the store or with a bridged board."""
import logging
import secrets

from tssb.cli import EXIT_FAILURE, CliError, _board as board, open_home, run_async

log = logging.getLogger("tssb.web")


def register(subparsers):
    p = subparsers.add_parser(
        "web", help="serve a live web view of feeds, posts, traffic and the mesh",
        description="Serve a page showing this host's feeds with their decoded posts (and "
                    "a form to post), and live: the board's traffic with RSSI/SNR, "
                    "neighbours heard, GOSET agreement and replication progress, airtime "
                    "against the region plan's budget, and recent host syncs. With --serial "
                    "the board is bridged in this process (as `tssb bridge` does) and every "
                    "packet shows its feed, seq and fate; without it the view reads the "
                    "store and follows the event log a `tssb bridge` elsewhere writes. "
                    "Serves 127.0.0.1 unless --bind says otherwise; beyond loopback an "
                    "access token is required and printed in the URL. Prints the URL on "
                    "stdout; Ctrl-C stops.")
    p.add_argument("--port", type=int, default=None, metavar="N",
                   help="HTTP port (default 8558; 0: any free port)")
    p.add_argument("--bind", default="127.0.0.1", metavar="ADDR",
                   help="address to serve on (default 127.0.0.1; others need the token)")
    p.add_argument("--serial", nargs="?", const="auto", metavar="PORT",
                   help="bridge the board on this serial port in this process "
                        "(without PORT: auto-detect it)")
    p.add_argument("--baud", type=int, default=115200, help="serial baud rate (default 115200)")
    p.add_argument("--plan", metavar="NAME",
                   help="region plan for the airtime budget when no bridged board reports "
                        "it, e.g. EU868.a")
    p.add_argument("--token", action="store_true",
                   help="require the access token on loopback too")
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    p.set_defaults(func=run, log_default="info")


def _say_url(line):
    # the URL is the command's result: on stdout, whatever the log level
    if line.startswith("web view on "):
        print(line, flush=True)
    else:
        log.info("%s", line)


def run(args):
    from tssb.web.server import is_loopback
    from tssb.web.view import DEFAULT_PORT, WebView, plan_limits
    port = DEFAULT_PORT if args.port is None else args.port
    if not 0 <= port <= 65535:
        raise CliError("--port must be 0..65535")
    if args.duration is not None and not args.duration > 0:
        raise CliError("--duration must be positive")
    if args.plan is not None and plan_limits(args.plan) is None:
        from tssbfw import regions
        raise CliError("unknown plan %r (one of %s)" % (args.plan, ", ".join(regions.names())))
    token = secrets.token_urlsafe(18) if args.token or not is_loopback(args.bind) else None
    resolve = None
    if args.serial is not None:
        from tssb.bridge import ports
        name = None if args.serial == "auto" else args.serial
        try:
            first = ports.choose(name)
        except ports.PortChoiceError as e:
            raise CliError(str(e).replace("--port", "--serial PORT"), EXIT_FAILURE)
        board.check_port(first, args.baud)     # missing or held by another process
        # after an unplug the board may come back under another name: re-detect then
        resolve = (lambda: name) if name else (lambda: ports.choose(None))
        log.info("board port %s", first)
    ctx = open_home(args)
    view = WebView(ctx, args.bind, port, token, args.plan, say=_say_url)
    try:
        if resolve is None:
            run_async(view.run_alone(args.duration))
        else:
            from tssb.bridge import runner
            run_async(runner.run(ctx, resolve, args.baud, duration=args.duration,
                                 say=log.info, web=view, warn=log.warning))
    except KeyboardInterrupt:
        pass             # Ctrl-C is how a server is stopped
    except OSError as e:
        raise CliError("cannot serve on %s:%d: %s (is another server using the port?)"
                       % (args.bind, port, e.strerror or e), EXIT_FAILURE)
    finally:
        ctx.close()
    log.info("stopped")
    return 0
