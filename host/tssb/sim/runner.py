"""The event-driven simulator: boards on a virtual LoRa channel.

Events live in one heap, ordered by (time, order, sequence number):
  TX_END  a frame leaves the air: each receiver that could decode it gets it (unless it
          collided, was half-duplex-deafened, or the optional random loss took it)
  POST    an author appends a post to its own feed
  WAKE    a board runs its periodic node work (firmware on_tick) and, when its scheduler
          slot and duty-cycle limiter allow, starts a transmission
  INJECT  a raw frame put on air by transmit() (tests, what-if experiments)
Between events nothing happens, so idle time costs nothing (no fixed 1 ms steps).
Everything random comes from random.Random instances seeded from the scenario seed, so
a run is a pure function of its scenario.

Links: with no mobility every board's neighbours and their mean RSSI are computed once
(self.neigh). With mobility, that table only holds pairs of boards that both stay; a
pair involving a mover is evaluated when a frame starts, at the positions of that
instant, with the pair's static shadowing draw.
"""
import heapq
import math
import os
import random
from array import array

from tinyssb import crypto
from tinyssb.bus import same_stores
from tssb.sim import mobility, phy, topology
from tssb.sim.board import Board, RxFrame, VirtualClock
from tssb.sim.errors import ScenarioError
from tssb.sim.scenario import check_area
from tssbfw.airtime import plan_airtime_ms

TX_END, POST, WAKE, INJECT = 0, 1, 2, 3   # at the same ms: ends before starts
KINDS = ("claim", "novelty", "want", "chnk", "entry", "chunk",
         "beacon", "reply", "symbols", "request", "keys",   # these five: gosetx
         "probe", "other")   # probe: a WANT confirming a deployed neighbour's key (peerset)
PAYLOAD_KINDS = ("entry", "chunk")


class _Rx:
    __slots__ = ("node", "rssi", "end", "lost")   # rssi: at the frame's start

    def __init__(self, node, rssi, end):
        self.node = node
        self.rssi = rssi
        self.end = end
        self.lost = None   # reason once lost: collision or half_duplex


class Simulator:
    """A scenario (tssb.sim.scenario.from_dict/load) ready to run.

    Args:
        scenario: validated scenario dict.
        logdir: directory for one JSONL event log per board, or None for no logs.
    """

    def __init__(self, scenario, logdir=None, trace=False):
        self.sc = scenario
        # (end ms, src, dst, outcome) per decodable reception when tracing; outcome is
        # "ok" or the loss reason (collision, half_duplex, loss)
        self.trace = [] if trace else None
        seed = scenario["seed"]
        self.plan = scenario["plan"]
        radio = scenario["radio"]
        self.model = phy.LinkModel(
            self.plan, radio["d0_m"], radio["pl_d0_db"], radio["path_loss_exponent"],
            radio["shadowing_sigma_db"], radio["noise_figure_db"], radio["capture_db"],
            radio["tx_power_dbm"])
        self.positions = _place(scenario["topology"], self.model, seed)
        n = len(self.positions)
        self.n = n
        self.mobility = _mobility(scenario.get("mobility"), self.positions, seed)
        if self.mobility is not None:   # per board: function(t) -> (x, y)
            self._where = [self.mobility.locator(i) for i in range(n)]
        self._neighbours(random.Random("%d/shadowing" % seed))
        self.loss_rnd = random.Random("%d/loss" % seed)
        self.fade_rnd = random.Random("%d/fading" % seed)
        self.clock = VirtualClock()
        self.now = 0
        self._heap = []
        self._seq = 0
        self._files = []
        self._active = [[] for _ in range(n)]   # receptions in progress per board
        id_rnd = random.Random("%d/identities" % seed)
        authors = scenario["authors"]
        self.boards = []
        if logdir is not None:
            os.makedirs(logdir, exist_ok=True)
        for i in range(n):
            ident = None
            if i in authors:
                s = bytes(id_rnd.getrandbits(8) for _ in range(32))
                ident = (s, crypto.publickey(s))
            r = random.Random("%d/board/%d" % (seed, i))
            sink = None
            name = "node%02d" % i
            if logdir is not None:
                # written as .jsonl.live, renamed to .jsonl when closed (docs/events.md)
                final = os.path.join(logdir, name + ".jsonl")
                f = open(final + ".live", "w")
                self._files.append((f, final))
                sink = lambda line, f=f: f.write(line + "\n")
            self.boards.append(Board(i, name, self.plan, self.clock,
                                     lambda k, r=r: r.randrange(k) if k > 1 else 0,
                                     ident, self._on_event, sink, run="sim%d" % seed,
                                     deployed=i in scenario.get("deployed", ())))
        # statistics
        self.by_kind = {k: {"frames": 0, "bytes": 0, "airtime_ms": 0} for k in KINDS}
        self.attempts = 0
        self.delivered = 0
        self.lost = {"collision": 0, "half_duplex": 0, "loss": 0}
        self.goset_ms = None
        self._goset_count = [len(b.node.goset) for b in self.boards]
        self.posts = []        # dicts: author, feed, seq, t, chunks, done {node: ms}
        self._post_index = {}  # (feed hex, seq) -> post dict
        self._pending = 0      # (post, node) pairs not complete yet
        self._posts_left = 0
        self.converge_ms = None
        self._schedule_posts(random.Random("%d/posts" % seed))
        # Boards power on at different times (a node's timers start at its first tick),
        # so the deployed 20 s full claims of different boards do not all collide.
        spread = scenario.get("boot_spread_ms", 0)
        boot_rnd = random.Random("%d/boot" % seed)
        self.boot_ms = [boot_rnd.randrange(spread) if spread else 0 for _ in range(n)]
        for b in self.boards:
            self._wake(b, self.boot_ms[b.index])

    # -- set-up ----------------------------------------------------------------------

    def _neighbours(self, rnd):
        """Per board, the boards whose frames reach it: [(j, mean rssi)], symmetric.
        With mobility only pairs of boards that stay are listed, and every pair's
        shadowing is kept (self.shadow[i * n + j]) for the movers' links."""
        m = self.model
        pos = self.positions
        n = self.n
        mob = self.mobility
        stays = [mob is None or not mob.moves(i) for i in range(n)]
        self.shadow = array("d", bytes(8 * n * n)) if mob is not None else None
        self.neigh = [[] for _ in range(n)]
        self.links = {}   # decodable links at the start positions, for hop counts
        for i in range(n):
            for j in range(i + 1, n):
                shadow = rnd.gauss(0.0, m.sigma) if m.sigma else 0.0
                rssi = m.mean_rssi(topology.distance(pos[i], pos[j]), shadow)
                if mob is not None:
                    self.shadow[i * n + j] = self.shadow[j * n + i] = shadow
                if m.relevant(rssi) and stays[i] and stays[j]:
                    self.neigh[i].append((j, rssi))
                    self.neigh[j].append((i, rssi))
                if m.decodable(rssi):
                    self.links.setdefault(i, []).append(j)
                    self.links.setdefault(j, []).append(i)

    def _neighbours_at(self, i, t):
        """Board i's neighbours [(j, mean rssi)] at virtual time t (mobility on): the
        static table plus every mover, or every board when i moves. Costs one position
        and one path loss per pair evaluated (LinkModel.mean_rssi, inlined)."""
        mob = self.mobility
        m = self.model
        n = self.n
        shadow = self.shadow
        where = self._where
        x, y = where[i](t)
        if mob.moves(i):
            out, others = [], range(n)
        else:
            out, others = list(self.neigh[i]), mob.moving
        tx, pl_d0, k, d0 = m.tx_power, m.pl_d0, 10.0 * m.exponent, m.d0
        cut = m.sensitivity - m.capture_db - phy.IGNORE_MARGIN_DB   # LinkModel.relevant
        base = i * n
        for j in others:
            if j != i:
                xj, yj = where[j](t)
                d = math.hypot(xj - x, yj - y)
                rssi = tx - (pl_d0 + k * math.log10(max(d, d0) / d0)) - shadow[base + j]
                if rssi >= cut:
                    out.append((j, rssi))
        return out

    def position(self, i, t_ms=None):
        """Position (x, y) in metres of board i at virtual time t_ms (default: now)."""
        if self.mobility is None:
            return self.positions[i]
        return self.mobility.position(i, self.now if t_ms is None else t_ms)

    def _schedule_posts(self, rnd):
        p = self.sc["posts"]
        sizes = p["sizes"]
        k = 0
        for n in range(p["per_author"]):
            for a_i, a in enumerate(self.sc["authors"]):
                t = p["start_ms"] + n * p["interval_ms"] + a_i * 1000
                size = sizes[k % len(sizes)]
                k += 1
                head = ("author %d post %d: " % (a, n)).encode()[:size]
                body = head + bytes(rnd.getrandbits(8) for _ in range(size - len(head)))
                self._push(t, POST, (a, body))
                self._posts_left += 1

    def _push(self, t, kind, data):
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, data))

    def _wake(self, b, t):
        t = max(t, self.now)
        if b.wake_at is not None and b.wake_at <= t:
            return   # an earlier wake is pending; it reschedules itself
        b.wake_at = t
        self._push(t, WAKE, b)

    # -- event hook (every board's node, port and scheduler events) -------------------

    def _on_event(self, i, event, fields):
        if event == "append" or event == "chunk":
            post = self._post_index.get((fields["feed"], fields["seq"]))
            if post is not None and i not in post["done"]:
                fid = bytes.fromhex(fields["feed"])
                if self.boards[i].store.chunk_count(fid, post["seq"]) >= post["chunks"]:
                    post["done"][i] = self.now
                    self._pending -= 1
        elif event == "goset":
            self._goset_count[i] = fields["count"]
            if self.goset_ms is None and min(self._goset_count) == len(self.sc["authors"]):
                self.goset_ms = self.now

    # -- the loop ----------------------------------------------------------------------

    def run(self, progress=None, progress_every_ms=60000):
        """Run until the scenario's duration (or convergence when it asks to stop then).

        Args:
            progress: function(now_ms, duration_ms) called every progress_every_ms of
                virtual time, or None.
        Returns:
            the summary dict (see summary()).
        """
        until = self.sc["duration_ms"]
        stop = self.sc["stop_when_converged"]
        heap = self._heap
        next_report = progress_every_ms
        try:
            while heap and heap[0][0] <= until:
                t, kind, _, data = heapq.heappop(heap)
                self.now = self.clock.t = t
                if progress is not None and t >= next_report:
                    progress(t, until)
                    next_report = t + progress_every_ms
                if kind == TX_END:
                    self._tx_end(*data)
                elif kind == WAKE:
                    if data.wake_at == t:
                        data.wake_at = None
                        self._service(data)
                elif kind == INJECT:
                    self._start_tx(*data)
                else:
                    self._post(*data)
                if (self.converge_ms is None and self._posts_left == 0
                        and self._pending == 0):
                    self.converge_ms = t
                    if stop:
                        break
            else:
                self.now = self.clock.t = until
        finally:
            for f, final in self._files:
                f.close()
                os.replace(f.name, final)
            self._files = []
        return self.summary()

    def transmit(self, i, frame, at_ms):
        """Put a raw frame on air from board i at at_ms, past its scheduler and limiter.

        Args:
            i: board index; frame: bytes as sent on air (packet || CRC32);
            at_ms: start time (virtual ms, not in the past).
        Raises:
            ValueError: bad board index, time or frame length.
        """
        if not 0 <= i < self.n or at_ms < self.now or not 1 <= len(frame) <= 255:
            raise ValueError("bad board, time or frame length")
        self._push(at_ms, INJECT, (self.boards[i], bytes(frame), at_ms))

    def _post(self, a, body):
        b = self.boards[a]
        seq = b.link.post(body)
        fid = b.node.author.fid
        post = {"author": a, "feed": fid.hex(), "seq": seq, "t": self.now, "size": len(body),
                "chunks": b.store.chunk_count(fid, seq), "done": {a: self.now}}
        self.posts.append(post)
        self._post_index[(post["feed"], seq)] = post
        self._pending += self.n - 1
        self._posts_left -= 1
        self._wake(b, self.now)

    def _service(self, b):
        now = self.now
        fw = b.fw
        if now >= b.link.next_deadline(now):
            fw.on_tick(now)
        if b.tx_end <= now:
            frame = fw.next_frame(now)
            if frame is not None:
                self._start_tx(b, frame, now)
        self._reschedule(b)

    def _reschedule(self, b):
        now = self.now
        t = b.link.next_deadline(now)
        due = b.fw.sched.due_in(now)
        if due is not None:
            t = min(t, max(now + due, b.tx_end))
        self._wake(b, max(t, now + 1))

    def _start_tx(self, b, frame, now):
        air = plan_airtime_ms(self.plan, len(frame))
        end = now + air
        kind = b.fw.frame_kind(frame)
        b.tx_airtime_ms += air
        st = self.by_kind[kind]
        st["frames"] += 1
        st["bytes"] += len(frame)
        st["airtime_ms"] += air
        b.fw.port.sent(frame)
        b.fw.bridge.on_radio_tx(frame)
        b.tx_end = end
        # Half-duplex: starting to send deafens the board to frames still arriving.
        for rx in self._active[b.index]:
            if rx.end > now and rx.lost is None:
                rx.lost = "half_duplex"
        fade = self.sc["radio"]["fading_sigma_db"]
        cap = self.model.capture_db
        rxs = []
        neigh = (self.neigh[b.index] if self.mobility is None
                 else self._neighbours_at(b.index, now))
        boot = self.boot_ms
        for j, rssi in neigh:
            if boot[j] > now:
                continue   # still powered off: neither receives nor interferes with
            if fade:
                rssi -= self.fade_rnd.gauss(0.0, fade)
            rx = _Rx(j, rssi, end)
            if self.boards[j].tx_end > now:
                rx.lost = "half_duplex"
            active = self._active[j]
            if active:
                live = [o for o in active if o.end > now]
                live.append(rx)
                self._active[j] = live
                # Interference only rises when a frame starts, so checking every frame on
                # air now, at each start, finds each one's worst instant (phy.survives).
                if len(live) == 2:   # one interferer: the pairwise rule, inline for speed
                    o = live[0]
                    if rssi - o.rssi < cap and rx.lost is None:
                        rx.lost = "collision"
                    if o.rssi - rssi < cap and o.lost is None:
                        o.lost = "collision"
                elif len(live) > 2:
                    powers = [o.rssi for o in live]
                    for k, o in enumerate(live):
                        if o.lost is None and not phy.survives(
                                o.rssi, powers[:k] + powers[k + 1:], cap):
                            o.lost = "collision"
            else:
                active.append(rx)
            rxs.append(rx)
        self._push(end, TX_END, (b, frame, rxs))

    def _tx_end(self, b, frame, rxs):
        now = self.now
        m = self.model
        loss = self.sc["radio"]["loss"]
        for rx in rxs:
            j = rx.node
            active = self._active[j]
            if rx in active:
                active.remove(rx)
            if not m.decodable(rx.rssi):
                continue   # below sensitivity: only ever interference
            self.attempts += 1
            lost = rx.lost
            if lost is None and loss and self.loss_rnd.random() < loss:
                lost = "loss"
            if self.trace is not None:
                self.trace.append((now, b.index, j, lost or "ok"))
            if lost is not None:
                self.lost[lost] += 1
                continue
            self.delivered += 1
            rb = self.boards[j]
            rb.fw.on_rx(RxFrame(frame, rx.rssi, m.snr(rx.rssi), b.name), now)
            self._reschedule(rb)

    # -- results -----------------------------------------------------------------------

    def converged(self):
        """True when every board holds the same feeds, entries and chunks."""
        return same_stores([b.node for b in self.boards])

    def hops(self, src):
        """Hop counts from board src over decodable links at the start positions
        (-1: unreachable)."""
        return topology.hops_from(self.links, src, self.n)

    def summary(self):
        """Figures of the run: convergence, traffic and airtime per kind, delivery."""
        total_air = sum(v["airtime_ms"] for v in self.by_kind.values())
        share = {k: (v["airtime_ms"] / total_air if total_air else 0.0)
                 for k, v in self.by_kind.items() if v["frames"]}
        sched, drops = {}, {}
        for b in self.boards:
            for k, v in b.fw.sched.counters.items():
                sched[k] = sched.get(k, 0) + v
            for k, v in b.node.counters.items():
                if k.startswith("drop_"):
                    drops[k[5:]] = drops.get(k[5:], 0) + v
        lat = [t - p["t"] for p in self.posts for i, t in p["done"].items() if i != p["author"]]
        return {
            "scenario": self.sc["name"], "seed": self.sc["seed"], "plan": self.plan["name"],
            "nodes": self.n, "end_ms": self.now, "goset_ms": self.goset_ms,
            "boot_spread_ms": self.sc.get("boot_spread_ms", 0),
            "converged": self.converge_ms is not None, "converge_ms": self.converge_ms,
            "posts": len(self.posts),
            "frames": sum(v["frames"] for v in self.by_kind.values()),
            "bytes": sum(v["bytes"] for v in self.by_kind.values()),
            "airtime_ms": total_air, "by_kind": {k: dict(v) for k, v in self.by_kind.items()
                                                 if v["frames"]},
            "airtime_share": share,
            "payload_share": sum(share.get(k, 0.0) for k in PAYLOAD_KINDS),
            "delivery": {"attempts": self.attempts, "delivered": self.delivered,
                         "ratio": self.delivered / self.attempts if self.attempts else 0.0,
                         "lost": dict(self.lost)},
            "sched": sched, "node_drops": drops,
            "latency_ms": {"n": len(lat), "max": max(lat) if lat else None,
                           "mean": sum(lat) / len(lat) if lat else None},
            "mobility": "none" if self.mobility is None else "random_waypoint",
            "moving": 0 if self.mobility is None else len(self.mobility.moving),
        }


def _mobility(mob, positions, seed):
    """The scenario's mobility model over the placed boards, or None when nothing moves."""
    if mob is None or mob["model"] == "none":
        return None
    movers = mob["nodes"] if mob["nodes"] is not None else range(len(positions))
    area = mob["area"]
    if area is None:
        area = mobility.bounding_area(positions, mob["margin_m"])
    else:
        x0, y0, x1, y1 = area
        for i in movers:
            x, y = positions[i]
            if not (x0 <= x <= x1 and y0 <= y <= y1):
                raise ScenarioError("node %d starts outside the area" % i, "mobility.area")
    check_area(mob, area)
    return mobility.RandomWaypoint(seed, positions, movers, area, mob["speed_min_mps"],
                                   mob["speed_max_mps"], mob["pause_s"])


def _place(topo, model, seed):
    kind = topo["kind"]
    if kind == "positions":
        return list(topo["positions"])
    if kind == "line":
        return topology.line(topo["nodes"], topo["spacing_m"])
    if kind == "grid":
        return topology.grid(topo["nodes"], topo["width"], topo["spacing_m"])
    return topology.random_geometric(topo["nodes"], topo["side_m"],
                                     random.Random("%d/topology" % seed), model.range_m())
