"""`tssb id`: show (creating on first use) the host identity and its network key; export
and import it."""
import hashlib
import json
import os
import secrets

from tssb.cli import EXIT_FAILURE, CliError, home_path, open_home
from tssb.context import SSB_MAIN_NETWORK_KEY, NoHome, ssb_id

EXPORT_TYPE = "tssb-identity"
EXPORT_VERSION = 1
MAX_EXPORT = 4096   # an export is ~300 bytes; refuse to read more


def register(subparsers):
    p = subparsers.add_parser(
        "id", help="show or create this host's identity and network key; export/import it",
        description="Show this host's long-term Ed25519 identity and the secret-handshake "
                    "network key of the deployment. This is the command that creates a data "
                    "directory (with a fresh identity and network key); others only use one. "
                    "Hosts only talk to each other when they share the network key: copy it "
                    "to the other hosts with --network HEX. --export writes the identity and "
                    "network key to a file (0600); --import makes a new data directory with "
                    "them (e.g. to move a host).")
    p.add_argument("--network", metavar="KEY",
                   help="set the network key: 64 hex digits, 'new' for a fresh random key, "
                        "or 'ssb-main' for the Secure Scuttlebutt main-net key")
    p.add_argument("--show-network-key", action="store_true",
                   help="print the network key itself (a shared secret), not only its fingerprint")
    p.add_argument("--export", metavar="FILE", help="write identity and network key to FILE")
    p.add_argument("--import", dest="import_file", metavar="FILE",
                   help="create the data directory with the identity in FILE")
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


def export_identity(ctx, path):
    data = json.dumps({"type": EXPORT_TYPE, "v": EXPORT_VERSION,
                       "seed": ctx.identity.seed.hex(), "public": ctx.identity.public.hex(),
                       "network_key": ctx.network_key.hex()}).encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data + b"\n")


def read_export(path):
    """(seed, public, network_key) from an export file. Raises: CliError."""
    with open(path, "rb") as f:
        raw = f.read(MAX_EXPORT + 1)
    bad = CliError("%s is not a tssb identity export" % path, EXIT_FAILURE)
    if len(raw) > MAX_EXPORT:
        raise bad
    try:
        d = json.loads(raw)
        if d.get("type") != EXPORT_TYPE or d.get("v") != EXPORT_VERSION:
            raise bad
        seed, public, key = (bytes.fromhex(d[k]) for k in ("seed", "public", "network_key"))
    except (ValueError, TypeError, KeyError, AttributeError):
        raise bad
    from tinyssb import crypto
    if len(seed) != 32 or len(key) != 32 or crypto.publickey(seed) != public:
        raise CliError("%s is damaged: its seed does not give its public key" % path,
                       EXIT_FAILURE)
    return seed, public, key


def _import(args):
    seed, public, key = read_export(args.import_file)
    from tssb.context import Context
    home = home_path(args)
    try:
        Context.open(home, create=False).close()
        raise CliError("%s already has a data directory: --import makes a new one (choose "
                       "another --home, or restore a whole store with `tssb store restore`)"
                       % home, EXIT_FAILURE)
    except NoHome:
        pass
    from tssb.store import open_store
    store = open_store(home)
    try:
        with store.transaction():
            store.set_identity(seed, public)
            store.set_config("network_key", key)
    finally:
        store.close()
    return open_home(args)


def run(args):
    if args.import_file and (args.export or args.network):
        raise CliError("--import goes alone (then use --network or --export in another run)")
    ctx = _import(args) if args.import_file else open_home(args, create=True)
    try:
        if args.network:
            ctx.set_network_key(_parse_network(args.network))
        key = ctx.network_key
        if args.export:
            try:
                export_identity(ctx, args.export)
            except FileExistsError:
                raise CliError("%s exists: choose a new file name" % args.export, EXIT_FAILURE)
        info = {
            "home": ctx.home,
            "public": ctx.identity.public.hex(),
            "id": ssb_id(ctx.identity.public),
            "network": "ssb-main" if key == SSB_MAIN_NETWORK_KEY else "custom",
            "network_fingerprint": hashlib.sha256(key).hexdigest()[:16],
        }
        if args.show_network_key:
            info["network_key"] = key.hex()
        if args.export:
            info["exported_to"] = os.path.abspath(args.export)
        if args.json:
            print(json.dumps(info))
        else:
            for k, v in info.items():
                print("%-20s %s" % (k + ":", v))
    finally:
        ctx.close()
    return 0
