"""`tssb config get|set KEY [VALUE]`: a bridged board's settings over the USB link
(CFG_GET / CFG_SET), persisted on the board's flash."""
import json
import logging
import sqlite3

from tinyssb import link
from tssb.cli import EXIT_FAILURE, CliError, _board as board, open_home
from tssb.cli.post import BOARD_PLAN_CONFIG

log = logging.getLogger("tssb.cli")

# What each key means for `--help` (the keys themselves come from the firmware's config).
MEANING = {
    "plan": "LoRa region plan (band, bandwidth, SF, sync word); none = radio off",
    "name": "node name in event logs",
    "power": "TX power in dBm (capped by the band's limit); null = the plan's",
    "sf": "spreading factor 7..12; null = the plan's (every node of a mesh must agree)",
    "ble": "Bluetooth LE port for the tinySSB Android app (true/false)",
    "ble_name": "name advertised over BLE; null = tinySSB-XXXX",
    "board": "board definition (pins, radio); set by `tssb deploy`",
    "capacity": "bytes of flash for feeds",
    "tick_ms": "node tick period in ms",
}


def keys():
    from tssbfw import config
    return sorted(config.DEFAULTS)


def register(subparsers):
    ks = keys()
    p = subparsers.add_parser(
        "config", help="read or change a board's settings (region, name, TX power, SF, BLE)",
        description="Read or change the settings of the board on USB (auto-detected unless "
                    "--port) over the link protocol; the board validates and saves them on "
                    "its flash. Changes to the radio, BLE and storage take effect when the "
                    "board restarts (press RESET or replug it). Do not run it while `tssb "
                    "bridge` holds the port. Keys: " +
                    "; ".join("%s: %s" % (k, MEANING.get(k, "")) for k in ks))
    sub = p.add_subparsers(dest="config_command", metavar="ACTION")
    p.set_defaults(func=lambda _args: p.print_help() or 2)
    g = sub.add_parser("get", help="print one setting, or all of them",
                       description="Print KEY's value (JSON), or every setting without KEY.")
    g.add_argument("key", metavar="KEY", nargs="?", choices=ks + [None],
                   help="one of: " + ", ".join(ks))
    s = sub.add_parser("set", help="change one setting (saved on the board)",
                       description="Set KEY to VALUE on the board. VALUE is JSON where it "
                                   "parses as JSON (10, true, null), else text (EU868.a).")
    s.add_argument("key", metavar="KEY", choices=ks, help="one of: " + ", ".join(ks))
    s.add_argument("value", metavar="VALUE")
    for sp in (g, s):
        sp.add_argument("--port", metavar="P", help="serial port (default: auto-detect)")
        sp.add_argument("--json", action="store_true", help="print the result as JSON")
    g.set_defaults(func=cmd_get)
    s.set_defaults(func=cmd_set)


def parse_value(key, text):
    """VALUE as the firmware's config.check wants it. Raises: CliError (usage)."""
    from tssbfw import config
    try:
        value = json.loads(text)
    except ValueError:
        value = text
    try:
        return config.check(key, value)
    except ValueError as e:
        raise CliError("%s: %s" % (key, e))
    except ImportError as e:   # board definitions missing from this install
        raise CliError("%s: cannot check here (%s)" % (key, e))


def _remember_plan(args, plan):
    """Keep the board's plan in the home (post's airtime estimate), if there is a home."""
    try:
        ctx = open_home(args)
        try:
            ctx.store.set_config(BOARD_PLAN_CONFIG, plan)
        finally:
            ctx.close()
    except (CliError, sqlite3.Error, OSError) as e:   # the board's answer still stands
        log.debug("board plan not remembered: %s", e)


def cmd_get(args):
    port = board.choose_port(args.port)
    value = board.request(port, lambda rid: link.config_get(rid, args.key or ""))
    plan = value.get("plan") if isinstance(value, dict) else value if args.key == "plan" else None
    if isinstance(plan, str):
        _remember_plan(args, plan)
    if args.json or args.key:
        print(json.dumps(value))
        return 0
    if not isinstance(value, dict):
        raise CliError("the board answered %r, not its settings" % (value,), EXIT_FAILURE)
    for k in sorted(value):
        print("%-10s %s" % (k, json.dumps(value[k])))
    return 0


def cmd_set(args):
    value = parse_value(args.key, args.value)
    port = board.choose_port(args.port)
    res = board.request(port, lambda rid: link.config_set(rid, args.key, value))
    if not isinstance(res, dict) or not res.get("ok"):
        raise CliError("the board did not take %s: %r" % (args.key, res), EXIT_FAILURE)
    if args.key == "plan" and value:
        _remember_plan(args, value)
    if args.json:
        print(json.dumps({"key": args.key, "value": value, "restart": bool(res.get("restart"))}))
        return 0
    print("%s = %s saved on the board%s" % (
        args.key, json.dumps(value),
        "; restart it to apply (press RESET or replug)" if res.get("restart") else ""))
    return 0
