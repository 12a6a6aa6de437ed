"""`tssb id`: show (creating on first use) the host identity and its network key; export
and import it."""
import hashlib
import json
import os
import secrets
import shutil
import sys

from tssb.cli import EXIT_FAILURE, CliError, home_path, open_home
from tssb.context import SSB_MAIN_NETWORK_KEY, ssb_id

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
                        "or 'ssb-main' for the Secure Scuttlebutt main-net key (a `tssb "
                        "serve` already running on this home keeps its old key until "
                        "restarted)")
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
        if not isinstance(d, dict) or d.get("type") != EXPORT_TYPE or \
                d.get("v") != EXPORT_VERSION:
            raise bad
        seed, public, key = (bytes.fromhex(d[k]) for k in ("seed", "public", "network_key"))
    except (ValueError, TypeError, KeyError, RecursionError):
        raise bad
    from tinyssb import crypto
    if len(seed) != 32 or len(key) != 32 or crypto.publickey(seed) != public:
        raise CliError("%s is damaged: its seed does not give its public key" % path,
                       EXIT_FAILURE)
    return seed, public, key


def _import(args):
    seed, public, key = read_export(args.import_file)
    from tssb import homelock, ownfeed
    from tssb.store import DB_NAME, make_home, open_store
    home = home_path(args)
    exists = CliError("%s already has a data directory: --import makes a new one (choose "
                      "another --home, or restore a whole store with `tssb store restore`)"
                      % home, EXIT_FAILURE)
    if os.path.exists(os.path.join(home, DB_NAME)):
        raise exists
    made = make_home(home)
    try:
        with homelock.alone(home):
            if os.path.exists(os.path.join(home, DB_NAME)):
                raise exists       # made meanwhile by another tssb
            store = open_store(home)
            try:
                with store.transaction():
                    store.set_identity(seed, public)
                    store.set_config("network_key", key)
                # this identity may have posted elsewhere: not before a peer confirms
                ownfeed.mark_unconfirmed(store, "identity imported from %s"
                                         % os.path.basename(args.import_file))
            finally:
                store.close()
    except homelock.HomeBusy as e:
        raise CliError("not imported: %s; stop it first" % e, EXIT_FAILURE)
    except BaseException:
        if made and not os.path.exists(os.path.join(home, DB_NAME)):
            shutil.rmtree(home, ignore_errors=True)
        raise
    print("imported %s into %s; its own feed may have entries elsewhere: `tssb post` waits "
          "for a sync with a peer that holds them (`tssb sync --peer HOST:PORT`), or --force"
          % (public.hex()[:16], home), file=sys.stderr)
    return open_home(args)


def _running_servers(home):
    from tssb import homelock
    return [(pid, cmd) for pid, cmd in homelock.holders(home)
            if cmd.split()[1:2] == ["serve"] and pid != os.getpid()]


def run(args):
    if args.import_file and (args.export or args.network):
        raise CliError("--import goes alone (then use --network or --export in another run)")
    ctx = _import(args) if args.import_file else open_home(args, create=True)
    try:
        if args.network:
            new_key = _parse_network(args.network)
            changed = new_key != ctx.network_key
            ctx.set_network_key(new_key)
            servers = _running_servers(ctx.home) if changed else []
            if servers:
                from tssb.homelock import describe
                print("note: %s still uses the old network key: restart it to use the new "
                      "one" % describe(servers), file=sys.stderr)
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
