"""`tssb config get|set|export|import`: a board's settings over the USB link (CFG_GET,
CFG_SET; import as one CMD config_set_many), persisted on the board's flash."""
import json
import logging
import sqlite3
import sys

from tssb.cli import EXIT_FAILURE, CliError, _board as board, open_home
from tssb.cli.post import BOARD_PLAN_CONFIG
from tssb.safeparse import InputError, json_loads

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
# The board's hardware is not a setting to copy: import leaves it as it is.
NOT_IMPORTED = ("board",)
EXPORT_FORMAT = "tssb-board-config"   # the "format" field of an exported file
MAX_FILE = 64 * 1024                  # a config file is well under 1 KB
MAX_DEPTH = 4                         # an export: {"settings": {key: value}}, values flat


def keys():
    from tssbfw import config
    return sorted(config.DEFAULTS)


def register(subparsers):
    ks = keys()
    p = subparsers.add_parser(
        "config", help="read, change, export or import a board's settings (region, name, "
                       "TX power, SF, BLE)",
        description="Read or change the settings of the board on USB (auto-detected unless "
                    "--port) over the link protocol, through the running `tssb bridge` of "
                    "this home when it holds the board; the board validates and saves them "
                    "on its flash. Changes to the radio, BLE and storage take effect when "
                    "the board restarts (`tssb reboot`). Keys: " +
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
    e = sub.add_parser("export", help="save every setting of the board to a file",
                       description="Write the board's settings to FILE as JSON (- for "
                                   "stdout), to restore them later or copy them to another "
                                   "board with `tssb config import`.")
    e.add_argument("file", metavar="FILE", help="file to write (- for stdout)")
    e.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    i = sub.add_parser("import", help="set the board's settings from an exported file",
                       description="Set the settings saved in FILE (from `tssb config "
                                   "export`; - for stdin) on the board, all of them or none: "
                                   "the file is checked here first, then the board checks "
                                   "and saves them as one change. The board's hardware "
                                   "(key board) is not imported: it stays the board's own. "
                                   "Restart the board to apply radio, BLE and storage "
                                   "changes (`tssb reboot`).")
    i.add_argument("file", metavar="FILE", help="file to read (- for stdin)")
    for sp in (g, s, e, i):
        sp.add_argument("--port", metavar="P", help="serial port (default: auto-detect)")
        sp.add_argument("--json", action="store_true", help="print the result as JSON")
    g.set_defaults(func=cmd_get)
    s.set_defaults(func=cmd_set)
    e.set_defaults(func=cmd_export)
    i.set_defaults(func=cmd_import)


def parse_value(key, text):
    """VALUE as the firmware's config.check wants it. Raises: CliError (usage)."""
    try:
        value = json_loads(text, MAX_FILE, MAX_DEPTH, "VALUE")
    except InputError:      # text (or JSON we do not take: nested, NaN; check refuses it)
        value = text
    return checked(key, value)


def checked(key, value):
    """`value` checked here as the board will check it. Raises: CliError (usage)."""
    from tssbfw import config
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
    value = board.ask(args, ["cfg_get", args.key or ""])
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
    res = board.ask(args, ["cfg_set", args.key, value])
    if not isinstance(res, dict) or not res.get("ok"):
        raise CliError("the board did not take %s: %r" % (args.key, res), EXIT_FAILURE)
    if args.key == "plan" and value:
        _remember_plan(args, value)
    if args.json:
        print(json.dumps({"key": args.key, "value": value, "restart": bool(res.get("restart"))}))
        return 0
    print("%s = %s saved on the board%s" % (
        args.key, json.dumps(value),
        "; restart it to apply (`tssb reboot`)" if res.get("restart") else ""))
    return 0


def _settings(args):
    value = board.ask(args, ["cfg_get", ""])
    if not isinstance(value, dict):
        raise CliError("the board answered %r, not its settings" % (value,), EXIT_FAILURE)
    return value


def cmd_export(args):
    import os
    cfg = _settings(args)
    text = json.dumps({"format": EXPORT_FORMAT, "settings": cfg}, indent=2, sort_keys=True)
    if args.file == "-":
        print(text)
        return 0
    try:
        with open(args.file, "w" if args.force else "x", encoding="utf-8") as f:
            f.write(text + "\n")
    except FileExistsError:
        raise CliError("%s exists: choose another name, or --force to overwrite it"
                       % args.file, EXIT_FAILURE)
    if args.json:
        print(json.dumps({"file": os.path.abspath(args.file), "settings": cfg}))
    else:
        print("%d settings of the %s board saved to %s" % (len(cfg), cfg.get("board"),
                                                        args.file))
    return 0


def read_export(path):
    """{key: value} of an exported file, each value checked; board left out.

    Raises:
        CliError: unreadable file, not an export, or a bad key or value (usage).
    """
    try:
        if path == "-":
            text = sys.stdin.read(MAX_FILE + 1)
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read(MAX_FILE + 1)
    except (OSError, UnicodeError) as e:
        raise CliError("cannot read %s: %s" % (path, getattr(e, "strerror", None) or e),
                       EXIT_FAILURE)
    not_export = "%s is not a board config export (from `tssb config export`)" % path
    try:
        doc = json_loads(text, MAX_FILE, MAX_DEPTH, "JSON")
    except InputError as e:
        raise CliError("%s: %s" % (not_export, e))
    if not isinstance(doc, dict) or doc.get("format") != EXPORT_FORMAT or \
            not isinstance(doc.get("settings"), dict):
        raise CliError(not_export)
    out = {}
    for k, v in doc["settings"].items():
        if k not in NOT_IMPORTED:
            out[k] = checked(k, v)
    return out


def cmd_import(args):
    values = read_export(args.file)
    res = board.ask(args, ["cmd", "config_set_many", values])
    if not isinstance(res, dict) or not res.get("ok"):
        raise CliError("the board did not take the settings: %r" % (res,), EXIT_FAILURE)
    if isinstance(values.get("plan"), str):
        _remember_plan(args, values["plan"])
    if args.json:
        print(json.dumps({"settings": values, "restart": bool(res.get("restart"))}))
        return 0
    print("%d settings from %s saved on the board%s" % (
        len(values), args.file,
        "; restart it to apply (`tssb reboot`)" if res.get("restart") else ""))
    return 0
