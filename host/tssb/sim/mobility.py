"""Node mobility: where each board is at a given virtual time.

Random waypoint model (Johnson and Maltz, "Dynamic Source Routing in Ad Hoc Wireless
Networks", 1996): a moving node picks a waypoint uniformly in the area and a speed
uniformly in [speed_min, speed_max], travels there in a straight line, pauses pause_s,
and repeats. It starts at its topology position at time 0, already travelling. The
minimum speed must be above zero: with 0 allowed the mean speed decays towards zero
over a run (Yoon, Liu and Noble, "Random Waypoint Considered Harmful", INFOCOM 2003).

A position is a pure function of (seed, node, time): each node's legs come from its
own random.Random("<seed>/mobility/<node>") and are generated lazily, one leg at a time,
as the simulator's clock moves forward. Only the current leg is kept (memory O(1) per
node); a query earlier than it replays the node's legs from the start (tests do that;
the event loop only moves forward).
"""
import math
import random

MODELS = ("none", "random_waypoint")


class RandomWaypoint:
    """Positions of the boards, some of them moving.

    Args:
        seed: scenario seed.
        starts: [(x, y)] start position per board (metres); boards not in `moving` stay.
        moving: indices of the boards that move.
        area: (x0, y0, x1, y1) the waypoints are drawn in.
        speed_min, speed_max: m/s, 0 < speed_min <= speed_max.
        pause_s: wait at each waypoint.
    """

    def __init__(self, seed, starts, moving, area, speed_min, speed_max, pause_s):
        self.starts = list(starts)
        self.moving = sorted(set(moving))
        self.area = tuple(area)
        self._walkers = {i: _Walker("%d/mobility/%d" % (seed, i), self.starts[i], self.area,
                                    speed_min, speed_max, pause_s * 1000.0)
                         for i in self.moving}

    def moves(self, i):
        return i in self._walkers

    def locator(self, i):
        """function(t_ms) -> (x, y) for board i (the simulator's hot path)."""
        w = self._walkers.get(i)
        if w is None:
            p = self.starts[i]
            return lambda t: p
        return w.at

    def position(self, i, t_ms):
        """Position (x, y) of board i at virtual time t_ms."""
        w = self._walkers.get(i)
        return self.starts[i] if w is None else w.at(t_ms)


class _Walker:
    """One moving node: the current leg (t0 -> t1 ms, p0 -> p1) and its random source."""

    __slots__ = ("label", "start", "area", "vmin", "vmax", "pause_ms", "rnd", "t0", "t1",
                 "p0", "p1", "travelling")

    def __init__(self, label, start, area, vmin, vmax, pause_ms):
        self.label = label
        self.start = start
        self.area = area
        self.vmin = vmin
        self.vmax = vmax
        self.pause_ms = pause_ms
        self._reset()

    def _reset(self):
        self.rnd = random.Random(self.label)
        self.t0 = self.t1 = 0.0
        self.p0 = self.p1 = self.start
        self.travelling = False

    def at(self, t):
        if t < self.t0:
            self._reset()
        while t >= self.t1:
            self._next()
        (x0, y0), (x1, y1) = self.p0, self.p1
        f = (t - self.t0) / (self.t1 - self.t0)
        return (x0 + f * (x1 - x0), y0 + f * (y1 - y0))

    def _next(self):
        if self.travelling and self.pause_ms > 0:
            self.p0 = self.p1
            self.t0, self.t1 = self.t1, self.t1 + self.pause_ms
            self.travelling = False
            return
        ax0, ay0, ax1, ay1 = self.area
        r = self.rnd
        to = (r.uniform(ax0, ax1), r.uniform(ay0, ay1))
        v = r.uniform(self.vmin, self.vmax)
        d = math.hypot(to[0] - self.p1[0], to[1] - self.p1[1])
        self.p0, self.p1 = self.p1, to
        self.t0, self.t1 = self.t1, self.t1 + d / v * 1000.0
        self.travelling = True


def bounding_area(positions, margin_m):
    """The positions' bounding box grown by margin_m on every side: (x0, y0, x1, y1)."""
    xs = [p[0] for p in positions]
    ys = [p[1] for p in positions]
    return (min(xs) - margin_m, min(ys) - margin_m, max(xs) + margin_m, max(ys) + margin_m)
