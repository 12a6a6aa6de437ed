"""`tssb peer add/list/remove`: the allow-list of hosts that may open sessions."""
import json

from tssb import posts
from tssb.addr import format_addr
from tssb.cli import EXIT_FAILURE, CliError, open_home, peer_address
from tssb.context import parse_public_key, ssb_id
from tssb.store import StoreError


def register(subparsers):
    p = subparsers.add_parser(
        "peer", help="manage the allow-list of peer hosts",
        description="Peers are the hosts (by Ed25519 public key) allowed to open secure "
                    "sessions with this one (`tssb serve`). An address lets `connect` find "
                    "a peer's key from host:port.")
    sub = p.add_subparsers(dest="peer_command", metavar="ACTION")
    a = sub.add_parser("add", help="allow a peer (or update its name/address)",
                       description="Allow a peer's key. For a peer already listed, only what "
                                   "is given changes: --name keeps the address, --addr "
                                   "keeps the name (an empty value clears it). One address "
                                   "names one peer (localhost and 127.0.0.1 are the same).")
    a.add_argument("key", help="public key: 64 hex digits or @base64.ed25519 (see `tssb id`)")
    a.add_argument("--name", help="a label for listings (also usable as FEED in `tssb read`)")
    a.add_argument("--addr", metavar="HOST:PORT", help="where the peer serves")
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
    return format_addr(*peer_address(addr, "--addr"))


def run_add(args):
    key = _key(args.key)
    addr = _check_addr(args.addr)
    ctx = open_home(args)
    try:
        try:
            new = ctx.store.add_peer(key, args.name, addr)
        except StoreError as e:
            raise CliError("%s: remove that peer first, or give it another address (`tssb "
                           "peer add ITS_KEY --addr ...`)" % e, EXIT_FAILURE)
        p = [q for q in ctx.store.peers() if q["public"] == key][0]
    finally:
        ctx.close()
    print("%s %s  name %s  addr %s" % ("added" if new else "updated", ssb_id(key),
                                       p["name"] or "-", p["addr"] or "-"))
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
