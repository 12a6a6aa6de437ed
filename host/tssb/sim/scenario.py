"""Scenario files: TOML (tomllib), validated into a plain dict with every default filled.
Files are outside input: at most MAX_FILE_BYTES, nested at most MAX_DEPTH deep, no NaN or
infinite numbers (tssb.safeparse); anything else is one ScenarioError line.

    name = "demo"
    seed = 1
    region = "EU868.a"            # a firmware region plan (tssbfw.regions)
    duration_s = 3600             # virtual time limit
    stop_when_converged = true    # end once every post reached every node
    boot_spread_s = 0             # boards power on at random times in [0, spread)

    [topology]                    # kind: line | grid | random | positions
    kind = "grid"
    nodes = 12
    width = 4                     # grid only
    spacing_m = 100               # line and grid
    # side_m = 300                # random: square side; placement redrawn until connected
    # positions = [[0, 0], [90, 10]]   # positions: one [x, y] in metres per node

    [radio]                       # all optional; defaults in tssb.sim.phy
    shadowing_sigma_db = 3.57
    capture_db = 6.0
    loss = 0.0                    # extra random loss per reception, 0..1

    [authors]
    nodes = [0, 5, 11]            # indices of the nodes that post

    [posts]
    per_author = 4
    start_s = 30                  # first post (each author offset by 1 s)
    interval_s = 20
    sizes = [16, 40, 180, 700]    # content bytes, used in turn; > 48 makes a side chain

    [deployed]                    # optional: boards running the deployed tinySSB
    nodes = [3, 7]                # behaviour (ESP32 GOSET algorithm and timers, no
                                  # extension); the others run ours (default: none)

    [mobility]                    # optional; nothing moves unless model is set
    model = "random_waypoint"     # none (default) | random_waypoint
    nodes = [6]                   # the boards that move (default: all)
    speed_min_mps = 0.5           # each leg's speed is uniform in [min, max], min > 0
    speed_max_mps = 1.5
    pause_s = 0                   # wait at each waypoint
    margin_m = 50                 # waypoint area: the start positions' bounding box
                                  # grown by this on every side, unless
    # area = [x0, y0, x1, y1]     # is given (it must hold the movers' start positions)
"""
import math

from tssb.safeparse import InputError, toml_loads
from tssb.sim import mobility, phy, topology
from tssb.sim.errors import ScenarioError
from tssbfw import regions

MAX_DURATION_S = 7 * 24 * 3600  # a week of virtual time bounds the event loop
MAX_FILE_BYTES = 1 << 20        # a scenario with 100 positions is ~3 KB
MAX_DEPTH = 4                   # tables hold lists of [x, y] pairs at most
MAX_POSTS = 10000               # posts per scenario (memory of the per-entry records)
MAX_POST_BYTES = 10000          # 100 chunks; deployed readers fetch up to 100 KB chains
MAX_SPEED_MPS = 100.0           # faster than any road vehicle a board rides on
MIN_CROSSING_S = 1.0            # speed_max / area side: at most about one waypoint leg
                                # per node per virtual second, fewer than a board's frames

_TOP = {"name", "seed", "region", "duration_s", "stop_when_converged", "boot_spread_s",
        "topology", "radio", "authors", "posts", "mobility", "deployed"}
_RADIO = {"d0_m": phy.D0_M, "pl_d0_db": phy.PL_D0_DB,
          "path_loss_exponent": phy.PATH_LOSS_EXPONENT,
          "shadowing_sigma_db": phy.SHADOWING_SIGMA_DB, "capture_db": phy.CAPTURE_DB,
          "noise_figure_db": phy.NOISE_FIGURE_DB, "tx_power_dbm": None, "loss": 0.0,
          "fading_sigma_db": 0.0}


def load(path):
    """Read and validate a scenario file.

    Returns:
        the scenario dict (see from_dict).
    Raises:
        ScenarioError: unreadable file, bad TOML or invalid content.
    """
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise ScenarioError("cannot read: %s" % (e.strerror or e), str(path))
    try:
        data = toml_loads(raw, MAX_FILE_BYTES, MAX_DEPTH, "scenario")
    except InputError as e:
        raise ScenarioError(str(e), str(path))
    if not data:   # an empty file would silently run every default
        raise ScenarioError("empty scenario (the keys are in docs/sim.md)", str(path))
    return from_dict(data)


def from_dict(d):
    """Validate a scenario given as a dict (as parsed from TOML) and fill in defaults.

    Returns:
        dict with name, seed, plan (the region plan dict), duration_ms,
        stop_when_converged, topology (dict), radio (dict), authors (list of int),
        posts (dict), mobility (dict: model, nodes (list, or None for all), speed_min_mps,
        speed_max_mps, pause_s, margin_m, area ((x0, y0, x1, y1) or None)),
        deployed (list of int: boards with deployed behaviour).
    Raises:
        ScenarioError: unknown key, wrong type or value out of range.
    """
    if not isinstance(d, dict):
        raise ScenarioError("scenario must be a table")
    _no_unknown(d, _TOP, "")
    out = {}
    out["name"] = _get(d, "name", str, "scenario", "name")
    out["seed"] = _get(d, "seed", int, 1, "seed")
    region = _get(d, "region", str, regions.DEFAULT_PLAN, "region")
    try:
        out["plan"] = regions.plan(region)
    except ValueError as e:
        raise ScenarioError(str(e), "region")
    dur = _num(d, "duration_s", 3600, "duration_s", 0.001, MAX_DURATION_S)
    out["duration_ms"] = int(dur * 1000)
    out["stop_when_converged"] = _get(d, "stop_when_converged", bool, True,
                                      "stop_when_converged")
    out["topology"] = _topology(_table(d, "topology"))
    n = out["topology"]["nodes"]
    out["radio"] = _radio(_table(d, "radio"))
    authors = _table(d, "authors")
    _no_unknown(authors, {"nodes"}, "authors.")
    alist = authors.get("nodes", [0])
    if not isinstance(alist, list) or not alist:
        raise ScenarioError("must be a non-empty list of node indices", "authors.nodes")
    for a in alist:
        if not isinstance(a, int) or isinstance(a, bool) or not 0 <= a < n:
            raise ScenarioError("node index out of range 0..%d" % (n - 1), "authors.nodes")
    if len(set(alist)) != len(alist):
        raise ScenarioError("duplicate node index", "authors.nodes")
    out["authors"] = list(alist)
    out["posts"] = _posts(_table(d, "posts"), len(alist))
    spread = _num(d, "boot_spread_s", 0, "boot_spread_s", 0, MAX_DURATION_S)
    if spread * 1000 > out["posts"]["start_ms"]:
        raise ScenarioError("must not exceed posts.start_s (authors post once powered on)",
                            "boot_spread_s")
    out["boot_spread_ms"] = int(spread * 1000)
    out["mobility"] = _mobility(_table(d, "mobility"), n)
    dep = _table(d, "deployed")
    _no_unknown(dep, {"nodes"}, "deployed.")
    out["deployed"] = _indices(dep.get("nodes", []), n, "deployed.nodes")
    return out


def _indices(v, n, where):
    if not isinstance(v, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n for i in v):
        raise ScenarioError("must be a list of node indices 0..%d" % (n - 1), where)
    if len(set(v)) != len(v):
        raise ScenarioError("duplicate node index", where)
    return list(v)


def _topology(t):
    _no_unknown(t, {"kind", "nodes", "width", "spacing_m", "side_m", "positions"}, "topology.")
    kind = _get(t, "kind", str, "grid", "topology.kind")
    out = {"kind": kind}
    if kind == "positions":
        pos = t.get("positions")
        if not isinstance(pos, list) or not 1 <= len(pos) <= topology.MAX_NODES:
            raise ScenarioError("must be a list of 1..%d [x, y] pairs" % topology.MAX_NODES,
                                "topology.positions")
        clean = []
        for p in pos:
            if (not isinstance(p, list) or len(p) != 2
                    or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                               for v in p)):
                raise ScenarioError("each position must be [x, y] in metres",
                                    "topology.positions")
            clean.append((float(p[0]), float(p[1])))
        out["nodes"] = len(clean)
        out["positions"] = clean
        return out
    if kind not in ("line", "grid", "random"):
        raise ScenarioError("must be line, grid, random or positions", "topology.kind")
    out["nodes"] = _get(t, "nodes", int, 12, "topology.nodes")
    if not 1 <= out["nodes"] <= topology.MAX_NODES:
        raise ScenarioError("must be 1..%d" % topology.MAX_NODES, "topology.nodes")
    if kind == "grid":
        out["width"] = _get(t, "width", int, 4, "topology.width")
        if out["width"] < 1:
            raise ScenarioError("must be >= 1", "topology.width")
    if kind == "random":
        out["side_m"] = _num(t, "side_m", 500.0, "topology.side_m", 1.0, 1e6)
    else:
        out["spacing_m"] = _num(t, "spacing_m", 100.0, "topology.spacing_m", 0.0, 1e6)
    return out


def _radio(r):
    _no_unknown(r, set(_RADIO), "radio.")
    out = {}
    for k, default in _RADIO.items():
        v = r.get(k, default)
        if v is None:
            out[k] = None
            continue
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
            raise ScenarioError("must be a number", "radio." + k)
        out[k] = float(v)
    if not 0.0 <= out["loss"] <= 1.0:
        raise ScenarioError("must be in 0..1", "radio.loss")
    for k in ("shadowing_sigma_db", "fading_sigma_db", "capture_db"):
        if not 0.0 <= out[k] <= 100.0:
            raise ScenarioError("must be in 0..100", "radio." + k)
    if out["d0_m"] <= 0 or out["path_loss_exponent"] <= 0:
        raise ScenarioError("must be > 0", "radio")
    return out


def _posts(p, n_authors):
    _no_unknown(p, {"per_author", "start_s", "interval_s", "sizes"}, "posts.")
    out = {}
    out["per_author"] = _get(p, "per_author", int, 4, "posts.per_author")
    if not 0 <= out["per_author"] * n_authors <= MAX_POSTS:
        raise ScenarioError("at most %d posts in all" % MAX_POSTS, "posts.per_author")
    out["start_ms"] = int(_num(p, "start_s", 30, "posts.start_s", 0, MAX_DURATION_S) * 1000)
    out["interval_ms"] = int(_num(p, "interval_s", 20, "posts.interval_s", 0,
                                  MAX_DURATION_S) * 1000)
    sizes = p.get("sizes", [16, 40, 180, 700])
    if (not isinstance(sizes, list) or not sizes
            or not all(isinstance(s, int) and not isinstance(s, bool)
                       and 1 <= s <= MAX_POST_BYTES for s in sizes)):
        raise ScenarioError("must be a non-empty list of sizes 1..%d" % MAX_POST_BYTES,
                            "posts.sizes")
    out["sizes"] = list(sizes)
    return out


def _mobility(m, n):
    _no_unknown(m, {"model", "nodes", "speed_min_mps", "speed_max_mps", "pause_s",
                    "margin_m", "area"}, "mobility.")
    out = {"model": _get(m, "model", str, "none", "mobility.model")}
    if out["model"] not in mobility.MODELS:
        raise ScenarioError("must be one of %s" % ", ".join(mobility.MODELS),
                            "mobility.model")
    nodes = m.get("nodes")
    if nodes is not None:
        if (not isinstance(nodes, list) or not nodes
                or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n
                           for i in nodes)):
            raise ScenarioError("must be a non-empty list of node indices 0..%d" % (n - 1),
                                "mobility.nodes")
        if len(set(nodes)) != len(nodes):
            raise ScenarioError("duplicate node index", "mobility.nodes")
        nodes = list(nodes)
    out["nodes"] = nodes
    lo = _num(m, "speed_min_mps", 0.5, "mobility.speed_min_mps", 0.0, MAX_SPEED_MPS)
    hi = _num(m, "speed_max_mps", max(lo, 1.5), "mobility.speed_max_mps", 0.0, MAX_SPEED_MPS)
    if lo <= 0:
        raise ScenarioError("must be > 0 (random waypoint speeds decay towards 0 otherwise)",
                            "mobility.speed_min_mps")
    if hi < lo:
        raise ScenarioError("must be >= speed_min_mps", "mobility.speed_max_mps")
    out["speed_min_mps"], out["speed_max_mps"] = lo, hi
    out["pause_s"] = _num(m, "pause_s", 0.0, "mobility.pause_s", 0.0, MAX_DURATION_S)
    if "area" in m and "margin_m" in m:
        raise ScenarioError("give area or margin_m, not both", "mobility.margin_m")
    out["margin_m"] = _num(m, "margin_m", 50.0, "mobility.margin_m", 0.0, 1e6)
    area = m.get("area")
    if area is not None:
        if (not isinstance(area, list) or len(area) != 4
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                           for v in area)
                or area[2] < area[0] or area[3] < area[1]):
            raise ScenarioError("must be [x0, y0, x1, y1] in metres, x0 <= x1, y0 <= y1",
                                "mobility.area")
        area = tuple(float(v) for v in area)
    out["area"] = area
    return out


def check_area(mob, area):
    """Refuse a waypoint area in which random waypoint legs would be too short: a point,
    or one crossed faster than MIN_CROSSING_S at the top speed (bounds the legs per second).

    Raises:
        ScenarioError: naming mobility.area (or margin_m when the area is the default).
    """
    where = "mobility.area" if mob["area"] is not None else "mobility.margin_m"
    side = max(area[2] - area[0], area[3] - area[1])
    if side <= 0 or side / mob["speed_max_mps"] < MIN_CROSSING_S:
        raise ScenarioError("waypoint area too small: crossing it at speed_max_mps takes "
                            "under %g s" % MIN_CROSSING_S, where)


def _table(d, key):
    v = d.get(key, {})
    if not isinstance(v, dict):
        raise ScenarioError("must be a table", key)
    return v


def _no_unknown(d, known, prefix):
    for k in d:
        if k not in known:
            raise ScenarioError("unknown key", prefix + str(k))


def _get(d, key, typ, default, where):
    v = d.get(key, default)
    if typ is int and isinstance(v, bool) or not isinstance(v, typ):
        raise ScenarioError("must be %s" % typ.__name__, where)
    return v


def _num(d, key, default, where, lo, hi):
    v = d.get(key, default)
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not lo <= v <= hi:
        raise ScenarioError("must be a number in %g..%g" % (lo, hi), where)
    return float(v)
