"""`tssb status`: the host store at a glance, and optionally the attached board's status."""
import json

from tssb.cli import CliError, _board as board, open_home
from tssb.cli.feeds import feed_rows


def register(subparsers):
    p = subparsers.add_parser(
        "status", help="show the host store and, with --board, the attached board",
        description="Show the host identity, the feeds and entries in the store, and with "
                    "--board the status the board reports over USB (queue, radio and node "
                    "counters), through the running `tssb bridge` of this home when it holds "
                    "the board.")
    p.add_argument("--board", action="store_true", help="also query the board over USB")
    p.add_argument("--port", metavar="P", help="serial port (default: auto-detect)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def _check(args):
    if args.port and not args.board:
        raise CliError("--port needs --board")


def run(args):
    _check(args)
    ctx = open_home(args)
    try:
        rows = feed_rows(ctx.store, ctx.identity.public)
        out = {"home": ctx.home, "id": ctx.identity.public.hex(), "feeds": len(rows),
               "entries": sum(r[1] for r in rows), "chunks": sum(r[2] for r in rows),
               "schema": ctx.store.schema_version()}
    finally:
        ctx.close()
    if args.board:
        out["board"] = board.ask(args, ["status"])
    if args.json:
        print(json.dumps(out))
        return 0
    for k in ("home", "id", "feeds", "entries", "chunks", "schema"):
        print("%-8s %s" % (k, out[k]))
    for k, v in sorted(out.get("board", {}).items()):
        print("board.%-12s %s" % (k, v))
    return 0
