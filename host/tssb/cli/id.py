"""`tssb id`: show (creating on first use) the host identity and its network key."""
import hashlib
import json
import secrets

from tssb.cli import CliError, open_home
from tssb.context import SSB_MAIN_NETWORK_KEY, ssb_id


def register(subparsers):
    p = subparsers.add_parser(
        "id", help="show or create this host's identity and network key",
        description="Show this host's long-term Ed25519 identity (created on first use) and "
                    "the secret-handshake network key of the deployment. Hosts only talk to "
                    "each other when they share the network key: create one (the default for "
                    "a new data directory), then copy it to the other hosts with --network HEX.")
    p.add_argument("--network", metavar="KEY",
                   help="set the network key: 64 hex digits, 'new' for a fresh random key, "
                        "or 'ssb-main' for the Secure Scuttlebutt main-net key")
    p.add_argument("--show-network-key", action="store_true",
                   help="print the network key itself (a shared secret), not only its fingerprint")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def _parse_network(text):
    if text == "ssb-main":
        return SSB_MAIN_NETWORK_KEY
    if text == "new":
        return secrets.token_bytes(32)
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise CliError("--network wants 64 hex digits, 'new' or 'ssb-main'")
    return key


def run(args):
    ctx = open_home(args, create=True)
    try:
        if args.network:
            ctx.set_network_key(_parse_network(args.network))
        key = ctx.network_key
        info = {
            "home": ctx.home,
            "public": ctx.identity.public.hex(),
            "id": ssb_id(ctx.identity.public),
            "network": "ssb-main" if key == SSB_MAIN_NETWORK_KEY else "custom",
            "network_fingerprint": hashlib.sha256(key).hexdigest()[:16],
        }
        if args.show_network_key:
            info["network_key"] = key.hex()
        if args.json:
            print(json.dumps(info))
        else:
            for k, v in info.items():
                print("%-20s %s" % (k + ":", v))
    finally:
        ctx.close()
    return 0
