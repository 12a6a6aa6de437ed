"""`tssb bridge`: attach to a board over USB serial and gateway it to WebSocket and UDP."""
import logging

from tssb.cli import EXIT_FAILURE, CliError, _board as board, open_home, peer_address, \
    run_async

log = logging.getLogger("tssb.bridge")


def register(subparsers):
    p = subparsers.add_parser(
        "bridge", help="attach to a board on USB and run the host node / gateway",
        description="Run the host's tinySSB node over its SQLite store. It attaches to a board "
                    "on USB serial (found by USB VID/PID unless --port is given; the board is "
                    "not reset), mirrors the board's feeds into the store, reconnects after "
                    "unplug, and optionally speaks tinySSB over WebSocket (server and client, "
                    "one binary message per packet) and UDP multicast 239.5.5.8:1558.")
    p.add_argument("--port", metavar="P", help="serial port (default: auto-detect the board)")
    p.add_argument("--baud", type=int, default=115200, help="baud rate (default 115200)")
    p.add_argument("--no-serial", action="store_true", help="run without a board (gateway only)")
    p.add_argument("--list", action="store_true", help="list candidate board ports and exit")
    p.add_argument("--ws-listen", metavar="HOST:PORT", help="serve WebSocket, e.g. 127.0.0.1:8080")
    p.add_argument("--ws-connect", metavar="URI", action="append", default=[],
                   help="connect to a WebSocket pub (repeatable), e.g. ws://pub.example:8080")
    p.add_argument("--ble", metavar="ADDRESS", action="append", default=[],
                   help="reach a board over Bluetooth LE at this address (repeatable; needs "
                        "bleak and a Bluetooth adapter; not tested on hardware); with --ble "
                        "a serial board is used only when --port names it")
    p.add_argument("--udp", action="store_true", help="join UDP multicast 239.5.5.8:1558")
    p.add_argument("--udp-iface", default="0.0.0.0", metavar="ADDR",
                   help="IPv4 address of the interface for multicast (default: any)")
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")
    p.set_defaults(func=run, log_default="info")


def run(args):
    from tssb.bridge import ports, runner
    if args.list:
        found = ports.candidates()
        if not found:
            print("no board ports found")
        for dev, desc, boards in found:
            print("%-20s %-32s %s" % (dev, desc, ", ".join(boards)))
        return 0
    resolve = None
    if not args.no_serial and (args.port or not args.ble):
        try:
            first = ports.choose(args.port)
        except ports.PortChoiceError as e:
            raise CliError(str(e), EXIT_FAILURE)
        # after an unplug the board may come back under another name: re-detect then
        resolve = (lambda: args.port) if args.port else (lambda: ports.choose(None))
        board.check_port(first, args.baud)     # missing or held by another process
        log.info("board port %s", first)
    ws_listen = peer_address(args.ws_listen, "--ws-listen") if args.ws_listen else None
    if args.duration is not None and not args.duration > 0:
        raise CliError("--duration must be positive")
    ctx = open_home(args)
    try:
        out = run_async(runner.run(ctx, resolve, args.baud, ws_listen, args.ws_connect,
                                   args.udp, args.udp_iface, duration=args.duration,
                                   ble=args.ble, say=log.info, warn=log.warning))
    except KeyboardInterrupt:
        log.info("stopped")
        return 0
    except OSError as e:
        raise CliError("bridge: %s" % (e.strerror or e), EXIT_FAILURE)
    finally:
        ctx.close()
    log.info("stopped: feeds %(feeds)d, packets rx %(rx)d tx %(tx)d", out)
    return 0
