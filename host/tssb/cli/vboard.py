"""`tssb vboard`: a virtual board on a pseudo-terminal (tssb.sim.vboard)."""
import logging
import threading

from tssb.cli import EXIT_FAILURE, CliError

log = logging.getLogger("tssb.vboard")


def register(subparsers):
    import tssb_boards
    from tssbfw import regions
    p = subparsers.add_parser(
        "vboard", help="run a virtual board: the real firmware on a pseudo-terminal",
        description="Run the tinySSB firmware as a board of the given type would, without "
                    "hardware: the firmware's own modules in the MicroPython unix port with "
                    "that board's heap (`-X heapsize`: twice the board's 32-bit figure, plus "
                    "what the unix port spends on bytecode a board keeps frozen in flash), "
                    "its flash as a LittleFS volume in a file, the ESP32's console (a 0x03 "
                    "byte interrupts the program unless the firmware turned that off), its "
                    "USB serial on a pseudo-terminal whose path is printed, and its radio on "
                    "UDP multicast with --udp (the group `tssb bridge --udp` joins, so "
                    "virtual boards and bridge hosts hear each other). Use the path as a "
                    "board's port: `tssb bridge --port PATH`, `tssb info --port PATH`, "
                    "`tssb config`, `status --board`, `listen`, `web --serial PATH`, "
                    "`reboot`. The board's console text is logged here. Ctrl-C switches it "
                    "off. Linux only.")
    p.add_argument("--board", required=True, metavar="BOARD",
                   help="board type, optionally with its radio (e.g. tbeam:sx1262); one "
                        "of: " + ", ".join(tssb_boards.names()))
    p.add_argument("--plan", choices=regions.names(), metavar="PLAN",
                   help="region plan written to its config at power-on (no default: "
                        "radio off until `tssb config set plan`); one of: "
                        + ", ".join(regions.names()))
    p.add_argument("--name", help="node name (default: from its public key)")
    p.add_argument("--power", type=int, metavar="DBM", help="TX power (default: the plan's)")
    p.add_argument("--sf", type=int, metavar="SF",
                   help="spreading factor (default: the plan's)")
    p.add_argument("--dir", metavar="DIR",
                   help="keep the board's flash (DIR/flash.img) and compiled firmware here, "
                        "across runs (default: a temporary folder, removed at the end)")
    p.add_argument("--udp", action="store_true",
                   help="put its radio on UDP multicast 239.5.5.8 (default: alone)")
    p.add_argument("--udp-iface", default="0.0.0.0", metavar="ADDR",
                   help="IPv4 address of the interface for multicast (default: any; "
                        "127.0.0.1 keeps it on this machine)")
    p.add_argument("--udp-port", type=int, default=1558, metavar="N",
                   help="UDP port of the air (default 1558, as `tssb bridge --udp`)")
    p.add_argument("--heap", type=int, metavar="BYTES",
                   help="-X heapsize for the unix port (default: from the board, see above)")
    p.add_argument("--duration", type=float, metavar="S", help="switch off after S seconds")
    p.set_defaults(func=run, log_default="info")


def _config(args):
    from tssbfw import config
    out = {}
    for key in ("plan", "name", "power", "sf"):
        value = getattr(args, key)
        if value is not None:
            try:
                out[key] = config.check(key, value)
            except ValueError as e:
                raise CliError("--%s: %s" % (key, e))
    return out


def run(args):
    from tssb.bridge import udp
    from tssb.sim import vboard
    if args.duration is not None and not args.duration > 0:
        raise CliError("--duration must be positive")
    if args.heap is not None and args.heap < 64 * 1024:
        raise CliError("--heap must be at least 65536 bytes")
    if not 0 < args.udp_port < 65536:
        raise CliError("--udp-port must be 1..65535")
    medium = (udp.GROUP, args.udp_port, args.udp_iface) if args.udp else None
    try:
        vb = vboard.VirtualBoard(args.board, _config(args), args.dir, medium, args.heap,
                                 say=log.info)
    except vboard.VboardError as e:
        raise CliError(str(e))
    try:
        try:
            vb.start()
        except vboard.VboardError as e:
            raise CliError(str(e), EXIT_FAILURE)
        print("virtual %s on %s" % (args.board, vb.port_name), flush=True)
        log.info("heap %d bytes (the board's %d in the 64-bit unix port), flash %d KB in %s, "
                 "radio %s", vb.heap, vboard.board_heap(vb.board), vb.blocks * 4,
                 vb.image, "udp %s:%d on %s" % medium if medium else "alone")
        log.info("try: tssb info --port %s", vb.port_name)
        done = threading.Event()
        err = []

        def supervise():
            try:
                vb.run(args.duration)
            except vboard.VboardError as e:
                err.append(e)
            finally:
                done.set()
        threading.Thread(target=supervise, daemon=True).start()
        try:
            while not done.wait(0.2):
                pass
        except KeyboardInterrupt:
            log.info("switched off")
            return 0
        if err:
            raise CliError(str(err[0]), EXIT_FAILURE)
        return 0
    finally:
        vb.close()
