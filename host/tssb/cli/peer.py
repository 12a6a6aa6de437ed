"""`tssb peer add/list/remove`: the allow-list of hosts that may open sessions."""
import json

from tssb import posts
from tssb.cli import CliError, open_home
from tssb.context import parse_public_key, ssb_id


def register(subparsers):
    p = subparsers.add_parser(
        "peer", help="manage the allow-list of peer hosts",
        description="Peers are the hosts (by Ed25519 public key) allowed to open secure "
                    "sessions with this one (`tssb serve`). An address lets `connect` find "
                    "a peer's key from host:port.")
    sub = p.add_subparsers(dest="peer_command", metavar="ACTION")
    a = sub.add_parser("add", help="allow a peer (or update its name/address)")
    a.add_argument("key", help="public key: 64 hex digits or @base64.ed25519 (see `tssb id`)")
    a.add_argument("--name", default="", help="a label for listings")
    a.add_argument("--addr", default="", metavar="HOST:PORT", help="where the peer serves")
    a.set_defaults(func=run_add)
    ls = sub.add_parser("list", help="list allowed peers")
    ls.add_argument("--json", action="store_true", help="one JSON object per line")
    ls.set_defaults(func=run_list)
    r = sub.add_parser("remove", help="remove a peer from the allow-list")
    r.add_argument("key", help="public key as for add")
    r.set_defaults(func=run_remove)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _key(text):
    try:
        return parse_public_key(text)
    except ValueError as e:
        raise CliError(str(e))


def _check_addr(addr):
    if not addr:
        return addr
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise CliError("--addr wants HOST:PORT, got %r" % addr)
    return addr


def run_add(args):
    key = _key(args.key)
    addr = _check_addr(args.addr)
    ctx = open_home(args)
    try:
        new = ctx.store.add_peer(key, args.name, addr)
    finally:
        ctx.close()
    print("%s %s" % ("added" if new else "updated", ssb_id(key)))
    return 0


def run_list(args):
    ctx = open_home(args)
    try:
        peers = ctx.store.peers()
        iam = posts.names(ctx.store, [p["public"] for p in peers
                                      if ctx.store.has_feed(p["public"])])
    finally:
        ctx.close()
    for p in peers:
        called = iam.get(bytes(p["public"]))
        if args.json:
            print(json.dumps({"public": p["public"].hex(), "id": ssb_id(p["public"]),
                              "name": p["name"], "addr": p["addr"], "iam": called}))
        else:
            print("%s  %-16s %s%s" % (p["public"].hex(), p["name"] or "-", p["addr"] or "-",
                                      "  (calls itself %r)" % called if called else ""))
    if not peers and not args.json:
        print("no peers (add one with `tssb peer add KEY`)")
    return 0


def run_remove(args):
    key = _key(args.key)
    ctx = open_home(args)
    try:
        if not ctx.store.remove_peer(key):
            raise CliError("no such peer: %s" % ssb_id(key), status=1)
    finally:
        ctx.close()
    print("removed %s" % ssb_id(key))
    return 0
