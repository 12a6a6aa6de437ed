"""`tssb status`: the host store at a glance, and optionally the attached board's status."""
import asyncio
import json

from tinyssb import link
from tssb.cli import CliError
from tssb.cli.feeds import feed_rows
from tssb.context import Context, add_home_option


def register(subparsers):
    p = subparsers.add_parser(
        "status", help="show the host store and, with --board, the attached board",
        description="Show the host identity, the feeds and entries in the store, and with "
                    "--board the status the board reports over USB (queue, radio and node "
                    "counters). Do not run it while `tssb bridge` holds the port.")
    add_home_option(p)
    p.add_argument("--board", action="store_true", help="also query the board over USB")
    p.add_argument("--port", metavar="P", help="serial port (default: auto-detect)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


async def query_board(port_name, timeout=3.0):
    """The board's STATUS reply (dict). Raises CliError when it does not answer."""
    from tssb.bridge.serial_link import BoardPort, SerialLink

    class _NoNode:
        def receive(self, *a):
            pass
    bp = BoardPort(_NoNode())
    sl = SerialLink(lambda: port_name, bp.on_message, loop=asyncio.get_running_loop())
    bp.link = sl
    sl.start()
    try:
        for _ in range(int(timeout / 0.05)):
            if sl.connected:
                break
            await asyncio.sleep(0.05)
        return await bp.request(link.status_request, timeout)
    except asyncio.TimeoutError:
        raise CliError("the board on %s did not answer (is the tinySSB firmware running?)"
                       % port_name)
    finally:
        sl.stop()


def run(args):
    ctx = Context.open(args.home)
    try:
        rows = feed_rows(ctx.store, ctx.identity.public)
        out = {"home": ctx.home, "id": ctx.identity.public.hex(), "feeds": len(rows),
               "entries": sum(r[1] for r in rows), "chunks": sum(r[2] for r in rows),
               "schema": ctx.store.schema_version()}
    finally:
        ctx.close()
    if args.board:
        from tssb.bridge import ports
        try:
            name = ports.choose(args.port)
        except ports.PortChoiceError as e:
            raise CliError(str(e))
        out["board"] = asyncio.run(query_board(name))
    if args.json:
        print(json.dumps(out))
        return 0
    for k in ("home", "id", "feeds", "entries", "chunks", "schema"):
        print("%-8s %s" % (k, out[k]))
    for k, v in sorted(out.get("board", {}).items()):
        print("board.%-12s %s" % (k, v))
    return 0
