"""`tssb reboot [--repl]`: restart the board, or leave it at the MicroPython REPL."""
import json
import time

from tssb.cli import EXIT_FAILURE, CliError, _board as board

WAIT_S = 30.0     # --wait: a board boots in a few seconds, recovering its store included
RETRY_S = 0.5


def register(subparsers):
    p = subparsers.add_parser(
        "reboot", help="restart the board (applies changed settings), or stop the firmware "
                       "for the REPL",
        description="Restart the board on USB (auto-detected unless --port; through the "
                    "running `tssb bridge` of this home when it holds the board), as the "
                    "RESET button does: settings changed with `tssb config` take effect. "
                    "With --repl the board restarts into the MicroPython REPL instead and "
                    "the firmware stays off until the next reset, so that mpremote, "
                    "`tssb deploy` or a terminal can use the console (while the firmware "
                    "runs it ignores Ctrl-C: the link's frames carry that byte). Back to the "
                    "firmware: press RESET, or `mpremote reset`.")
    p.add_argument("--repl", action="store_true",
                   help="restart into the MicroPython REPL (firmware off until next reset)")
    p.add_argument("--wait", action="store_true",
                   help="wait until the firmware answers again (up to %d s)" % WAIT_S)
    p.add_argument("--port", metavar="P", help="serial port (default: auto-detect)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args):
    if args.repl and args.wait:
        raise CliError("--wait waits for the firmware, which --repl keeps off")
    res = board.ask(args, ["cmd", "repl" if args.repl else "reboot"])
    if not isinstance(res, dict) or not res.get("ok"):
        raise CliError("the board did not restart: %r" % (res,), EXIT_FAILURE)
    back = None
    if args.wait:
        back = _wait_for_firmware(args)
    if args.json:
        print(json.dumps({"repl": args.repl, "back_s": back}))
    elif args.repl:
        print("the board is restarting into the MicroPython REPL; the firmware stays off "
              "until the next reset (RESET button or `mpremote reset`)")
    else:
        print("the board restarted" + (" and answers again after %.1f s" % back
                                        if back is not None else ""))
    return 0


def _wait_for_firmware(args):
    """Seconds until the board answers a status request again. Raises: CliError."""
    start = time.monotonic()
    time.sleep(RETRY_S * 2)             # the reset happens right after the reply
    while time.monotonic() - start < WAIT_S:
        try:
            board.ask(args, ["status"], timeout=1.0)
            return time.monotonic() - start
        except CliError:
            time.sleep(RETRY_S)
    raise CliError("the board did not answer within %d s of restarting" % WAIT_S,
                   EXIT_FAILURE)
