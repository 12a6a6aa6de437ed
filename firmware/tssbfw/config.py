"""Node configuration and identity on flash.

  <root>/config.json   {"plan", "board", "name", "capacity", "tick_ms", "ble",
                        "ble_name", "power", "sf"} (JSON)
  <root>/identity      the 32-byte Ed25519 seed of the node's own feed
  <root>/repl          present: the next boot leaves the board at the MicroPython REPL
                       instead of starting the firmware (`tssb reboot --repl`); removed
                       by that boot, so the one after starts the firmware again

Config and identity are written atomically (write `.tmp`, remove, rename; a lone `.tmp`
is finished).
A missing or unreadable config gives the defaults (and says why in `problems`); a
missing identity is created on first boot from os.urandom.

There is no default region plan: a board transmits only in the band its user chose
(`tssb deploy --plan`, `tssb config set plan`); without one the radio stays off.
"power" and "sf" override the plan's TX power (capped by the band's limit) and
spreading factor; None keeps the plan's.
"""
import json
import os

from tssbfw import regions
from tssbfw.flashstore import DEFAULT_CAPACITY, _exists, _mkdirs, _settle_tmp

SEED_LEN = 32
MIN_CAPACITY = 16 * 1024      # below this a node cannot hold even a handful of feeds
MAX_CAPACITY = 64 << 20       # larger than any ESP32 flash
MIN_TICK_MS = 10
MAX_TICK_MS = 5000
# TX power the radios can be set to: SX126x -9..+22 dBm (SX1261/2 datasheet, SetTxParams);
# the plan's band caps it further (regions.RULES max_dbm).
MIN_POWER_DBM = -9
MAX_POWER_DBM = 22
# Spreading factors both radio families run with an explicit header (SX127x: 7..12 with
# SF6 implicit only; SX126x: 5..12); the deployed plans use 7 and 9.
MIN_SF = 7
MAX_SF = 12

DEFAULTS = {"plan": None, "board": None, "name": None,   # no plan: radio off
            "capacity": DEFAULT_CAPACITY, "tick_ms": 100,
            "ble": True, "ble_name": None,   # BLE on, as on deployed boards
            "power": None, "sf": None}       # None: the plan's own


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def check(key, value):
    """Validate one config value; return it normalised.

    Every value is checked for its type first: it may come from a host over the link,
    as any JSON value.

    Raises:
        ValueError: unknown key or bad value (message says which).
    """
    if not isinstance(key, str):
        raise ValueError("config key must be text")
    if key in ("plan", "board", "name", "ble_name") and value is not None and \
            not isinstance(value, str):
        raise ValueError("%s must be text or null" % key)
    if key == "plan":
        if value is not None:
            regions.plan(value)
        return value
    if key == "power":
        if value is not None and (not _is_int(value) or
                                  not MIN_POWER_DBM <= value <= MAX_POWER_DBM):
            raise ValueError("power must be %d..%d dBm" % (MIN_POWER_DBM, MAX_POWER_DBM))
        return value
    if key == "sf":
        if value is not None and (not _is_int(value) or not MIN_SF <= value <= MAX_SF):
            raise ValueError("sf must be %d..%d" % (MIN_SF, MAX_SF))
        return value
    if key == "board":
        if value is None:
            return None
        import tssb_boards
        tssb_boards.get(value)
        return value
    if key == "name":
        from tinyssb.eventlog import valid_node
        if value is not None and not valid_node(value):
            raise ValueError("bad node name")
        return value
    if key == "capacity":
        if not _is_int(value) or not MIN_CAPACITY <= value <= MAX_CAPACITY:
            raise ValueError("capacity out of range")
        return value
    if key == "tick_ms":
        if not _is_int(value) or not MIN_TICK_MS <= value <= MAX_TICK_MS:
            raise ValueError("tick_ms out of range")
        return value
    if key == "ble":
        if not isinstance(value, bool):
            raise ValueError("ble must be true or false")
        return value
    if key == "ble_name":
        if value is None:
            return None
        from tssbfw.ble import NAME_MAX
        if not 0 < len(value) <= NAME_MAX or not all(" " <= ch <= "~" for ch in value):
            raise ValueError("ble_name must be 1..%d printable ASCII characters" % NAME_MAX)
        return value
    raise ValueError("unknown config key %r" % key)


def check_many(values):
    """Validate a {key: value} dict as one change; return it normalised.

    Raises:
        ValueError: not a dict, or any key or value bad (nothing is taken then).
    """
    if not isinstance(values, dict):
        raise ValueError("settings must be an object of key: value")
    out = {}
    for k in values:
        try:
            out[k] = check(k, values[k])
        except ValueError as e:
            why = str(e)
            raise ValueError(why if why.startswith(str(k)) else "%s: %s" % (k, why))
    return out


def load(root):
    """Read the config; return (config dict, list of problems found)."""
    cfg = dict(DEFAULTS)
    problems = []
    path = root + "/config.json"
    _settle_tmp(path)
    if not _exists(path):
        return cfg, ["no config, using defaults"]
    try:
        with open(path) as f:
            data = json.loads(f.read())
        if not isinstance(data, dict):
            raise ValueError("config is not an object")
    except (ValueError, OSError) as e:
        return cfg, ["unreadable config: %s" % e]
    for k in data:
        try:
            cfg[k] = check(k, data[k])
        except ValueError as e:
            problems.append("%s: %s" % (k, e))
    return cfg, problems


def save(root, cfg):
    """Write the config atomically (only known keys, each validated)."""
    out = {}
    for k in DEFAULTS:
        out[k] = check(k, cfg.get(k, DEFAULTS[k]))
    _write_atomic(root + "/config.json", json.dumps(out).encode())


def request_repl(root):
    """Make the next boot leave the board at the REPL (see take_repl_request)."""
    _write_atomic(root + "/repl", b"1")


def take_repl_request(root):
    """Whether this boot was asked to stay at the REPL; the request is used up."""
    path = root + "/repl"
    _settle_tmp(path)
    if not _exists(path):
        return False
    os.remove(path)
    return True


def load_identity(root, publickey, urandom=None):
    """The node's (seed, public key); created and saved on first boot.

    Args:
        publickey: function(seed) -> 32-byte public key (tinyssb.crypto.publickey).
        urandom: function(n) -> n random bytes (default os.urandom).
    Returns:
        (seed, public, created)
    """
    path = root + "/identity"
    _settle_tmp(path)
    seed = None
    if _exists(path):
        with open(path, "rb") as f:
            seed = f.read()
        if len(seed) != SEED_LEN:
            seed = None  # a torn write cannot happen (atomic); treat as absent
    created = seed is None
    if created:
        seed = (urandom or os.urandom)(SEED_LEN)
        _write_atomic(path, seed)
    return seed, publickey(seed), created


def _write_atomic(path, data):
    d = path.rsplit("/", 1)[0]
    if d and not _exists(d):
        _mkdirs(d)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    if _exists(path):
        os.remove(path)
    os.rename(tmp, path)
