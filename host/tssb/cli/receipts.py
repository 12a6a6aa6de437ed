"""`tssb receipts [--delivered on|off] [--read on|off]`: which receipts this host sends."""
import json

from tssb.chat import appmsg, inbox
from tssb.cli import open_home


def register(subparsers):
    p = subparsers.add_parser(
        "receipts", help="switch the delivered / read receipts this host sends",
        description="Show or change which receipts this host sends for private messages "
                    "addressed to it: delivered (the app's DLV, when the message is stored "
                    "here) and read (ACK, when `tssb read` or the web view shows it). Both "
                    "are on by default; each is an encrypted entry only the message's "
                    "author can open.")
    for opt, what in (("--delivered", "delivered receipts (DLV)"),
                      ("--read", "read receipts (ACK)")):
        p.add_argument(opt, choices=("on", "off"), help="send %s or not" % what)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=run)


def run(args):
    ctx = open_home(args)
    try:
        for tag, v in ((appmsg.DLV, args.delivered), (appmsg.ACK, args.read)):
            if v is not None:
                inbox.set_enabled(ctx.store, tag, v == "on")
        now = {"delivered": inbox.enabled(ctx.store, appmsg.DLV),
               "read": inbox.enabled(ctx.store, appmsg.ACK)}
    finally:
        ctx.close()
    if args.json:
        print(json.dumps(now))
    else:
        print("delivered receipts: %s\nread receipts: %s" % (
            "on" if now["delivered"] else "off", "on" if now["read"] else "off"))
    return 0
