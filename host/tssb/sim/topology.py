"""Node placements: line, grid, random geometric, or explicit positions (metres)."""
import math

from tssb.sim.errors import ScenarioError

MAX_NODES = 1000          # bounds every per-node and per-pair allocation of a scenario
MAX_PLACEMENT_TRIES = 200  # random geometric: draws before giving up on connectivity


def line(n, spacing_m):
    """n nodes on the x axis, spacing_m apart."""
    _check_n(n)
    return [(i * spacing_m, 0.0) for i in range(n)]


def grid(n, width, spacing_m):
    """n nodes row by row on a grid `width` nodes wide."""
    _check_n(n)
    if width < 1:
        raise ScenarioError("width must be >= 1", "topology.width")
    return [((i % width) * spacing_m, (i // width) * spacing_m) for i in range(n)]


def random_geometric(n, side_m, rnd, link_m=None):
    """n nodes uniformly in a side_m x side_m square.

    Args:
        rnd: random.Random to draw from (deterministic for a seed).
        link_m: when given, redraw (up to MAX_PLACEMENT_TRIES times) until the unit-disk
            graph with this radius is connected.
    Raises:
        ScenarioError: no connected placement found.
    """
    _check_n(n)
    if side_m <= 0:
        raise ScenarioError("side_m must be > 0", "topology.side_m")
    for _ in range(MAX_PLACEMENT_TRIES):
        pos = [(rnd.uniform(0, side_m), rnd.uniform(0, side_m)) for _ in range(n)]
        if link_m is None or connected(pos, link_m):
            return pos
    raise ScenarioError("no connected placement in %d tries; shrink side_m"
                        % MAX_PLACEMENT_TRIES, "topology.side_m")


def distance(a, b):
    return math.hypot(a[0] - b[0], a[1] - b[1])


def connected(pos, link_m):
    """True when every node reaches every other over hops of at most link_m."""
    n = len(pos)
    if n == 0:
        return True
    seen = {0}
    todo = [0]
    while todo:
        i = todo.pop()
        for j in range(n):
            if j not in seen and distance(pos[i], pos[j]) <= link_m:
                seen.add(j)
                todo.append(j)
    return len(seen) == n


def hops_from(links, src, n):
    """Hop counts from src over a neighbour map {i: iterable of j}; -1 = unreachable."""
    hops = [-1] * n
    hops[src] = 0
    frontier = [src]
    while frontier:
        nxt = []
        for i in frontier:
            for j in links.get(i, ()):
                if hops[j] < 0:
                    hops[j] = hops[i] + 1
                    nxt.append(j)
        frontier = nxt
    return hops


def _check_n(n):
    if not isinstance(n, int) or not 1 <= n <= MAX_NODES:
        raise ScenarioError("node count must be 1..%d" % MAX_NODES, "topology.nodes")
